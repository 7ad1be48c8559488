package main

import "testing"

// TestCapacity: the highest single-row rate sustained with every lower one,
// p99 under 100 ms and the writers reaching 95% of the rate asked.
func TestCapacity(t *testing.T) {
	phase := func(tx, rows int, p99, achieved float64) phaseResult {
		return phaseResult{Load: load{tx, rows}, P99: p99, AchievedTx: achieved}
	}
	for _, c := range []struct {
		name   string
		phases []phaseResult
		want   float64
	}{
		{"all sustained", []phaseResult{phase(5000, 1, 60, 4990), phase(1000, 1, 10, 1000), phase(3000, 1, 20, 3000)}, 5000},
		{"p99 over at the top", []phaseResult{phase(1000, 1, 10, 1000), phase(3000, 1, 20, 3000), phase(5000, 1, 140, 5000)}, 3000},
		{"writers starved", []phaseResult{phase(1000, 1, 10, 1000), phase(3000, 1, 20, 2500), phase(5000, 1, 40, 5000)}, 1000},
		{"multi-row loads ignored", []phaseResult{phase(1000, 1, 10, 1000), phase(1000, 10, 500, 1000)}, 1000},
		{"none", []phaseResult{phase(1000, 1, 100, 1000)}, 0},
	} {
		if got := capacity(c.phases); got != c.want {
			t.Errorf("%s: capacity %.0f, want %.0f", c.name, got, c.want)
		}
	}
}
