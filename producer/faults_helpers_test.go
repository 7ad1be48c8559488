package producer

import (
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// The property tests' fault injection: a seeded coin, random refusals of
// produce requests and leaders moved at random.

// sized is how much a property or load test does: full in the full suite
// (make test, go test without -short), short under go test -short, which
// runs every fault the test injects, fewer times, to stay under a minute
// for the whole repository.
func sized(full, short int) int {
	if testing.Short() {
		return short
	}
	return full
}

// chance is a seeded coin shared by the fault injectors.
type chance struct {
	mu  sync.Mutex
	rng *rand.Rand
}

func (c *chance) below(p float64) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.rng.Float64() < p
}

func (c *chance) intN(n int) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.rng.IntN(n)
}

// randomFault fails a partition of a produce request with err, at odds p.
type randomFault struct {
	err *kerr.Error
	p   float64
}

// injectRandomFaults fails produce requests to topic with faults, each at
// its odds. When is asked per partition: each partition of a request fails
// alone.
func injectRandomFaults(cluster *kfake.Cluster, coin *chance, topic string, faults ...randomFault) *kfake.FaultHandle {
	fs := make([]kfake.Fault, len(faults))
	for i, f := range faults {
		fs[i] = kfake.Fault{Keys: []kmsg.Key{kmsg.Produce}, Topic: topic, Err: f.err, Count: -1,
			When: func(kmsg.Request) bool { return coin.below(f.p) }}
	}
	return cluster.Fault(fs...)
}

// moveLeaders moves a random partition of topic to a random one of brokers
// every interval, so that requests meet leaders that moved, until stop is
// called; stop waits for the mover and returns the moves it made.
func moveLeaders(cluster *kfake.Cluster, coin *chance, topic string, brokers int, every time.Duration) (stop func() int64) {
	done := make(chan struct{})
	var moving sync.WaitGroup
	var moves atomic.Int64
	moving.Go(func() {
		for {
			select {
			case <-done:
				return
			case <-time.After(every):
			}
			n := len(cluster.PartitionInfos(topic))
			if cluster.MoveTopicPartition(topic, int32(coin.intN(n)), int32(coin.intN(brokers))) == nil {
				moves.Add(1)
			}
		}
	})
	return func() int64 {
		close(done)
		moving.Wait()
		return moves.Load()
	}
}
