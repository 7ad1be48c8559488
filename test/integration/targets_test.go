package integration

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/segmentio/kafka-go"

	"github.com/outbox-cdc/outbox-cdc/internal/testkit"
)

// targetColumns is the outbox table of sql/publication.sql with the
// column that says which Kafka cluster a row is for.
const targetColumns = defaultColumns + `,
	target_broker text not null default 'default'`

// targets is one outbox table relayed to two Kafka clusters: the
// package's broker for rows whose target_broker is 'default' (publication
// and slot named after the table), and a broker of the test's own for
// 'partner' rows (publication and slot <table>_partner), each by a relay
// of its own with --where.
type targets struct {
	o                *outbox
	partner          string         // the partner relay's publication and slot
	partnerKafka     *testkit.Kafka // stopped when the test ends
	topic            string         // the same name on both clusters
	defaultR, partnR *relay
}

// startTargets starts the partner broker and both relays, each with extra
// flags, after before (if any) ran on the new table; what it starts is
// stopped when the test ends, however it ends.
func startTargets(t *testing.T, prefix string, before func(*targets), extra ...string) *targets {
	t.Helper()
	k, err := testkit.StartKafka()
	if err != nil {
		t.Fatalf("start the partner's broker: %v", err)
	}
	t.Cleanup(func() { _ = k.Stop() })
	o := newOutbox(t, prefix, targetColumns)
	tg := &targets{o: o, partner: o.name + "_partner", partnerKafka: k, topic: o.name + ".order"}
	// Registered before the relays' cleanups, so it runs after they are
	// stopped.
	t.Cleanup(func() {
		testkit.DropSlot(t, pg.URL, tg.partner)
		_, _ = o.db.Exec(context.Background(), "DROP PUBLICATION IF EXISTS "+tg.partner)
	})
	if before != nil {
		before(tg)
	}
	tg.defaultR = startRelay(t, o.args(append([]string{"--where", "target_broker = 'default'", "--topic-partitions", "1"}, extra...)...)...)
	tg.partnR = startRelay(t, o.args(append([]string{"--kafka-brokers", k.Brokers, "--publication", tg.partner, "--slot", tg.partner,
		"--where", "target_broker='partner' -- the partner's cluster", "--topic-partitions", "1"}, extra...)...)...)
	return tg
}

// insert writes one row per target in one transaction and returns their
// ids, by target, and when the commit returned.
func (tg *targets) insert(ctx context.Context, targets ...string) (map[string]string, time.Time, error) {
	tx, err := tg.o.db.Begin(ctx)
	if err != nil {
		return nil, time.Time{}, err
	}
	defer tx.Rollback(ctx)
	ids := map[string]string{}
	for _, target := range targets {
		ids[target] = uuid.NewString()
		_, err := tx.Exec(ctx, fmt.Sprintf(`INSERT INTO %s (id, aggregate_type, aggregate_id, event_type, payload, target_broker)
			VALUES ($1, 'order', $2, 'created', '{}', $3)`, tg.o.name), ids[target], "o-"+ids[target][:8], target)
		if err != nil {
			return nil, time.Time{}, err
		}
	}
	if err := tx.Commit(ctx); err != nil {
		return nil, time.Time{}, err
	}
	return ids, time.Now(), nil
}

// verify reads both clusters until each holds its rows, and checks that
// every row arrived at its own target only: none lost, none at the other
// cluster, no duplicate on the default side (whose cluster never failed).
// It returns the partner side's duplicates.
func (tg *targets) verify(t *testing.T, want map[string][]string, timeout time.Duration) int {
	t.Helper()
	got := map[string][]kafka.Message{
		"default": consume(t, []string{tg.topic}, len(want["default"]), timeout),
		"partner": testkit.Consume(t, tg.partnerKafka.Brokers, []string{tg.topic}, len(want["partner"]), timeout),
	}
	dups := 0
	for target, other := range map[string]string{"default": "partner", "partner": "default"} {
		seen := map[string]int{}
		for _, m := range got[target] {
			id, _ := testkit.Header(m, "id")
			seen[id]++
		}
		for _, id := range want[target] {
			if seen[id] == 0 {
				t.Errorf("%s row %s never reached its cluster", target, id)
			}
			if seen[id] > 1 && target == "default" {
				t.Errorf("default row %s arrived %d times, though its cluster never failed", id, seen[id])
			}
			if seen[id] > 1 {
				dups += seen[id] - 1
			}
		}
		for _, id := range want[other] {
			if seen[id] > 0 {
				t.Errorf("%s row %s reached the %s cluster", other, id, target)
			}
		}
		if n := len(seen); n != len(want[target]) {
			t.Errorf("the %s cluster holds %d distinct events, want %d", target, n, len(want[target]))
		}
	}
	return dups
}

