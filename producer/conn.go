package producer

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"time"

	"github.com/segmentio/kafka-go"
	"github.com/segmentio/kafka-go/protocol"
	"github.com/segmentio/kafka-go/protocol/apiversions"
	"github.com/segmentio/kafka-go/protocol/saslauthenticate"
	"github.com/segmentio/kafka-go/protocol/saslhandshake"
	"github.com/segmentio/kafka-go/sasl"

	"github.com/outbox-cdc/outbox-cdc/internal/kwire"
)

// Conn is one connection to one broker that carries several requests at
// once. Requests are written in the order Send is called, and a broker
// answers the requests of one connection in the order it received them,
// so the batches of a partition sent one after the other reach it in their
// sequence order: what the Java producer's max.in.flight.requests.per.connection
// relies on. kafka-go's Transport carries one request per connection at a
// time and spreads concurrent ones over several connections, where that
// order is lost.
//
// One goroutine (read) reads the answers. The first failure (a write or
// read error, an answer past its deadline, a malformed answer
// (*kwire.MalformedError), Close) breaks the connection:
// every request out fails with it, and Send refuses new ones.
type Conn struct {
	pc       *protocol.Conn
	versions map[protocol.ApiKey]int16
	clientID string

	mu     sync.Mutex    // writes one request at a time, in order
	nextID int32         // the last correlation id; guarded by mu
	closed bool          // guarded by mu: Send refuses
	calls  chan *Call    // out, oldest first
	slots  chan struct{} // one per call out, until its answer is in: at most depth

	once   sync.Once
	broken chan struct{} // closed by the first failure
	err    error         // that failure, set before broken closes
	exited chan struct{} // read returned
}

// Call is a request on a Conn: Done closes once its answer or its
// failure is in.
type Call struct {
	apiKey   protocol.ApiKey
	version  int16
	id       int32
	deadline time.Time
	done     chan struct{}
	res      protocol.Message
	err      error
	at       time.Time // when the answer or failure came in
}

// Done is closed once the call's answer (or failure) is in.
func (c *Call) Done() <-chan struct{} { return c.done }

// Result returns the broker's answer, or why there is none. It waits for
// Done.
func (c *Call) Result() (protocol.Message, error) {
	<-c.done
	return c.res, c.err
}

// Answered returns when the call's answer (or failure) came in, however
// late its caller reads it: the round trip without the caller's own work
// on earlier answers. It waits for Done.
func (c *Call) Answered() time.Time {
	<-c.done
	return c.at
}

// finish fills in call's result and frees its slot.
func (c *Conn) finish(call *Call, res protocol.Message, err error) {
	call.res, call.err, call.at = res, err, time.Now()
	<-c.slots
	close(call.done)
}

// ErrTooManyInFlight is Send called with as many requests out as the
// connection was dialed for: the caller counts its requests.
var ErrTooManyInFlight = errors.New("too many requests in flight on the connection")

// Send writes msg and returns its call, whose answer read fills in. It
// fails at once when the connection is broken, or when depth requests are
// out. A failed write breaks the connection, and the call fails with it.
func (c *Conn) Send(msg protocol.Message, deadline time.Time) (*Call, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return nil, c.failure()
	}
	if r, ok := msg.(interface{ HasResponse() bool }); ok && !r.HasResponse() {
		return nil, fmt.Errorf("a %s request without an answer (acks=0) cannot be pipelined", msg.ApiKey())
	}
	version, ok := c.versions[msg.ApiKey()]
	if !ok {
		return nil, fmt.Errorf("the broker does not support %s requests", msg.ApiKey())
	}
	if p, ok := msg.(protocol.PreparedMessage); ok {
		p.Prepare(version)
	}
	c.nextID++
	call := &Call{apiKey: msg.ApiKey(), version: version, id: c.nextID, deadline: deadline, done: make(chan struct{})}
	select {
	case c.slots <- struct{}{}:
	default:
		return nil, ErrTooManyInFlight
	}
	c.calls <- call // never blocks: calls has room for every slot
	_ = c.pc.SetWriteDeadline(deadline)
	if err := protocol.WriteRequest(c.pc, version, call.id, c.clientID, msg); err != nil {
		c.fail(fmt.Errorf("write a %s request: %w", msg.ApiKey(), err))
	}
	return call, nil
}

