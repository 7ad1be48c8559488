package kwire

import (
	"context"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"sync"

	"github.com/segmentio/kafka-go/protocol"
)

// Guard wraps nc, a connection to a broker that kafka-go's protocol
// writes requests on and reads their answers from (plaintext: over TLS,
// Guard goes above it). It notes each request as it is written, and hands
// out an answer only once the whole of it has arrived and Check found it
// safe to decode as the answer to the oldest request noted; a malformed
// answer closes nc, and the read that met it and every later one fail
// with a *MalformedError. kafka-go reads an answer only after writing its
// request, and a broker answers the requests of one connection in order.
// A connection guarded already is returned as it is.
func Guard(nc net.Conn) net.Conn {
	if _, ok := nc.(*guard); ok {
		return nc
	}
	return &guard{Conn: nc, size: -1}
}

type guard struct {
	net.Conn

	mu      sync.Mutex // Write (the request side) against Read
	pending []due      // requests written whose answers are due, oldest first
	head    []byte     // the first bytes of the request being written
	size    int        // the request's size; -1: its size prefix is still being written
	left    int        // of the request, still to be written
	noted   bool       // the request being written was noted
	raw     bool       // SASL's raw exchange (SaslHandshake v0) is under way

	frame []byte // the answer being read, checked, not yet handed out
	err   error  // the read side's failure, for good
}

// due is the answer a request written awaits.
type due struct {
	key     protocol.ApiKey
	version int16
	raw     bool // SASL v0's raw bytes: a size-prefixed frame, no header
}

// requestHead is how much of a request's start Write keeps to learn what
// it awaits: a produce request's acks come after its client and
// transactional ids, of at most 32 KiB each.
const requestHead = 4 + 8 + 2*(2+32767) + 2

func (g *guard) Write(b []byte) (int, error) {
	g.mu.Lock()
	err := g.note(b)
	g.mu.Unlock()
	if err != nil {
		return 0, err
	}
	return g.Conn.Write(b)
}

// note follows the requests in b, which continues what was written
// before.
func (g *guard) note(b []byte) error {
	for len(b) > 0 {
		if g.size < 0 {
			n := min(4-len(g.head), len(b))
			g.head, b = append(g.head, b[:n]...), b[n:]
			if len(g.head) == 4 {
				g.size = int(int32(binary.BigEndian.Uint32(g.head)))
				g.left = g.size
				if g.size < 0 {
					return fmt.Errorf("a request of size %d", g.size)
				}
			}
		} else {
			n := min(g.left, len(b))
			if keep := min(n, requestHead-len(g.head)); keep > 0 {
				g.head = append(g.head, b[:keep]...)
			}
			g.left, b = g.left-n, b[n:]
		}
		if g.size >= 0 && !g.noted {
			d, complete, err := g.parse(g.head, g.left == 0)
			if err != nil {
				return err
			}
			if complete {
				g.noted = true
				if d != nil {
					g.pending = append(g.pending, *d)
				}
			}
		}
		if g.size >= 0 && g.left <= 0 {
			g.head, g.size, g.noted = g.head[:0], -1, false
		}
	}
	return nil
}

// parse reads what a request awaits from its first bytes: nil for a
// produce request with acks=0, which has no answer. complete is false
// while more of the request is needed.
func (g *guard) parse(head []byte, whole bool) (d *due, complete bool, err error) {
	if len(head) < 4+4 {
		if !whole {
			return nil, false, nil
		}
		if g.raw {
			return &due{raw: true}, true, nil
		}
		return nil, true, fmt.Errorf("a request of %d bytes, without its API key and version", g.size)
	}
	key := protocol.ApiKey(binary.BigEndian.Uint16(head[4:]))
	version := int16(binary.BigEndian.Uint16(head[6:]))
	lo, hi, known := requestVersions(key)
	known = known && lo <= version && version <= hi
	if g.raw {
		if len(head) < 14 && !whole {
			return nil, false, nil
		}
		if !known || !clientIDFits(head, g.size) {
			return &due{raw: true}, true, nil // SASL's raw bytes
		}
		g.raw = false
	}
	if !known {
		return nil, true, fmt.Errorf("a request of API key %d v%d, whose answer the guard cannot check", key, version)
	}
	if key == protocol.SaslHandshake && version == 0 {
		g.raw = true // the SASL exchange that follows is raw bytes
	}
	if key != protocol.Produce {
		return &due{key: key, version: version}, true, nil
	}
	acks, ok := produceAcks(head, version)
	if !ok {
		if !whole {
			return nil, false, nil
		}
		return nil, true, fmt.Errorf("a produce request v%d without its acks", version)
	}
	if acks == 0 {
		return nil, true, nil
	}
	return &due{key: key, version: version}, true, nil
}

