package producer

import (
	"sync"
	"sync/atomic"
	"time"
)

// index is the writer's registry: its partitions, its senders by broker,
// the brokers' addresses, and what pipelining reached. Its lock (mu) is
// locked only in this file, never while calling out, and under no other
// lock but a partition's (see partition for the order).
type index struct {
	parts sync.Map // topicPartition → *partition; never removed, read on every event

	mu      sync.Mutex
	senders map[int32]*sender // by broker id; a stopped sender leaves it
	addrs   map[int32]string  // broker id → host:port, from metadata

	peak    atomic.Int64 // the most requests a sender had out at once
	slowest atomic.Int64 // the longest round trip a sender recorded, in ns
}

func newIndex() index {
	return index{senders: map[int32]*sender{}, addrs: map[int32]string{}}
}

// partition returns tp's partition, made on first use.
func (x *index) partition(tp topicPartition) *partition {
	if p, ok := x.parts.Load(tp); ok {
		return p.(*partition)
	}
	p, _ := x.parts.LoadOrStore(tp, &partition{tp: tp, state: state{leader: -1}})
	return p.(*partition)
}

// found returns tp's partition, if an event ever went to it.
func (x *index) found(tp topicPartition) (*partition, bool) {
	p, ok := x.parts.Load(tp)
	if !ok {
		return nil, false
	}
	return p.(*partition), true
}

// each calls f with every partition of topic, until f returns false.
func (x *index) each(topic string, f func(*partition) bool) {
	x.parts.Range(func(k, v any) bool {
		if k.(topicPartition).topic != topic {
			return true
		}
		return f(v.(*partition))
	})
}

// senderFor returns broker's running sender, or starts a new one, in two
// goroutines w.owned counts, started here under the lock: a closed
// writer makes no new sender for an unowned caller (nil), so none is
// counted once Close may be waiting for owned. A new sender is awaited
// (see sender.add): it does not stop before the caller hands it the
// partition it was made for.
func (x *index) senderFor(w *Writer, broker int32, owned bool) *sender {
	x.mu.Lock()
	defer x.mu.Unlock()
	if s, ok := x.senders[broker]; ok {
		return s
	}
	if w.closed.Load() && !owned {
		return nil
	}
	s := newSender(w, broker)
	x.senders[broker] = s
	w.owned.Go(s.run)
	w.owned.Go(s.receive)
	return s
}

// retired drops s, stopped, from the senders: the next partition its
// broker leads makes a new one.
func (x *index) retired(s *sender) {
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.senders[s.broker] == s {
		delete(x.senders, s.broker)
	}
}

// wakeAll wakes every sender: Close and Flush want them to look again.
func (x *index) wakeAll() {
	x.mu.Lock()
	defer x.mu.Unlock()
	for _, s := range x.senders {
		s.signal()
	}
}

// spawn runs f in a goroutine the writer owns, unless the writer is closed
// (false): for callers that are not owned goroutines themselves (Produce),
// which must not add to owned once Close may be waiting for it.
func (x *index) spawn(w *Writer, f func()) bool {
	x.mu.Lock()
	if w.closed.Load() {
		x.mu.Unlock()
		return false
	}
	w.owned.Add(1)
	x.mu.Unlock()
	go func() {
		defer w.owned.Done()
		f()
	}()
	return true
}

// learnAddrs records the brokers' addresses a metadata answer gave.
func (x *index) learnAddrs(addrs map[int32]string) {
	x.mu.Lock()
	defer x.mu.Unlock()
	for id, a := range addrs {
		x.addrs[id] = a
	}
}

// addr returns broker's address, as metadata last gave it.
func (x *index) addr(broker int32) (string, bool) {
	x.mu.Lock()
	defer x.mu.Unlock()
	a, ok := x.addrs[broker]
	return a, ok
}

// sending records a sender's requests out and the round trip of its
// last answer, keeping the highest of each.
func (x *index) sending(inflight int, rtt time.Duration) {
	for old := x.peak.Load(); int64(inflight) > old && !x.peak.CompareAndSwap(old, int64(inflight)); old = x.peak.Load() {
	}
	for old := x.slowest.Load(); int64(rtt) > old && !x.slowest.CompareAndSwap(old, int64(rtt)); old = x.slowest.Load() {
	}
}

// running returns broker's sender, nil if none runs.
func (x *index) running(broker int32) *sender {
	x.mu.Lock()
	defer x.mu.Unlock()
	return x.senders[broker]
}
