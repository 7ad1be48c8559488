package delivery

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pglogrepl"

	"github.com/outbox-cdc/outbox-cdc/checkpoint"
	"github.com/outbox-cdc/outbox-cdc/internal/retry"
)

// TestOpenCheckpointOfARestoredDatabase: a checkpoint ahead of the slot, on
// the same system and timeline and within the server's WAL, whose
// transaction the server has not assigned yet names a history the
// database no longer has (restored from a snapshot, then written to past
// the checkpoint's position): the relay stops, saying why and naming the
// key to reset and the topic, rather than skip to it. One whose
// transaction the server assigned is trusted; one naming no transaction
// is trusted, saying the check was skipped; one behind the slot is not
// checked (the slot is trusted, nothing is skipped). A server that cannot
// say its next id fails the session, which is retried.
func TestOpenCheckpointOfARestoredDatabase(t *testing.T) {
	const ahead, behind = pglogrepl.LSN(0x3000), pglogrepl.LSN(0x800)
	const next = uint64(7)<<32 | 1000 // the server's next full transaction id
	for _, tt := range []struct {
		name    string
		end     pglogrepl.LSN
		xid     uint32
		readErr error
		stop    bool
		skip    pglogrepl.LSN // skipped up to, after a successful open
		says    []string      // in the error, or in the log
	}{
		{"ahead, a transaction not assigned yet", ahead, 1500, nil, true, 0,
			[]string{"xid 1500", "restored", "tombstone", "docs/exactly-once.md"}},
		{"ahead, an assigned transaction", ahead, 900, nil, false, ahead, nil},
		{"ahead, no transaction", ahead, 0, nil, false, ahead, []string{"names no transaction", "not checked"}},
		{"behind the slot, a transaction not assigned yet", behind, 1500, nil, false, 0, nil},
		{"ahead, the server does not answer", ahead, 900, errors.New("connection refused"), false, 0,
			[]string{"next transaction id", "connection refused"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c, r := openCluster(t)
			var logged bytes.Buffer
			r.env.Log = slog.New(slog.NewTextHandler(&logged, nil))
			asked := 0
			r.env.NextXid = func(context.Context) (uint64, error) { asked++; return next, tt.readErr }
			key := checkpoint.Key(openSystem.ID, r.cfg.Slot)
			putCheckpoint(t, c, key, checkpoint.Record{Slot: r.cfg.Slot, SystemID: openSystem.ID, Timeline: openSystem.Timeline,
				CommitLSN: tt.end - 0x10, EndLSN: tt.end, Xid: tt.xid})
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			s, err := openSession(t, ctx, r)
			said := logged.String()
			if err != nil {
				said = err.Error()
			}
			for _, s := range tt.says {
				if !strings.Contains(said, s) {
					t.Errorf("does not say %q: %s", s, said)
				}
			}
			if tt.end < openStart && asked != 0 {
				t.Errorf("the server was asked its next transaction id for a checkpoint behind the slot")
			}
			switch {
			case tt.readErr != nil:
				if err == nil {
					t.Fatalf("open: no error, want the read's")
				}
				if retry.Classify(err) == retry.Permanent {
					t.Errorf("open: %v is permanent: a server that cannot answer now may later", err)
				}
			case tt.stop:
				if retry.Classify(err) != retry.Permanent || !errors.Is(err, checkpoint.ErrRestored) {
					t.Fatalf("open: %v (%T), want checkpoint.ErrRestored, permanent", err, err)
				}
				for _, want := range []string{key, checkpointTopic} {
					if !strings.Contains(err.Error(), want) {
						t.Errorf("the error does not name %q: %v", want, err)
					}
				}
			default:
				if err != nil {
					t.Fatalf("open: %v, want none", err)
				}
				skipsTo(t, s, tt.skip)
			}
		})
	}
}
