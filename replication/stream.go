package replication

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync/atomic"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgproto3"
)

// Handler receives one pgoutput message, the WALData of one XLogData, in
// stream order. It runs on the receive loop: while it blocks, nothing more is
// read, which is how a full in-flight window pauses the stream. ctx ends at
// the next status deadline: a handler that returns an error after ctx's
// deadline passed is called again with the same message once status is sent,
// and must resume where it stopped, not act on the message twice. data stays
// valid until the handler returns nil.
type Handler func(ctx context.Context, walStart pglogrepl.LSN, data []byte) error

// Progress tells the stream what it may report to Postgres as flushed.
type Progress interface {
	// Confirmed returns the end of the newest transaction whose events are
	// all acknowledged.
	Confirmed() pglogrepl.LSN
	// ConfirmIdle may move the confirmed position to a keepalive's WAL end
	// when nothing is in flight, and returns the confirmed position.
	ConfirmIdle(serverWALEnd pglogrepl.LSN) pglogrepl.LSN
}

// StreamConfig configures a replication session.
type StreamConfig struct {
	URL            string // libpq URL or key=value; replication=database is added
	Slot           string
	Publication    string
	StatusInterval time.Duration // longest gap between standby status updates
	// ConfirmEvery is how soon a newly confirmed position is reported, so
	// that a crash replays little. Zero means 20 ms.
	ConfirmEvery time.Duration
	// ReceiveTimeout is how long the stream waits for any message from the
	// server (it asks for a keepalive every StatusInterval when idle) before
	// it presumes the connection dead. Zero means 3 × StatusInterval.
	ReceiveTimeout time.Duration
	// ReadPacing, when positive, is the least time between two reads of
	// the connection while the server sends little (see pacedConn): fewer
	// wake-ups per event at a moderate rate, for up to ReadPacing of
	// latency. Zero reads whenever data arrives.
	ReadPacing time.Duration
	Logger     *slog.Logger
}

// walConn is what a Stream asks of its connection: pgConn on a server,
// a fake in tests.
type walConn interface {
	// IdentifySystem runs IDENTIFY_SYSTEM, before StartReplication.
	IdentifySystem(ctx context.Context) (pglogrepl.IdentifySystemResult, error)
	// TimelineHistory runs TIMELINE_HISTORY, before StartReplication, and
	// returns the history file's content.
	TimelineHistory(ctx context.Context, timeline int32) ([]byte, error)
	StartReplication(ctx context.Context, slot string, start pglogrepl.LSN, opts pglogrepl.StartReplicationOptions) error
	// ReceiveMessage returns one backend message; when the read deadline
	// passes first, an error for which pgconn.Timeout is true.
	ReceiveMessage(ctx context.Context) (pgproto3.BackendMessage, error)
	// SetReadDeadline bounds ReceiveMessage; the zero time removes the bound.
	SetReadDeadline(t time.Time) error
	SendStandbyStatusUpdate(ctx context.Context, ssu pglogrepl.StandbyStatusUpdate) error
	IsClosed() bool
	Close(ctx context.Context) error
}

// Stream is one replication connection streaming one slot.
type Stream struct {
	cfg       StreamConfig
	conn      walConn
	progress  Progress
	received  pglogrepl.LSN // newest WAL position received
	heard     time.Time     // when the server was last heard from, or last listened to
	askedAt   time.Time     // when a reply was last asked for
	sentAt    time.Time     // when status was last sent
	sentFlush pglogrepl.LSN // the flush position it reported
	caughtUp  bool          // "caught up" was logged this session
	streaming bool          // START_REPLICATION was accepted: status updates mean something
	log       *slog.Logger

	// shown mirrors received for readers on other goroutines (metrics).
	shown atomic.Uint64
	// alive is when Run last came round its loop, for a watchdog on
	// another goroutine (see Alive).
	alive beat
}

// Received returns the newest WAL position received from the server. It is
// safe to call from any goroutine.
func (s *Stream) Received() pglogrepl.LSN { return pglogrepl.LSN(s.shown.Load()) }

