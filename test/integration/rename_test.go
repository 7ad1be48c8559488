package integration

import (
	"context"
	"fmt"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
)

// TestRenameUnderLoad renames the outbox table while writers commit to it
// (issue 22, item 6). No insert may be skipped and confirmed: the relay
// follows the table by its OID, stops with one line naming the new name,
// and a restart under that name relays the rest; every row arrives.
func TestRenameUnderLoad(t *testing.T) {
	o := newOutbox(t, "rename", defaultColumns)
	renamedTo := o.name + "_new"
	ctx := context.Background()
	t.Cleanup(func() { _, _ = o.db.Exec(ctx, "DROP TABLE IF EXISTS "+renamedTo) })
	args := o.args("--heartbeat-interval", "3s")
	r := startRelay(t, args...)

	var table atomic.Value
	table.Store(o.name)
	w := startRowWriter(o, func() string { return table.Load().(string) }, 2*time.Millisecond)
	time.Sleep(time.Second)
	if _, err := o.db.Exec(ctx, fmt.Sprintf("ALTER TABLE %s RENAME TO %s", o.name, renamedTo)); err != nil {
		t.Fatal(err)
	}
	table.Store(renamedTo)
	var code int
	select {
	case <-r.done:
		code = r.cmd.ProcessState.ExitCode()
	case <-time.After(30 * time.Second):
		t.Fatal("the relay still runs 30 s after its table was renamed")
	}
	b, _ := os.ReadFile(r.log)
	if last := lastLine(string(b)); code != 1 || !strings.Contains(last, "renamed to") || !strings.Contains(last, renamedTo) {
		t.Errorf("exit %d, last line %q; want exit 1 saying the table was renamed to %s", code, last, renamedTo)
	}
	time.Sleep(time.Second) // rows into the renamed table while the relay is down
	want := w.stop()

	// Restarted under the new name, the relay replays from where it
	// confirmed: every row, before and after the rename, arrives.
	r2 := startRelay(t, append(without(args, "--table"), "--table", "public."+renamedTo)...)
	msgs := consume(t, []string{o.name + ".Order"}, len(want), time.Minute)
	first, dups := byID(t, msgs)
	lost := 0
	for _, id := range want {
		if _, ok := first[id]; !ok {
			lost++
		}
	}
	if lost > 0 {
		t.Errorf("%d of %d rows never arrived: skipped and confirmed around the rename", lost, len(want))
	}
	if code := r2.Stop(t, 15, 40*time.Second); code != 0 {
		t.Errorf("exit %d on SIGTERM", code)
	}
	t.Logf("%d rows written across a rename: %d lost, %d duplicates", len(want), lost, dups)
}

// rowWriter commits one row a transaction (aggregate type Order, 8
// aggregates) into the table table() names, pausing between rows, until
// stopped. A failed insert is skipped: only committed rows are counted.
type rowWriter struct {
	done chan struct{}
	wg   sync.WaitGroup
	mu   sync.Mutex
	ids  []string
}

func startRowWriter(o *outbox, table func() string, pause time.Duration) *rowWriter {
	w := &rowWriter{done: make(chan struct{})}
	ctx := context.Background()
	w.wg.Go(func() {
		for i := 0; ; i++ {
			select {
			case <-w.done:
				return
			case <-time.After(pause):
			}
			id := uuid.NewString()
			if _, err := o.db.Exec(ctx, fmt.Sprintf(`INSERT INTO %s (id, aggregate_type, aggregate_id, event_type, payload) VALUES ($1, 'Order', $2, 'Placed', '{}')`,
				table()), id, fmt.Sprint(i%8)); err != nil {
				continue
			}
			w.mu.Lock()
			w.ids = append(w.ids, id)
			w.mu.Unlock()
		}
	})
	return w
}

// stop stops the writer and returns the ids it committed.
func (w *rowWriter) stop() []string {
	close(w.done)
	w.wg.Wait()
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]string(nil), w.ids...)
}
