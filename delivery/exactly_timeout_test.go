package delivery

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/segmentio/kafka-go"

	"github.com/outbox-cdc/outbox-cdc/checkpoint"
	"github.com/outbox-cdc/outbox-cdc/decode"
	"github.com/outbox-cdc/outbox-cdc/internal/retry"
	"github.com/outbox-cdc/outbox-cdc/producer"
)

// TestTransactionTimeoutStops: a Kafka transaction refused for its epoch
// (or its state) after it had been open --transaction-timeout is one the
// broker aborted by its timeout. The second such abort of the same
// Postgres transaction stops the relay, naming the transaction's size,
// the time it took and the settings to raise; a different transaction, a
// fence that came before the timeout (another instance took the id), or
// a failure that is no refusal, is retried.
func TestTransactionTimeoutStops(t *testing.T) {
	const timeout = time.Minute
	fenced := &producer.TxnError{Op: "Produce", Kind: producer.ErrFenced, Err: kafka.InvalidProducerEpoch}
	refused := &producer.TxnError{Op: "Produce", Kind: producer.ErrTxnAbortable, Err: kafka.InvalidTransactionState}
	lost := fmt.Errorf("receive from slot %q: %w", "outbox", io.ErrUnexpectedEOF)
	type session struct {
		xid    uint32
		commit pglogrepl.LSN
		idle   time.Duration // from the session's start to the transaction's first event
		took   time.Duration // from its first event to the failure
		err    error
	}
	big := func(xid uint32, commit pglogrepl.LSN, err error) session {
		return session{xid: xid, commit: commit, took: timeout + 2*time.Second, err: err}
	}
	for _, tt := range []struct {
		name     string
		sessions []session
		timedOut int // the failures judged aborts by timeout
		stops    bool
	}{
		{"the same transaction aborted twice", []session{big(7, 0x2f0, fenced), big(7, 0x2f0, fenced)}, 2, true},
		{"the same transaction refused for its state twice", []session{big(7, 0x2f0, refused), big(7, 0x2f0, refused)}, 2, true},
		{"two transactions aborted once each", []session{big(7, 0x2f0, fenced), big(8, 0x3f0, fenced)}, 2, false},
		{"a transaction with the same xid and another commit", []session{big(7, 0x2f0, fenced), big(7, 0x3f0, fenced)}, 2, false},
		{"fenced before the timeout, twice", []session{{xid: 7, commit: 0x2f0, took: timeout / 3, err: fenced},
			{xid: 7, commit: 0x2f0, took: timeout / 3, err: fenced}}, 0, false},
		{"idle time before the first event", []session{{xid: 7, commit: 0x2f0, idle: 2 * timeout, took: timeout / 2, err: fenced},
			{xid: 7, commit: 0x2f0, idle: 2 * timeout, took: timeout / 2, err: fenced}}, 0, false},
		{"a lost connection past the timeout, twice", []session{big(7, 0x2f0, lost), big(7, 0x2f0, lost)}, 0, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			now := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
			var judged txnTimeouts
			timedOut := 0
			var stop error
			for i, s := range tt.sessions {
				d := testConfig()
				d.TransactionTimeout = timeout
				x := newExactly(checkpoint.New(0x100, 10, 1<<20), d, 0x100, slog.New(slog.DiscardHandler))
				x.clock.now = func() time.Time { return now }
				now = now.Add(s.idle)
				if err := x.Enter(context.Background()); err != nil {
					t.Fatal(err)
				}
				for range 3 {
					x.Handing(&decode.Event{CommitLSN: s.commit, Xid: s.xid, Payload: make([]byte, 1000)})
				}
				now = now.Add(s.took)
				x.Fail(s.err)
				err := x.TimedOut(s.err)
				if !errors.Is(err, s.err) {
					t.Fatalf("session %d: %v does not wrap the session's error %v", i, err, s.err)
				}
				te, st := judged.judge(err)
				if te != nil {
					timedOut++
				}
				if st != nil {
					stop = st
					if i != len(tt.sessions)-1 {
						t.Fatalf("session %d of %d stopped the relay: %v", i+1, len(tt.sessions), st)
					}
				}
			}
			if timedOut != tt.timedOut {
				t.Errorf("%d failures judged aborts by the transaction timeout, want %d", timedOut, tt.timedOut)
			}
			if (stop != nil) != tt.stops {
				t.Fatalf("stop: %v, want one: %v", stop, tt.stops)
			}
			if stop == nil {
				return
			}
			if c := retry.Classify(stop); c != retry.Permanent {
				t.Errorf("the stop is %s, want permanent", c)
			}
			for _, want := range []string{"xid 7", "0/2F0", "3 events", "3000 bytes", "1m2s", "--transaction-timeout 1m0s",
				"transaction.max.timeout.ms", "--delivery at-least-once"} {
				if !strings.Contains(stop.Error(), want) {
					t.Errorf("the stop does not say %q: %s", want, stop)
				}
			}
		})
	}
}

// TestTimeoutCountedAndSaid: each abort by the transaction timeout that
// ends a session is counted (Env.TransactionTimedOut, which the relay
// wires to outbox_cdc_transaction_timeouts_total); the first is said in
// one warning and retried, the second of the same Postgres transaction is
// the relay's stop.
func TestTimeoutCountedAndSaid(t *testing.T) {
	var logs strings.Builder
	counted := 0
	env := stubEnv(t)
	env.Log, env.TransactionTimedOut = slog.New(slog.NewTextHandler(&logs, nil)), func() { counted++ }
	m := mustNew(t, testConfig(), env)
	aborted := func() error {
		return &txnTimeoutError{pg: pgTxn{xid: 7, commit: 0x2f0, events: 3, bytes: 3000}, open: time.Minute, timeout: time.Minute,
			err: &producer.TxnError{Op: "EndTxn", Kind: producer.ErrFenced, Err: kafka.ProducerFenced}}
	}
	if stop, timedOut := m.Judge(errors.New("another failure")); stop != nil || timedOut {
		t.Fatalf("another failure: stop %v, timed out %v", stop, timedOut)
	}
	if stop, timedOut := m.Judge(aborted()); stop != nil || !timedOut {
		t.Fatalf("the first abort: stop %v, timed out %v", stop, timedOut)
	}
	if n := strings.Count(logs.String(), "level=WARN"); n != 1 || !strings.Contains(logs.String(), "xid=7") {
		t.Errorf("after the first abort, %d warnings, want 1 naming xid 7:\n%s", n, logs.String())
	}
	if stop, _ := m.Judge(aborted()); stop == nil {
		t.Fatal("the second abort of the same transaction did not stop the relay")
	}
	if counted != 2 {
		t.Errorf("counted %d aborts by timeout, want 2", counted)
	}
	if stop, timedOut := mustNew(t, Config{Mode: AtLeastOnce}, Env{}).Judge(aborted()); stop != nil || timedOut {
		t.Errorf("at least once judged an error: stop %v, timed out %v", stop, timedOut)
	}
}
