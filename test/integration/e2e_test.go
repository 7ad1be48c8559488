package integration

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/segmentio/kafka-go"
	"golang.org/x/sync/errgroup"

	"github.com/outbox-cdc/outbox-cdc/internal/testkit"
)

// written is what the writers committed and rolled back.
type written struct {
	mu         sync.Mutex
	committed  map[string]row // by id
	rolledBack map[string]bool
}

// writeLoad inserts perWriter committed rows from each of writers goroutines,
// in transactions of 1 to maxTx rows, rolling back about one in ten. Each
// aggregate (aggregates in all) is written by one writer only, and its rows
// carry n, the aggregate's own counter, so commit order per aggregate is known.
func writeLoad(ctx context.Context, o *outbox, writers, perWriter, aggregates, maxTx int) (*written, error) {
	w := &written{committed: map[string]row{}, rolledBack: map[string]bool{}}
	g, ctx := errgroup.WithContext(ctx)
	for wi := range writers {
		g.Go(func() error {
			rng := rand.New(rand.NewPCG(uint64(wi), 42))
			counters := map[int]int{}
			var mine []int
			for a := wi; a < aggregates; a += writers {
				mine = append(mine, a)
			}
			for done := 0; done < perWriter; {
				size := 1 + rng.IntN(maxTx)
				commit := rng.IntN(10) != 0
				if commit {
					size = min(size, perWriter-done)
				}
				next := map[int]int{}
				rows := make([]row, size)
				for i := range rows {
					a := mine[rng.IntN(len(mine))]
					n, ok := next[a]
					if !ok {
						n = counters[a]
					}
					next[a] = n + 1
					typ := "order"
					if a%2 == 1 {
						typ = "customer"
					}
					r := row{
						ID: uuid.NewString(), AggregateType: typ, AggregateID: fmt.Sprintf("agg-%03d", a),
						EventType: typ + "_changed", Payload: fmt.Sprintf(`{"agg": "agg-%03d", "n": %d, "note": "héllo \u00e9"}`, a, n),
					}
					if i%3 == 0 {
						h := fmt.Sprintf(`{"trace": "t-%s", "n": 5, "skip": null}`, r.ID[:8])
						r.Headers = &h
					}
					rows[i] = r
				}
				if err := o.insertTx(ctx, rows, commit); err != nil {
					return err
				}
				w.record(rows, commit)
				if commit {
					for a, n := range next {
						counters[a] = n
					}
					done += size
				}
			}
			return nil
		})
	}
	return w, g.Wait()
}

// checkDelivered asserts that msgs hold every committed row exactly as
// stored, no rolled-back row, and each aggregate's rows in commit order
// (first delivery of each id). It returns the number of duplicates.
func checkDelivered(t *testing.T, o *outbox, w *written, msgs []kafka.Message) int {
	t.Helper()
	first, dups := byID(t, msgs)
	for id := range w.rolledBack {
		if _, ok := first[id]; ok {
			t.Errorf("rolled-back event %s was published", id)
		}
	}
	// The value must be the payload column's text, byte for byte.
	stored := map[string]string{}
	rows, err := o.db.Query(context.Background(), fmt.Sprintf("SELECT id::text, payload::text FROM %s", o.name))
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var id, payload string
		if err := rows.Scan(&id, &payload); err != nil {
			t.Fatal(err)
		}
		stored[id] = payload
	}
	if rows.Err() != nil {
		t.Fatal(rows.Err())
	}
	missing := 0
	for id, r := range w.committed {
		m, ok := first[id]
		if !ok {
			if missing++; missing <= 10 {
				t.Logf("missing: %+v headers=%v", r, r.Headers != nil)
			}
			continue
		}
		if want := o.name + "." + r.AggregateType; m.Topic != want {
			t.Errorf("event %s on topic %s, want %s", id, m.Topic, want)
		}
		if string(m.Key) != r.AggregateID {
			t.Errorf("event %s key %q, want %q", id, m.Key, r.AggregateID)
		}
		if string(m.Value) != stored[id] {
			t.Errorf("event %s value %q, want the stored payload %q", id, m.Value, stored[id])
		}
		for k, want := range map[string]string{"event_type": r.EventType, "aggregate_type": r.AggregateType} {
			if got, _ := testkit.Header(m, k); got != want {
				t.Errorf("event %s header %s = %q, want %q", id, k, got, want)
			}
		}
		if r.Headers != nil {
			if got, _ := testkit.Header(m, "trace"); got != "t-"+id[:8] {
				t.Errorf("event %s header trace = %q, want %q", id, got, "t-"+id[:8])
			}
			if got, _ := testkit.Header(m, "n"); got != "5" {
				t.Errorf("event %s header n = %q, want 5", id, got)
			}
			if _, ok := testkit.Header(m, "skip"); ok {
				t.Errorf("event %s has a header for a null member", id)
			}
		}
		if time.Since(m.Time) > time.Hour || m.Time.After(time.Now().Add(time.Minute)) {
			t.Errorf("event %s timestamp %s is not the row's time", id, m.Time)
		}
	}
	if missing > 0 {
		t.Errorf("%d of %d committed events never arrived", missing, len(w.committed))
	}
	checkOrder(t, msgs) // per aggregate, first deliveries count n = 0, 1, 2, ...
	return dups
}

func TestEndToEnd(t *testing.T) {
	o := newOutbox(t, "e2e", defaultColumns)
	r := startRelay(t, o.args()...)

	start := time.Now()
	w, err := writeLoad(context.Background(), o, 8, 1250, 200, 50)
	if err != nil {
		t.Fatalf("write load: %v", err)
	}
	wrote := time.Since(start)
	end := o.CurrentLSN(t) // at least the end of the last commit
	msgs := consume(t, []string{o.name + ".order", o.name + ".customer"}, len(w.committed), 90*time.Second)
	t.Logf("read back %s after the first insert", time.Since(start).Round(time.Millisecond))
	elapsed := time.Since(start)
	dups := checkDelivered(t, o, w, msgs)
	t.Logf("%d committed (%d rolled back) events written in %s by 8 writers; all delivered %s after the first insert: %.0f events/s; %d duplicates",
		len(w.committed), len(w.rolledBack), wrote.Round(time.Millisecond), elapsed.Round(time.Millisecond), float64(len(w.committed))/elapsed.Seconds(), dups)

	// Once everything is acked the slot confirms past the last commit.
	waitConfirmed(t, o, end, 60*time.Second)
	if code := r.Stop(t, syscall.SIGTERM, 30*time.Second); code != 0 {
		t.Errorf("outbox-cdc exited %d on SIGTERM, want 0", code)
	}
}
