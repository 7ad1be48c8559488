package delivery

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/outbox-cdc/outbox-cdc/checkpoint"
	"github.com/outbox-cdc/outbox-cdc/decode"
	"github.com/outbox-cdc/outbox-cdc/producer"
	"github.com/outbox-cdc/outbox-cdc/replication"
	"github.com/outbox-cdc/outbox-cdc/sink"
)

// openSystem is the server the sessions of these tests stream from, and
// openStart the slot's confirmed position.
var (
	openSystem = replication.System{ID: "7312345678901234567", Timeline: 2, WALEnd: 0x5000, Database: "outbox"}
	openStart  = pglogrepl.LSN(0x1000)
)

// openCluster starts a one-broker kfake cluster holding the checkpoint
// topic (one partition), and an exactly-once mode whose brokers it is.
func openCluster(t *testing.T) (*kfake.Cluster, *exactlyOnceMode) {
	t.Helper()
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, checkpointTopic))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	env := stubEnv(t)
	env.Connect = func() *producer.Cluster { return producer.Connect(sink.Security{}, c.ListenAddrs(), 0) }
	env.NextXid = func(context.Context) (uint64, error) { return 0, errors.New("no server") }
	m := mustNew(t, testConfig(), env)
	return c, m.(*exactlyOnceMode)
}

// fakeStream is a replication stream of openSystem that starts at once.
type fakeStream struct{}

func (fakeStream) System(context.Context) (replication.System, error) { return openSystem, nil }
func (fakeStream) Switches(context.Context, int32) (replication.Switches, error) {
	return nil, nil
}
func (fakeStream) Start(context.Context, pglogrepl.LSN) error { return nil }

// openSession opens a session of m from openStart, through the seam, with
// a publisher that has neither writer nor cleaner; it ends the session
// when the test ends.
func openSession(t *testing.T, ctx context.Context, m Mode) (Session, error) {
	t.Helper()
	s := m.Session(checkpoint.New(openStart, 10, 1<<20), openStart)
	err := s.Open(ctx, fakeStream{}, openStart, func(Writes) (Publisher, error) { return Publisher{}, nil })
	if err == nil {
		t.Cleanup(func() { _ = s.Finish(context.Background(), false, true) })
	}
	return s, err
}

// skipsTo fails the test unless s skips the transactions that committed
// before skip, and no other (0: none).
func skipsTo(t *testing.T, s Session, skip pglogrepl.LSN) {
	t.Helper()
	if skip == 0 {
		if s.Skips(openStart, false) {
			t.Errorf("skips the slot's own position %s, want no skip", openStart)
		}
		return
	}
	if !s.Skips(skip-1, false) || s.Skips(skip, false) {
		t.Errorf("skips %s: %v, %s: %v; want to skip up to %s", skip-1, s.Skips(skip-1, false), skip, s.Skips(skip, false), skip)
	}
}

// newOpenExactly is a session's exactly-once delivery before openExactly.
func newOpenExactly(m *exactlyOnceMode) *exactly {
	return newExactly(checkpoint.New(openStart, 10, 1<<20), m.cfg, openStart, m.env.Log)
}

// putCheckpoint writes rec under key to the checkpoint topic, committed
// (not transactional: ReadCheckpoint reads read_committed, which shows it).
func putCheckpoint(t *testing.T, c *kfake.Cluster, key string, rec checkpoint.Record) {
	t.Helper()
	value, err := rec.Encode()
	if err != nil {
		t.Fatal(err)
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...), kgo.DefaultProduceTopic(checkpointTopic))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	if err := cl.ProduceSync(context.Background(), &kgo.Record{Key: []byte(key), Value: value}).FirstErr(); err != nil {
		t.Fatalf("produce the checkpoint: %v", err)
	}
}

// hold never answers the requests of key: the client waits until its
// context ends.
func hold(c *kfake.Cluster, key kmsg.Key) {
	c.ControlKey(int16(key), func(kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		return nil, nil, true
	})
}

// countRequests counts the requests of key, which the cluster still
// handles.
func countRequests(c *kfake.Cluster, key kmsg.Key) *atomic.Int32 {
	var n atomic.Int32
	c.ControlKey(int16(key), func(kmsg.Request) (kmsg.Response, error, bool) {
		n.Add(1)
		return nil, nil, false
	})
	return &n
}

