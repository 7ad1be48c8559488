package delivery

import (
	"context"
	"errors"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/outbox-cdc/outbox-cdc/checkpoint"
	"github.com/outbox-cdc/outbox-cdc/decode"
)

// TestExactlyConfirms walks the position exactly-once lets the slot be
// confirmed at, on the receive loop's calls: the start until a Kafka
// commit while any event waits for one, the tracker's (transactions without
// events, an idle server's WAL end) while none does. The commit (the
// session's last, at its end) writes the checkpoint of the last Postgres
// transaction handed over.
func TestExactlyConfirms(t *testing.T) {
	_, m := openCluster(t)
	ctx, track, s := openAt0x100(t, m)
	// A transaction without events moves the slot: nothing waits.
	track.Begin()
	track.Commit(0x200)
	if got := s.Confirmed(); got != 0x200 {
		t.Fatalf("after a transaction without events: %s, want 0/200", got)
	}
	// A transaction with an event: held back while it waits for a commit,
	// even once the broker acknowledged it.
	track.Begin()
	if err := s.Enter(ctx); err != nil {
		t.Fatal(err)
	}
	s.Handing(&decode.Event{CommitLSN: 0x2f0, Xid: 7})
	seq, err := track.Reserve(ctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	if got := s.Confirmed(); got != 0x200 {
		t.Errorf("inside the transaction: %s, want 0/200", got)
	}
	track.Ack(seq)
	track.Commit(0x300)
	s.Leave(0x300)
	if got := s.Confirmed(); got != 0x200 {
		t.Errorf("acknowledged, not committed in Kafka: %s, want 0/200", got)
	}
	if got := s.ConfirmIdle(0x900); got != 0x200 {
		t.Errorf("an idle keepalive while an event waits for a commit: %s, want 0/200", got)
	}
	// The session's end commits: the keepalive came after everything
	// before it was received, so its WAL end is confirmed now that the
	// event is committed.
	if err := s.Finish(ctx, true, true); err != nil {
		t.Fatalf("finish: %v", err)
	}
	if got := s.Confirmed(); got != 0x900 {
		t.Errorf("committed: %s, want the keepalive's 0/900", got)
	}
	if got := s.ConfirmIdle(0xa00); got != 0xa00 {
		t.Errorf("an idle keepalive with nothing waiting: %s, want 0/A00", got)
	}
	cluster := m.env.Connect()
	defer cluster.Close()
	rec, found, err := cluster.ReadCheckpoint(ctx, checkpointTopic, checkpoint.Key(openSystem.ID, m.cfg.Slot))
	if err != nil || !found {
		t.Fatalf("read the checkpoint: found %v, %v", found, err)
	}
	if rec.CommitLSN != 0x2f0 || rec.EndLSN != 0x300 || rec.Xid != 7 || rec.SystemID != openSystem.ID || rec.Slot != m.cfg.Slot {
		t.Errorf("the checkpoint: %+v, want commit 0/2F0 end 0/300 xid 7 of the session's system and slot", rec)
	}
}

// TestExactlyStandaloneMessage: Postgres reports a non-transactional
// message at the end of its record, where the next transaction's commit
// record may start. A checkpoint ending at a message skips the message on
// restart, and not a transaction committing right there.
func TestExactlyStandaloneMessage(t *testing.T) {
	x := newExactly(checkpoint.New(0x100, 10, 1<<20), testConfig(), 0x100, slog.New(slog.DiscardHandler))
	if err := x.Enter(context.Background()); err != nil {
		t.Fatal(err)
	}
	x.Handing(&decode.Event{CommitLSN: 0x500})
	x.Leave(0x500)
	if x.closed.end != 0x500 || x.closed.commit != 0x500 {
		t.Fatalf("checkpoint of the message: commit %s end %s, want 0/500 0/500", x.closed.commit, x.closed.end)
	}
	x.skip = x.closed.end
	for _, c := range []struct {
		lsn        uint64
		standalone bool
		want       bool
	}{{0x500, true, true}, {0x4ff, false, true}, {0x500, false, false}, {0x501, true, false}} {
		if got := x.Skips(pglogrepl.LSN(c.lsn), c.standalone); got != c.want {
			t.Errorf("skips(%X, standalone %v) = %v, want %v", c.lsn, c.standalone, got, c.want)
		}
	}
}

// TestExactlyGate: a commit waits for the receive loop to finish the
// Postgres transaction it is handing over, and the receive loop waits for
// a commit under way; finish without a commit cuts a commit short that
// waits for acknowledgements that will not come.
func TestExactlyGate(t *testing.T) {
	track := checkpoint.New(0x100, 10, 1<<20)
	x := newExactly(track, testConfig(), 0x100, slog.New(slog.DiscardHandler))
	ctx := context.Background()
	if err := x.Enter(ctx); err != nil {
		t.Fatal(err)
	}
	taken := make(chan struct{})
	go func() { x.gate <- struct{}{}; close(taken) }() // a commit asking for the gate
	select {
	case <-taken:
		t.Fatal("a commit took the gate inside a Postgres transaction")
	case <-time.After(50 * time.Millisecond):
	}
	x.Leave(0x200)
	<-taken
	short, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
	defer cancel()
	if err := x.Enter(short); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("entering while a commit holds the gate: %v, want the context's end", err)
	}
	<-x.gate

	// A commit waiting for an acknowledgement that never comes.
	if err := x.Enter(ctx); err != nil {
		t.Fatal(err)
	}
	x.Handing(&decode.Event{CommitLSN: 0x300})
	if _, err := track.Reserve(ctx, 1); err != nil {
		t.Fatal(err)
	}
	x.Leave(0x310)
	done := make(chan error, 1)
	go func() {
		x.gate <- struct{}{}
		done <- x.commit()
		<-x.gate
	}()
	time.Sleep(20 * time.Millisecond)
	x.abort(errors.New("the writer gave up"))
	if err := <-done; err == nil {
		t.Fatal("a commit whose events were never acknowledged returned nil")
	}
}

