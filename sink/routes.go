package sink

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"

	"github.com/segmentio/kafka-go"
)

// routes is where events go: each topic's partitions and their leaders as
// last learned, the partition count events are routed by (it changes only
// once what was queued under the old count is delivered), where null keys
// go for now, and how to create a missing topic. Guarded by the writer's
// mu; its methods are called with mu held and do no I/O, so that routing
// is decided apart from sending.
type routes struct {
	batchSize int // records a null key's sticky partition takes before it moves

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
		drainFrom: map[string]int{},
		rechecks:  map[string]*recheck{},
	}
}

// learned caches c, topic's partitions as a lookup just answered them. A
// count other than the one last seen starts a drain (see draining); it
// returns that count and true.
func (r *routes) learned(topic string, c topicCount) (from int, changed bool) {
	n, ok := r.seen[topic]
	if changed = ok && n != len(c.ids); changed {
		if !r.draining[topic] {
			r.drainFrom[topic] = n
		}
		r.draining[topic] = true
	}
	r.seen[topic] = len(c.ids)
	r.counts[topic] = c
	return n, changed
}

// drained ends topic's drain: nothing queued under its old count is left.
func (r *routes) drained(topic string) {
	delete(r.draining, topic)
	delete(r.drainFrom, topic)
}

var balancer = &kafka.Murmur2Balancer{}

// pick returns msg's partition among ids: the one its row's partition
// column names (meta.partition), else its key's (choose). A name that is
// not an integer, or not a partition of the topic, is an *Error with its
// reason: the event is dead-lettered. Called with the writer's mu held.
func (r *routes) pick(msg *kafka.Message, ids []int) (int, error) {
	m, _ := msg.WriterData.(meta)
	if m.partition == "" {
		return r.choose(msg, ids), nil
	}
	n, err := strconv.ParseInt(m.partition, 10, 32)
	switch {
	case errors.Is(err, strconv.ErrSyntax):
		return 0, &Error{Topic: msg.Topic, Reason: ReasonInvalidPartition,
			Err: fmt.Errorf("the partition column's value %q is not an integer (--column-partition)", m.partition)}
	case err != nil || n < 0 || n >= int64(len(ids)):
		return 0, &Error{Topic: msg.Topic, Reason: ReasonPartitionOutOfRange,
			Err: fmt.Errorf("the partition column names partition %s; the topic has %d, 0 to %d (--column-partition)", m.partition, len(ids), len(ids)-1)}
	}
	return int(n), nil
}

// choose returns msg's partition among ids: by murmur2 of its key, as the
// Java client does; a null key goes to its topic's sticky partition, which
// moves to another at random once a batch's worth of records went to it
// (the Java client's uniform sticky partitioner), so that null keys spread
// evenly and still fill batches. Called with the writer's mu held.
func (r *routes) choose(msg *kafka.Message, ids []int) int {
	if msg.Key != nil || len(ids) == 1 {
		return balancer.Balance(*msg, ids...)
	}
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
