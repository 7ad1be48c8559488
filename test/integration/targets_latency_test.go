package integration

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/outbox-cdc/outbox-cdc/internal/testkit"
)

// latencies pairs each default row's commit with the moment the live
// reader got it, in whichever order the two are told.
type latencies struct {
	mu      sync.Mutex
	commit  map[string]time.Time // by id: when its commit returned
	arrived map[string]time.Time // by id: when it was first read
	written []time.Time          // every commit
	samples []sample
}

type sample struct {
	committed time.Time
	d         time.Duration
}

func newLatencies() *latencies {
	return &latencies{commit: map[string]time.Time{}, arrived: map[string]time.Time{}}
}

func (l *latencies) add(c, a time.Time) {
	l.samples = append(l.samples, sample{c, max(a.Sub(c), 0)})
}

// committed records the commit of the default row of ids, if any.
func (l *latencies) committed(ids map[string]string, at time.Time) {
	id, ok := ids["default"]
	if !ok {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.commit[id] = at
	l.written = append(l.written, at)
	if a, ok := l.arrived[id]; ok {
		l.add(at, a)
	}
}

// read consumes topic's one partition on the package's broker from its
// start until ctx ends.
func (l *latencies) read(ctx context.Context, topic string) {
	r := kafka.NewReader(kafka.ReaderConfig{Brokers: strings.Split(broker.Brokers, ","), Topic: topic, Partition: 0, MinBytes: 1, MaxBytes: 10 << 20, MaxWait: 20 * time.Millisecond})
	defer r.Close()
	for {
		m, err := r.ReadMessage(ctx)
		if err != nil {
			return
		}
		now := time.Now()
		id, _ := testkit.Header(m, "id")
		l.mu.Lock()
		if _, seen := l.arrived[id]; !seen {
			l.arrived[id] = now
			if c, ok := l.commit[id]; ok {
				l.add(c, now)
			}
		}
		l.mu.Unlock()
	}
}

// stats are the latencies of rows committed in a window.
type stats struct {
	n             int
	p50, p99, max time.Duration
}

func (s stats) String() string {
	return fmt.Sprintf("%d rows, p50 %s, p99 %s, max %s", s.n, s.p50, s.p99, s.max)
}

// between returns the latencies of rows committed in [from, to).
func (l *latencies) between(from, to time.Time) stats {
	l.mu.Lock()
	defer l.mu.Unlock()
	var ds []time.Duration
	for _, s := range l.samples {
		if !s.committed.Before(from) && s.committed.Before(to) {
			ds = append(ds, s.d)
		}
	}
	if len(ds) == 0 {
		return stats{}
	}
	slices.Sort(ds)
	q := func(p float64) time.Duration {
		return ds[min(len(ds)-1, int(p*float64(len(ds))))].Round(100 * time.Microsecond)
	}
	return stats{n: len(ds), p50: q(0.50), p99: q(0.99), max: ds[len(ds)-1].Round(100 * time.Microsecond)}
}

// writtenBetween counts the default rows committed in [from, to).
func (l *latencies) writtenBetween(from, to time.Time) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, at := range l.written {
		if !at.Before(from) && at.Before(to) {
			n++
		}
	}
	return n
}