// TestExactlyPacing: in exactly-once, a session's produce requests leave
// no more often than commits; at-least-once, and the backfill's
// transactions, keep --batch-timeout.
func TestExactlyPacing(t *testing.T) {
	const interval = 25 * time.Millisecond
	for _, tt := range []struct {
		name        string
		w           Writes
		batch, want time.Duration
	}{
		{"at least once", atLeastOnceWrites{}, 7 * time.Millisecond, 7 * time.Millisecond},
		{"exactly once", &transactional{pacing: interval}, 7 * time.Millisecond, interval},
		{"exactly once, a longer batch timeout", &transactional{pacing: interval}, time.Second, time.Second},
		{"exactly once, the backfill's", &transactional{}, 7 * time.Millisecond, 7 * time.Millisecond},
	} {
		if got := tt.w.BatchTimeout(tt.batch); got != tt.want {
			t.Errorf("%s with --batch-timeout %s: paced %s, want %s", tt.name, tt.batch, got, tt.want)
		}
	}
}

// testConfig is an exactly-once Config with the relay's defaults.
func testConfig() Config {
	return Config{Mode: ExactlyOnce, Slot: "outbox_cdc", CheckpointTopic: checkpointTopic,
		TransactionalID:     func(systemID string) string { return "outbox-cdc." + systemID + ".outbox_cdc" },
		TransactionInterval: 25 * time.Millisecond, TransactionTimeout: time.Minute, MaxInFlight: 10}
}

// checkpointTopic is the checkpoint topic of these tests.
const checkpointTopic = "outbox_cdc.checkpoints"

// TestExactlyCommitsAfterAQuietSpell: a Postgres transaction that ends
// while nothing waits for a commit, and none began within the interval,
// commits at once instead of at the next tick; one that ends right after
// a commit waits for the interval, so that commits never come more often
// than --transaction-interval.
func TestExactlyCommitsAfterAQuietSpell(t *testing.T) {
	_, m := openCluster(t)
	m.cfg.TransactionInterval = time.Hour // a tick never comes in this test
	ctx, track, s := openAt0x100(t, m)
	failed := make(chan error, 1)
	s.Start(ctx, func(err error) { failed <- err })
	defer s.Finish(ctx, false, true) //nolint:errcheck // the test's end
	hand := func(commit, end pglogrepl.LSN, xid uint32) { t.Helper(); handAcked(ctx, t, track, s, commit, end, xid) }
	hand(0x2f0, 0x300, 7)
	for s.Confirmed() != 0x300 {
		select {
		case err := <-failed:
			t.Fatalf("the committer failed: %v", err)
		case <-ctx.Done():
			t.Fatalf("a transaction after a quiet spell is not committed before the interval's tick: confirmed %s, want 0/300", s.Confirmed())
		case <-time.After(5 * time.Millisecond):
		}
	}
	hand(0x3f0, 0x400, 8)
	time.Sleep(300 * time.Millisecond)
	if got := s.Confirmed(); got != 0x300 {
		t.Errorf("a transaction ending right after a commit committed before the interval passed: confirmed %s, want 0/300", got)
	}
}

