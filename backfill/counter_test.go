package backfill

import (
	"sync"
	"testing"
)

func TestCounter(t *testing.T) {
	for _, tc := range []struct {
		name string
		acks []uint64
		want uint64
	}{
		{"none", nil, 0},
		{"in order", []uint64{0, 1, 2, 3}, 4},
		{"first missing", []uint64{1, 2, 3}, 0},
		{"out of order, complete", []uint64{3, 1, 0, 2}, 4},
		{"out of order, a hole", []uint64{2, 0, 4, 3}, 1},
		{"the hole filled last", []uint64{2, 0, 4, 3, 1}, 5},
		{"reversed", []uint64{5, 4, 3, 2, 1, 0}, 6},
		{"twice in order", []uint64{0, 0, 1, 1}, 2},
		{"twice ahead", []uint64{2, 2, 0, 1}, 3},
		{"an old row again", []uint64{0, 1, 0}, 2},
		{"far ahead", []uint64{1000, 0}, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var c Counter
			for _, n := range tc.acks {
				c.Ack(n)
			}
			if got := c.Acked(); got != tc.want {
				t.Errorf("acks %v: Acked() = %d, want %d", tc.acks, got, tc.want)
			}
			if tc.want == uint64(len(tc.acks)) && len(c.ahead) != 0 {
				t.Errorf("acks %v: %d rows still kept ahead", tc.acks, len(c.ahead))
			}
		})
	}
}

// TestCounterConcurrent acks from several goroutines, as the sink's
// completions do, each its own interleaved share of the rows.
func TestCounterConcurrent(t *testing.T) {
	const rows, workers = 10000, 8
	var c Counter
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for n := rows - 1 - w; n >= 0; n -= workers {
				c.Ack(uint64(n))
			}
		})
	}
	wg.Wait()
	if got := c.Acked(); got != rows {
		t.Errorf("Acked() = %d, want %d", got, rows)
	}
	if len(c.ahead) != 0 {
		t.Errorf("%d rows still kept ahead", len(c.ahead))
	}
}

func TestLegacyKey(t *testing.T) {
	s := func(v string) *string { return &v }
	for _, tc := range []struct {
		name  string
		after *Key
		order Order
		want  []*string // nil: no key
	}{
		{"none", nil, OrderTimestamp, nil},
		{"by id", &Key{Values: []*string{s("2024-01-01"), s("id-7")}}, OrderID, []*string{s("id-7")}},
		{"by timestamp", &Key{Values: []*string{s("2024-01-01"), s("id-7")}}, OrderTimestamp, []*string{s("2024-01-01"), nil, s("id-7")}},
		{"a NULL timestamp", &Key{Values: []*string{nil, s("id-7")}}, OrderTimestamp, []*string{nil, nil, s("id-7")}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := legacyKey(tc.after, tc.order)
			if (got == nil) != (tc.want == nil) {
				t.Fatalf("legacyKey = %v, want %v", got, tc.want)
			}
			if got != nil && keyString(got.Values) != keyString(tc.want) {
				t.Errorf("legacyKey = %s, want %s", keyString(got.Values), keyString(tc.want))
			}
		})
	}
}

// keyString shows a key's values, NULL for nil.
func keyString(values []*string) string {
	out := "["
	for i, v := range values {
		if i > 0 {
			out += ", "
		}
		if v == nil {
			out += "NULL"
		} else {
			out += *v
		}
	}
	return out + "]"
}
