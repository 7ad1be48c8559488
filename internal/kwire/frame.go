package kwire

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"io"
)

// MaxFrame bounds the size of one answer. The largest answers the relay
// asks for are fetches: at most 50 MiB of checkpoints (checkpoint's
// fetchResponseMaxBytes) or 4 MiB of dead letters, plus one first batch
// past that bound, which a broker caps at its message.max.bytes (1 MiB by
// default); a metadata answer of a hundred thousand partitions is a few
// megabytes. 100 MiB, the brokers' own bound on a request
// (socket.request.max.bytes), leaves room for all of them, and bounds
// what a broken broker can make the relay hold for one answer: the frame,
// then kafka-go's decoding of it, which the checks keep within a small
// multiple of the frame.
const MaxFrame = 100 << 20

// ReadFrame reads one size-prefixed frame from r, the prefix included. It
// grows its buffer as bytes arrive, so a size the broker claims but does
// not send costs nothing.
func ReadFrame(r io.Reader) ([]byte, error) {
	var prefix [4]byte
	if _, err := io.ReadFull(r, prefix[:]); err != nil {
		return nil, err
	}
	size := int32(binary.BigEndian.Uint32(prefix[:]))
	if size < 0 || size > MaxFrame {
		return nil, &frameSizeError{size: size}
	}
	var buf bytes.Buffer
	buf.Grow(4 + min(int(size), 64<<10))
	buf.Write(prefix[:])
	if _, err := io.CopyN(&buf, r, int64(size)); err != nil {
		if err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		return nil, err
	}
	return buf.Bytes(), nil
}

// frameSizeError is a frame's size prefix out of bounds.
type frameSizeError struct{ size int32 }

func (e *frameSizeError) Error() string {
	if b := uint32(e.size); b>>24 == 0x15 && b>>8&0xffff >= 0x0301 && b>>8&0xffff <= 0x0304 {
		return fmt.Sprintf("frame size %d, out of 0 to %d bytes: a TLS alert, the broker appears to expect TLS", e.size, MaxFrame)
	}
	return fmt.Sprintf("frame size %d, out of 0 to %d bytes", e.size, MaxFrame)
}
