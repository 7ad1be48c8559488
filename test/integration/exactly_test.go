package integration

import (
	"context"
	"syscall"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/outbox-cdc/outbox-cdc/internal/testkit"
)

// exactlyArgs are o's relay flags in exactly-once delivery, with a
// checkpoint topic of its own.
func exactlyArgs(o *outbox, extra ...string) []string {
	return o.args(append([]string{"--delivery", "exactly-once", "--checkpoint-topic", o.name + ".checkpoints"}, extra...)...)
}

// TestExactlyOnce streams whole transactions in exactly-once delivery and
// stops with SIGTERM: a read_committed consumer reads every event once, in
// order per aggregate; the checkpoint topic holds the slot's last
// transaction; a restart with the same flags publishes nothing again.
func TestExactlyOnce(t *testing.T) {
	slowFault(t)
	o := newOutbox(t, "eos", defaultColumns)
	args := exactlyArgs(o)
	r := startRelay(t, args...)
	w, counters := newWritten(), map[string]int{}
	insertRows(t, o, w, makeRows(3000, 50, "order", counters), 25)
	topics := []string{o.name + ".order"}
	msgs := consumeCommitted(t, topics, len(w.committed), time.Minute)
	if dups := checkDelivered(t, o, w, msgs); dups != 0 {
		t.Errorf("%d duplicates read at read_committed", dups)
	}
	if n := r.Metric(t, `outbox_cdc_kafka_transactions_total{outcome="committed"}`); n == 0 {
		t.Errorf("outbox_cdc_kafka_transactions_total{outcome=\"committed\"} is 0")
	}
	if n := r.Metric(t, "outbox_cdc_kafka_commit_seconds_count"); n == 0 {
		t.Errorf("outbox_cdc_kafka_commit_seconds has no sample")
	}
	end := o.CurrentLSN(t)
	if code := r.Stop(t, syscall.SIGTERM, 30*time.Second); code != 0 {
		t.Fatalf("SIGTERM: exit %d\n%s", code, testkit.Tail(r.LogText(), 30))
	}
	if got := o.Confirmed(t); got < end {
		t.Errorf("slot confirmed at %s after SIGTERM, want at least %s", got, end)
	}
	startRelay(t, args...)
	insertRows(t, o, w, makeRows(500, 50, "order", counters), 25)
	msgs = consumeCommitted(t, topics, len(w.committed), time.Minute)
	if dups := checkDelivered(t, o, w, msgs); dups != 0 {
		t.Errorf("after a restart: %d duplicates read at read_committed", dups)
	}
	if n := len(consumeCommitted(t, []string{o.name + ".checkpoints"}, 1, 30*time.Second)); n == 0 {
		t.Errorf("the checkpoint topic holds no record")
	}
}

// TestExactlyOnceCrashes kills the relay in exactly-once delivery with
// SIGKILL 20 times at random moments under load, restarting it each time:
// a read_committed consumer reads every committed event once, in order
// per aggregate: no loss, no duplicate.
func TestExactlyOnceCrashes(t *testing.T) {
	slowFault(t)
	o := newOutbox(t, "eoscrash", defaultColumns)
	args := exactlyArgs(o, "--max-in-flight", "2000")
	w, counters := newWritten(), map[string]int{}
	r := startRelay(t, args...)
	wait := insertInBackground(o, w, makeRows(12000, 100, "order", counters), 20, 40*time.Millisecond)
	const kills = 20
	killRepeatedly(t, r, args, kills)
	if err := wait(); err != nil {
		t.Fatalf("insert: %v", err)
	}
	msgs := consumeCommitted(t, []string{o.name + ".order"}, len(w.committed), 3*time.Minute)
	dups := checkDelivered(t, o, w, msgs)
	if dups != 0 {
		t.Errorf("%d duplicates read at read_committed after %d kill -9", dups, kills)
	}
	t.Logf("%d kill -9 under load, exactly-once: %d events committed, all delivered; %d duplicates at read_committed", kills, len(w.committed), dups)
}

// consumeCommitted is consume at read_committed (testkit.ConsumeCommitted).
func consumeCommitted(t *testing.T, topics []string, want int, timeout time.Duration) []kafka.Message {
	t.Helper()
	return testkit.ConsumeCommitted(t, broker.Brokers, topics, want, timeout)
}

// TestExactlyOnceFrozenTakeover freezes (SIGSTOP) the streaming relay in
// exactly-once delivery while its Kafka transaction holds events, and
// terminates its walsender: the standby takes the slot and the
// transactional id, which fences the frozen one and aborts its open
// transaction. A read_committed consumer reads every event once. Woken,
// the frozen one writes nothing (no record is appended to the topic, not
// even an aborted one) and stands by.
func TestExactlyOnceFrozenTakeover(t *testing.T) {
	slowFault(t)
	o := newOutbox(t, "eosfrozen", defaultColumns)
	topic := o.name + ".Order"
	// Kafka transactions of 5 s: when frozen, the first holds up to 5 s of
	// events published and not committed.
	first := startRelay(t, exactlyArgs(o, "--transaction-interval", "5s")...)
	second := startRelayNoWait(t, exactlyArgs(o)...)
	ctx := context.Background()

	w := startRowWriter(o, func() string { return o.name }, 5*time.Millisecond)
	time.Sleep(3500 * time.Millisecond)
	if err := first.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = first.cmd.Process.Signal(syscall.SIGCONT) })
	if _, err := o.db.Exec(ctx, `SELECT pg_terminate_backend(active_pid) FROM pg_replication_slots WHERE slot_name = $1`, o.name); err != nil {
		t.Fatal(err)
	}
	time.Sleep(3 * time.Second) // the standby takes over meanwhile
	ids := w.stop()
	msgs := consumeCommitted(t, []string{topic}, len(ids), time.Minute)
	if second.countLines("msg=streaming") != 1 {
		t.Fatalf("the standby did not take over\n%s", testkit.Tail(second.LogText(), 20))
	}
	wokenAppendsNothing(t, first, topic)
	if dups := countDuplicates(t, ids, msgs); dups > 0 {
		t.Errorf("%d of %d events read twice at read_committed after the takeover", dups, len(ids))
	}
	if !first.running() {
		t.Error("the woken instance exited; it should stand by")
	}
	if n := first.countLines("standing by"); n != 1 {
		t.Errorf("the woken instance logged %q %d times, want once:\n%s", "standing by", n, testkit.Tail(first.LogText(), 20))
	}
	t.Logf("%d events, none read twice; the woken instance appended nothing; its last words: %s", len(ids),
		testkit.Tail(first.LogText(), 3))
}

// countDuplicates reports each of ids missing from msgs as an error, and
// returns how many are in msgs more than once.
func countDuplicates(t *testing.T, ids []string, msgs []kafka.Message) int {
	t.Helper()
	count := map[string]int{}
	for _, m := range msgs {
		id, _ := testkit.Header(m, "id")
		count[id]++
	}
	dups, missing := 0, 0
	for _, id := range ids {
		switch n := count[id]; {
		case n == 0:
			if missing++; missing <= 10 {
				t.Errorf("event %s missing", id)
			}
		case n > 1:
			dups++
		}
	}
	return dups
}
