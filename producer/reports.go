package producer

import (
	"cmp"
	"slices"
)

// Fates are reported in each partition's order (Done's promise), although
// its batches out at once may be answered out of it: a batch whose answer
// was lost after the broker wrote it is retried, and the broker may have
// acknowledged the batches sent behind it meanwhile. Each batch takes a
// number (order) when it is first taken from the queue; an acknowledged
// batch is held until every batch before it has its fate, then reported;
// so is a batch failed in a transaction (failInTransaction), and what a
// partition holds when it is dropped goes in the same order (drop).

// reports is a partition's order of reports: part of the partition's
// state, guarded by its lock (partition.go), which calls the methods below
// and hands what they release to Done one goroutine at a time
// (partition.report).
type reports struct {
	next     uint64  // the order of the next batch taken
	reported uint64  // the order of the next batch whose fate is reported
	held     []batch // settled, waiting for an earlier batch's fate, by order
}

// fate is messages' fate, to report.
type fate struct {
	msgs []Outgoing
	err  error
	// reason, when own, is the fate's dead-letter reason instead of the
	// messages' own (a message salvage dead-lettered).
	reason string
	own    bool
}

// reportFate hands each of f's messages' fate to Done.
func (w *Writer) reportFate(f fate) {
	for i := range f.msgs {
		m := &f.msgs[i]
		reason := m.Reason
		if f.own {
			reason = f.reason
		}
		if m.settled != nil {
			// A salvage's dead letter: its salvage reports the event
			// through its own partition, in that partition's order.
			m.settled <- f.err
			continue
		}
		w.done(m.Token, reason, f.err)
	}
}

// release returns b and the batches held behind it once b is next in
// order; otherwise it holds b.
func (f *reports) release(b batch) []batch {
	if b.order != f.reported {
		i, _ := slices.BinarySearchFunc(f.held, b.order, func(h batch, order uint64) int {
			return cmp.Compare(h.order, order)
		})
		f.held = slices.Insert(f.held, i, b)
		return nil
	}
	f.reported++
	return append([]batch{b}, f.flush()...)
}

// flush returns the held batches now next in order.
func (f *reports) flush() []batch {
	n := 0
	for n < len(f.held) && f.held[n].order == f.reported {
		f.reported++
		n++
	}
	ready := slices.Clone(f.held[:n])
	f.held = slices.Delete(f.held, 0, n)
	return ready
}
