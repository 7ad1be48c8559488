package delivery

import (
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/jackc/pglogrepl"

	"github.com/outbox-cdc/outbox-cdc/producer"
)

// A Kafka transaction open longer than --transaction-timeout is aborted
// by the broker's transaction coordinator, which bumps the producer's
// epoch as it does (Kafka's abortTimedOutTransactions; kfake's
// updateTimer). The coordinator tells the producer nothing: its next
// request is refused, for its epoch (INVALID_PRODUCER_EPOCH,
// PRODUCER_FENCED: producer.ErrFenced) or, for a produce to a partition
// the abort took out of the transaction, for its state
// (INVALID_TXN_STATE, what kfake answers). Another instance taking the
// transactional id looks the same, so the relay judges by the clock: a
// refusal of either kind after the Kafka transaction had been open
// --transaction-timeout, counted from its first event handed over, is an
// abort by timeout. The coordinator's clock starts later, at the
// transaction's first AddPartitionsToTxn (Begin is the client's only, and
// the writer adds a partition before its first batch), so a transaction
// it aborted by timeout is always judged one; a takeover is judged one
// only when it came after the transaction had been open that long, which
// the coordinator would have aborted anyway.
//
// One abort by timeout is retried: a broker slow for a while may have held
// the transaction back. The same Postgres transaction (its xid and commit
// LSN) aborted by timeout a second time stops the relay: every new session
// would stream it again and fail the same way, while the slot pins WAL.

// txnClock times the open Kafka transaction and the Postgres transaction
// handed over last. The receive loop writes it, a commit (under the gate)
// restarts it, a failure on any goroutine stamps it.
type txnClock struct {
	now func() time.Time

	mu       sync.Mutex
	opened   time.Time // the first event of the open Kafka transaction was handed over; zero: none since the last commit
	pg       pgTxn     // the Postgres transaction handed over last
	failedAt time.Time // the session's first failure; zero: none yet
}

// pgTxn is a Postgres transaction as far as it was handed over.
type pgTxn struct {
	xid    uint32
	commit pglogrepl.LSN
	events int64
	bytes  int64
	first  time.Time // its first event was handed over
}

// hand counts an event of the Postgres transaction xid committed at commit.
func (c *txnClock) hand(xid uint32, commit pglogrepl.LSN, size int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.now()
	if c.opened.IsZero() {
		c.opened = now
	}
	if c.pg.first.IsZero() || c.pg.xid != xid || c.pg.commit != commit {
		c.pg = pgTxn{xid: xid, commit: commit, first: now}
	}
	c.pg.events++
	c.pg.bytes += size
}

// committed restarts the clock: the next Kafka transaction opens with its
// first event.
func (c *txnClock) committed() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.opened = time.Time{}
}

// fail stamps the session's first failure.
func (c *txnClock) fail() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.failedAt.IsZero() {
		c.failedAt = c.now()
	}
}

