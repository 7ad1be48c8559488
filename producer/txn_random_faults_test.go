package producer

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// txnSeedsEnv adds seeds to the property's fixed ones: a comma-separated
// list, such as OUTBOX_CDC_TXN_SEEDS=$(seq 10 40 | paste -sd,).
const txnSeedsEnv = "OUTBOX_CDC_TXN_SEEDS"

// TestTransactionUnderRandomFaults is the property of the transactional
// writer, driven as the relay drives it: a session takes the
// transactional id (Init) and runs transactions one after another, each
// publishing events, waiting until every one is acknowledged, and
// committing; an aborted transaction (Abort, or left to the next session's
// Init) ends the session, and the next one publishes its events again.
// Meanwhile a 3-broker fake cluster refuses partitions of produce
// requests at random (some after writing them: a lost answer), drops
// connections, moves partition leaders, and the topic grows from 3 to 5
// partitions. A read_committed consumer must read every event once, each
// key's in order (within a partition, and across the partitions a key
// moved between), and nothing of an aborted transaction, which a
// read_uncommitted consumer does see. Seeds 1, 2 and 3 of 1,000 events
// each; under -short seed 1 of 500.
func TestTransactionUnderRandomFaults(t *testing.T) {
	besideOthersWhenShort(t)
	seeds := []uint64{1, 2, 3}
	if testing.Short() {
		seeds = seeds[:1]
	}
	if s := os.Getenv(txnSeedsEnv); s != "" {
		for _, f := range strings.Split(s, ",") {
			seed, err := strconv.ParseUint(strings.TrimSpace(f), 10, 64)
			if err != nil {
				t.Fatalf("%s: %v", txnSeedsEnv, err)
			}
			seeds = append(seeds, seed)
		}
	}
	for _, seed := range seeds {
		t.Run(fmt.Sprint("seed=", seed), func(t *testing.T) {
			if len(seeds) > 1 {
				t.Parallel() // a run mostly waits out backoffs; one alone keeps its parent's place
			}
			// Faults and timing share the coin, so a run can leave out
			// what the property needs (no key moved, nothing aborted):
			// then another seed runs, up to three; what a run checks
			// fails it at once.
			for try := range uint64(3) {
				if transactionsUnderFaults(t, seed+1000*try) || t.Failed() {
					return
				}
			}
			t.Fatal("three runs in a row proved too little")
		})
	}
}

const chaosTopic = "txchaos"

// txnRun is one run of the property and its model: events 0 to events-1
// over keys, event i of key k(i%keys), carrying its number within its key
// and the transaction (attempt) that published it.
type txnRun struct {
	t       *testing.T
	ctx     context.Context
	cluster *kfake.Cluster
	coin    *chance
	cfg     testConfig
	o       *outcomes
	txn     *Txn
	w       *testWriter

	events, keys int
	next         int    // the first event no transaction committed
	token        uint64 // fates asked for so far
	keyOf        []int  // by token: its event's key; -1 for a sentinel
	attempt      uint32 // transactions begun
	committed    map[uint32]bool
	aborted      int // events published in transactions aborted
	sessions     int
	reported     int // problems reported (see problem)
}

