package producer

import (
	"fmt"

	"math/rand/v2"
	"sync/atomic"

	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestLostAnswerIsNotDuplicated: the broker writes batches and answers
// with an error (the answer of a write that happened, lost), so the writer
// retries them. With producer ids the broker recognises each retry and the
// topic holds every event once; without (the broker refuses producer ids,
// so the writer falls back) the same faults duplicate events, which shows
// that the count can fail. A producer id refused for a while (the broker
// not ready) is asked again, not given up.
func TestLostAnswerIsNotDuplicated(t *testing.T) {
	besideOthersWhenShort(t)
	for _, c := range []struct {
		name       string
		err        *kerr.Error
		idsErr     *kerr.Error // InitProducerID's answer, idsCount times
		idsCount   int
		wantDupes  bool
		idempotent bool
	}{
		{"timed out after the write", kerr.RequestTimedOut, nil, 0, false, true},
		{"not enough replicas after append", kerr.NotEnoughReplicasAfterAppend, nil, 0, false, true},
		{"producer id late, timed out after the write", kerr.RequestTimedOut, kerr.NotCoordinator, 3, false, true},
		{"no producer ids, timed out after the write", kerr.RequestTimedOut, kerr.ClusterAuthorizationFailed, -1, true, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			cluster := newFakeCluster(t, kfake.NumBrokers(1), kfake.SeedTopics(2, "idem"))
			ids := watchProducerIDs(t, cluster)
			faults := cluster.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.Produce}, Topic: "idem", Err: c.err, Count: 6})
			if c.idsErr != nil {
				cluster.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.InitProducerID}, Err: c.idsErr, Count: c.idsCount})
			}
			const events, keys = 400, 10
			ctx, w, f := keyedWriter(t, cluster, "idem", events, testConfig{BatchSize: 20,
				RetryBackoffMin: time.Millisecond, RetryBackoffMax: 20 * time.Millisecond})
			publishKeyed(ctx, t, w, events, keys)
			total, distinct, _ := checkKeyed(ctx, t, f, w, keys, cluster, "idem", 2)
			if distinct != events {
				t.Errorf("%d distinct events in the topic, want %d", distinct, events)
			}
			if dupes := total - distinct; (dupes > 0) != c.wantDupes {
				t.Errorf("%d duplicates; want some: %t", dupes, c.wantDupes)
			}
			if ids.idempotent("idem") != c.idempotent {
				t.Errorf("batches by producer id %v; want idempotent: %t", ids.batches, c.idempotent)
			}
			if faults.Hits() == 0 {
				t.Fatal("no fault injected: the test proves nothing")
			}
			t.Logf("%d faults, %d InitProducerID, batches by producer id %v, %d records for %d events",
				faults.Hits(), ids.inits.Load(), ids.batches, total, events)
		})
	}
}

// TestRefusedSequenceRenewsProducerID: the broker refuses batches for
// their producer id, epoch or sequence (before writing them). The writer
// gets a new producer id, restarts the partition's sequence, and sends the
// same batch again: every event lands once, in order.
func TestRefusedSequenceRenewsProducerID(t *testing.T) {
	besideOthersWhenShort(t)
	for _, code := range []*kerr.Error{kerr.UnknownProducerID, kerr.OutOfOrderSequenceNumber, kerr.InvalidProducerEpoch} {
		t.Run(code.Message, func(t *testing.T) {
			cluster := newFakeCluster(t, kfake.NumBrokers(1), kfake.SeedTopics(2, "idem"))
			ids := watchProducerIDs(t, cluster)
			var produced atomic.Int64
			faults := cluster.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.Produce}, Topic: "idem", Err: code, Count: 2,
				When: func(kmsg.Request) bool { return produced.Add(1) > 3 }}) // once sequences have advanced
			const events, keys = 300, 10
			ctx, w, f := keyedWriter(t, cluster, "idem", events, testConfig{BatchSize: 20})
			publishKeyed(ctx, t, w, events, keys)
			total, distinct, _ := checkKeyed(ctx, t, f, w, keys, cluster, "idem", 2)
			if distinct != events || total != events {
				t.Errorf("%d records of %d distinct events in the topic, want %d once each", total, distinct, events)
			}
			if faults.Hits() == 0 || ids.inits.Load() < 2 || !ids.idempotent("idem") {
				t.Fatalf("%d faults, %d InitProducerID, batches by producer id %v: want a renewed producer id", faults.Hits(), ids.inits.Load(), ids.batches)
			}
			t.Logf("%d refusals, %d InitProducerID, batches by producer id %v", faults.Hits(), ids.inits.Load(), ids.batches)
		})
	}
}

// TestIdempotenceUnderRandomFaults is the property: against a 3-broker fake
// cluster that refuses partitions of produce requests at random, writes
// some and answers them with an error (lost answers), delays requests and
// moves partition leaders, every event is acknowledged once, in publish
// order per key, and the topic holds each event exactly once, each key's
// in order. Three seeds per run, each a new one (one under -short).
func TestIdempotenceUnderRandomFaults(t *testing.T) {
	besideOthersWhenShort(t)
	for round := range sized(3, 1) {
		seed := uint64(time.Now().UnixNano()) + uint64(round)
		t.Run(fmt.Sprint("seed=", seed), func(t *testing.T) { idempotenceUnderFaults(t, seed) })
	}
}

func idempotenceUnderFaults(t *testing.T, seed uint64) {
	coin := &chance{rng: rand.New(rand.NewPCG(seed, seed>>1))}
	cluster := newFakeCluster(t, kfake.NumBrokers(3), kfake.SeedTopics(4, "prop"))
	ids := watchProducerIDs(t, cluster)
	faults := injectRandomFaults(cluster, coin, "prop",
		randomFault{kerr.NotLeaderForPartition, 0.05},
		randomFault{kerr.RequestTimedOut, 0.06},
		randomFault{kerr.NotEnoughReplicasAfterAppend, 0.04},
	)
	events, keys := sized(1500, 600), 24
	ctx, w, f := keyedWriter(t, cluster, "prop", events, testConfig{BatchSize: 15, MetadataMaxAge: 100 * time.Millisecond})
	stopMoving := moveLeaders(cluster, coin, "prop", 3, 25*time.Millisecond)
	publishKeyed(ctx, t, w, events, keys)
	stopMoving()
	total, distinct, _ := checkKeyed(ctx, t, f, w, keys, cluster, "prop", 4)
	if distinct != events || total != events {
		t.Errorf("%d records of %d distinct events, want %d once each", total, distinct, events)
	}
	if faults.Hits() == 0 || !ids.idempotent("prop") {
		t.Fatalf("%d faults, batches by producer id %v: the test proves too little", faults.Hits(), ids.batches)
	}
	t.Logf("%d faults, %d InitProducerID; %d records, each event once, order kept per key", faults.Hits(), ids.inits.Load(), total)
}