// Connect opens the replication connection.
func Connect(ctx context.Context, cfg StreamConfig, progress Progress) (*Stream, error) {
	pc, err := pgconn.ParseConfig(cfg.URL)
	if err != nil {
		return nil, fmt.Errorf("parse postgres url: %w", err)
	}
	pc.RuntimeParams["replication"] = "database"
	// Timestamps reach decode/ as text; make that text unambiguous.
	pc.RuntimeParams["DateStyle"] = "ISO"
	pc.RuntimeParams["TimeZone"] = "UTC"
	pc.RuntimeParams["bytea_output"] = "hex"
	if pc.RuntimeParams["application_name"] == "" {
		pc.RuntimeParams["application_name"] = "outbox-cdc"
	}
	if cfg.ReadPacing > 0 {
		pc.DialFunc = pacedDial(pc.DialFunc, cfg.ReadPacing)
	}
	conn, err := pgconn.ConnectConfig(ctx, pc)
	if err != nil {
		return nil, fmt.Errorf("open replication connection: %w", err)
	}
	return newStream(cfg, pgConn{conn}, progress), nil
}

// newStream is Connect's second half, on a connection already open: tests
// pass a fake.
func newStream(cfg StreamConfig, conn walConn, progress Progress) *Stream {
	log := cfg.Logger
	if log == nil {
		log = slog.Default()
	}
	return &Stream{cfg: cfg, conn: conn, progress: progress, log: log, alive: beat{base: time.Now()}}
}

// Start begins streaming the slot from start, which should be the slot's
// confirmed position as read by Prepare.
func (s *Stream) Start(ctx context.Context, start pglogrepl.LSN) error {
	pub := `"` + strings.ReplaceAll(s.cfg.Publication, `"`, `""`) + `"`
	err := s.conn.StartReplication(ctx, s.cfg.Slot, start, pglogrepl.StartReplicationOptions{
		PluginArgs: []string{
			"proto_version '1'",
			"publication_names '" + strings.ReplaceAll(pub, "'", "''") + "'",
			"messages 'true'", // heartbeats, see decode.HeartbeatPrefix
		},
	})
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Code == "55006" { // object_in_use
		return fmt.Errorf("start replication on slot %q: %w: %s", s.cfg.Slot, ErrSlotActive, pgErr.Message)
	}
	if err != nil {
		return fmt.Errorf("start replication on slot %q at %s: %w", s.cfg.Slot, start, err)
	}
	s.received, s.streaming = start, true
	s.shown.Store(uint64(start))
	s.log.Info("streaming", slog.String("slot", s.cfg.Slot), slog.String("from", start.String()))
	return nil
}