// transactionsUnderFaults runs the property with seed; it reports whether
// the run exercised what it must (faults, moves, a key moved, aborts,
// commits) for its checks to prove anything.
func transactionsUnderFaults(t *testing.T, seed uint64) (proved bool) {
	coin := &chance{rng: rand.New(rand.NewPCG(seed, seed>>1))}
	cluster := newFakeCluster(t, kfake.NumBrokers(3), kfake.SeedTopics(3, chaosTopic))
	faults := injectRandomFaults(cluster, coin, chaosTopic,
		randomFault{kerr.NotLeaderForPartition, 0.05},
		randomFault{kerr.NotEnoughReplicas, 0.03},
		randomFault{kerr.RequestTimedOut, 0.03}, // written, then answered as timed out: the retry is a duplicate the broker drops
	)
	drops := dropConnections(cluster, coin, 0.01)
	r := &txnRun{t: t, ctx: testContext(t, time.Minute), cluster: cluster, coin: coin, o: newOutcomes(),
		events: sized(1000, 500), keys: 24, committed: map[uint32]bool{}}
	r.cfg = testConfig{Brokers: cluster.ListenAddrs(), BatchSize: 15, BatchTimeout: 2 * time.Millisecond,
		MetadataMaxAge: 100 * time.Millisecond, MissingTopicTimeout: 10 * time.Second}
	if testing.Short() {
		// The same faults, retried sooner: a run mostly waits out backoffs.
		r.cfg.RetryBackoffMin, r.cfg.RetryBackoffMax = 10*time.Millisecond, 200*time.Millisecond
	}
	r.cfg.Topic = chaosTopic
	stopMoving := moveLeaders(cluster, coin, chaosTopic, 3, 40*time.Millisecond)
	r.session()
	for n := 0; r.next < r.events; n++ {
		r.transaction(n == 3) // the topic grows in the fourth
	}
	r.sentinels()
	moves := stopMoving()
	if err := r.w.Close(r.ctx); err != nil {
		t.Fatal(err)
	}
	r.checkAckOrder()
	committed := consume(r.ctx, t, cluster, chaosTopic, true, sentinelsRead)
	moved := r.checkCommitted(committed)
	visible := consume(r.ctx, t, cluster, chaosTopic, false, sentinelsRead)
	abortedSeen := r.abortedRecords(visible)
	if faults.Hits() == 0 || moves == 0 || moved == 0 || r.aborted == 0 || abortedSeen == 0 || len(r.committed) < 3 {
		t.Logf("seed %d: %d faults, %d leader moves, %d keys moved, %d events aborted (%d records of them in the log), %d commits: the run proves too little",
			seed, faults.Hits(), moves, moved, r.aborted, abortedSeen, len(r.committed))
		return false
	}
	if r.reported > 10 {
		t.Errorf("and %d more problems", r.reported-10)
	}
	t.Logf("%d events in %d transactions (%d committed) over %d sessions: %d partition faults, %d connections dropped, %d leader moves, "+
		"3 → 5 partitions (%d keys moved); %d records of aborted transactions in the log", r.events, r.attempt, len(r.committed), r.sessions,
		faults.Hits(), drops.Load(), moves, moved, abortedSeen)
	return true
}

// session starts a session, as the relay's: a new Txn whose Init fences
// (and aborts the transaction of) the last, and a new writer.
func (r *txnRun) session() {
	r.txn = begunTxn(r.ctx, r.t, r.cluster, chaosTopic)
	cfg := r.cfg
	cfg.Transaction = r.txn
	r.w = newTestWriter(cfg, r.o.done)
	r.sessions++
}

// publish publishes ev, an event of key (-1: a sentinel, of none of the
// run's keys), and returns its token.
func (r *txnRun) publish(ev *event, key int) uint64 {
	token := r.token
	r.token++
	r.keyOf = append(r.keyOf, key)
	if err := r.w.Publish(r.ctx, ev, token); err != nil {
		r.t.Fatalf("publish %s: %v", ev.ID, err)
	}
	return token
}

// keyedTxnEvent is event i, published in the transaction begun last.
func (r *txnRun) keyedTxnEvent(i int) *event {
	payload := binary.BigEndian.AppendUint32(nil, uint32(i/r.keys))
	return &event{ID: fmt.Sprint(i), AggregateType: "t", AggregateID: fmt.Sprintf("k%d", i%r.keys), EventType: "e",
		Payload: binary.BigEndian.AppendUint32(payload, r.attempt)}
}

// transaction publishes the next events in one transaction, waits until
// each is acknowledged (Flush on meanwhile, as the relay's commit does),
// and commits it, or aborts it and starts a new session. The topic grows
// halfway through when grow says so.
func (r *txnRun) transaction(grow bool) {
	r.attempt++
	first := r.next
	end := min(first+80+r.coin.intN(80), r.events)
	tokens := make([]uint64, 0, end-first)
	for i := first; i < end; i++ {
		if grow && i == (first+end)/2 {
			r.grow()
		}
		tokens = append(tokens, r.publish(r.keyedTxnEvent(i), i%r.keys))
		if i%10 == 0 {
			time.Sleep(2 * time.Millisecond) // requests interleave with faults, moves and the growth
		}
	}
	r.w.Flush(true)
	defer r.w.Flush(false)
	r.o.wait(r.ctx, r.t, int(r.token))
	checkFates(r.t, r.o, nil, tokens...)
	if end == r.events || r.attempt%4 != 2 && !r.coin.below(0.15) {
		r.commit()
		r.next = end
		return
	}
	r.aborted += end - first
	if err := r.w.Close(r.ctx); err != nil {
		r.t.Fatal(err)
	}
	if r.coin.below(0.5) {
		if err := r.txn.Abort(r.ctx); err != nil {
			r.t.Fatalf("abort: %v", err)
		}
	} // else left open: the next session's Init aborts it
	r.session()
}

// commit commits the open transaction and begins the next.
func (r *txnRun) commit() {
	if err := r.txn.Commit(r.ctx); err != nil {
		r.t.Fatalf("commit transaction %d: %v", r.attempt, err)
	}
	r.committed[r.attempt] = true
	if err := r.txn.Begin(); err != nil {
		r.t.Fatal(err)
	}
}

