package relay

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/jackc/pglogrepl"

	"github.com/outbox-cdc/outbox-cdc/checkpoint"
	"github.com/outbox-cdc/outbox-cdc/cleanup"
	"github.com/outbox-cdc/outbox-cdc/decode"
	"github.com/outbox-cdc/outbox-cdc/sink"
)

// pipeline is the replication handler: it decodes each pgoutput message,
// tracks transactions and events in the checkpoint, and hands events to the
// sink. It runs on the replication receive loop.
type pipeline struct {
	dec   *decode.Decoder
	track *checkpoint.Tracker
	pub   *sink.Writer
	clean *cleanup.Cleaner // nil without --cleanup
	gate  txnGate          // the delivery mode's

	// The event being handed over when the last call was interrupted by a
	// status deadline; the next call, with the same message, resumes it.
	pending *pendingEvent
}

// txnGate is what the pipeline asks of the delivery mode at the edges of a
// Postgres transaction (delivery.Session: exactly-once's gate, which a
// Kafka commit takes between two Postgres transactions; at-least-once:
// nothing).
type txnGate interface {
	// Skips reports whether Kafka holds already the events of the
	// transaction committed at commit (standalone: of the
	// non-transactional message whose record ends at commit).
	Skips(commit pglogrepl.LSN, standalone bool) bool
	// Enter admits the transaction being handed over, waiting for a
	// commit under way; a transaction entered already passes.
	Enter(ctx context.Context) error
	// Handing counts an event of the entered transaction, before it is
	// reserved.
	Handing(ev *decode.Event)
	// Leave says the transaction entered ended at end: all its events
	// are handed over.
	Leave(end pglogrepl.LSN)
}

type pendingEvent struct {
	ev       decode.Event
	invalid  *decode.InvalidRowError // a row that did not decode: dead-lettered instead
	seq      checkpoint.Seq
	reserved bool
	counted  bool // counted as handed over (txnGate.handing)
	// standalone is the end of a non-transactional message's own
	// transaction, committed once the event is handed over; 0 otherwise.
	standalone pglogrepl.LSN
	// cleanOnly: exactly-once's checkpoint says Kafka holds the event
	// already, but --cleanup may not have cleaned its row (a crash between
	// the Kafka commit and the statement): the row is cleaned, the event
	// not sent.
	cleanOnly bool
}

func (p *pipeline) handle(ctx context.Context, _ pglogrepl.LSN, data []byte) error {
	// A call cut short (ctx ended while waiting for room in the window, or
	// for the sink) keeps its event in p.pending; the stream calls again
	// with the same message, and the event is resumed, not decoded twice.
	if p.pending == nil {
		res, err := p.dec.Decode(data)
		var rowErr *decode.InvalidRowError
		if res.Standalone {
			p.track.Begin()
		}
		switch {
		case errors.As(err, &rowErr):
			p.pending = &pendingEvent{invalid: rowErr}
		case err != nil:
			return err
		case res.Kind == decode.KindBegin:
			p.track.Begin()
			return nil
		case res.Kind == decode.KindCommit:
			p.track.Commit(res.End)
			p.gate.Leave(res.End)
			return nil
		case res.Kind == decode.KindHeartbeat:
			p.track.ConfirmIdle(res.End)
			return nil
		case res.Kind == decode.KindSkip:
			return nil
		default:
			p.pending = &pendingEvent{ev: res.Event}
		}
		if res.Standalone {
			p.pending.standalone = res.End
		}
		if p.skipped() {
			return nil
		}
	}
	return p.hand(ctx)
}

// skipped drops the pending event when the delivery mode says Kafka holds
// its transaction already (exactly-once's checkpoint), closing the
// transaction of a non-transactional message.
func (p *pipeline) skipped() bool {
	pe := p.pending
	commit := pe.ev.CommitLSN
	if pe.invalid != nil {
		commit = pe.invalid.CommitLSN
	}
	if !p.gate.Skips(commit, pe.standalone != 0) {
		return false
	}
	if p.clean != nil && pe.row() != nil {
		pe.cleanOnly = true
		return false
	}
	p.pending = nil
	if pe.standalone != 0 {
		p.track.Commit(pe.standalone)
	}
	return true
}

