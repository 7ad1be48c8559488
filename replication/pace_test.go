package replication

import (
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