// TestExactlyFlushesATransactionBegunWhileIdle: a Postgres transaction
// that begins while the committer waits for work, and outlasts the
// interval, has the writer send at once (Flush(true)) as any transaction
// spanning a commit does: otherwise requests keep the transaction
// interval's pacing and a transaction larger than the in-flight window
// streams one window per interval.
func TestExactlyFlushesATransactionBegunWhileIdle(t *testing.T) {
	d := testConfig()
	d.TransactionInterval = 10 * time.Millisecond
	x := newExactly(checkpoint.New(0x100, 10, 1<<20), d, 0x100, slog.New(slog.DiscardHandler))
	flushed := make(chan bool, 16)
	x.flush = func(on bool) { flushed <- on }
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	x.Start(ctx, func(err error) { t.Errorf("the committer failed: %v", err) })
	defer x.halt()
	time.Sleep(5 * d.TransactionInterval) // the committer idles
	if err := x.Enter(ctx); err != nil {
		t.Fatal(err)
	}
	x.Handing(&decode.Event{CommitLSN: 0x300, Xid: 9}) // and the transaction goes on
	select {
	case on := <-flushed:
		if !on {
			t.Fatal("the writer's flush was turned off first")
		}
	case <-time.After(2 * time.Second):
		t.Fatal("a transaction begun while the committer idled kept the writer paced past the interval")
	}
	x.halt() // its stop path turns the flush off: the transaction never ended
	x.abort(errors.New("test over"))
}

// openAt0x100 opens a session of m whose slot starts at 0/100, with a
// publisher that has neither writer nor cleaner, and a context that ends
// with the test (20 s at most).
func openAt0x100(t *testing.T, m *exactlyOnceMode) (context.Context, *checkpoint.Tracker, Session) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	track := checkpoint.New(0x100, 10, 1<<20)
	s := m.Session(track, 0x100)
	if err := s.Open(ctx, fakeStream{}, 0x100, func(Writes) (Publisher, error) { return Publisher{}, nil }); err != nil {
		t.Fatalf("open: %v", err)
	}
	return ctx, track, s
}

// TestExactlyGathersAfterASlowCommit: after a commit that outlasted the
// interval, the next transaction waits an interval to gather others,
// rather than committing at its first event: otherwise, with commits
// slower than the interval, each would hold one Postgres transaction.
func TestExactlyGathersAfterASlowCommit(t *testing.T) {
	c, m := openCluster(t)
	const interval = 500 * time.Millisecond
	m.cfg.TransactionInterval = interval
	ctx, track, s := openAt0x100(t, m)
	var slowed atomic.Bool
	c.ControlKey(int16(kmsg.EndTxn), func(kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		if !slowed.Swap(true) { // the first commit outlasts the interval
			time.Sleep(3 * interval)
		}
		return nil, nil, false
	})
	failed := make(chan error, 1)
	s.Start(ctx, func(err error) { failed <- err })
	defer s.Finish(ctx, false, true) //nolint:errcheck // the test's end
	hand := func(commit, end pglogrepl.LSN, xid uint32) { t.Helper(); handAcked(ctx, t, track, s, commit, end, xid) }
	waitFor := func(want pglogrepl.LSN) {
		t.Helper()
		for s.Confirmed() != want {
			select {
			case err := <-failed:
				t.Fatalf("the committer failed: %v", err)
			case <-ctx.Done():
				t.Fatalf("confirmed %s, want %s", s.Confirmed(), want)
			case <-time.After(5 * time.Millisecond):
			}
		}
	}
	hand(0x2f0, 0x300, 7) // a quiet spell: commits at once, slowly
	waitFor(0x300)
	hand(0x3f0, 0x400, 8)
	time.Sleep(interval / 3)
	if got := s.Confirmed(); got != 0x300 {
		t.Errorf("the transaction after a slow commit committed at once: confirmed %s, want 0/300 for an interval", got)
	}
	waitFor(0x400)
}

// handAcked hands s a Postgres transaction of one event, acknowledged at
// once, committed at commit and ending at end.
func handAcked(ctx context.Context, t *testing.T, track *checkpoint.Tracker, s Session, commit, end pglogrepl.LSN, xid uint32) {
	t.Helper()
	track.Begin()
	if err := s.Enter(ctx); err != nil {
		t.Fatal(err)
	}
	s.Handing(&decode.Event{CommitLSN: commit, Xid: xid})
	seq, err := track.Reserve(ctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	track.Ack(seq)
	track.Commit(end)
	s.Leave(end)
}
