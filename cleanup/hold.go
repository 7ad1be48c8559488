package cleanup

import (
	"context"
	"fmt"
	"time"
)

// With exactly-once delivery a row is cleaned only after the Kafka
// transaction that holds its event commits, so that it never leaves the
// table (or takes its mark) while its event may still be aborted. The
// relay acks such an event to the checkpoint on Kafka's acknowledgement
// (its Kafka transaction waits for every ack before it commits, and a
// Postgres transaction larger than the in-flight window needs the window
// to free), and holds the slot's position back itself until Release has
// cleaned the rows of the transaction that committed.
//
// A crash after the commit and before the rows are cleaned leaves them to
// the next session: it reads their events again from the slot, finds them
// in Kafka already (the checkpoint), and cleans their rows without
// publishing them (Done, as in at-least-once).

// Hold takes Kafka's acknowledgement of the event under seq, sent in a
// Kafka transaction that has yet to commit: its row is cleaned once that
// commits (Commit, then Release), and its event is never acked by the cleaner (the caller acked
// it). A reason says it went to the dead-letter topic, as with Done.
func (c *Cleaner) Hold(seq uint64, reason string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	st := c.settle(seq, reason)
	st.acked = true
	c.held = append(c.held, st)
}

// Held returns how many rows wait for their Kafka transaction's commit.
func (c *Cleaner) Held() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.held)
}

// Committed is what Hold held when a Kafka transaction committed: the rows
// of its events, for Release.
type Committed struct{ rows []settled }

// Commit takes every row held so far: call it once the Kafka transaction
// of their events committed, before any event of the next is acknowledged
// (while nothing more is handed over), and Release the result.
func (c *Cleaner) Commit() Committed {
	c.mu.Lock()
	defer c.mu.Unlock()
	held := c.held
	c.held = nil
	return Committed{rows: held}
}

// Release cleans the rows of a committed Kafka transaction and returns
// once they are all cleaned, or with ctx's end or a failing statement: the
// caller then confirms nothing past them, and the next session cleans them
// (see Hold). One Release runs at a time. It cleans on a connection of its
// own, so it needs not Run (the last commit of a session comes after the
// cleaner stopped), and wakes Run to clean beside it.
func (c *Cleaner) Release(ctx context.Context, done Committed) error {
	c.mu.Lock()
	c.releasing += len(done.rows)
	c.ready = append(c.ready, done.rows...)
	c.mu.Unlock()
	select {
	case c.wake <- struct{}{}:
	default:
	}
	for {
		c.mu.Lock()
		left := c.releasing
		c.mu.Unlock()
		if left == 0 {
			return nil
		}
		n, err := c.flush(ctx, &c.rconn)
		if err != nil {
			return fmt.Errorf("cleanup: clean the rows of a committed kafka transaction: %w", err)
		}
		if n == 0 { // Run has them, or their transactions are not yet visible
			select {
			case <-time.After(waitBeforeRetry):
			case <-ctx.Done():
				return fmt.Errorf("cleanup: clean the rows of a committed kafka transaction: %w", context.Cause(ctx))
			}
		}
	}
}

// CloseRelease closes Release's connection, once the session's last
// Release returned.
func (c *Cleaner) CloseRelease() {
	if c.rconn != nil {
		c.rconn.Close(context.Background())
		c.rconn = nil
	}
}

// released counts settled events of Hold that a flush cleaned. Called with
// mu held.
func (c *Cleaner) released(batch []settled) {
	for _, s := range batch {
		if s.acked {
			c.releasing--
		}
	}
}