// clientIDFits reports whether head, the start of a frame of size bytes,
// reads as a request header: its client id within the frame.
func clientIDFits(head []byte, size int) bool {
	if len(head) < 14 {
		return false
	}
	n := int(int16(binary.BigEndian.Uint16(head[12:])))
	return n == -1 || n >= 0 && 10+n <= size
}

// produceAcks reads a produce request's acks (kafka-go sends v0 to v8,
// none flexible): after the header's client id, and from v3 on after the
// transactional id.
func produceAcks(head []byte, version int16) (int16, bool) {
	off := 12
	skips := 1
	if version >= 3 {
		skips = 2
	}
	for range skips {
		if len(head) < off+2 {
			return 0, false
		}
		n := int(int16(binary.BigEndian.Uint16(head[off:])))
		off += 2 + max(n, 0)
	}
	if len(head) < off+2 {
		return 0, false
	}
	return int16(binary.BigEndian.Uint16(head[off:])), true
}

func (g *guard) Read(b []byte) (int, error) {
	if len(g.frame) == 0 {
		if g.err != nil {
			return 0, g.err
		}
		frame, err := g.next()
		if err != nil {
			g.err = err
			return 0, err
		}
		g.frame = frame
	}
	n := copy(b, g.frame)
	g.frame = g.frame[n:]
	return n, nil
}

// next reads the next answer whole and checks it against the oldest
// request awaiting one. A malformed answer closes the connection.
func (g *guard) next() ([]byte, error) {
	frame, err := ReadFrame(g.Conn)
	var sizeErr *frameSizeError
	if err != nil && !errors.As(err, &sizeErr) {
		return nil, err
	}
	g.mu.Lock()
	if len(g.pending) == 0 {
		g.mu.Unlock()
		_ = g.Conn.Close()
		return nil, errors.New("an answer from the broker to no request")
	}
	d := g.pending[0]
	g.pending = g.pending[1:]
	g.mu.Unlock()
	switch {
	case err != nil:
		err = &MalformedError{ApiKey: d.key, Version: d.version, Err: err}
	case !d.raw:
		err = checkSafely(d.key, d.version, frame)
	}
	if err != nil {
		_ = g.Conn.Close()
		return nil, err
	}
	return frame, nil
}

// checkSafely is Check, with a panic of its own (a decompressor's) taken
// for a malformed answer.
func checkSafely(key protocol.ApiKey, version int16, frame []byte) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = &MalformedError{ApiKey: key, Version: version, Err: fmt.Errorf("checking it panicked: %v", r)}
		}
	}()
	return Check(key, version, frame)
}

// DialFunc is how kafka-go's Transport and the producer dial a broker.
type DialFunc func(ctx context.Context, network, addr string) (net.Conn, error)

// Dial returns a dial function for kafka.Transport.Dial whose connections
// are guarded: dial's connection (nil: a net.Dialer's), over TLS when cfg
// is set (as kafka-go's Transport would, the server name being the
// broker's host unless cfg names one), then Guard. The Transport's own TLS
// must then be nil: it would wrap the guard, which would see ciphertext.
func Dial(dial DialFunc, cfg *tls.Config) DialFunc {
	if dial == nil {
		dial = (&net.Dialer{}).DialContext
	}
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		nc, err := dial(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		if cfg != nil {
			c := cfg
			if c.ServerName == "" {
				host, _, _ := net.SplitHostPort(addr)
				c = c.Clone()
				c.ServerName = host
			}
			nc = tls.Client(nc, c)
		}
		return Guard(nc), nil
	}
}