// enter takes the delivery mode's gate for pe's transaction and counts
// pe, once.
func (p *pipeline) enter(ctx context.Context, pe *pendingEvent) error {
	if pe.counted {
		return nil
	}
	if err := p.gate.Enter(ctx); err != nil {
		return err
	}
	ev := &pe.ev
	if pe.invalid != nil {
		ev = &decode.Event{CommitLSN: pe.invalid.CommitLSN, Xid: pe.invalid.Xid}
	}
	p.gate.Handing(ev)
	pe.counted = true
	return nil
}

// hand hands the pending event over through the pipeline's outlet. Cut
// short, it keeps the event pending, to be resumed by the next call.
func (p *pipeline) hand(ctx context.Context) error {
	pe, out := p.pending, outlet{track: p.track, pub: p.pub, clean: p.clean}
	if !pe.cleanOnly {
		if err := p.enter(ctx, pe); err != nil {
			return err
		}
	}
	if err := out.reserve(ctx, pe); err != nil {
		return err
	}
	if pe.cleanOnly {
		out.cleanOnly(pe)
	} else if err := out.send(ctx, pe); err != nil {
		return err
	}
	p.pending = nil
	if pe.standalone != 0 {
		p.track.Commit(pe.standalone)
		p.gate.Leave(pe.standalone)
	}
	return nil
}

// outlet is where events leave the pipeline: room in an in-flight window,
// then the sink (a row that did not decode, the dead-letter topic). The
// stream's pipeline and the backfill's entry each hand events through one.
type outlet struct {
	track *checkpoint.Tracker
	pub   *sink.Writer
	clean *cleanup.Cleaner // nil without --cleanup
}

// reserve admits pe to the window, blocking while it is full; an event
// reserved already (its handing cut short) keeps its seq.
func (o outlet) reserve(ctx context.Context, pe *pendingEvent) error {
	if pe.reserved {
		return nil
	}
	size := pe.ev.Size()
	if pe.invalid != nil {
		size = 0
		for _, c := range pe.invalid.Columns {
			size += int64(len(c.Value))
		}
	}
	seq, err := o.track.Reserve(ctx, size)
	if err != nil {
		return err
	}
	pe.seq, pe.reserved = seq, true
	return nil
}

// row returns the table, id and xid of pe's row, with the dead letter's
// reason for a row that did not decode; nil for a message, or a row that
// did not decode without an id.
func (pe *pendingEvent) row() *cleanRow {
	switch {
	case pe.invalid != nil && pe.invalid.ID != "" && !strings.HasPrefix(pe.invalid.Table, decode.MessageSource):
		return &cleanRow{table: pe.invalid.Table, id: pe.invalid.ID, xid: pe.invalid.Xid, reason: pe.invalid.Reason}
	case pe.invalid == nil && !pe.ev.Message:
		return &cleanRow{table: pe.ev.Table, id: pe.ev.ID, xid: pe.ev.Xid}
	}
	return nil
}

// cleanRow is what the cleaner needs of an event's row.
type cleanRow struct {
	table, id, reason string
	xid               uint32
}

// cleanOnly has reserved pe's row cleaned without sending its event (see
// pendingEvent.cleanOnly); its seq is acked once the row is clean. A row
// that went to the dead-letter topic for a reason other than its decoding
// (a contract, a topic refused) is cleaned here as published: the crash
// left no record of that reason, and its dead letter holds the whole
// event. A row too large for its dead letter to have carried its value is
// kept as it is: it may be the only full copy of its event.
func (o outlet) cleanOnly(pe *pendingEvent) {
	r := pe.row()
	if pe.invalid == nil && !o.pub.DeadLetterKeepsValue(&pe.ev) {
		o.clean.Done(uint64(pe.seq), "") // untracked: kept, then acked
		return
	}
	o.clean.Track(uint64(pe.seq), r.table, r.id, r.xid)
	o.clean.Done(uint64(pe.seq), r.reason)
}

// send hands reserved pe to the sink (a row that did not decode, to the
// dead-letter topic); its fate comes back with its seq.
func (o outlet) send(ctx context.Context, pe *pendingEvent) error {
	if r := pe.row(); o.clean != nil && r != nil {
		o.clean.Track(uint64(pe.seq), r.table, r.id, r.xid) // a dead letter's for --mark-dead
	}
	if pe.invalid != nil {
		return o.pub.DeadLetterRow(ctx, pe.invalid, uint64(pe.seq))
	}
	if err := o.pub.Publish(ctx, &pe.ev, uint64(pe.seq)); err != nil {
		return fmt.Errorf("event %s at %s: %w", pe.ev.ID, pe.ev.CommitLSN, err)
	}
	return nil
}
