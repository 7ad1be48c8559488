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

	// The event being handed over when the last call was interrupted by a
	// status deadline; the next call, with the same message, resumes it.
	pending *pendingEvent
}

type pendingEvent struct {
	ev       decode.Event
	invalid  *decode.InvalidRowError // a row that did not decode: dead-lettered instead
	seq      checkpoint.Seq
	reserved bool
	// standalone is the end of a non-transactional message's own
	// transaction, committed once the event is handed over; 0 otherwise.
	standalone pglogrepl.LSN
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
	}
	return p.hand(ctx)
}

// hand reserves room for the pending event and hands it to the sink (a
// row that did not decode, to the dead-letter topic). Cut short, it keeps
// the event pending, to be resumed by the next call.
func (p *pipeline) hand(ctx context.Context) error {
	pe := p.pending
	if !pe.reserved {
		size := pe.ev.Size()
		if pe.invalid != nil {
			size = 0
			for _, c := range pe.invalid.Columns {
				size += int64(len(c.Value))
			}
		}
		seq, err := p.track.Reserve(ctx, size)
		if err != nil {
			return err
		}
		pe.seq, pe.reserved = seq, true
	}
	if pe.invalid != nil {
		if p.clean != nil && pe.invalid.ID != "" && !strings.HasPrefix(pe.invalid.Table, decode.MessageSource) {
			p.clean.Track(uint64(pe.seq), pe.invalid.Table, pe.invalid.ID) // for --mark-dead
		}
		if err := p.pub.DeadLetterRow(ctx, pe.invalid, uint64(pe.seq)); err != nil {
			return err
		}
	} else {
		if p.clean != nil && !pe.ev.Message {
			p.clean.Track(uint64(pe.seq), pe.ev.Table, pe.ev.ID)
		}
		if err := p.pub.Publish(ctx, &pe.ev, uint64(pe.seq)); err != nil {
			return fmt.Errorf("event %s at %s: %w", pe.ev.ID, pe.ev.CommitLSN, err)
		}
	}
	p.pending = nil
	if pe.standalone != 0 {
		p.track.Commit(pe.standalone)
	}
	return nil
}
