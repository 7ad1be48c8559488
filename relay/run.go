package relay

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/outbox-cdc/outbox-cdc/cleanup"
	"github.com/outbox-cdc/outbox-cdc/replication"
	"github.com/outbox-cdc/outbox-cdc/sink"
	"github.com/outbox-cdc/outbox-cdc/slot"
)

// run streams until ctx ends (a signal: drain, confirm, return nil) or a
// failure that retrying cannot mend. Failures after streaming has begun are
// retried with backoff by starting a new session from the slot's confirmed
// position; a failure before that is returned, so that a wrong URL or an
// unready server is reported at once.
func (r *Relay) run(ctx context.Context) error {
	cfg, log := r.cfg, r.log
	brokers := strings.Join(cfg.Kafka.Brokers, ",")
	log.Info("starting", slog.String("version", r.version), slog.String("postgres", cfg.PostgresTarget()),
		slog.String("kafka", brokers), slog.String("tables", cfg.TableNames()),
		slog.String("message_prefix", cfg.Messages.Prefix),
		slog.String("slot", cfg.Slot.Name), slog.String("publication", cfg.Slot.Publication), slog.String("topic", cfg.Defaults.Route.Topic))
	// Kafka first: a wrong broker address should not leave a new slot behind
	// pinning WAL.
	if err := sink.Ping(ctx, cfg.Kafka.Brokers, r.security); err != nil {
		return err
	}
	log.Info("kafka reachable", slog.String("brokers", brokers))
	if t := cfg.Topics; t.Create && t.OnInvalid == OnInvalidDLQ {
		// Where rows go that cannot be published must exist before the
		// first of them: refused, the relay stops here and says why.
		created, err := sink.EnsureTopic(ctx, cfg.Kafka.Brokers, r.security, t.DeadLetterTopic, cfg.Defaults.Route.Spec)
		if err != nil {
			return fmt.Errorf("dead-letter topic: %w", err)
		}
		if created {
			log.Info("created the dead-letter topic", slog.String("topic", t.DeadLetterTopic), slog.String("spec", cfg.Defaults.Route.Spec.String()))
		}
	}
	if err := r.delivery.Ready(ctx); err != nil {
		return err
	}
	if cfg.Cleanup != cleanup.None {
		// Before a slot is created: a table that cannot be cleaned is a
		// setup mistake, reported at once.
		if _, err := cleanup.New(ctx, cleanup.Config{URL: cfg.PostgresURL, Tables: cfg.CleanupTables()}); err != nil {
			return err
		}
	}
	usual := func(ctx context.Context) (pglogrepl.LSN, error) {
		if r.backfilled() {
			return r.prepareBackfilled(ctx, cfg.BackfillForce)
		}
		return r.prepare(ctx, true, false)
	}
	var start pglogrepl.LSN
	var err error
	if r.heals() {
		if cfg.Messages.Prefix != "" {
			log.Warn("--on-slot-lost heal republishes rows; logical decoding messages committed while a slot is lost are in no table and cannot be healed",
				slog.String("message_prefix", cfg.Messages.Prefix))
		}
		start, err = r.prepareHealing(ctx, false, usual)
	} else {
		start, err = r.prepareFailing(ctx, usual)
	}
	if fatalAtStart(err) || ctx.Err() != nil {
		return err
	}
	if err == nil {
		r.warnSlot(ctx)
	}
	return r.reconnect(ctx, start, err)
}

// fatalAtStart says whether err, preparing the first session, ends the
// relay: any failure but a slot in use (a lost slot a heal waits for its
// holder to let go of), which the retry loop stands by for.
func fatalAtStart(err error) bool { return err != nil && !errors.Is(err, replication.ErrSlotActive) }

// warnSlot logs, once at start, what an operator should know of the slot
// (failover: see slot.SlotWarnings).
func (r *Relay) warnSlot(ctx context.Context) {
	conn, err := pgx.Connect(ctx, r.cfg.PostgresURL)
	if err != nil {
		return // the session reports an unreachable server
	}
	defer conn.Close(context.Background())
	warnings, err := slot.SlotWarnings(ctx, conn, r.target)
	if err != nil {
		r.log.Debug("slot warnings", slog.Any("err", err))
	}
	for _, w := range warnings {
		r.log.Warn(w, slog.String("slot", r.cfg.Slot.Name))
	}
}

// standbyPoll is how often a standing-by instance tries the slot.
const standbyPoll = 2 * time.Second

// prepare readies the publication and the slot (creating the slot when
// createSlot) and returns the slot's confirmed position. A standing-by
// instance also reads the slot's state for its metrics: while another
// process streams the slot (or hangs holding it), the standby's lag and
// wal_status are what an operator sees of it.
func (r *Relay) prepare(ctx context.Context, createSlot, standingBy bool) (pglogrepl.LSN, error) {
	conn, err := pgx.Connect(ctx, r.cfg.PostgresURL)
	if err != nil {
		return 0, fmt.Errorf("connect to postgres (%s): %w", PostgresHint(err), err)
	}
	defer conn.Close(context.Background())
	start, err := slot.Prepare(ctx, conn, r.target, createSlot)
	if err == nil && standingBy {
		if st, serr := slot.ReadSlotState(ctx, conn, r.target); serr == nil {
			r.metrics.Slot(st)
		}
	}
	return start, err
}

// PostgresHint says what to look at when Postgres cannot be reached.
func PostgresHint(err error) string {
	var certErr *tls.CertificateVerificationError
	var pgErr *pgconn.PgError
	switch {
	case errors.As(err, &certErr):
		return "the server's certificate was not accepted: check sslrootcert and sslmode in --postgres-url"
	case errors.As(err, &pgErr) && pgErr.Code == "28P01":
		return "the password was refused: check the user and password in --postgres-url"
	case errors.As(err, &pgErr) && pgErr.Code == "28000":
		return "pg_hba.conf refused the connection: check the user, database and sslmode in --postgres-url"
	}
	return "is it running, and is --postgres-url right?"
}