// Run receives until ctx ends or the stream fails, passing each pgoutput
// message to handle and reporting progress at least every StatusInterval.
// It returns ctx's cause when ctx ends.
func (s *Stream) Run(ctx context.Context, handle Handler) error {
	d := newDeadline(ctx, min(s.confirmEvery(), s.cfg.StatusInterval, s.receiveTimeout()/2), s.conn)
	defer d.stop()
	// Reads are bounded by the socket's read deadline, set once per status
	// interval, rather than by a context: pgconn watches a context with a
	// goroutine handoff on every call, a cost per message (7% of the relay's
	// CPU at 5,000 single-row transactions a second). Ending ctx ends a read
	// at once the same way.
	stopWatch := context.AfterFunc(ctx, func() { _ = s.conn.SetReadDeadline(time.Now()) })
	defer func() {
		stopWatch()
		_ = s.conn.SetReadDeadline(time.Time{})
	}()
	s.heard = time.Now()
	s.alive.at(s.heard)
	defer s.alive.stop()
	for {
		raw, err := s.conn.ReceiveMessage(context.Background())
		if ctx.Err() != nil {
			return context.Cause(ctx)
		}
		now := time.Now()
		s.alive.at(now)
		if err == nil {
			s.heard = now
		}
		if err != nil {
			if !pgconn.Timeout(err) {
				return fmt.Errorf("receive from slot %q: %w", s.cfg.Slot, err)
			}
			if err := s.statusDue(d); err != nil {
				return err
			}
			continue
		}
		switch msg := raw.(type) {
		case *pgproto3.CopyData:
			// A handler that blocks past the status deadline (a full
			// window) is interrupted, status is sent so that Postgres does
			// not drop us, and it is called again with the same message.
			for {
				err := s.copyData(d.ctx, msg.Data, handle)
				if err == nil {
					break
				}
				if ctx.Err() != nil {
					return context.Cause(ctx)
				}
				if d.ctx.Err() == nil {
					return err
				}
				if err := s.statusDue(d); err != nil {
					return err
				}
				// Not reading while the handler waits: the server's
				// silence is not measured meanwhile.
				s.heard = time.Now()
				s.alive.at(s.heard)
			}
		case *pgproto3.ErrorResponse:
			return fmt.Errorf("stream slot %q: %w", s.cfg.Slot, pgconn.ErrorResponseToPgError(msg))
		case *pgproto3.CopyDone:
			return fmt.Errorf("stream slot %q: server ended the stream", s.cfg.Slot)
		default:
			s.log.Debug("unexpected replication message", slog.String("type", fmt.Sprintf("%T", raw)))
		}
	}
}

// statusDue runs at each deadline: every ConfirmEvery, or sooner when a
// blocked handler is interrupted. It sends a status update when the
// confirmed position moved (so that a crash replays little), when
// StatusInterval passed since the last one, or to ask for a reply: when the
// server has been silent for an interval, the keepalive that answers proves
// the connection alive and carries the WAL end that an idle stream may
// confirm. Silence past ReceiveTimeout ends the session with ErrNoResponse.
func (s *Stream) statusDue(d *deadline) error {
	silent := time.Since(s.heard)
	if timeout := s.receiveTimeout(); silent >= timeout {
		return fmt.Errorf("stream slot %q: %w for %s; reconnecting", s.cfg.Slot, ErrNoResponse, silent.Round(time.Millisecond))
	}
	askAfter := min(s.cfg.StatusInterval, s.receiveTimeout()/2) * 9 / 10
	ask := silent >= askAfter && time.Since(s.askedAt) >= askAfter
	if ask || s.progress.Confirmed() != s.sentFlush || time.Since(s.sentAt) >= s.cfg.StatusInterval*9/10 {
		if err := s.sendStatus(ask); err != nil {
			return err
		}
		if ask {
			s.askedAt = time.Now()
		}
	}
	d.reset()
	return nil
}

func (s *Stream) confirmEvery() time.Duration {
	if s.cfg.ConfirmEvery > 0 {
		return s.cfg.ConfirmEvery
	}
	return 20 * time.Millisecond
}

func (s *Stream) receiveTimeout() time.Duration {
	if s.cfg.ReceiveTimeout > 0 {
		return s.cfg.ReceiveTimeout
	}
	return 3 * s.cfg.StatusInterval
}

// deadline is a context that ends at the next status update, shared by every
// handler call of one interval (a context per message costs measurable
// CPU), and the same moment as the connection's read deadline.
type deadline struct {
	parent   context.Context
	interval time.Duration
	conn     interface{ SetReadDeadline(time.Time) error }
	ctx      context.Context
	cancel   context.CancelFunc
}

func newDeadline(parent context.Context, interval time.Duration, conn interface{ SetReadDeadline(time.Time) error }) *deadline {
	d := &deadline{parent: parent, interval: interval, conn: conn}
	d.reset()
	return d
}

func (d *deadline) reset() {
	if d.cancel != nil {
		d.cancel()
	}
	at := time.Now().Add(d.interval)
	d.ctx, d.cancel = context.WithDeadline(d.parent, at)
	if d.parent.Err() == nil {
		_ = d.conn.SetReadDeadline(at)
	}
}