// read fills in each call's answer, oldest first, until the connection
// breaks; then it fails every call left.
func (c *Conn) read() {
	defer close(c.exited)
	for {
		var call *Call
		select {
		case call = <-c.calls:
		case <-c.broken:
			c.drain()
			return
		}
		_ = c.pc.SetReadDeadline(call.deadline)
		id, res, err := readResponse(c.pc, call.apiKey, call.version)
		if err == nil && id != call.id {
			err = fmt.Errorf("the broker answered request %d for request %d", id, call.id)
		}
		if err != nil {
			c.fail(fmt.Errorf("read the answer to a %s request: %w", call.apiKey, err))
			c.finish(call, nil, c.err)
			c.drain()
			return
		}
		c.finish(call, res, nil)
	}
}

// readResponse reads an answer with kafka-go's decoder, below which
// kwire.Guard (see DialConn) has checked every length of the answer
// against its size. A panic of the decoder all the same (a shape the
// check missed) is the answer's failure, that breaks the connection, not
// the process's; a fatal out-of-memory would not be caught here, which is
// why the check comes first.
func readResponse(r io.Reader, key protocol.ApiKey, version int16) (id int32, res protocol.Message, err error) {
	defer func() {
		if p := recover(); p != nil {
			err = &kwire.MalformedError{ApiKey: key, Version: version, Err: fmt.Errorf("decoding it panicked: %v", p)}
		}
	}()
	return protocol.ReadResponse(r, key, version)
}

// drain fails the calls left once the connection is broken, and stops
// Send from adding any.
func (c *Conn) drain() {
	c.mu.Lock() // a Send under way has written or failed by now: fail closed pc
	c.closed = true
	c.mu.Unlock()
	for {
		select {
		case call := <-c.calls:
			c.finish(call, nil, c.err)
		default:
			return
		}
	}
}

// fail breaks the connection with err, once.
func (c *Conn) fail(err error) {
	c.once.Do(func() {
		c.err = err
		close(c.broken)
		_ = c.pc.Close() // unblocks a write or a read under way
	})
}

func (c *Conn) failure() error {
	<-c.broken
	return c.err
}

// Broken reports whether the connection failed or was closed: it takes no
// new request.
func (c *Conn) Broken() bool {
	select {
	case <-c.broken:
		return true
	default:
		return false
	}
}

// ErrClosed is the failure of the requests out when the connection was
// closed.
var ErrClosed = errors.New("connection closed")

// Close breaks the connection (the requests out fail with ErrClosed) and
// waits for its reader. It is safe to call twice.
func (c *Conn) Close() {
	c.fail(ErrClosed)
	<-c.exited
}

// Dialer opens Conns.
type Dialer struct {
	ClientID string
	// Dial opens the TCP connection; nil: a net.Dialer.
	Dial    func(ctx context.Context, network, addr string) (net.Conn, error)
	TLS     *tls.Config    // nil: plaintext
	SASL    sasl.Mechanism // nil: no authentication
	Timeout time.Duration  // bounds the dial, the versions' exchange and SASL; 0: 10 s
}

