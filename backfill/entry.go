package backfill

import (
	"context"

	"github.com/outbox-cdc/outbox-cdc/decode"
)

// Entry is the pipeline's way in for backfilled rows, as the replication
// stream's handler is for WAL messages. The relay implements it with its
// Kafka writer and an in-flight window of its own; the backfill keeps its
// progress from the done calls, never from positions.
type Entry interface {
	// Publish hands row over: its event is published, or, for a row that
	// did not decode, the row is dead-lettered; done is called once Kafka
	// acknowledged it (from another goroutine; never for a row that
	// failed). It blocks while the in-flight window is full. Once a
	// publish has failed it returns that failure, also when the failure
	// came while it waited.
	Publish(ctx context.Context, row Row, done func()) error
	// Drain waits, bounded by ctx, until every row handed over is
	// acknowledged or failed, and says why not all were: a publish
	// failure Publish did not return, or the drain cut short. The entry
	// takes more rows afterwards.
	Drain(ctx context.Context) error
	// Failure ends at the first publish failure, with it as its cause, so
	// that the read stops at once, even while Postgres is still sorting
	// or scanning; it is renewed by Drain.
	Failure() context.Context
}

// Row is one backfilled row as the pipeline takes it.
type Row struct {
	Event decode.Event // the row's event, when it decoded
	// Invalid says why the row did not decode; set, the row goes to the
	// dead-letter topic (or stops the relay, as in the stream).
	Invalid *decode.InvalidRowError
}
