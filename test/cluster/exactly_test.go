//go:build cluster

package cluster

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/outbox-cdc/outbox-cdc/internal/testkit"
)

// transactionState is Kafka's transaction state log: the coordinators'
// partitions, which must stay in sync for commits to go on.
const transactionState = "__transaction_state"

// exactlyRun is one exactly-once relay streaming under load, with what a
// test needs to fault the cluster under it and check what it delivered.
type exactlyRun struct {
	o     *outbox
	r     *testkit.Relay
	l     *load
	topic string // the event topic
	ckpt  string // the relay's own checkpoint topic
	txnID string // its transactional id
}

// startExactly starts an exactly-once relay, its checkpoint topic of its
// own replicated three times, and a load of 30 keys; it returns once
// read_committed consumers see events, the checkpoint topic exists with
// three replicas and the relay took its transactional id.
func startExactly(t *testing.T, prefix string) *exactlyRun {
	t.Helper()
	o := newOutbox(t, prefix)
	x := &exactlyRun{o: o, topic: o.name + ".order", ckpt: o.name + ".checkpoints", txnID: "outbox-cdc-cluster." + o.name}
	x.r = startRelay(t, o.args("--delivery", "exactly-once", "--transactional-id", x.txnID,
		"--checkpoint-topic", x.ckpt, "--checkpoint-replication-factor", "3")...)
	x.l = startLoad(o, 30, 2*time.Millisecond)
	t.Cleanup(func() { // a test that ends early stops its writers before the table is dropped
		select {
		case <-x.l.stop:
		default:
			x.l.finish()
		}
	})
	consumeCommitted(t, []string{x.topic}, 300, time.Minute)
	waitInSync(t, time.Minute, x.topic, x.ckpt, transactionState)
	if !strings.Contains(x.r.LogText(), "transactional_id="+x.txnID) {
		t.Fatalf("the relay did not log taking transactional id %s:\n%s", x.txnID, testkit.Tail(x.r.LogText(), 20))
	}
	return x
}

// verify stops the load and checks what a read_committed consumer reads:
// every committed row once, each key's events in order. It returns the
// events and how the relay rode the fault: its stream interruptions
// (sessions that ended) and its warnings.
func (x *exactlyRun) verify(t *testing.T) (events, interrupted, warnings int) {
	t.Helper()
	events = x.l.finish()
	msgs := consumeCommitted(t, []string{x.topic}, events, 2*time.Minute)
	if dups := check(t, x.l, msgs); dups != 0 {
		t.Errorf("%d duplicates read at read_committed in exactly-once", dups)
	}
	consumeCommitted(t, []string{x.ckpt}, 1, 30*time.Second) // a committed checkpoint record
	log := x.r.LogText()
	for _, line := range strings.Split(log, "\n") {
		if strings.Contains(line, "level=WARN") {
			warnings++
			t.Logf("relay: %.300s", line)
		}
	}
	return events, strings.Count(log, "stream interrupted"), warnings
}

// TestExactlyLeaderKilled: in exactly-once, the leader of a busy partition
// is killed (SIGKILL) mid-transaction and restarted; a read_committed
// consumer reads every event once, in order per key.
func TestExactlyLeaderKilled(t *testing.T) {
	x := startExactly(t, "eosleader")
	node := leaderOf(t, x.topic, 0)
	down(t, node, false)
	moved := waitLeaderMoved(t, x.topic, 0, node, time.Minute)
	recovery := waitFlowing(t, x.o, 2*time.Minute)
	up(t, node)
	waitInSync(t, 2*time.Minute, x.topic, x.ckpt, transactionState)
	waitFlowing(t, x.o, time.Minute)
	n, interrupted, warnings := x.verify(t)
	t.Logf("leader (node %d) of partition 0 killed: leadership moved in %s, every row committed by then in a Kafka commit %s later; %d events, %d stream interruptions, %d warnings",
		node, moved.Round(100*time.Millisecond), recovery.Round(100*time.Millisecond), n, interrupted, warnings)
}

// TestExactlyCoordinatorKilled: the broker hosting the transaction
// coordinator of the relay's transactional id is killed (SIGKILL) while
// the relay commits every 100 ms, then restarted; the coordinator moves
// to another broker, which must finish or abort the transaction in
// progress: a read_committed consumer reads every event once, in order.
func TestExactlyCoordinatorKilled(t *testing.T) {
	x := startExactly(t, "eoscoord")
	node := coordinatorOf(t, x.txnID, time.Minute)
	down(t, node, false)
	moved, took := waitCoordinatorMoved(t, x.txnID, node, 2*time.Minute)
	recovery := waitFlowing(t, x.o, 2*time.Minute)
	up(t, node)
	waitInSync(t, 2*time.Minute, x.topic, x.ckpt, transactionState)
	waitFlowing(t, x.o, time.Minute)
	n, interrupted, warnings := x.verify(t)
	t.Logf("coordinator (node %d) of %s killed: moved to node %d in %s; every row committed by then in a Kafka commit %s later; %d events, %d stream interruptions, %d warnings",
		node, x.txnID, moved, took.Round(100*time.Millisecond), recovery.Round(100*time.Millisecond), n, interrupted, warnings)
}

