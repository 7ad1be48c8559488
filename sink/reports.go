package sink

import (
	"cmp"
	"slices"

	"github.com/segmentio/kafka-go"
)

// Fates are reported in each partition's order (Done's promise), although
// its batches out at once may be answered out of it: a batch whose answer
// was lost after the broker wrote it is retried, and the broker may have
// acknowledged the batches sent behind it meanwhile. Each batch takes a
// number (order) when it is first taken from the queue; an acknowledged
// batch is held until every batch before it has its fate, then reported;
// so is a batch failed in a transaction (failInTransaction), and what a
// partition holds when it is dropped goes in the same order (drop).

// reports is a partition's order of reports. Guarded by the writer's mu,
// except reporting, which the partition's reporting lock serialises.
type reports struct {
	next     uint64  // the order of the next batch taken
	reported uint64  // the order of the next batch whose fate is reported
	held     []batch // settled, waiting for an earlier batch's fate, by order
}

// report hands the fates of b's messages (b.fate: nil once acknowledged)
// to Done once every batch of its partition before it has its own, with
// those of the batches held behind it.
func (w *Writer) report(b batch) {
	p := b.p
	p.reporting.Lock()
	defer p.reporting.Unlock()
	w.mu.Lock()
	ready := p.reports.release(b)
	w.mu.Unlock()
	for _, r := range ready {
		w.reportMessages(r.msgs, r.fate)
	}
}

// resolved moves p's order past b, whose fate was reported otherwise
// (salvage reports each of its messages), and reports the batches held
// behind it.
func (w *Writer) resolved(b batch) {
	p := b.p
	p.reporting.Lock()
	defer p.reporting.Unlock()
	w.mu.Lock()
	var ready []batch
	if p.reports.reported == b.order {
		p.reports.reported++
		ready = p.reports.flush()
	}
	w.mu.Unlock()
	for _, r := range ready {
		w.reportMessages(r.msgs, r.fate)
	}
}

// reportMessages hands each message's fate to Done.
func (w *Writer) reportMessages(msgs []kafka.Message, err error) {
	for i := range msgs {
		m := msgs[i].WriterData.(meta)
		w.done(m.token, m.reason, err)
	}
}

// release returns b and the batches held behind it once b is next in
// order; otherwise it holds b. Called with the writer's mu held.
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

// flush returns the held batches now next in order. Called with the
// writer's mu held.
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
