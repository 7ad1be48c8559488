package backfill

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pglogrepl"

	"github.com/outbox-cdc/outbox-cdc/decode"
	"github.com/outbox-cdc/outbox-cdc/slot"
)

// fakeEntry takes rows and acknowledges them when the test says.
type fakeEntry struct {
	rows     []Row
	dones    []func()
	during   map[int][]int // on publishing row i, these rows are acknowledged
	atDrain  []int         // rows acknowledged by the drain, in this order
	failAt   int           // Publish of this row fails (-1: none)
	drainErr error
}

var errPublish = errors.New("record too large")

func (e *fakeEntry) Publish(_ context.Context, row Row, done func()) error {
	if len(e.rows) == e.failAt {
		return errPublish
	}
	e.rows, e.dones = append(e.rows, row), append(e.dones, done)
	for _, i := range e.during[len(e.rows)-1] {
		e.dones[i]()
	}
	return nil
}

func (e *fakeEntry) Failure() context.Context { return context.Background() }

func (e *fakeEntry) Drain(context.Context) error {
	for _, i := range e.atDrain {
		e.dones[i]()
	}
	return e.drainErr
}

// fakeStore keeps every state saved.
type fakeStore struct{ saved []State }

func (s *fakeStore) Save(_ context.Context, st State) error {
	s.saved = append(s.saved, st)
	return nil
}

var testTable = decode.Table{Schema: "public", Name: "outbox", Columns: decode.Columns{
	ID: "id", AggregateType: "aggregate_type", AggregateID: "aggregate_id", EventType: "event_type", Payload: "payload"}}

var testRelation = &pglogrepl.RelationMessage{Namespace: "public", RelationName: "outbox", Columns: []*pglogrepl.RelationMessageColumn{
	{Name: "id", DataType: 25}, {Name: "aggregate_type", DataType: 25}, {Name: "aggregate_id", DataType: 25},
	{Name: "event_type", DataType: 25}, {Name: "payload", DataType: 3802}}}

// TestFeed hands rows over, acknowledges them out of order, and checks
// what the feed records: the key of the last row acknowledged with every
// one before it, and done only when every row was.
func TestFeed(t *testing.T) {
	for _, tc := range []struct {
		name     string
		rows     int
		invalid  int           // this row has an empty key: dead-lettered (-1: none)
		during   map[int][]int // acks while reading
		atDrain  []int
		failAt   int
		drainErr error
		cancel   bool
		wantErr  string // "" nil
		// Done of each recorded state, in order; the last is what a
		// resume starts from.
		wantDone []int64
		wantEnd  string // phase of the last state saved
	}{
		{name: "every row, in order", rows: 4, invalid: -1, atDrain: []int{0, 1, 2, 3}, failAt: -1,
			wantDone: []int64{14, 14}, wantEnd: PhaseDone},
		{name: "out of order while reading", rows: 5, invalid: -1, during: map[int][]int{1: {1}, 2: {0}, 4: {3, 4}}, atDrain: []int{2}, failAt: -1,
			wantDone: []int64{12, 15, 15}, wantEnd: PhaseDone},
		{name: "a row never acknowledged", rows: 5, invalid: -1, during: map[int][]int{2: {2, 0}}, atDrain: []int{4, 3}, failAt: -1,
			wantErr: "backfill of public.outbox: 1 of 5 rows acknowledged: the entry drained", wantDone: []int64{11}, wantEnd: PhaseRunning},
		{name: "an invalid row is handed over too", rows: 3, invalid: 1, atDrain: []int{2, 1, 0}, failAt: -1,
			wantDone: []int64{13, 13}, wantEnd: PhaseDone},
		{name: "a publish failure stops the read", rows: 6, invalid: -1, during: map[int][]int{1: {0, 1}}, atDrain: []int{2}, failAt: 3,
			wantErr: "3 of 3 rows acknowledged: record too large", wantDone: []int64{12, 13}, wantEnd: PhaseRunning},
		{name: "a drain cut short", rows: 3, invalid: -1, atDrain: []int{0}, failAt: -1, drainErr: context.DeadlineExceeded,
			wantErr: "1 of 3 rows acknowledged: context deadline exceeded", wantDone: []int64{11}, wantEnd: PhaseRunning},
		{name: "stopped: a restart resumes", rows: 3, invalid: -1, atDrain: []int{1, 0}, failAt: -1, cancel: true,
			wantDone: []int64{12}, wantEnd: PhaseRunning},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			entry := &fakeEntry{during: tc.during, atDrain: tc.atDrain, failAt: tc.failAt, drainErr: tc.drainErr}
			store := &fakeStore{}
			p := &Plan{cfg: Config{Target: slot.Target{Tables: []decode.Table{testTable}}, DrainTimeout: time.Second}, log: slog.New(slog.NewTextHandler(io.Discard, nil))}
			f := p.newFeed(State{Table: "public.outbox", Phase: PhaseRunning, Done: 10}, entry)
			f.store, f.every = store, 0 // recorded after every row
			readErr := feedRows(ctx, f, tc.rows, tc.invalid)
			if tc.cancel {
				cancel()
			}
			err := f.finish(ctx, readErr)
			if tc.wantErr == "" && err != nil || tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)) {
				t.Fatalf("finish: %v, want %q", err, tc.wantErr)
			}
			var done []int64
			for _, st := range store.saved {
				done = append(done, st.Done)
				if st.After == nil || *st.After.Values[0] != fmt.Sprint(st.Done-11) {
					t.Errorf("recorded done %d with key %v, want the key of row %d", st.Done, st.After, st.Done-11)
				}
			}
			if !slices.Equal(done, tc.wantDone) {
				t.Errorf("recorded done %v, want %v", done, tc.wantDone)
			}
			if n := len(store.saved); n > 0 && store.saved[n-1].Phase != tc.wantEnd {
				t.Errorf("last recorded phase %q, want %q", store.saved[n-1].Phase, tc.wantEnd)
			}
			for i, row := range entry.rows {
				if (row.Invalid != nil) != (i == tc.invalid) {
					t.Errorf("row %d: invalid %v, want %v", i, row.Invalid, i == tc.invalid)
				}
				if row.Invalid == nil && (row.Event.ID != fmt.Sprintf("id-%d", i) || row.Event.Table != "public.outbox") {
					t.Errorf("row %d: event %s of %s", i, row.Event.ID, row.Event.Table)
				}
			}
		})
	}
}

// feedRows feeds f n rows as the snapshot's read would, row i keyed i;
// the invalid-th has an empty key column.
func feedRows(ctx context.Context, f *feed, n, invalid int) error {
	for i := range n {
		aggID := fmt.Sprint(i % 2)
		if i == invalid {
			aggID = ""
		}
		values := [][]byte{[]byte(fmt.Sprintf("id-%d", i)), []byte("Order"), []byte(aggID), []byte("Placed"), []byte(`{}`)}
		if err := f.row(ctx, testRelation, values, Key{Values: []*string{ptr(fmt.Sprint(i))}}); err != nil {
			return err
		}
	}
	return nil
}

func ptr(s string) *string { return &s }
