package replication

import (
	"errors"
	"net"
	"testing"
	"time"
)

// chunks is a net.Conn whose reads return the next of its chunk sizes at
// once, recording when each read reached it.
type chunks struct {
	net.Conn
	sizes []int
	at    []time.Time
}

func (c *chunks) Read(p []byte) (int, error) {
	c.at = append(c.at, time.Now())
	n := min(c.sizes[0], len(p))
	c.sizes = c.sizes[1:]
	return n, nil
}

// TestPacedReads: after a read that brought little, the next read waits
// until the gap has passed since it; after a read that filled the buffer
// (a backlog), the next read goes at once.
func TestPacedReads(t *testing.T) {
	const gap = 50 * time.Millisecond
	c := &chunks{sizes: []int{100, 100, 8192, 8192, 100}}
	p := &pacedConn{Conn: c, gap: gap}
	buf := make([]byte, 8192)
	for range 5 {
		if _, err := p.Read(buf); err != nil {
			t.Fatal(err)
		}
	}
	waited := func(i int) time.Duration { return c.at[i].Sub(c.at[i-1]) }
	if w := waited(1); w < gap {
		t.Errorf("the read after a short one went %s after it, want at least %s", w, gap)
	}
	if w := waited(2); w < gap {
		t.Errorf("the second read after a short one went %s after it, want at least %s", w, gap)
	}
	if w := waited(3); w >= gap {
		t.Errorf("the read after a full one waited %s, want none", w)
	}
	if w := waited(4); w >= gap {
		t.Errorf("the read after a second full one waited %s, want none", w)
	}
}

// TestPacedReadsKeepToTheReadDeadline: a gap longer than the time the
// stream gives each read (its read deadline, set anew after each timeout)
// must not leave every read starting past its deadline, where Go times it
// out before looking at the data waiting: the stream would read nothing
// for ever. The pause ends before the deadline.
func TestPacedReadsKeepToTheReadDeadline(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	stop := make(chan struct{})
	defer close(stop)
	go func() { // the server: 10 bytes every 5 ms
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		for {
			select {
			case <-stop:
				return
			case <-time.After(5 * time.Millisecond):
			}
			if _, err := c.Write(make([]byte, 10)); err != nil {
				return
			}
		}
	}()
	raw, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	p := &pacedConn{Conn: raw, gap: 25 * time.Millisecond}
	buf := make([]byte, 8192)
	got := 0
	for end := time.Now().Add(time.Second); time.Now().Before(end); {
		if err := p.SetReadDeadline(time.Now().Add(20 * time.Millisecond)); err != nil {
			t.Fatal(err)
		}
		n, err := p.Read(buf)
		got += n
		var ne net.Error
		if err != nil && !(errors.As(err, &ne) && ne.Timeout()) {
			t.Fatal(err)
		}
	}
	if got < 100 {
		t.Fatalf("read %d bytes in 1s of a server sending 2,000, want them read", got)
	}
}

// TestPacedLargeMessage: a message larger than the reader's usual buffer
// is read into a buffer its size; reads that bring a few KiB of it are not
// "short", so its continuation is not paced read after read.
func TestPacedLargeMessage(t *testing.T) {
	const gap = 50 * time.Millisecond
	c := &chunks{sizes: []int{8192, 4096, 4096, 4096}}
	p := &pacedConn{Conn: c, gap: gap}
	big := make([]byte, 1<<20) // the size of the message
	for range 4 {
		if _, err := p.Read(big); err != nil {
			t.Fatal(err)
		}
	}
	for i := 1; i < len(c.at); i++ {
		if w := c.at[i].Sub(c.at[i-1]); w >= gap {
			t.Errorf("read %d of a large message waited %s after the one before", i, w)
		}
	}
}