func (d *deadline) stop() { d.cancel() }

func (s *Stream) copyData(ctx context.Context, data []byte, handle Handler) error {
	if len(data) == 0 {
		return errors.New("replication stream: empty CopyData")
	}
	switch data[0] {
	case pglogrepl.XLogDataByteID:
		xld, err := pglogrepl.ParseXLogData(data[1:])
		if err != nil {
			return fmt.Errorf("parse XLogData: %w", err)
		}
		if err := handle(ctx, xld.WALStart, xld.WALData); err != nil {
			return err
		}
		if xld.WALStart > s.received {
			s.received = xld.WALStart
			s.shown.Store(uint64(s.received))
		}
	case pglogrepl.PrimaryKeepaliveMessageByteID:
		ka, err := pglogrepl.ParsePrimaryKeepaliveMessage(data[1:])
		if err != nil {
			return fmt.Errorf("parse keepalive: %w", err)
		}
		// Every message before this keepalive has been handled (handle is
		// synchronous), so its WAL end is owed nothing once nothing is in
		// flight.
		s.progress.ConfirmIdle(ka.ServerWALEnd)
		if ka.ServerWALEnd > s.received {
			s.received = ka.ServerWALEnd
			s.shown.Store(uint64(s.received))
		}
		if !s.caughtUp {
			// The walsender sends keepalives while it waits for new WAL,
			// that is, once it has sent everything there was.
			s.caughtUp = true
			s.log.Info("caught up", slog.String("slot", s.cfg.Slot), slog.String("wal_end", ka.ServerWALEnd.String()))
		}
		if ka.ReplyRequested {
			return s.sendStatus(false)
		}
	}
	return nil
}

// statusWriteTimeout bounds the write of one status update (39 bytes): a
// server that has not taken them in 10 s has stopped reading. It stays
// well inside the systemd unit's WatchdogSec (30 s), so that a write the
// relay gives up on by itself is not also a watchdog's kill.
const statusWriteTimeout = 10 * time.Second

// sendStatus reports the confirmed position as flushed and applied. The
// flush position is always set explicitly: pglogrepl would copy the write
// position into a zero flush position.
func (s *Stream) sendStatus(replyRequested bool) error {
	flushed := s.progress.Confirmed()
	write := max(s.received, flushed)
	if flushed == 0 {
		write = 0
	}
	// A status update that cannot be written within statusWriteTimeout
	// (or ReceiveTimeout, when shorter) ends the session, as silence
	// does: the server stopped reading.
	ctx, cancel := context.WithTimeout(context.Background(), min(s.receiveTimeout(), statusWriteTimeout))
	defer cancel()
	err := s.conn.SendStandbyStatusUpdate(ctx, pglogrepl.StandbyStatusUpdate{
		WALWritePosition: write,
		WALFlushPosition: flushed,
		WALApplyPosition: flushed,
		ReplyRequested:   replyRequested,
	})
	if err != nil {
		return fmt.Errorf("send standby status to slot %q: %w", s.cfg.Slot, err)
	}
	s.sentAt, s.sentFlush = time.Now(), flushed
	return nil
}

// Close reports the final confirmed position and closes the connection. Call
// it after in-flight events were drained, so that the last acks are
// confirmed. It is safe to call twice. A connection whose START_REPLICATION
// was refused (a standby's, while another process streams the slot) has
// nothing to confirm, and says nothing.
func (s *Stream) Close(ctx context.Context) error {
	if s.conn.IsClosed() {
		return nil
	}
	var statusErr error
	if s.streaming {
		if statusErr = s.sendStatus(false); statusErr == nil {
			s.log.Info("confirmed", slog.String("slot", s.cfg.Slot), slog.String("lsn", s.progress.Confirmed().String()))
		}
	}
	if err := s.conn.Close(ctx); err != nil && statusErr == nil {
		return fmt.Errorf("close replication connection: %w", err)
	}
	return statusErr
}