// TestTargets: one outbox, two clusters. Two relays, each with its own
// slot, publication (a row filter from --where) and broker, share the
// table's rows out by target_broker: each row reaches its own cluster,
// none the other, the rows pending before the slots existed (each relay's
// --backfill-where, narrowed by its --where, one of them ending in a
// comment) as well as those committed after. The publications carry the
// filters as PostgreSQL 15 deparses them.
func TestTargets(t *testing.T) {
	ctx := context.Background()
	want := map[string][]string{}
	pending := func(tg *targets) {
		for range 10 {
			ids, _, err := tg.insert(ctx, "default", "partner")
			if err != nil {
				t.Fatal(err)
			}
			for target, id := range ids {
				want[target] = append(want[target], id)
			}
		}
	}
	tg := startTargets(t, "targets", pending, "--backfill-where", "true", "--backfill-order", "id")
	for range 20 {
		ids, _, err := tg.insert(ctx, "default", "partner")
		if err != nil {
			t.Fatal(err)
		}
		for target, id := range ids {
			want[target] = append(want[target], id)
		}
	}
	if dups := tg.verify(t, want, time.Minute); dups > 0 {
		t.Logf("%d duplicates on the partner side", dups)
	}
	for pub, filter := range map[string]string{tg.o.name: "(target_broker = 'default'::text)", tg.partner: "(target_broker = 'partner'::text)"} {
		var got string
		if err := tg.o.db.QueryRow(ctx, `SELECT rowfilter FROM pg_publication_tables WHERE pubname = $1`, pub).Scan(&got); err != nil || got != filter {
			t.Errorf("publication %s's row filter %q (%v), want %q", pub, got, err, filter)
		}
	}
}