// TestExactlyRollingRestart restarts the three brokers one after the
// other (SIGTERM), as an operator does: each back and every replica in
// sync (transaction state log included) before the next; the relay keeps
// committing while each is down.
func TestExactlyRollingRestart(t *testing.T) {
	x := startExactly(t, "eosrolling")
	began := time.Now()
	var slowest time.Duration
	for node := 1; node <= 3; node++ {
		down(t, node, true)
		slowest = max(slowest, waitFlowing(t, x.o, 2*time.Minute))
		up(t, node)
		waitInSync(t, 2*time.Minute, x.topic, x.ckpt, transactionState)
	}
	waitFlowing(t, x.o, time.Minute)
	n, interrupted, warnings := x.verify(t)
	t.Logf("rolling restart of 3 brokers in %s: rows committed caught up within %s with a broker down; %d events, %d stream interruptions, %d warnings",
		time.Since(began).Round(time.Second), slowest.Round(100*time.Millisecond), n, interrupted, warnings)
}

// coordinatorOf returns the node (1-3) that coordinates transactional id
// id (FindCoordinator, key type 1), retrying while none is available.
func coordinatorOf(t *testing.T, id string, timeout time.Duration) int {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(strings.Split(brokers, ",")...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	deadline := time.Now().Add(timeout)
	for {
		req := kmsg.NewPtrFindCoordinatorRequest()
		req.CoordinatorType, req.CoordinatorKey = 1, id
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		resp, err := req.RequestWith(ctx, cl)
		cancel()
		if err == nil {
			if err = kerr.ErrorForCode(resp.ErrorCode); err == nil {
				return int(resp.NodeID)
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("FindCoordinator for transactional id %s: %v after %s", id, err, timeout)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// waitCoordinatorMoved waits until a node other than from coordinates
// transactional id id, and returns it and how long that took.
func waitCoordinatorMoved(t *testing.T, id string, from int, timeout time.Duration) (int, time.Duration) {
	t.Helper()
	began := time.Now()
	for {
		if n := coordinatorOf(t, id, timeout); n != from {
			return n, time.Since(began)
		}
		if time.Since(began) > timeout {
			t.Fatalf("the coordinator of %s still on killed node %d after %s", id, from, timeout)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// waitLeaderMoved waits until topic's partition p is led by a node other
// than from, and returns how long that took.
func waitLeaderMoved(t *testing.T, topic string, p, from int, timeout time.Duration) time.Duration {
	t.Helper()
	began := time.Now()
	for {
		if parts, err := partitions(topic); err == nil && p < len(parts) {
			if l := parts[p].Leader.ID; l != from && l > 0 {
				return time.Since(began)
			}
		}
		if time.Since(began) > timeout {
			t.Fatalf("%s/%d still led by killed node %d after %s", topic, p, from, timeout)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// waitInSync waits until every partition of topics has a leader and its
// three replicas in sync: what a rolling restart waits for before the next
// broker.
func waitInSync(t *testing.T, timeout time.Duration, topics ...string) {
	t.Helper()
	began := time.Now()
	for {
		lagging, err := laggingPartitions(topics)
		if err == nil && len(lagging) == 0 {
			return
		}
		if time.Since(began) > timeout {
			t.Fatalf("replicas not in sync after %s: %v (%v)", timeout, lagging, err)
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// laggingPartitions names the partitions of topics without a leader or
// with fewer than three in-sync replicas.
func laggingPartitions(topics []string) ([]string, error) {
	var lagging []string
	for _, topic := range topics {
		parts, err := partitions(topic)
		if err != nil {
			return nil, err
		}
		for _, p := range parts {
			if p.Leader.ID <= 0 || len(p.Isr) < 3 {
				lagging = append(lagging, fmt.Sprintf("%s/%d leader %d isr %d", topic, p.ID, p.Leader.ID, len(p.Isr)))
			}
		}
	}
	return lagging, nil
}

// partitions returns topic's partitions as the cluster's metadata has them.
func partitions(topic string) ([]kafka.Partition, error) {
	client := &kafka.Client{Addr: kafka.TCP(strings.Split(brokers, ",")...), Timeout: 5 * time.Second}
	md, err := client.Metadata(context.Background(), &kafka.MetadataRequest{Topics: []string{topic}})
	if err != nil {
		return nil, fmt.Errorf("metadata of %s: %w", topic, err)
	}
	if len(md.Topics) != 1 || md.Topics[0].Error != nil || len(md.Topics[0].Partitions) == 0 {
		return nil, fmt.Errorf("metadata of %s: %d topics, %v", topic, len(md.Topics), md.Topics)
	}
	return md.Topics[0].Partitions, nil
}

// consumeCommitted is testkit.ConsumeCommitted on the cluster.
func consumeCommitted(t *testing.T, topics []string, want int, timeout time.Duration) []kafka.Message {
	t.Helper()
	return testkit.ConsumeCommitted(t, brokers, topics, want, timeout)
}
