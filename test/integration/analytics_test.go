package integration

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/segmentio/kafka-go"

	"github.com/outbox-cdc/outbox-cdc/internal/testkit"
)

// analyticsColumns is an outbox table whose key and payload may be NULL,
// the payload text so that it may be empty too, with a partition column.
const analyticsColumns = `
	id uuid primary key,
	aggregate_type text not null,
	aggregate_id text,
	event_type text not null,
	payload text,
	headers jsonb,
	part numeric,
	created_at timestamptz not null default now()`

// fetchedRecord is a record as the broker keeps it. kafka-go's Reader
// reads a null value and an empty one alike (nil); its Fetch API tells
// them apart.
type fetchedRecord struct {
	offset     int64
	key, value []byte
	null       bool
	headers    []kafka.Header
}

// fetchFromStart reads partition p of topic from its first offset to its
// high watermark through kafka-go's Fetch API.
func fetchFromStart(ctx context.Context, topic string, p int) ([]fetchedRecord, error) {
	client := &kafka.Client{Addr: kafka.TCP(strings.Split(broker.Brokers, ",")...), Timeout: 10 * time.Second}
	var out []fetchedRecord
	for offset := int64(0); ; {
		res, err := client.Fetch(ctx, &kafka.FetchRequest{Topic: topic, Partition: p, Offset: offset, MinBytes: 1, MaxBytes: 10 << 20, MaxWait: 100 * time.Millisecond})
		if err == nil {
			err = res.Error
		}
		if err != nil {
			return out, fmt.Errorf("fetch %s/%d at %d: %w", topic, p, offset, err)
		}
		n := 0
		for res.Records != nil {
			r, err := res.Records.ReadRecord()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				return out, fmt.Errorf("read %s/%d: %w", topic, p, err)
			}
			f := fetchedRecord{offset: r.Offset, null: r.Value == nil, headers: r.Headers}
			if f.key, err = kafka.ReadAll(r.Key); err == nil && r.Value != nil {
				f.value, err = kafka.ReadAll(r.Value)
			}
			if err != nil {
				return out, fmt.Errorf("read %s/%d at %d: %w", topic, p, r.Offset, err)
			}
			out, offset, n = append(out, f), r.Offset+1, n+1
		}
		if n == 0 || offset >= res.HighWatermark {
			return out, nil
		}
	}
}

// TestTombstonesCompact: with --null-payload=tombstone a NULL payload is
// a record with the row's key and headers and a null value (an empty
// payload stays an empty value); on a compacted topic the key is then gone
// once the cleaner ran, value and tombstone both. A row without a key is
// dead-lettered even with --null-key=allow.
func TestTombstonesCompact(t *testing.T) {
	o := newOutbox(t, "tomb", analyticsColumns)
	topic, dlq := o.name+".acct", o.name+".dlq"
	startRelay(t, o.args("--null-payload", "tombstone", "--null-key", "allow", "--dlq-topic", dlq, "--topic-partitions", "1",
		"--topic-config", "cleanup.policy=compact", "--topic-config", "segment.ms=100",
		"--topic-config", "min.cleanable.dirty.ratio=0.001", "--topic-config", "delete.retention.ms=100")...)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	id := func() string { return uuid.NewString() }
	o.insertOne(t, id(), "acct", "A", "opened", `{"balance": 1}`, nil)
	tombID := o.insertOne(t, id(), "acct", "A", "closed", nil, `{"trace": "t-1"}`)
	o.insertOne(t, id(), "acct", "E", "opened", "", nil)
	keyless := o.insertOne(t, id(), "acct", nil, "closed", nil, nil)

	msgs := consume(t, []string{topic}, 3, time.Minute)
	first, _ := byID(t, msgs)
	if m, ok := first[tombID]; !ok || string(m.Key) != "A" || len(m.Value) != 0 {
		t.Fatalf("tombstone read by kafka-go's Reader: %+v, want key A and no value", m)
	}
	tomb, empty := fetchTombstone(ctx, t, topic, tombID)
	switch {
	case tomb == nil || !tomb.null || string(tomb.key) != "A":
		t.Fatalf("tombstone as fetched: %+v, want key A and a null value", tomb)
	case empty == nil || empty.null || len(empty.value) != 0:
		t.Fatalf("empty payload as fetched: %+v, want an empty value, not null", empty)
	}
	if tr, _ := headerOf(tomb.headers, "trace"); tr != "t-1" {
		t.Errorf("tombstone's trace header %q, want the row's t-1", tr)
	}
	dead := deadLetters(t, consume(t, []string{dlq}, 1, time.Minute))
	if r, _ := testkit.Header(dead[keyless], "outbox_cdc.reason"); r != "null_column" {
		t.Errorf("keyless NULL payload: dead letter's reason %q, want null_column", r)
	}

	// Compaction itself waits for the broker's log cleaner (25–30 s here):
	// make test-analytics runs it, make test does not.
	if os.Getenv("OUTBOX_CDC_TEST_COMPACTION") == "" {
		t.Log("not waiting for compaction: make test-analytics (OUTBOX_CDC_TEST_COMPACTION=1) does")
		return
	}
	// More rows roll segments (segment.ms, on the next append) and keep the
	// log dirty, so that the cleaner removes A's value, then, past
	// delete.retention.ms, its tombstone.
	began := time.Now()
	for i := 0; ; i++ {
		o.insertOne(t, id(), "acct", fmt.Sprintf("f-%d", i), "opened", `{}`, nil)
		time.Sleep(time.Second)
		recs, err := fetchFromStart(ctx, topic, 0)
		switch {
		case err != nil:
			t.Logf("read from the start: %v", err) // the log being cleaned under the read, say: read again
		case !hasKey(recs, "A"):
			t.Logf("key A compacted away after %s (%d fillers; %d records left)", time.Since(began).Round(time.Second), i+1, len(recs))
			return
		}
		if time.Since(began) > 90*time.Second {
			t.Fatalf("key A is still in the topic after %s: %d records read (last error: %v)", time.Since(began).Round(time.Second), len(recs), err)
		}
	}
}