// TestTargetsFilterDrift: a publication whose row filter is not --where's
// is refused by run in one line naming the ALTER PUBLICATION to run, and
// failed by check; setup runs that statement; a --where written otherwise
// than PostgreSQL prints it, but meaning the same, is accepted.
func TestTargetsFilterDrift(t *testing.T) {
	o := newOutbox(t, "drift", targetColumns)
	args := without(without(o.args(), "--status-interval"), "--http-addr")
	with := func(where string, extra ...string) []string {
		return append(slices.Clone(args), append([]string{"--where", where}, extra...)...)
	}
	if code, out := runOnce(t, append([]string{"setup"}, with("target_broker = 'partner'")...)...); code != 0 {
		t.Fatalf("setup: exit %d\n%s", code, out)
	}
	if code, out := runOnce(t, append([]string{"check"}, with("(target_broker)='partner' /* same */")...)...); code != 0 || !strings.Contains(out, "filtered as --where says") {
		t.Errorf("check with an equivalent --where: exit %d\n%s", code, out)
	}
	alter := fmt.Sprintf(`ALTER PUBLICATION "%s" SET TABLE "public"."%s" WHERE (target_broker <> 'partner');`, o.name, o.name)
	code, out := runOnce(t, append([]string{"check"}, with("target_broker <> 'partner'")...)...)
	if code != 1 || !strings.Contains(out, "[FAIL] publication") || !strings.Contains(out, alter) {
		t.Errorf("check with another --where: exit %d, want 1, a failed publication item and %s\n%s", code, alter, out)
	}
	code, out = runWithin(t, 30*time.Second, append(with("target_broker <> 'partner'"), "--http-addr", "")...)
	if line := lastLine(out); code != 1 || !strings.Contains(line, alter) || !strings.Contains(line, "never alters") {
		t.Errorf("run with another --where: exit %d, last line %q; want exit 1 and a line naming %s", code, line, alter)
	}
	t.Logf("run with another --where, exit %d: %s", code, lastLine(out))
	code, out = runOnce(t, append([]string{"check"}, without(args, "--where")...)...)
	if code != 1 || !strings.Contains(out, "otherwise than --where says") {
		t.Errorf("check without --where on a filtered publication: exit %d, want 1 (its relay would miss rows)\n%s", code, out)
	}
	if code, out := runOnce(t, append([]string{"setup"}, with("target_broker <> 'partner'")...)...); code != 0 || !strings.Contains(out, "WHERE (target_broker <> 'partner')") {
		t.Errorf("setup with another --where: exit %d, want 0 and the ALTER run\n%s", code, out)
	}
	if code, out := runOnce(t, append([]string{"check"}, with("target_broker <> 'partner'")...)...); code != 0 {
		t.Errorf("check after setup: exit %d\n%s", code, out)
	}
	code, out = runOnce(t, append([]string{"check"}, with("1=1); DROP TABLE "+o.name+"; --")...)...)
	if code != 2 || !strings.Contains(out, "--where") {
		t.Errorf("check with an injection attempt: exit %d, want 2 and a usage error naming --where\n%s", code, out)
	}
	code, out = runOnce(t, append([]string{"check"}, with("no_such_column = 'partner'")...)...)
	if code != 1 || !strings.Contains(out, `[FAIL] row filter: postgres not ready for outbox-cdc: --where "no_such_column = 'partner'"`) || !strings.Contains(out, "no_such_column") {
		t.Errorf("check with a --where over a column the table lacks: exit %d, want 1 and a failed row filter item\n%s", code, out)
	}
	code, out = runWithin(t, 30*time.Second, append(with("now() > created_at", "--publication", o.name+"_volatile"), "--http-addr", "")...)
	if line := lastLine(out); code != 1 || !strings.Contains(line, "--where") || !strings.Contains(line, "mutable functions are not allowed") {
		t.Errorf("run with a --where PostgreSQL refuses in a row filter: exit %d, last line %q; want exit 1 and a line naming --where", code, line)
	}
	t.Logf("run with a --where calling now(), exit %d: %s", code, lastLine(out))
	var tables int
	if err := o.db.QueryRow(context.Background(), `SELECT count(*) FROM pg_class WHERE relname = $1`, o.name).Scan(&tables); err != nil || tables != 1 {
		t.Errorf("the outbox table: %d (%v), want it still there", tables, err)
	}
}

// TestTargetsNeedPostgres15: publication row filters arrived in
// PostgreSQL 15. On 14, run with --where exits 1 at start with one line
// saying so, leaving no slot and no publication behind, and check fails
// an item with the same words; without --where, 14 is served as before.
func TestTargetsNeedPostgres15(t *testing.T) {
	old, err := testkit.StartPostgresVersion("14")
	if err != nil {
		t.Fatalf("start PostgreSQL 14: %v", err)
	}
	t.Cleanup(func() { _ = old.Stop() })
	ctx := context.Background()
	o := testkit.NewOutbox(t, old.URL, "pg14", testkit.WithColumns(targetColumns))
	args := without(without(o.Args(broker.Brokers, "--where", "target_broker = 'partner'"), "--status-interval"), "--http-addr")
	want := "--where needs PostgreSQL 15 or newer: it becomes a publication row filter"

	code, out := runWithin(t, 30*time.Second, append(args, "--http-addr", "")...)
	if code != 1 || !strings.Contains(lastLine(out), want) || !strings.Contains(lastLine(out), "PostgreSQL 14") {
		t.Errorf("run --where on PostgreSQL 14: exit %d, last line %q; want exit 1 and %q", code, lastLine(out), want)
	}
	t.Logf("run --where on PostgreSQL 14, exit %d: %s", code, lastLine(out))
	var slots, pubs int
	if err := o.DB.QueryRow(ctx, `SELECT (SELECT count(*) FROM pg_replication_slots), (SELECT count(*) FROM pg_publication)`).Scan(&slots, &pubs); err != nil {
		t.Fatal(err)
	}
	if slots != 0 || pubs != 0 {
		t.Errorf("run --where left %d slot(s) and %d publication(s) on PostgreSQL 14", slots, pubs)
	}
	code, out = runWithin(t, 30*time.Second, append([]string{"check"}, args...)...)
	if code != 1 || !strings.Contains(out, "[FAIL] row filter: "+want) {
		t.Errorf("check --where on PostgreSQL 14: exit %d, want 1 and an item \"[FAIL] row filter: %s…\"; its output:\n%s", code, want, out)
	}
	code, out = runWithin(t, 30*time.Second, append([]string{"check"}, without(args, "--where")...)...)
	if code != 0 || strings.Contains(out, "row filter") {
		t.Errorf("check without --where on PostgreSQL 14: exit %d, want 0 and no row filter item; its output:\n%s", code, out)
	}
}

