package relay

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"testing"

	"github.com/jackc/pglogrepl"

	"github.com/outbox-cdc/outbox-cdc/backfill"
	"github.com/outbox-cdc/outbox-cdc/checkpoint"
	"github.com/outbox-cdc/outbox-cdc/decode"
)

// recordingGate is a delivery mode's txnGate that says which transactions
// Kafka holds and records what the pipeline asked.
type recordingGate struct {
	holds   bool
	skipped []pglogrepl.LSN
	entered int
	leaves  []pglogrepl.LSN
}

func (g *recordingGate) Skips(commit pglogrepl.LSN, _ bool) bool {
	g.skipped = append(g.skipped, commit)
	return g.holds
}
func (g *recordingGate) Enter(context.Context) error { g.entered++; return nil }
func (g *recordingGate) Handing(*decode.Event)       {}
func (g *recordingGate) Leave(end pglogrepl.LSN)     { g.leaves = append(g.leaves, end) }

func beginMessage(final pglogrepl.LSN, xid uint32) []byte {
	b := binary.BigEndian.AppendUint64([]byte{'B'}, uint64(final))
	b = binary.BigEndian.AppendUint64(b, 0)
	return binary.BigEndian.AppendUint32(b, xid)
}

func commitMessage(commit, end pglogrepl.LSN) []byte {
	b := binary.BigEndian.AppendUint64([]byte{'C', 0}, uint64(commit))
	b = binary.BigEndian.AppendUint64(b, uint64(end))
	return binary.BigEndian.AppendUint64(b, 0)
}

// standaloneMessage is a non-transactional logical decoding message.
func standaloneMessage(lsn pglogrepl.LSN, prefix, content string) []byte {
	b := binary.BigEndian.AppendUint64([]byte{'M', 0}, uint64(lsn))
	b = append(append(b, prefix...), 0)
	b = binary.BigEndian.AppendUint32(b, uint32(len(content)))
	return append(b, content...)
}

func TestPipelineAsksTheDeliveryModeAtTransactionEdges(t *testing.T) {
	tests := []struct {
		name       string
		holds      bool
		messages   [][]byte
		wantSkips  []pglogrepl.LSN
		wantLeaves []pglogrepl.LSN
		confirmed  pglogrepl.LSN
	}{
		{name: "a commit leaves the transaction", messages: [][]byte{beginMessage(0x1f0, 7), commitMessage(0x1f0, 0x200)},
			wantLeaves: []pglogrepl.LSN{0x200}, confirmed: 0x200},
		{name: "a message Kafka holds is dropped, its transaction closed", holds: true,
			messages:  [][]byte{standaloneMessage(0x300, "outbox", `{"id":"1"}`)},
			wantSkips: []pglogrepl.LSN{0x300}, confirmed: 0x300},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			gate := &recordingGate{holds: tt.holds}
			dec := decode.New()
			dec.DecodeMessages("outbox")
			p := &pipeline{dec: dec, track: checkpoint.New(0x100, 10, 1<<20), gate: gate}
			for _, m := range tt.messages {
				if err := p.handle(t.Context(), 0, m); err != nil {
					t.Fatalf("handle: %v", err)
				}
			}
			if !slices.Equal(gate.skipped, tt.wantSkips) || !slices.Equal(gate.leaves, tt.wantLeaves) || gate.entered != 0 {
				t.Errorf("skips asked %v, left %v, entered %d; want %v, %v, 0", gate.skipped, gate.leaves, gate.entered, tt.wantSkips, tt.wantLeaves)
			}
			if p.pending != nil {
				t.Errorf("an event is pending: %+v", p.pending)
			}
			if got := p.track.Confirmed(); got != tt.confirmed {
				t.Errorf("the tracker confirms %s, want %s", got, tt.confirmed)
			}
		})
	}
}

