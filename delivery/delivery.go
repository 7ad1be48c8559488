package delivery

import (
	"context"
	"log/slog"
	"maps"
	"slices"
	"time"

	"github.com/jackc/pglogrepl"

	"github.com/outbox-cdc/outbox-cdc/backfill"
	"github.com/outbox-cdc/outbox-cdc/cleanup"
	"github.com/outbox-cdc/outbox-cdc/decode"
	"github.com/outbox-cdc/outbox-cdc/internal/outage"
	"github.com/outbox-cdc/outbox-cdc/producer"
	"github.com/outbox-cdc/outbox-cdc/replication"
	"github.com/outbox-cdc/outbox-cdc/sink"
)

// Name is a delivery mode's name (--delivery).
type Name string

// The modes.
const (
	// AtLeastOnce publishes every event once or, after a crash, more: an
	// idempotent producer writes a retried batch once, but what was
	// published and not yet confirmed to Postgres is published again.
	AtLeastOnce Name = "at-least-once"
	// ExactlyOnce publishes whole Postgres transactions in Kafka
	// transactions with a checkpoint of the last one: a read_committed
	// consumer sees each event once, across crashes and takeovers.
	ExactlyOnce Name = "exactly-once"
)

// modes is where each Name is wired to its implementation: a new mode is
// its own file here and one line in this map.
var modes = map[Name]func(Config, Env) (Mode, error){
	AtLeastOnce: func(Config, Env) (Mode, error) { return atLeastOnceMode{}, nil },
	ExactlyOnce: newExactlyOnceMode,
}

// Known reports whether n names a mode New builds.
func Known(n Name) bool {
	_, ok := modes[n]
	return ok
}

// Names are the modes New builds, sorted.
func Names() []Name {
	return slices.Sorted(maps.Keys(modes))
}

// Config is what a mode needs of the relay's settings: ids and names, no
// connection.
type Config struct {
	Mode Name
	Slot string // the slot's name, which each checkpoint record and its key name
	// TransactionalID is the transactional id on the Postgres cluster of
	// a system identifier (relay.Config.TransactionalID).
	TransactionalID             func(systemID string) string
	CheckpointTopic             string
	CheckpointReplicationFactor int
	TransactionInterval         time.Duration
	TransactionTimeout          time.Duration
	// Cleanup: --cleanup deletes or marks published rows.
	Cleanup bool
	// MaxInFlight is --max-in-flight: how many rows may wait for a Kafka
	// commit's cleaning before a new Postgres transaction is held back.
	MaxInFlight int
	// ForcedBackfill: --backfill-force with a backfill configured.
	ForcedBackfill bool
}

// Env is what a mode asks of the process around it: a logger, the brokers,
// the metrics it reports to, and the Postgres questions the relay answers.
// Exactly-once needs Connect, Identify, SlotPosition and NextXid (New
// refuses it without them); a nil metrics func is not called.
type Env struct {
	Log *slog.Logger
	// Connect returns a connection to the brokers for transactions and
	// the checkpoint topic; Close it when done.
	Connect func() *producer.Cluster
	// Outage follows the transactions' Kafka requests across sessions.
	Outage *outage.Tracker
	// Transaction is told of each Kafka transaction that ended:
	// committed, and how long its commit held publishing back; or not.
	Transaction func(committed bool, took time.Duration)
	// FailoverGhosts is told of the WAL bytes a failover's old timeline
	// wrote past the branch point (once per failover).
	FailoverGhosts func(bytes uint64)
	// TransactionTimedOut is told of each session failure judged an
	// abort by the transaction timeout.
	TransactionTimedOut func()
	// Identify identifies the Postgres system the slot is on (the
	// backfill's, which has no replication connection).
	Identify func(ctx context.Context) (replication.System, error)
	// SlotPosition is the slot's confirmed position.
	SlotPosition func(ctx context.Context) (pglogrepl.LSN, error)
	// NextXid is the server's next full transaction id.
	NextXid func(ctx context.Context) (uint64, error)
}

// New returns the mode cfg names (at-least-once when it names none the
// package knows: relay's Config.Validate refuses those), or an error naming
// the Config or Env func the mode calls and was not given. The mode lasts
// across sessions.
func New(cfg Config, env Env) (Mode, error) {
	if env.Log == nil {
		env.Log = slog.New(slog.DiscardHandler)
	}
	m, ok := modes[cfg.Mode]
	if !ok {
		return atLeastOnceMode{}, nil
	}
	return m(cfg, env)
}

// Mode is a delivery mode as the relay drives it: readied once before the
// first session, then a Session for each session and a Backfill for each
// backfill; it judges each session's failure.
type Mode interface {
	// Ready does what the mode needs done once, before any slot is
	// created or streamed (exactly-once: its checkpoint topic).
	Ready(ctx context.Context) error
	// Session returns the delivery of a session whose slot starts at
	// start, acknowledged through track.
	Session(track Acked, start pglogrepl.LSN) Session
	// Backfill returns the delivery of a backfill (heal: of a heal);
	// force: a forced backfill, which publishes at least once.
	Backfill(force, heal bool) Backfill
	// Judge returns the error that stops the relay, when the session's
	// failure err is one no new session mends, and whether err was
	// judged an abort by the transaction timeout (said and counted).
	Judge(err error) (stop error, timedOut bool)
}