// TestTargetsOutage: while the partner's cluster is down for 30 s, the
// default relay keeps publishing a steady stream (50 transactions a
// second, a row for each cluster in each); once the partner's cluster is
// back, every row reaches its own cluster and none the other. Duplicates
// are allowed on the partner side only, and counted. The default side's
// latency (commit to consumed) before and during the outage is logged,
// not asserted. It takes a minute: make test-analytics runs it
// (OUTBOX_CDC_TEST_TARGETS=1).
func TestTargetsOutage(t *testing.T) {
	if os.Getenv("OUTBOX_CDC_TEST_TARGETS") == "" {
		t.Skip("a 30 s outage of the partner's cluster: make test-analytics runs it (OUTBOX_CDC_TEST_TARGETS=1)")
	}
	tg := startTargets(t, "outage", nil)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	warm, _, err := tg.insert(ctx, "default")
	if err != nil {
		t.Fatal(err)
	}
	consume(t, []string{tg.topic}, 1, time.Minute) // the topic exists: the live reader can start
	lat := newLatencies()
	lat.committed(warm, time.Now())
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); lat.read(ctx, tg.topic) }()
	w := &writer{tg: tg, lat: lat}
	stop := make(chan struct{})
	go func() { defer wg.Done(); w.run(stop, 20*time.Millisecond) }()
	var once sync.Once
	end := func() { once.Do(func() { close(stop); cancel(); wg.Wait() }) }
	defer end()

	time.Sleep(15 * time.Second)
	down := time.Now()
	if err := tg.partnerKafka.Kill(); err != nil {
		t.Fatalf("stop the partner's broker: %v", err)
	}
	time.Sleep(2 * time.Second) // what was in flight when it stopped is settled
	held := testkit.SlotConfirmed(t, pg.URL, tg.partner)
	time.Sleep(28 * time.Second)
	up := time.Now()
	if now := testkit.SlotConfirmed(t, pg.URL, tg.partner); now != held {
		t.Errorf("the partner's slot moved from %s to %s while its cluster was down", held, now)
	}
	if err := tg.partnerKafka.Restart(); err != nil {
		t.Fatalf("restart the partner's broker: %v", err)
	}
	time.Sleep(10 * time.Second)
	end()
	if w.err != nil {
		t.Fatalf("writer: %v", w.err)
	}

	before, during := lat.between(time.Time{}, down), lat.between(down, up)
	t.Logf("default side, commit to consumed: before the outage %s; during it %s", before, during)
	written := lat.writtenBetween(down, up)
	if during.n < written/4 || during.n == 0 {
		t.Errorf("during the partner's outage %d default rows were committed and %d consumed: the default side stalled", written, during.n)
	}
	want := w.ids
	want["default"] = append(want["default"], warm["default"])
	dups := tg.verify(t, want, 2*time.Minute)
	running := true
	select {
	case <-tg.partnR.done:
		running = false
	default:
	}
	t.Logf("%d default and %d partner rows, each at its own cluster only; %d duplicates on the partner side; partner relay still running: %v",
		len(want["default"]), len(want["partner"]), dups, running)
}

// writer commits a transaction of one row per target every interval
// until stop is closed. Its transactions are never cut short: a commit
// whose answer was lost would leave a row the test does not know of.
type writer struct {
	tg  *targets
	lat *latencies
	ids map[string][]string
	err error
}

func (w *writer) run(stop <-chan struct{}, interval time.Duration) {
	w.ids = map[string][]string{}
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for {
		select {
		case <-stop:
			return
		case <-tick.C:
		}
		ids, at, err := w.tg.insert(context.Background(), "default", "partner")
		if err != nil {
			w.err = err
			return
		}
		for target, id := range ids {
			w.ids[target] = append(w.ids[target], id)
		}
		w.lat.committed(ids, at)
	}
}
