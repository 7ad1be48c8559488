//go:build unix

package replication

import (
	"io"
	"os"
	"syscall"
)

// lowWaterSupported: the socket's low-water mark is settable, and the
// kernel's poller honours it (Linux since 4.20, the BSDs' kqueue).
const lowWaterSupported = true

// setLowWater sets the socket's SO_RCVLOWAT.
func setLowWater(raw syscall.RawConn, n int) error {
	var serr error
	if err := raw.Control(func(fd uintptr) {
		serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVLOWAT, n)
	}); err != nil {
		return err
	}
	return serr
}

// readNow reads what the socket holds without waiting for more: 0 and no
// error when it holds nothing. It fails with the read deadline's error
// once that passed.
func readNow(raw syscall.RawConn, p []byte) (int, error) {
	var n int
	var rerr error
	if err := raw.Read(func(fd uintptr) bool {
		n, rerr = syscall.Read(int(fd), p)
		return true
	}); err != nil {
		return 0, err
	}
	switch {
	case rerr == syscall.EAGAIN || rerr == syscall.EINTR:
		return 0, nil
	case rerr != nil:
		return 0, os.NewSyscallError("read", rerr)
	case n == 0 && len(p) > 0:
		return 0, io.EOF
	}
	return n, nil
}