// TestOpenBounded: a coordinator that never answers InitProducerID, or a
// checkpoint partition whose ListOffsets or Fetch never returns, fails the
// session's open within openTimeout, saying which step, instead of
// holding the slot unread until Postgres ends the connection.
func TestOpenBounded(t *testing.T) {
	was := openTimeout
	openTimeout = time.Second // room for ApiVersions, FindCoordinator and InitProducerID (milliseconds against kfake) before a held request on a loaded machine
	t.Cleanup(func() { openTimeout = was })
	for _, tt := range []struct {
		name   string
		held   kmsg.Key
		record bool   // a record in the checkpoint partition, for ReadCheckpoint to fetch
		step   string // what the error says of the step
		cause  string // and of the request held
	}{
		{"InitProducerID", kmsg.InitProducerID, false, "take the transactional id", "InitProducerID"},
		{"ListOffsets", kmsg.ListOffsets, false, "read the last checkpoint", "offsets of " + checkpointTopic},
		{"Fetch", kmsg.Fetch, true, "read the last checkpoint", "at offset 0"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel() // a cluster of its own; openTimeout is restored after the last
			c, r := openCluster(t)
			if tt.record {
				putCheckpoint(t, c, checkpoint.Key(openSystem.ID, "another_slot"), checkpoint.Record{
					SystemID: openSystem.ID, Slot: "another_slot", Timeline: openSystem.Timeline, CommitLSN: 0x100, EndLSN: 0x110})
			}
			hold(c, tt.held)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			done := make(chan error, 1)
			began := time.Now()
			go func() {
				_, err := openSession(t, ctx, r)
				done <- err
			}()
			select {
			case err := <-done:
				took := time.Since(began)
				if err == nil || !strings.Contains(err.Error(), tt.step) || !strings.Contains(err.Error(), tt.cause) {
					t.Fatalf("open with %s held: %v, want an error saying %q and %q", tt.name, err, tt.step, tt.cause)
				}
				if took < openTimeout/2 {
					t.Errorf("open with %s held failed after %s, before openTimeout (%s): not the bound", tt.name, took, openTimeout)
				}
			case <-time.After(openTimeout + 30*time.Second): // a watchdog, generous for a loaded machine
				t.Fatalf("open with %s held still waiting %s after it began; openTimeout is %s", tt.name, time.Since(began), openTimeout)
			}
		})
	}
}

// TestOpenCheckpointFromTheFuture: a checkpoint of the same system and
// timeline that ends past the server's WAL end names transactions the
// database no longer has (restored from a backup): the relay stops,
// naming the key to reset and the topic. From another timeline or system
// it says nothing about this history (the slot is trusted); ahead of the
// slot but within the WAL, the session skips to it.
func TestOpenCheckpointFromTheFuture(t *testing.T) {
	const future, ahead = pglogrepl.LSN(0x6000), pglogrepl.LSN(0x3000)
	for _, tt := range []struct {
		name     string
		systemID string
		timeline int32
		end      pglogrepl.LSN
		stop     bool
		skip     pglogrepl.LSN // skipped up to, after a successful open
	}{
		{"past the WAL end", openSystem.ID, openSystem.Timeline, future, true, 0},
		{"past the WAL end, another timeline", openSystem.ID, openSystem.Timeline - 1, future, false, 0},
		{"past the WAL end, another system", "7399999999999999999", openSystem.Timeline, future, false, 0},
		{"at the WAL end", openSystem.ID, openSystem.Timeline, openSystem.WALEnd, false, openSystem.WALEnd},
		{"ahead of the slot", openSystem.ID, openSystem.Timeline, ahead, false, ahead},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c, r := openCluster(t)
			// Under this system's key, whatever system the record names: an
			// operator's copy between clusters, say.
			key := checkpoint.Key(openSystem.ID, r.cfg.Slot)
			putCheckpoint(t, c, key, checkpoint.Record{Slot: r.cfg.Slot, SystemID: tt.systemID, Timeline: tt.timeline,
				CommitLSN: tt.end - 0x10, EndLSN: tt.end})
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			s, err := openSession(t, ctx, r)
			if !tt.stop {
				if err != nil {
					t.Fatalf("open: %v, want none", err)
				}
				skipsTo(t, s, tt.skip)
				return
			}
			var stop stopError
			if !errors.As(err, &stop) || stop.Retriable() {
				t.Fatalf("open: %v (%T), want a stopError, not retriable", err, err)
			}
			for _, want := range []string{key, checkpointTopic} {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("the error does not name %q: %v", want, err)
				}
			}
		})
	}
}

// TestFinishUnsure: an uncommitted session's transaction is aborted at its
// end (EndTxn) only when nothing may still be in flight under its epoch.
// When a commit may have half happened (unsure) or the writer gave up on
// requests (not drained), an EndTxn with the same epoch could let a late
// request open a hanging transaction: finish leaves it to the next
// InitProducerID and returns nil, sending no EndTxn, whether it was asked
// to commit or not.
func TestFinishUnsure(t *testing.T) {
	for _, tt := range []struct {
		name                    string
		commit, drained, unsure bool
		endTxn                  int32
	}{
		{"abort, unsure", false, true, true, 0},
		{"commit, unsure", true, true, true, 0},
		{"abort, not drained", false, false, false, 0},
		{"commit, not drained", true, false, false, 0},
		{"abort, not drained, unsure", false, false, true, 0},
		{"abort", false, true, false, 1},
		{"commit", true, true, false, 1},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c, r := openCluster(t)
			ends := countRequests(c, kmsg.EndTxn)
			x := newOpenExactly(r)
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			if _, err := r.openExactly(ctx, x, openSystem, nil, openStart); err != nil {
				t.Fatalf("open: %v", err)
			}
			// One event of one Postgres transaction handed over, in a
			// partition of the Kafka transaction (an empty one needs no
			// EndTxn); acknowledged, not committed.
			if err := x.txn.AddPartitions(ctx, map[string][]int32{x.ckpt.Topic(): {x.ckpt.Partition()}}); err != nil {
				t.Fatal(err)
			}
			if err := x.Enter(ctx); err != nil {
				t.Fatal(err)
			}
			x.Handing(&decode.Event{CommitLSN: 0x2f0, Xid: 7})
			x.Leave(0x300)
			x.unsure = tt.unsure // what a commit cut short after it began writing sets
			if err := x.Finish(ctx, tt.commit, tt.drained); err != nil {
				t.Fatalf("finish: %v", err)
			}
			if got := ends.Load(); got != tt.endTxn {
				t.Errorf("EndTxn requests: %d, want %d", got, tt.endTxn)
			}
		})
	}
}