// Acked is what a mode asks of the session's checkpoint tracker
// (checkpoint.Tracker).
type Acked interface {
	Confirmed() pglogrepl.LSN
	ConfirmIdle(serverWALEnd pglogrepl.LSN) pglogrepl.LSN
	WaitAcked(ctx context.Context) error
}

// Session is a session's delivery, as the session drives it. The pipeline
// calls its gate at the edges of each Postgres transaction; the stream
// asks it what to confirm (replication.Progress).
type Session interface {
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
	replication.Progress
	// Position is what is confirmed, read from any goroutine.
	Position() pglogrepl.LSN
	// Open starts streaming the slot from start and has publish make the
	// session's publisher, written as the mode says: once, whenever it
	// returns nil. On a failure it ends what it began.
	Open(ctx context.Context, stream Stream, start pglogrepl.LSN, publish Publish) error
	// Start begins the mode's work beside reading (exactly-once: the
	// committer); failed is called with a failure of it, which ends
	// reading.
	Start(ctx context.Context, failed func(error))
	// Fail is told of the first publish failure, which ends reading.
	Fail(err error)
	// ReadFailed is told that reading ended with a failure.
	ReadFailed()
	// DrainsWhenSlotGone says whether a session whose slot was dropped or
	// invalidated publishes and cleans what it holds before a heal.
	DrainsWhenSlotGone() bool
	// Finish ends the mode's work once the publisher closed: commit says
	// the session may commit what it handed over (it neither failed nor
	// lost its slot), drained that the publisher had every request
	// answered.
	Finish(ctx context.Context, commit, drained bool) error
	// TimedOut returns err, the session's failure, or what the mode
	// judges it (exactly-once: an abort by the transaction timeout).
	TimedOut(err error) error
}

// Stream is what a session's delivery asks of its replication stream
// (replication.Stream): exactly-once identifies the system before
// streaming, at-least-once only starts.
type Stream interface {
	System(ctx context.Context) (replication.System, error)
	Switches(ctx context.Context, timeline int32) (replication.Switches, error)
	Start(ctx context.Context, start pglogrepl.LSN) error
}

// Publish makes a publisher whose writer is written as w says, and returns
// what the mode may ask of it.
type Publish func(w Writes) (Publisher, error)

// Publisher is what a mode asks of a publisher the relay made.
type Publisher struct {
	// Flush, while on, sends what the writer holds at once instead of
	// pacing it (sink.Writer.Flush).
	Flush func(on bool)
	// Cleaner is --cleanup's cleaner; nil without --cleanup.
	Cleaner RowCleaner
}

// Writes is what a delivery mode makes of a publisher's writer.
type Writes interface {
	// Transaction makes the writer transactional; nil: it is not.
	Transaction() sink.Transaction
	// BatchTimeout is the writer's batch timeout, given --batch-timeout.
	BatchTimeout(t time.Duration) time.Duration
	// RowAcked takes the acknowledgement of token's event, whose row
	// --cleanup deletes or marks (c), and has ack called for it.
	RowAcked(c *cleanup.Cleaner, token uint64, reason string, ack func(uint64))
}

// RowCleaner is what exactly-once asks of --cleanup's cleaner
// (cleanup.Cleaner): take the rows a commit made cleanable, clean them.
type RowCleaner interface {
	Held() int
	Commit() cleanup.Committed
	Release(ctx context.Context, done cleanup.Committed) error
	CloseRelease()
}

// Backfill is a backfill's delivery: how each of its publishers writes,
// and, when its rows are committed, what a commit does.
type Backfill interface {
	// Committed is backfill.Config.Committed: the backfill's progress as
	// the last commit holds it. nil: the rows are not committed (at least
	// once), and the backfill's entry is no backfill.Committer.
	Committed() func(ctx context.Context) (*backfill.Progress, error)
	// Open has publish make the backfill's next publisher, written as the
	// mode says: once, whenever it returns nil. On a failure it ends what
	// it began.
	Open(ctx context.Context, publish Publish) error
	// Handed counts a row reserved, about to be sent.
	Handed()
	// Cut says a row's send ended after it was reserved: it may still be
	// sent.
	Cut()
	// Commit commits the rows handed over since the last commit with
	// progress, once acked (bounded by its ctx) says each is
	// acknowledged, and cleans them (--cleanup).
	Commit(ctx context.Context, progress backfill.Progress, acked func(context.Context) error) error
	// End ends what Open began, once its publisher closed (drained: it
	// had every request answered).
	End(drained bool) error
	// Seal ends a heal whose run is done.
	Seal(ctx context.Context) error
}

// stopError is a failure that no new session mends: the relay stops and
// says why (Retriable false).
type stopError string

func (e stopError) Error() string { return string(e) }

// Retriable is false.
func (stopError) Retriable() bool { return false }
