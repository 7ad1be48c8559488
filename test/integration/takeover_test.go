package integration

import (
	"context"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestFrozenInstanceSendsNothing (issue 22, item 12): the streaming relay
// is frozen (SIGSTOP) with events queued, its walsender terminated; the
// standby takes over and publishes everything. When the frozen one wakes,
// its replication connection is gone: it must send nothing of what it
// had, nor retry anything, and it stands by.
func TestFrozenInstanceSendsNothing(t *testing.T) {
	o := newOutbox(t, "frozen", defaultColumns)
	topic := o.name + ".Order"
	// Requests paced 2 s apart with room for everything: at any moment the
	// first relay holds up to 2 s of events queued and not yet sent.
	first := startRelay(t, o.args("--batch-timeout", "2s", "--batch-size", "100000")...)
	second := startRelayNoWait(t, o.args()...)
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
	want := len(w.stop())
	consume(t, []string{topic}, want, time.Minute)
	if second.countLines("msg=streaming") != 1 {
		t.Fatal("the standby did not take over")
	}
	wokenAppendsNothing(t, first, topic)
	if !first.running() {
		t.Error("the woken instance exited; it should stand by")
	}
	if n := first.countLines("standing by"); n != 1 {
		t.Errorf("the woken instance logged %q %d times, want once", "standing by", n)
	}
	abandoned := first.countLines("events not yet acknowledged are abandoned")
	t.Logf("%d events; the woken instance published nothing after the takeover; it said it abandoned its events %d times",
		want, abandoned)
	if abandoned == 0 && !strings.Contains(first.LogText(), "replication connection lost") {
		t.Log("(it had nothing in hand when frozen)")
	}
}