// grow makes the topic 5 partitions.
func (r *txnRun) grow() {
	client := &kafka.Client{Addr: kafka.TCP(r.cluster.ListenAddrs()...)}
	res, err := client.CreatePartitions(r.ctx, &kafka.CreatePartitionsRequest{Topics: []kafka.TopicPartitionsConfig{{Name: chaosTopic, Count: 5}}})
	if err == nil {
		err = res.Errors[chaosTopic]
	}
	if err != nil {
		r.t.Fatalf("create partitions: %v", err)
	}
}

// sentinels commits a last transaction of one event keyed "end" in each
// partition, after which a consumer has read everything.
func (r *txnRun) sentinels() {
	r.attempt++
	var tokens []uint64
	for p := range 5 {
		ev := &event{ID: fmt.Sprint("end-", p), AggregateType: "t", AggregateID: "end", EventType: "e", Partition: fmt.Sprint(p)}
		tokens = append(tokens, r.publish(ev, -1))
	}
	r.o.wait(r.ctx, r.t, int(r.token))
	checkFates(r.t, r.o, nil, tokens...)
	r.commit()
}

// sentinelsRead reports whether each of the 5 partitions ends in its
// sentinel.
func sentinelsRead(got map[int32][]*kgo.Record) bool {
	for p := range int32(5) {
		if n := len(got[p]); n == 0 || string(got[p][n-1].Key) != "end" {
			return false
		}
	}
	return true
}

// dropConnections closes the connection of a produce request, unread, at
// odds p: the writer learns nothing of its batches and sends them again.
func dropConnections(cluster *kfake.Cluster, coin *chance, p float64) *atomic.Int64 {
	var drops atomic.Int64
	cluster.ControlKey(int16(kmsg.Produce), func(kmsg.Request) (kmsg.Response, error, bool) {
		cluster.KeepControl()
		if coin.below(p) {
			drops.Add(1)
			return nil, errors.New("connection dropped by the test"), true
		}
		return nil, nil, false
	})
	return &drops
}

// problem reports a failed check, the first ten of a run only.
func (r *txnRun) problem(format string, args ...any) {
	r.t.Helper()
	if r.reported++; r.reported <= 10 {
		r.t.Errorf(format, args...)
	}
}

// checkAckOrder checks that each key's events were acknowledged in the
// order they were published, across transactions and sessions.
func (r *txnRun) checkAckOrder() {
	r.o.mu.Lock()
	defer r.o.mu.Unlock()
	last := map[int]uint64{}
	for _, tok := range r.o.order {
		k := r.keyOf[tok]
		if prev, ok := last[k]; ok && k >= 0 && tok < prev {
			r.problem("key k%d: publish %d acknowledged after publish %d", k, tok, prev)
		}
		last[k] = tok
	}
}

// checkCommitted checks what a read_committed consumer read: each event
// once, none of an aborted transaction, each key's in order within a
// partition, and a key's events in one partition all before or all after
// those in another. It returns how many keys span two partitions.
func (r *txnRun) checkCommitted(got map[int32][]*kgo.Record) (moved int) {
	spans := keySpans{}
	seen := make([]int, r.events)
	for p, records := range got {
		next := map[string]uint32{}
		for _, rec := range records {
			key := string(rec.Key)
			if key == "end" {
				continue
			}
			k, err := strconv.Atoi(strings.TrimPrefix(key, "k"))
			if err != nil || len(rec.Value) != 8 {
				r.problem("partition %d offset %d: a record the run did not publish (key %q)", p, rec.Offset, key)
				continue
			}
			n, attempt := binary.BigEndian.Uint32(rec.Value), binary.BigEndian.Uint32(rec.Value[4:])
			if !r.committed[attempt] {
				r.problem("partition %d offset %d: event %d of aborted transaction %d read_committed", p, rec.Offset, int(n)*r.keys+k, attempt)
			}
			if i := int(n)*r.keys + k; i < r.events {
				seen[i]++
			}
			if prev, ok := next[key]; ok && n < prev {
				r.problem("key %s, partition %d: its event %d read after its event %d", key, p, n, prev-1)
			}
			next[key] = n + 1
			spans.add(key, p, n)
		}
	}
	for i, n := range seen {
		if n != 1 {
			r.problem("event %d read %d times, want once", i, n)
		}
	}
	return spans.check(func(s string) { r.problem("%s", s) })
}

// abortedRecords counts the records of aborted transactions in got (read
// uncommitted): they are in the log, and only the isolation hides them.
func (r *txnRun) abortedRecords(got map[int32][]*kgo.Record) int {
	n := 0
	for _, records := range got {
		for _, rec := range records {
			if len(rec.Value) == 8 && !r.committed[binary.BigEndian.Uint32(rec.Value[4:])] {
				n++
			}
		}
	}
	return n
}
