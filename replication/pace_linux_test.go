package replication

import (
	"errors"
	"net"
	"syscall"
	"testing"
	"time"
)

// tcpPair returns both ends of a loopback TCP connection, closed when the
// test ends.
func tcpPair(t *testing.T) (client, server net.Conn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	accepted := make(chan net.Conn, 1)
	go func() {
		c, err := ln.Accept()
		if err == nil {
			accepted <- c
		}
		close(accepted)
	}()
	client, err = net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { client.Close() })
	server = <-accepted
	if server == nil {
		t.Fatal("accept failed")
	}
	t.Cleanup(func() { server.Close() })
	return client, server
}

// lowWaterOf reads the socket's SO_RCVLOWAT.
func lowWaterOf(t *testing.T, c *pacedConn) int {
	t.Helper()
	var v int
	var gerr error
	if err := c.raw.Control(func(fd uintptr) {
		v, gerr = syscall.GetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVLOWAT)
	}); err != nil || gerr != nil {
		t.Fatalf("getsockopt: %v %v", err, gerr)
	}
	return v
}

// TestPacedReadsWaitOnTheLowWaterMark: on a TCP connection, the read after
// a short one waits on the socket with its low-water mark raised (so that
// each small segment no longer wakes the process), still returns the few
// bytes that came once the pause passed, and after a pause in which
// nothing came at all lowers the mark again: the next message of a quiet
// stream is read as soon as it arrives, not after a deadline.
func TestPacedReadsWaitOnTheLowWaterMark(t *testing.T) {
	raw, server := tcpPair(t)
	const gap = 20 * time.Millisecond
	p := newPacedConn(raw, gap)
	if p.raw == nil {
		t.Fatal("a TCP connection is paced without its low-water mark")
	}
	buf := make([]byte, 8192)
	read := func(want int) {
		t.Helper()
		if err := p.SetReadDeadline(time.Now().Add(10 * time.Second)); err != nil {
			t.Fatal(err)
		}
		n, err := p.Read(buf)
		if err != nil || n != want {
			t.Fatalf("read %d bytes, %v; want %d", n, err, want)
		}
	}
	if _, err := server.Write(make([]byte, 10)); err != nil {
		t.Fatal(err)
	}
	read(10) // short: the next read pauses
	if _, err := server.Write(make([]byte, 10)); err != nil {
		t.Fatal(err)
	}
	read(10) // the pause passed with less than the mark: what came is read
	if got := lowWaterOf(t, p); got != lowWater {
		t.Errorf("low-water mark while the stream is busy: %d, want %d", got, lowWater)
	}
	// Nothing comes for longer than the pause: the read lowers the mark and
	// waits for the next message, which it returns before its deadline.
	go func() {
		time.Sleep(10 * gap)
		server.Write(make([]byte, 10)) //nolint:errcheck // the read below fails if it did not arrive
	}()
	read(10)
	if got := lowWaterOf(t, p); got != 1 {
		t.Errorf("low-water mark of a quiet stream: %d, want 1", got)
	}
	// A read deadline that comes before anything does is the caller's
	// timeout, paused or not.
	if err := p.SetReadDeadline(time.Now().Add(gap / 4)); err != nil {
		t.Fatal(err)
	}
	n, err := p.Read(buf)
	var ne net.Error
	if n != 0 || !errors.As(err, &ne) || !ne.Timeout() {
		t.Fatalf("a read past its deadline: %d bytes, %v; want a timeout", n, err)
	}
}

// TestPacedReadAfterAFullOneLowersTheMark: a paced read that brought
// plenty (a burst) is followed by a plain read, which must not wait for
// the raised mark: the burst's last message would wait for the read's
// deadline, or for ever without one.
func TestPacedReadAfterAFullOneLowersTheMark(t *testing.T) {
	raw, server := tcpPair(t)
	p := newPacedConn(raw, 50*time.Millisecond)
	buf := make([]byte, 8192)
	if _, err := server.Write(make([]byte, 10)); err != nil {
		t.Fatal(err)
	}
	if n, err := p.Read(buf); n != 10 || err != nil {
		t.Fatalf("first read: %d, %v", n, err)
	}
	if _, err := server.Write(make([]byte, 6000)); err != nil { // a burst past the mark during the pause
		t.Fatal(err)
	}
	got := 0
	for got < 6000 {
		n, err := p.Read(buf)
		if err != nil {
			t.Fatal(err)
		}
		got += n
	}
	go func() { // once the read below waits
		time.Sleep(100 * time.Millisecond)
		server.Write(make([]byte, 10)) //nolint:errcheck // the read below fails if it did not arrive
	}()
	if err := p.SetReadDeadline(time.Now().Add(5 * time.Second)); err != nil {
		t.Fatal(err)
	}
	if n, err := p.Read(buf); n != 10 || err != nil {
		t.Fatalf("the read after the burst: %d bytes, %v; want the 10 that came", n, err)
	}
}