// TestLiveShowsTheDeliveryPosition: what metrics and the status show as
// confirmed is the session's delivery mode's position, during the session
// and after it ended.
func TestLiveShowsTheDeliveryPosition(t *testing.T) {
	const start, end = pglogrepl.LSN(0x100), pglogrepl.LSN(0x200)
	tests := []struct {
		mode DeliveryMode
		want pglogrepl.LSN
	}{
		{mode: AtLeastOnce, want: end},   // the tracker's: every event acknowledged
		{mode: ExactlyOnce, want: start}, // what a Kafka commit holds: none yet
	}
	for _, tt := range tests {
		t.Run(string(tt.mode), func(t *testing.T) {
			cfg := Default()
			cfg.Delivery.Mode = tt.mode
			r := &Relay{cfg: cfg, log: slog.New(slog.DiscardHandler)}
			track := checkpoint.New(start, 10, 1<<20)
			mode, err := r.newDelivery()
			if err != nil {
				t.Fatal(err)
			}
			d := mode.Session(track, start)
			var l live
			l.begin(track, nil, d.Position)
			track.Begin()
			seq, err := track.Reserve(t.Context(), 1)
			if err != nil {
				t.Fatal(err)
			}
			track.Commit(end)
			track.Ack(seq)
			if got := l.confirmed(); got != tt.want {
				t.Errorf("confirmed during the session: %s, want %s", got, tt.want)
			}
			l.end()
			if got := l.confirmed(); got != tt.want {
				t.Errorf("confirmed after the session: %s, want %s", got, tt.want)
			}
		})
	}
}

// TestCheckpointTopicOfItsOwn: the checkpoint topic may not be one events
// go to as well.
func TestCheckpointTopicOfItsOwn(t *testing.T) {
	for _, c := range []struct {
		name   string
		change func(*Config)
		field  string
	}{
		{"its own", func(*Config) {}, ""},
		{"the dead-letter topic", func(c *Config) { c.Delivery.CheckpointTopic = c.Topics.DeadLetterTopic }, "Delivery.CheckpointTopic"},
		{"the dead-letter topic, unused", func(c *Config) {
			c.Delivery.CheckpointTopic, c.Topics.OnInvalid = c.Topics.DeadLetterTopic, OnInvalidFail
		}, ""},
		{"a fixed event topic", func(c *Config) { c.Tables[0].Route.Topic = c.Delivery.CheckpointTopic }, "Delivery.CheckpointTopic"},
		{"at least once", func(c *Config) { c.Delivery.Mode, c.Delivery.CheckpointTopic = AtLeastOnce, c.Topics.DeadLetterTopic }, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			cfg := Default()
			cfg.Delivery.Mode = ExactlyOnce
			c.change(&cfg)
			err := cfg.validateCheckpointTopic()
			var ce *ConfigError
			if c.field == "" && err != nil || c.field != "" && (!errors.As(err, &ce) || ce.Field != c.field) {
				t.Errorf("validate: %v, want an error of %q", err, c.field)
			}
		})
	}
}

// TestBackfillEntryCommitsAsTheModeSays: the backfill's entry is a
// backfill.Committer (and GapCleaner) exactly when the delivery mode
// commits the backfill's rows: exactly-once, not forced.
func TestBackfillEntryCommitsAsTheModeSays(t *testing.T) {
	for _, tt := range []struct {
		mode    DeliveryMode
		force   bool
		commits bool
	}{
		{AtLeastOnce, false, false},
		{ExactlyOnce, false, true},
		{ExactlyOnce, true, false},
	} {
		t.Run(fmt.Sprintf("%s, forced %v", tt.mode, tt.force), func(t *testing.T) {
			cfg := Default()
			cfg.Delivery.Mode = tt.mode
			r := &Relay{cfg: cfg, log: slog.New(slog.DiscardHandler)}
			mode, err := r.newDelivery()
			if err != nil {
				t.Fatal(err)
			}
			entry := newBackfillEntry(r, mode.Backfill(tt.force, false)).entry()
			_, commits := entry.(backfill.Committer)
			_, cleans := entry.(backfill.GapCleaner)
			if commits != tt.commits || cleans != tt.commits {
				t.Errorf("a Committer %v, a GapCleaner %v; want %v", commits, cleans, tt.commits)
			}
		})
	}
}

// TestUnknownDeliveryModeRefused: a mode package delivery does not build
// is refused, naming the field and the modes it builds.
func TestUnknownDeliveryModeRefused(t *testing.T) {
	cfg := Default()
	cfg.Delivery.Mode = "at-most-once"
	err := cfg.Delivery.validate()
	var ce *ConfigError
	if !errors.As(err, &ce) || ce.Field != "Mode" || !strings.Contains(err.Error(), `"at-most-once": use at-least-once or exactly-once`) {
		t.Errorf("validate: %v, want a ConfigError of Mode naming at-least-once and exactly-once", err)
	}
}
