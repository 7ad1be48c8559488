package producer

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/segmentio/kafka-go"
)

// routes is where events go: each topic's partitions and their leaders as
// last learned, the partition count events are routed by (it changes only
// once what was queued under the old count is delivered), where null keys
// go for now, and how to create a missing topic. Its mu is locked only by
// its methods, here, which do no I/O and take no other lock, so that
// routing is decided apart from sending.
type routes struct {
	batchSize int // records a null key's sticky partition takes before it moves

	// epoch counts the drains begun (learned), any topic's: an event
	// routed before one began is routed again (Writer.enqueue).
	epoch atomic.Uint64

	mu sync.Mutex

	counts map[string]topicCount      // partitions and leaders per topic, cached
	sticky map[string]stickyPartition // by topic: where null keys go
	specs  map[string]TopicSpec       // by topic: how to create it, when its route has a spec of its own
	seen   map[string]int             // by topic: the partition count last seen, kept across forget

	// draining holds the topics whose count changed while events queued
	// under the old one are undelivered: nothing is routed by the new
	// count until they are. Kept apart from counts, which lookups
	// overwrite and forget deletes; only the writer's route clears it,
	// once the topic is idle.
	draining map[string]bool
	gens     map[string]uint64 // by draining topic: the epoch its drain began in
	// drainFrom is the count a draining topic's events were routed by
	// before it changed: a transactional writer routes by it until its
	// open transaction ends (inTransactionCount).
	drainFrom map[string]int
	// rechecks holds each topic's latest lookup past every cache, asked
	// for a row naming a partition out of range (see recheck).
	rechecks map[string]*recheck
}

func newRoutes(batchSize int) routes {
	return routes{
		batchSize: batchSize,
		counts:    map[string]topicCount{},
		sticky:    map[string]stickyPartition{},
		specs:     map[string]TopicSpec{},
		seen:      map[string]int{},
		draining:  map[string]bool{},
		gens:      map[string]uint64{},
		drainFrom: map[string]int{},
		rechecks:  map[string]*recheck{},
	}
}

// learned caches c, topic's partitions as a lookup just answered them. A
// count other than the one last seen starts a drain (see draining); it
// returns that count and true.
func (r *routes) learned(topic string, c topicCount) (from int, changed bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	n, ok := r.seen[topic]
	if changed = ok && n != len(c.ids); changed {
		if !r.draining[topic] {
			r.drainFrom[topic] = n
		}
		r.draining[topic] = true
		r.gens[topic] = r.epoch.Add(1)
	}
	r.seen[topic] = len(c.ids)
	r.counts[topic] = c
	return n, changed
}

// drain is a topic's drain, as look saw it.
type drain struct {
	on   bool   // the count changed, and what was queued under the old one may be undelivered
	gen  uint64 // the epoch it began in
	from int    // the count before it began; fromOK false: none known
	seen int    // the count last seen
	// fromOK: from is known (a drain began and has not ended).
	fromOK bool
}

// look returns topic's cached partitions (ok false: none) and its drain.
// A count older than ttl is returned all the same, marked as being
// refreshed (refresh true for one caller: it asks the brokers).
func (r *routes) look(topic string, ttl time.Duration) (c topicCount, d drain, ok, refresh bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	c, ok = r.counts[topic]
	if refresh = ok && time.Since(c.at) >= ttl && !c.refreshing; refresh {
		c.refreshing = true
		r.counts[topic] = c
	}
	d = drain{on: r.draining[topic], gen: r.gens[topic], seen: r.seen[topic]}
	d.from, d.fromOK = r.drainFrom[topic]
	return c, d, ok, refresh
}

// drained ends topic's drain begun in gen, once nothing queued under its
// old count is left; a drain begun since stays. It reports whether topic
// is drained now.
func (r *routes) drained(topic string, gen uint64) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.draining[topic] && r.gens[topic] != gen {
		return false
	}
	delete(r.draining, topic)
	delete(r.drainFrom, topic)
	delete(r.gens, topic)
	return true
}

// forget drops what is cached about topic, so that the next lookup asks
// the broker. A pending drain stays (see routes.draining).
func (r *routes) forget(topic string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.counts, topic)
}

// spec returns how to create topic, when its route has a spec of its own.
func (r *routes) spec(topic string) (TopicSpec, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	s, ok := r.specs[topic]
	return s, ok
}

// specify records how to create topic, unless it is already known.
func (r *routes) specify(topic string, spec TopicSpec) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, ok := r.specs[topic]; !ok {
		r.specs[topic] = spec
	}
}

// seenCount returns topic's partition count last seen (0: none).
func (r *routes) seenCount(topic string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.seen[topic]
}

// rechecked returns topic's latest lookup past every cache, or a new one
// (fresh, for the caller to start) once the last is older than every and
// answered.
func (r *routes) rechecked(topic string, every time.Duration) (rc *recheck, fresh bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	rc, ok := r.rechecks[topic]
	if ok && (time.Since(rc.at) < every || !isClosed(rc.done)) {
		return rc, false
	}
	rc = &recheck{at: time.Now(), done: make(chan struct{})}
	r.rechecks[topic] = rc
	return rc, true
}

// sizes returns how many topics each of the routes' maps holds, the
// largest of them: per-topic state, which the topic cap bounds.
func (r *routes) sizes() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return max(len(r.counts), len(r.seen), len(r.specs))
}

var balancer = &kafka.Murmur2Balancer{}

// pick returns msg's partition among ids: the one its row's partition
// column names (Outgoing.Partition), else its key's (choose). A name that is
// not an integer, or not a partition of the topic, is an *Error with its
// reason: the event is dead-lettered.
func (r *routes) pick(msg *Outgoing, ids []int) (int, error) {
	if msg.Partition == "" {
		return r.choose(msg, ids), nil
	}
	n, err := strconv.ParseInt(msg.Partition, 10, 32)
	switch {
	case errors.Is(err, strconv.ErrSyntax):
		return 0, &Error{Topic: msg.Topic, Reason: ReasonInvalidPartition,
			Err: fmt.Errorf("the partition column's value %q is not an integer (--column-partition)", msg.Partition)}
	case err != nil || n < 0 || n >= int64(len(ids)):
		return 0, &Error{Topic: msg.Topic, Reason: ReasonPartitionOutOfRange,
			Err: fmt.Errorf("the partition column names partition %s; the topic has %d, 0 to %d (--column-partition)", msg.Partition, len(ids), len(ids)-1)}
	}
	return int(n), nil
}

// choose returns msg's partition among ids: by murmur2 of its key, as the
// Java client does; a null key goes to its topic's sticky partition, which
// moves to another at random once a batch's worth of records went to it
// (the Java client's uniform sticky partitioner), so that null keys spread
// evenly and still fill batches.
func (r *routes) choose(msg *Outgoing, ids []int) int {
	if msg.Key != nil || len(ids) == 1 {
		return balancer.Balance(kafka.Message{Key: msg.Key}, ids...)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	st := r.sticky[msg.Topic]
	if st.left <= 0 || !slices.Contains(ids, st.id) {
		next := ids[rand.N(len(ids))]
		for next == st.id && len(ids) > 1 {
			next = ids[rand.N(len(ids))]
		}
		st = stickyPartition{id: next, left: r.batchSize}
	}
	st.left--
	r.sticky[msg.Topic] = st
	return st.id
}

// stickyPartition is where a topic's null-keyed records go for now.
type stickyPartition struct {
	id   int
	left int // records still to send there
}
