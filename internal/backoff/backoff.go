// Package backoff computes how long to wait before trying again. The relay's
// sessions, the Kafka writer and the cleaner all retry with the same shape of
// delay, each with its own base and cap.
package backoff

import (
	"math/rand/v2"
	"time"
)

// Delay returns the wait before retry number attempt (0 for the first):
// base doubled attempt times, capped at ceiling, with equal jitter. Half of it
// is fixed and half random, so the result lies in [d/2, d] for that capped
// d: a retry never comes sooner than half the schedule (which full jitter,
// drawing from [0, d], would allow), and instances that failed together do
// not retry in step. A base of zero or less returns 0.
func Delay(attempt int, base, ceiling time.Duration) time.Duration {
	if base <= 0 {
		return 0
	}
	d := min(base, ceiling)
	for i := 0; i < attempt && d < ceiling; i++ {
		d *= 2 // d < ceiling: overflows only past a ceiling of 146 years
	}
	d = min(d, ceiling)
	return d/2 + rand.N(d/2+1)
}
