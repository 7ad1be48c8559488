package main

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/outbox-cdc/outbox-cdc/cleanup"
	"github.com/outbox-cdc/outbox-cdc/config"
	"github.com/outbox-cdc/outbox-cdc/decode"
	"github.com/outbox-cdc/outbox-cdc/metrics"
	"github.com/outbox-cdc/outbox-cdc/replication"
	"github.com/outbox-cdc/outbox-cdc/sink"
)

// relayer is the wiring of one `outbox-cdc run`: its configuration, what it
// shows operators, and the session that streams now.
type relayer struct {
	cfg      config.Config
	target   replication.Target
	topics   map[string]sink.Topic // by table
	security sink.Security
	log      *slog.Logger
	metrics  *metrics.Metrics
	live     live
}

// relay runs `outbox-cdc run`: it checks the configuration that needs more
// than parsing, serves metrics and probes, and streams until ctx ends.
func relay(ctx context.Context, cfg config.Config, log *slog.Logger) error {
	r := &relayer{cfg: cfg, target: target(cfg), log: log}
	var err error
	r.topics = map[string]sink.Topic{}
	for _, t := range cfg.Tables {
		if r.topics[t.Qualified()], err = sink.ParseTopic(t.Topic); err != nil {
			return &config.UsageError{Msg: fmt.Sprintf("--topic (table %s): %v", t.Qualified(), err)}
		}
	}
	if cfg.OnInvalid == config.OnInvalidDLQ {
		if err := sink.ValidateTopicName(cfg.DeadLetterTopic); err != nil {
			return &config.UsageError{Msg: fmt.Sprintf("--dlq-topic: %v", err)}
		}
	}
	if r.security, err = security(cfg.Kafka); err != nil {
		return err
	}
	r.metrics = metrics.New(version, metrics.Live{
		InFlight: r.live.inFlight, Confirmed: r.live.confirmed, Received: r.live.received, Streaming: r.live.streaming.Load,
	})
	log.Info("starting", slog.String("version", version), slog.String("postgres", cfg.PostgresTarget()),
		slog.String("kafka", strings.Join(cfg.KafkaBrokers, ",")), slog.String("tables", cfg.TableNames()),
		slog.String("slot", cfg.Slot), slog.String("publication", cfg.Publication), slog.String("topic", cfg.Topic))

	var served sync.WaitGroup
	defer served.Wait()
	if cfg.HTTPAddr != "" {
		ln, err := metrics.Listen(cfg.HTTPAddr)
		if err != nil {
			return err
		}
		httpCtx, stopHTTP := context.WithCancel(context.WithoutCancel(ctx))
		defer stopHTTP() // after the drain: probes and metrics answer until the end
		served.Go(func() {
			if err := metrics.Serve(httpCtx, ln, r.metrics, newReadiness(r).check, log); err != nil {
				log.Error("http server stopped", slog.Any("err", err))
			}
		})
		log.Info("serving metrics and probes", slog.String("addr", ln.Addr().String()))
	}
	return r.run(ctx)
}

func target(cfg config.Config) replication.Target {
	t := replication.Target{Publication: cfg.Publication, Slot: cfg.Slot}
	for _, tc := range cfg.Tables {
		t.Tables = append(t.Tables, tc.Table)
	}
	return t
}

// security turns the Kafka flags into what sink/ dials with.
func security(k config.KafkaSecurity) (sink.Security, error) {
	var s sink.Security
	var err error
	if k.TLS {
		s.TLS, err = sink.NewTLSConfig(sink.TLSFiles{CAFile: k.CAFile, CertFile: k.CertFile, KeyFile: k.KeyFile,
			ServerName: k.ServerName, InsecureSkipVerify: k.InsecureSkipVerify})
		if err != nil {
			return s, err
		}
	}
	s.SASL, err = sink.NewSASL(k.SASLMechanism, k.SASLUsername, k.SASLPassword)
	return s, err
}

// run streams until ctx ends (a signal: drain, confirm, return nil) or a
// failure that retrying cannot mend. Failures after streaming has begun are
// retried with backoff by starting a new session from the slot's confirmed
// position; a failure before that is returned, so that a wrong URL or an
// unready server is reported at once.
func (r *relayer) run(ctx context.Context) error {
	cfg, target, log := r.cfg, r.target, r.log
	// Kafka first: a wrong broker address should not leave a new slot behind
	// pinning WAL.
	if err := sink.Ping(ctx, cfg.KafkaBrokers, r.security); err != nil {
		return err
	}
	log.Info("kafka reachable", slog.String("brokers", strings.Join(cfg.KafkaBrokers, ",")))
	if cfg.Cleanup == config.CleanupDeleteAfterPublish {
		// Before a slot is created: a table that cannot be cleaned is a
		// setup mistake, reported at once.
		if _, err := cleanup.New(ctx, cleanup.Config{URL: cfg.PostgresURL, Tables: target.Tables}); err != nil {
			return err
		}
	}
	start, err := prepare(ctx, cfg.PostgresURL, target, true)
	if err != nil {
		return err
	}
	standby := false // another process streams the slot; we wait for it to let go
	for attempt := 0; ; attempt++ {
		began, err := r.session(ctx, start)
		if ctx.Err() != nil {
			return nil
		}
		if !retriable(err) {
			return err
		}
		if began {
			attempt, standby = 0, false
		}
		var wait time.Duration
		if errors.Is(err, replication.ErrSlotActive) {
			// A second instance: quiet, and quick to take over.
			attempt = 0
			wait = standbyPoll/2 + rand.N(standbyPoll/2+1)
			if !standby {
				standby = true
				log.Info("standing by: the slot is streamed by another process; taking over when it lets go",
					slog.String("slot", cfg.Slot), slog.Any("err", err))
			}
		} else {
			r.metrics.Reconnected()
			wait = backoff(attempt)
			log.Warn("stream interrupted, reconnecting", slog.Any("err", err), slog.Duration("in", wait))
		}
		select {
		case <-time.After(wait):
		case <-ctx.Done():
			return nil
		}
		if start, err = prepare(ctx, cfg.PostgresURL, target, false); err != nil {
			if ctx.Err() != nil {
				return nil
			}
			if !retriable(err) {
				return err
			}
			start = 0 // session fails fast and we come back here
		}
	}
}

// standbyPoll is how often a standing-by instance tries the slot.
const standbyPoll = 2 * time.Second

func prepare(ctx context.Context, url string, t replication.Target, createSlot bool) (pglogrepl.LSN, error) {
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		return 0, fmt.Errorf("connect to postgres (%s): %w", pgHint(err), err)
	}
	defer conn.Close(context.Background())
	return replication.Prepare(ctx, conn, t, createSlot)
}

// retriable tells failures that a new session may mend (a lost connection, a
// broker away too long) from those it cannot.
func retriable(err error) bool {
	var rowErr *decode.InvalidRowError
	var pubErr *sink.Error
	switch {
	case errors.As(err, &rowErr):
		return false
	case errors.As(err, &pubErr):
		return pubErr.Retriable
	case errors.Is(err, replication.ErrNotReady), errors.Is(err, replication.ErrColumnMissing), errors.Is(err, replication.ErrSlotInvalidated),
		errors.Is(err, cleanup.ErrNotReady):
		return false
	}
	return true
}

func backoff(attempt int) time.Duration {
	d := time.Second << min(attempt, 5)
	if d > 30*time.Second {
		d = 30 * time.Second
	}
	return d/2 + rand.N(d/2+1)
}

// pgHint says what to look at when Postgres cannot be reached.
func pgHint(err error) string {
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