// timedOut returns err, the session's, as a *txnTimeoutError when it is a
// refusal of the producer after the open Kafka transaction had been open
// timeout (see above); otherwise err.
func (c *txnClock) timedOut(err error, timeout time.Duration) error {
	if !producer.RefusedForEpochOrState(err) {
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	at := c.failedAt
	if at.IsZero() {
		at = c.now()
	}
	if c.opened.IsZero() || at.Sub(c.opened) < timeout {
		return err
	}
	return &txnTimeoutError{pg: c.pg, streamed: at.Sub(c.pg.first), open: at.Sub(c.opened), timeout: timeout, err: err}
}

// txnTimeoutError is a session's failure judged an abort of its Kafka
// transaction by the coordinator's timeout. It unwraps to the failure, so
// that a fenced producer still stands by as after any fence.
type txnTimeoutError struct {
	pg       pgTxn         // the Postgres transaction handed over last
	streamed time.Duration // from its first event to the failure
	open     time.Duration // the Kafka transaction's, to the failure
	timeout  time.Duration
	err      error
}

func (e *txnTimeoutError) Error() string {
	return fmt.Sprintf("the broker aborted the Kafka transaction holding Postgres transaction xid %d (commit %s), open %s, past --transaction-timeout %s: %v",
		e.pg.xid, e.pg.commit, e.open.Round(time.Millisecond), e.timeout, e.err)
}

func (e *txnTimeoutError) Unwrap() error { return e.err }

// stop is the relay's last word once e's Postgres transaction was aborted
// by timeout a second time. Like the warnings of this room, it names the
// flags, not Config fields: it is no ConfigError for config/ to translate
// but run-time advice to whoever runs the command (in-process, they are
// Delivery.TransactionTimeout and Delivery.Mode).
func (e *txnTimeoutError) stop() error {
	return stopError(fmt.Sprintf("exactly-once: Postgres transaction xid %d (commit %s) cannot be streamed within --transaction-timeout %s: "+
		"the broker aborted the Kafka transaction holding it twice, the last time after %s open, %d events (%d bytes) of it sent in %s. "+
		"Every new session would stream it again and be aborted again, while the slot pins WAL. Raise --transaction-timeout "+
		"(OUTBOX_CDC_TRANSACTION_TIMEOUT) up to the brokers' transaction.max.timeout.ms (15m by default), or relay the slot with "+
		"--delivery at-least-once until this transaction is through",
		e.pg.xid, e.pg.commit, e.timeout, e.open.Round(time.Millisecond), e.pg.events, e.pg.bytes, e.streamed.Round(time.Millisecond)))
}

// txnTimeouts remembers, across sessions, the last Postgres transaction
// whose Kafka transaction was aborted by timeout.
type txnTimeouts struct {
	last *pgTxn
}

// judge returns err's *txnTimeoutError, if it is one, and the error that
// stops the relay when its Postgres transaction was aborted by timeout
// before.
func (t *txnTimeouts) judge(err error) (*txnTimeoutError, error) {
	var te *txnTimeoutError
	if !errors.As(err, &te) {
		return nil, nil
	}
	if t.last != nil && t.last.xid == te.pg.xid && t.last.commit == te.pg.commit {
		return te, te.stop()
	}
	t.last = &te.pg
	return te, nil
}

// fail stamps the session's failure on the clock and cuts a commit under
// way short: some event will never be acknowledged.
func (x *exactly) Fail(err error) {
	x.clock.fail()
	x.abort(err)
}

// timedOut returns err, the session's failure, as a *txnTimeoutError when
// it is judged an abort by the transaction timeout.
func (x *exactly) TimedOut(err error) error { return x.clock.timedOut(err, x.timeout) }

// Judge counts a session's failure judged an abort of its Kafka
// transaction by the broker's transaction timeout (see txnClock), and says
// so in one line; the second of the same Postgres transaction returns the
// error that stops the relay.
func (m *exactlyOnceMode) Judge(err error) (stop error, timedOut bool) {
	te, stop := m.timeouts.judge(err)
	if te == nil {
		return nil, false
	}
	if m.env.TransactionTimedOut != nil {
		m.env.TransactionTimedOut()
	}
	if stop != nil {
		return stop, true
	}
	m.env.Log.Warn("exactly-once: the broker aborted the Kafka transaction open past --transaction-timeout; streaming its Postgres transaction again, "+
		"and stopping if that is aborted again: raise --transaction-timeout for Postgres transactions that take this long to stream",
		slog.Uint64("xid", uint64(te.pg.xid)), slog.String("commit", te.pg.commit.String()), slog.Int64("events", te.pg.events),
		slog.Int64("bytes", te.pg.bytes), slog.Duration("streamed", te.streamed), slog.Duration("open", te.open),
		slog.Duration("timeout", te.timeout), slog.Any("err", te.err))
	return nil, true
}
