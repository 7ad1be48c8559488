package producer

import (
	"testing"
	"time"
)

// TestRoutesLearned walks a topic's partition count through a change: the
// first count and a repeat start no drain; a new count starts one that
// remembers the count its queued events were routed by, which a second
// change before the drain ends does not overwrite; a drain ends only if
// no newer one began since it was seen.
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
	var seen drain
	for _, s := range steps {
		from, changed := r.learned("t", count(s.n))
		if changed != s.wantChanged {
			t.Fatalf("%s: changed %v, want %v", s.name, changed, s.wantChanged)
		}
		c, d, ok, _ := r.look("t", time.Hour)
		if s.wantFrom < 0 && d.fromOK || s.wantFrom >= 0 && (d.from != s.wantFrom || !d.fromOK || !d.on) {
			t.Fatalf("%s: drain from %d (%v), draining %v; want %d", s.name, d.from, d.fromOK, d.on, s.wantFrom)
		}
		if changed && from == s.n {
			t.Errorf("%s: changed from %d to itself", s.name, from)
		}
		if !ok || len(c.ids) != s.n || d.seen != s.n {
			t.Errorf("%s: cached %d partitions (%v), seen %d; want %d", s.name, len(c.ids), ok, d.seen, s.n)
		}
		if s.name == "grown" {
			seen = d
		}
	}
	if r.drained("t", seen.gen) {
		t.Error("a drain seen before the count changed again ended the newer one")
	}
	_, d, _, _ := r.look("t", time.Hour)
	if !r.drained("t", d.gen) {
		t.Error("the drain seen last did not end")
	}
	if _, d, _, _ := r.look("t", time.Hour); d.on || d.fromOK {
		t.Errorf("still draining after drained: %+v", d)
	}
	if _, changed := r.learned("t", count(6)); changed {
		t.Error("the count seen last started a drain again")
	}
}
