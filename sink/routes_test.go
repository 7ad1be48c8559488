package sink

import "testing"

// TestRoutesLearned walks a topic's partition count through a change: the
// first count and a repeat start no drain; a new count starts one that
// remembers the count its queued events were routed by, which a second
// change before the drain ends does not overwrite.
func TestRoutesLearned(t *testing.T) {
	r := newRoutes(10)
	count := func(n int) topicCount {
		c := topicCount{ids: make([]int, n), leaders: make([]int32, n)}
		for i := range c.ids {
			c.ids[i] = i
		}
		return c
	}
	steps := []struct {
		name        string
		n           int
		wantChanged bool
		wantFrom    int // drainFrom after the step; -1: none
	}{
		{"first count", 3, false, -1},
		{"same count", 3, false, -1},
		{"grown", 4, true, 3},
		{"grown again while draining", 6, true, 3},
	}
	for _, s := range steps {
		from, changed := r.learned("t", count(s.n))
		if changed != s.wantChanged {
			t.Fatalf("%s: changed %v, want %v", s.name, changed, s.wantChanged)
		}
		got, ok := r.drainFrom["t"]
		if s.wantFrom < 0 && ok || s.wantFrom >= 0 && (got != s.wantFrom || !r.draining["t"]) {
			t.Fatalf("%s: drainFrom %d (%v), draining %v; want %d", s.name, got, ok, r.draining["t"], s.wantFrom)
		}
		if changed && from == s.n {
			t.Errorf("%s: changed from %d to itself", s.name, from)
		}
		if len(r.counts["t"].ids) != s.n || r.seen["t"] != s.n {
			t.Errorf("%s: cached %d partitions, seen %d; want %d", s.name, len(r.counts["t"].ids), r.seen["t"], s.n)
		}
	}
	r.drained("t")
	if r.draining["t"] {
		t.Error("still draining after drained")
	}
	if _, ok := r.drainFrom["t"]; ok {
		t.Error("drainFrom kept after drained")
	}
	if _, changed := r.learned("t", count(6)); changed {
		t.Error("the count seen last started a drain again")
	}
}
