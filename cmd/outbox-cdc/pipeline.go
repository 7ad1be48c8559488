package main

import (
	"context"
	"fmt"

	"github.com/jackc/pglogrepl"

	"github.com/outbox-cdc/outbox-cdc/checkpoint"
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

	// The event being handed over when the last call was interrupted by a
	// status deadline; the next call, with the same message, resumes it.
	pending *pendingEvent
}

type pendingEvent struct {
	ev       decode.Event
	seq      checkpoint.Seq
	reserved bool
}

func (p *pipeline) handle(ctx context.Context, _ pglogrepl.LSN, data []byte) error {
	if p.pending == nil {
		res, err := p.dec.Decode(data)
		if err != nil {
			return err
		}
		switch res.Kind {
		case decode.KindBegin:
			p.track.Begin()
			return nil
		case decode.KindCommit:
			p.track.Commit(res.End)
			return nil
		case decode.KindSkip:
			return nil
		}
		p.pending = &pendingEvent{ev: res.Event}
	}
	pe := p.pending
	if !pe.reserved {
		seq, err := p.track.Reserve(ctx, pe.ev.Size())
		if err != nil {
			return err
		}
		pe.seq, pe.reserved = seq, true
	}
	if err := p.pub.Publish(ctx, &pe.ev, uint64(pe.seq)); err != nil {
		return fmt.Errorf("event %s at %s: %w", pe.ev.ID, pe.ev.CommitLSN, err)
	}
	p.pending = nil
	return nil
}