// DialConn connects to the broker at addr (host:port), learns the API
// versions it speaks, authenticates, and returns a Conn that carries up
// to depth requests at once.
func (d Dialer) DialConn(ctx context.Context, addr string, depth int) (*Conn, error) {
	timeout := d.Timeout
	if timeout <= 0 {
		timeout = 10 * time.Second
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	dial := d.Dial
	if dial == nil {
		dial = (&net.Dialer{}).DialContext
	}
	nc, err := dial(ctx, "tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("connect to %s: %w", addr, err)
	}
	if d.TLS != nil {
		cfg := d.TLS
		if cfg.ServerName == "" {
			host, _, _ := net.SplitHostPort(addr)
			cfg = cfg.Clone()
			cfg.ServerName = host
		}
		nc = tls.Client(nc, cfg)
	}
	// Every answer is read whole and checked before kafka-go decodes it,
	// the versions' exchange and SASL's included.
	pc := protocol.NewConn(kwire.Guard(nc), d.ClientID)
	deadline, _ := ctx.Deadline()
	_ = pc.SetDeadline(deadline)
	versions, err := d.handshake(ctx, pc, addr)
	if err != nil {
		_ = pc.Close()
		return nil, err
	}
	_ = pc.SetDeadline(time.Time{})
	c := &Conn{pc: pc, versions: versions, clientID: d.ClientID, calls: make(chan *Call, max(depth, 1)),
		slots:  make(chan struct{}, max(depth, 1)),
		broken: make(chan struct{}), exited: make(chan struct{})}
	go c.read()
	return c, nil
}

// handshake learns the versions the broker speaks, as kafka-go's
// Transport does, and authenticates with SASL when configured.
func (d Dialer) handshake(ctx context.Context, pc *protocol.Conn, addr string) (map[protocol.ApiKey]int16, error) {
	r, err := pc.RoundTrip(new(apiversions.Request))
	if err != nil {
		return nil, fmt.Errorf("ask %s for its API versions: %w", addr, err)
	}
	res := r.(*apiversions.Response)
	if res.ErrorCode != 0 {
		return nil, fmt.Errorf("ask %s for its API versions: %w", addr, kafka.Error(res.ErrorCode))
	}
	versions := make(map[protocol.ApiKey]int16, len(res.ApiKeys))
	for _, k := range res.ApiKeys {
		key := protocol.ApiKey(k.ApiKey)
		versions[key] = key.SelectVersion(k.MinVersion, k.MaxVersion)
	}
	pc.SetVersions(versions)
	if d.SASL != nil {
		if err := authenticate(ctx, pc, d.SASL, addr); err != nil {
			return nil, fmt.Errorf("authenticate to %s with SASL %s: %w", addr, d.SASL.Name(), err)
		}
	}
	return versions, nil
}

// authenticate runs mechanism's SASL exchange on pc, as kafka-go's
// Transport does.
func authenticate(ctx context.Context, pc *protocol.Conn, mechanism sasl.Mechanism, addr string) error {
	r, err := pc.RoundTrip(&saslhandshake.Request{Mechanism: mechanism.Name()})
	if err != nil {
		return err
	}
	if code := r.(*saslhandshake.Response).ErrorCode; code != 0 {
		return kafka.Error(code)
	}
	host, port, _ := net.SplitHostPort(addr)
	var portNumber int
	_, _ = fmt.Sscan(port, &portNumber)
	ctx = sasl.WithMetadata(ctx, &sasl.Metadata{Host: host, Port: portNumber})
	sess, state, err := mechanism.Start(ctx)
	if err != nil {
		return err
	}
	for completed := false; !completed; {
		r, err := pc.RoundTrip(&saslauthenticate.Request{AuthBytes: state})
		if err != nil {
			if errors.Is(err, io.EOF) {
				return kafka.SASLAuthenticationFailed // a broker may answer a failed exchange by closing
			}
			return err
		}
		res := r.(*saslauthenticate.Response)
		if res.ErrorCode != 0 {
			return fmt.Errorf("%w: %s", kafka.Error(res.ErrorCode), res.ErrorMessage)
		}
		if completed, state, err = sess.Next(ctx, res.AuthBytes); err != nil {
			return err
		}
	}
	return nil
}
