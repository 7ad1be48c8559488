package replication

import (
	"errors"
	"io"
	"net"
	"os"
	"syscall"
)

// lowWaterSupported: the socket's low-water mark is settable, Linux's
// poller honours it (since 4.20: a reader is not woken below it), and a
// non-blocking read still returns what is queued below it. The BSDs'
// read refuses data below the mark instead: pauses sleep there.
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
		for {
			n, rerr = syscall.Read(int(fd), p)
			if rerr != syscall.EINTR {
				return true
			}
		}
	}); err != nil {
		var op *net.OpError
		if errors.As(err, &op) { // the caller wraps it as a read's
			return 0, op.Err
		}
		return 0, err
	}
	switch {
	case rerr == syscall.EAGAIN:
		return 0, nil
	case rerr != nil:
		return 0, os.NewSyscallError("read", rerr)
	case n == 0 && len(p) > 0:
		return 0, io.EOF
	}
	return n, nil
}
