package backoff

import (
	"testing"
	"time"
)

func TestDelayBounds(t *testing.T) {
	tests := []struct {
		name           string
		attempt        int
		base, ceiling  time.Duration
		wantLo, wantHi time.Duration
	}{
		{"first attempt", 0, 100 * time.Millisecond, 5 * time.Second, 50 * time.Millisecond, 100 * time.Millisecond},
		{"doubles", 3, 100 * time.Millisecond, 5 * time.Second, 400 * time.Millisecond, 800 * time.Millisecond},
		{"last below the cap", 5, 100 * time.Millisecond, 5 * time.Second, 1600 * time.Millisecond, 3200 * time.Millisecond},
		{"capped", 6, 100 * time.Millisecond, 5 * time.Second, 2500 * time.Millisecond, 5 * time.Second},
		{"capped for ever", 1000, time.Second, 30 * time.Second, 15 * time.Second, 30 * time.Second},
		{"session schedule", 4, time.Second, 30 * time.Second, 8 * time.Second, 16 * time.Second},
		{"session cap", 5, time.Second, 30 * time.Second, 15 * time.Second, 30 * time.Second},
		{"base above the cap", 0, time.Minute, time.Second, 500 * time.Millisecond, time.Second},
		{"negative attempt", -1, time.Second, 30 * time.Second, 500 * time.Millisecond, time.Second},
		{"no base", 3, 0, time.Second, 0, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			lo, hi := tt.wantHi, tt.wantLo // the extremes seen
			for range 2000 {
				d := Delay(tt.attempt, tt.base, tt.ceiling)
				if d < tt.wantLo || d > tt.wantHi {
					t.Fatalf("Delay(%d, %s, %s) = %s, want within [%s, %s]", tt.attempt, tt.base, tt.ceiling, d, tt.wantLo, tt.wantHi)
				}
				lo, hi = min(lo, d), max(hi, d)
			}
			// Jittered: the draws spread over most of the range, not
			// one fixed point.
			if spread := tt.wantHi - tt.wantLo; spread > 0 && hi-lo < spread*8/10 {
				t.Errorf("Delay(%d, %s, %s) spread over [%s, %s] only, want most of [%s, %s]", tt.attempt, tt.base, tt.ceiling, lo, hi, tt.wantLo, tt.wantHi)
			}
		})
	}
}