// fetchTombstone reads topic from the start until it holds the record of
// row tombID and one of key E, for up to 30 s (a read can fail while the
// topic is young), and returns them (nil: not found).
func fetchTombstone(ctx context.Context, t *testing.T, topic, tombID string) (tomb, empty *fetchedRecord) {
	t.Helper()
	for began := time.Now(); ; time.Sleep(250 * time.Millisecond) {
		recs, err := fetchFromStart(ctx, topic, 0)
		for i, r := range recs {
			switch rid, _ := headerOf(r.headers, "id"); {
			case rid == tombID:
				tomb = &recs[i]
			case string(r.key) == "E":
				empty = &recs[i]
			}
		}
		if tomb != nil && empty != nil || time.Since(began) > 30*time.Second {
			t.Logf("fetched %d records (last error: %v)", len(recs), err)
			return tomb, empty
		}
	}
}

func hasKey(recs []fetchedRecord, key string) bool {
	for _, r := range recs {
		if string(r.key) == key {
			return true
		}
	}
	return false
}

func headerOf(hs []kafka.Header, key string) (string, bool) {
	return testkit.Header(kafka.Message{Headers: hs}, key)
}

// TestPartitionFromAColumn: rows of one key name their partitions in a
// column and land there; NULL leaves the key's partition; a partition
// the topic lacks, or a value that is not an integer, is dead-lettered
// with its reason.
func TestPartitionFromAColumn(t *testing.T) {
	o := newOutbox(t, "part", analyticsColumns)
	topic, dlq := o.name+".acct", o.name+".dlq"
	startRelay(t, o.args("--column-partition", "part", "--topic-partitions", "3", "--dlq-topic", dlq)...)
	byKey := (&kafka.Murmur2Balancer{}).Balance(kafka.Message{Key: []byte("k")}, 0, 1, 2)
	want := map[string]int{} // id → partition
	dead := map[string]string{}
	for _, c := range []struct {
		part   any
		want   int
		reason string
	}{
		{0, 0, ""}, {1, 1, ""}, {2, 2, ""}, {nil, byKey, ""}, {(byKey + 1) % 3, (byKey + 1) % 3, ""},
		{3, 0, "partition_out_of_range"}, {-1, 0, "partition_out_of_range"}, {"1.5", 0, "invalid_partition"},
	} {
		id := uuid.NewString()
		var part *string // NULL
		if c.part != nil {
			part = new(string)
			*part = fmt.Sprint(c.part)
		}
		if _, err := o.db.Exec(context.Background(), fmt.Sprintf(
			"INSERT INTO %s (id, aggregate_type, aggregate_id, event_type, payload, part) VALUES ($1, 'acct', 'k', 'e', '{}', $2::text::numeric)", o.name), id, part); err != nil {
			t.Fatal(err)
		}
		if c.reason != "" {
			dead[id] = c.reason
		} else {
			want[id] = c.want
		}
	}
	msgs, _ := byID(t, consume(t, []string{topic}, len(want), time.Minute))
	for id, p := range want {
		if m, ok := msgs[id]; !ok || m.Partition != p {
			t.Errorf("row %s: in partition %d (present %v), want %d", id, m.Partition, ok, p)
		}
	}
	got := deadLetters(t, consume(t, []string{dlq}, len(dead), time.Minute))
	for id, reason := range dead {
		if r, _ := testkit.Header(got[id], "outbox_cdc.reason"); r != reason {
			t.Errorf("row %s: dead letter's reason %q, want %s", id, r, reason)
		}
	}
}
