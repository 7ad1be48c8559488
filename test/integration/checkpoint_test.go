package integration

import (
	"context"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5"
	"github.com/segmentio/kafka-go"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/outbox-cdc/outbox-cdc/checkpoint"
	"github.com/outbox-cdc/outbox-cdc/producer"
	"github.com/outbox-cdc/outbox-cdc/replication"
)

// TestCheckpointStore runs the exactly-once checkpoint store against the
// real broker: EnsureCheckpointTopic creates the topic compacted; checkpoints are
// written in transactions by an independent client (franz-go), one
// committed, one aborted, then another slot's; ReadCheckpoint returns the
// committed one. The position it stores is of the real server's system and
// timeline, read through replication.Stream.System.
func TestCheckpointStore(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	sys := serverSystem(ctx, t)

	client := &kafka.Client{Addr: kafka.TCP(broker.Brokers), Timeout: 30 * time.Second, Transport: &kafka.Transport{}}
	topic := fmt.Sprintf("checkpoints-%d", time.Now().UnixNano())
	if created, err := producer.NewCluster(client).EnsureCheckpointTopic(ctx, topic, 1); err != nil || !created {
		t.Fatalf("ensure %s: created %v, %v", topic, created, err)
	}
	mine := checkpoint.Record{SystemID: sys.ID, Timeline: sys.Timeline, Slot: "cp_mine", Database: sys.Database,
		CommitLSN: sys.WALEnd, EndLSN: sys.WALEnd + 0x30, Xid: 7, CommitTime: time.Now()}
	aborted, theirs := mine, mine
	aborted.CommitLSN, aborted.EndLSN = mine.CommitLSN+0x100, mine.EndLSN+0x100
	theirs.Slot = "cp_theirs"

	p, err := kgo.NewClient(kgo.SeedBrokers(broker.Brokers), kgo.TransactionalID(topic), kgo.DefaultProduceTopic(topic))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	for _, w := range []struct {
		rec    checkpoint.Record
		commit bool
	}{{mine, true}, {aborted, false}, {theirs, true}} {
		value, err := w.rec.Encode()
		if err != nil {
			t.Fatal(err)
		}
		if err := p.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		if err := p.ProduceSync(ctx, &kgo.Record{Key: []byte(w.rec.Key()), Value: value}).FirstErr(); err != nil {
			t.Fatalf("produce: %v", err)
		}
		if err := p.EndTransaction(ctx, kgo.TransactionEndTry(w.commit)); err != nil {
			t.Fatalf("end transaction: %v", err)
		}
	}

	// What ReadCheckpoint must drop: the broker returns the aborted record at
	// read_committed, and kafka-go's Fetch passes it on.
	if n := fetchedUnder(ctx, t, client, topic, mine.Key()); n != 2 {
		t.Errorf("kafka-go's read_committed Fetch returned %d records under the key, want 2 (the aborted one too)", n)
	}
	got, found, err := producer.NewCluster(client).ReadCheckpoint(ctx, topic, mine.Key())
	if err != nil || !found || got.EndLSN != mine.EndLSN || got.Slot != mine.Slot {
		t.Fatalf("read %+v (found %v, %v), want the committed checkpoint at %s", got, found, err, mine.EndLSN)
	}
	if d := checkpoint.Resume(mine.EndLSN-0x10, checkpoint.System{ID: sys.ID, Timeline: sys.Timeline}, got, found); d.Start != mine.EndLSN || d.Warn {
		t.Errorf("resume from a slot behind it: %+v, want its end %s without a warning", d, mine.EndLSN)
	}
	if _, found, err := producer.NewCluster(client).ReadCheckpoint(ctx, topic, checkpoint.Key(sys.ID, "cp_none")); err != nil || found {
		t.Errorf("a slot without checkpoint: found %v, %v", found, err)
	}
}

// serverSystem reads the Postgres server's identity on a replication
// connection, and checks it against what SQL says.
func serverSystem(ctx context.Context, t *testing.T) replication.System {
	t.Helper()
	s, err := replication.Connect(ctx, replication.StreamConfig{URL: pg.URL, Slot: "none"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close(ctx)
	sys, err := s.System(ctx)
	if err != nil {
		t.Fatal(err)
	}
	conn, err := pgx.Connect(ctx, pg.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var id string
	var timeline int32
	var db string
	if err := conn.QueryRow(ctx, `SELECT system_identifier::text, (SELECT timeline_id FROM pg_control_checkpoint()), current_database()
		FROM pg_control_system()`).Scan(&id, &timeline, &db); err != nil {
		t.Fatal(err)
	}
	if sys.ID != id || sys.Timeline != timeline || sys.Database != db || sys.WALEnd == pglogrepl.LSN(0) || strings.TrimSpace(id) == "" {
		t.Fatalf("IDENTIFY_SYSTEM says %+v; SQL says system %s timeline %d database %s", sys, id, timeline, db)
	}
	return sys
}

// fetchedUnder counts the records under key that one read_committed
// kafka.Client.Fetch of the topic's partition 0 returns.
func fetchedUnder(ctx context.Context, t *testing.T, client *kafka.Client, topic, key string) int {
	t.Helper()
	res, err := client.Fetch(ctx, &kafka.FetchRequest{Topic: topic, Offset: 0, MaxBytes: 1 << 20, IsolationLevel: kafka.ReadCommitted})
	if err != nil || res.Error != nil {
		t.Fatalf("fetch: %v, %v", err, res.Error)
	}
	n := 0
	for {
		r, err := res.Records.ReadRecord()
		if err != nil {
			return n
		}
		if k, _ := io.ReadAll(r.Key); string(k) == key {
			n++
		}
	}
}
