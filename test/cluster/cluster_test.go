//go:build cluster

package cluster

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/outbox-cdc/outbox-cdc/internal/testkit"
)

// waitFlowing waits until the relay has published every row committed so
// far (the slot confirmed past them), and returns how long that took.
func waitFlowing(t *testing.T, o *outbox, timeout time.Duration) time.Duration {
	t.Helper()
	began := time.Now()
	target := o.CurrentLSN(t)
	for o.Confirmed(t) < target {
		if time.Since(began) > timeout {
			t.Fatalf("slot confirmed %s, short of %s after %s", o.Confirmed(t), target, timeout)
		}
		time.Sleep(100 * time.Millisecond)
	}
	return time.Since(began)
}

// TestLeaderKilled: the leader of a busy partition is killed with SIGKILL
// mid-stream, and comes back later.
func TestLeaderKilled(t *testing.T) {
	o := newOutbox(t, "leader")
	startRelay(t, o.args()...)
	l := startLoad(o, 30, 2*time.Millisecond)
	topic := o.name + ".order"
	consume(t, topic, 300, time.Minute)
	node := leaderOf(t, topic, 0)
	killed := time.Now()
	down(t, node, false)
	time.Sleep(2 * time.Second)
	recovery := waitFlowing(t, o, time.Minute) + 2*time.Second
	time.Sleep(3 * time.Second)
	up(t, node)
	n := l.finish()
	msgs := consume(t, topic, n, 2*time.Minute)
	dups := check(t, l, msgs)
	t.Logf("leader (node %d) of partition 0 killed at %s: %d events delivered, %d duplicates; every row committed by then published %s after the kill",
		node, killed.Format("15:04:05.000"), n, dups, recovery.Round(100*time.Millisecond))
}

// TestBelowMinInsyncReplicas: two of three brokers down leave one in-sync
// replica, below min.insync.replicas=2: produce is refused
// (NOT_ENOUGH_REPLICAS) and retried, the slot holds, /readyz says why; one
// broker back, the stream resumes.
func TestBelowMinInsyncReplicas(t *testing.T) {
	o := newOutbox(t, "minisr")
	r := startRelay(t, o.args()...)
	l := startLoad(o, 20, 5*time.Millisecond)
	topic := o.name + ".order"
	consume(t, topic, 200, time.Minute)
	down(t, 2, false)
	down(t, 3, false)
	down := time.Now()
	// Rows committed from here on cannot be acknowledged: the slot must not
	// pass the first of them.
	time.Sleep(time.Second)
	first := o.CurrentLSN(t)
	time.Sleep(12 * time.Second)
	if got := o.Confirmed(t); got > first {
		t.Errorf("slot confirmed %s with two of three brokers down, past %s", got, first)
	}
	// Readiness turns at the first stretch of failures long enough. While
	// the cluster settles after the kills (the ISR shrinking, leaders
	// moving), one produce may still succeed, which starts that stretch
	// again: poll for it, as a probe would, rather than look once (in one
	// CI run a success 5 s after the kills left /readyz 200 at 13 s).
	code, body := r.Readyz(t)
	for deadline := time.Now().Add(15 * time.Second); (code != 503 || !strings.Contains(body, "produce failing")) && time.Now().Before(deadline); {
		time.Sleep(500 * time.Millisecond)
		code, body = r.Readyz(t)
	}
	if code != 503 || !strings.Contains(body, "produce failing") {
		t.Errorf("/readyz = %d %q with produce refused for %s, want 503 saying why", code, body, time.Since(down).Round(time.Second))
	}
	t.Logf("/readyz with two brokers down for %s: %d %s", time.Since(down).Round(time.Second), code, strings.TrimSpace(body))
	// Once the controller has moved the leaders to the one broker left,
	// produce is refused for want of in-sync replicas, and retried.
	series := `outbox_cdc_publish_errors_total{kind="not_enough_replicas"}`
	for deadline := time.Now().Add(30 * time.Second); r.Metric(t, series) == 0; time.Sleep(time.Second) {
		if time.Now().After(deadline) {
			t.Fatalf("no NOT_ENOUGH_REPLICAS answer in 45 s with two brokers down; /metrics:\n%s", grepLines(r, t, "publish_errors"))
		}
	}
	if got := o.Confirmed(t); got > first {
		t.Errorf("slot confirmed %s with two of three brokers down, past %s", got, first)
	}
	t.Logf("%v produce attempts refused with NOT_ENOUGH_REPLICAS, retried", r.Metric(t, series))
	up(t, 2)
	back := time.Now()
	recovery := waitFlowing(t, o, 2*time.Minute)
	if code, body := r.Readyz(t); code != 200 {
		t.Errorf("/readyz = %d %q after a broker came back", code, body)
	}
	n := l.finish()
	msgs := consume(t, topic, n, 2*time.Minute)
	dups := check(t, l, msgs)
	up(t, 3)
	t.Logf("two brokers down for %s: slot held; one back, every row published %s later; %d events, %d duplicates",
		back.Sub(down).Round(time.Second), recovery.Round(100*time.Millisecond), n, dups)
}

// grepLines returns the lines of /metrics that contain s.
func grepLines(r *testkit.Relay, t *testing.T, s string) string {
	_, body := r.Get(t, "/metrics")
	var out []string
	for _, line := range strings.Split(body, "\n") {
		if strings.Contains(line, s) && !strings.HasPrefix(line, "#") {
			out = append(out, line)
		}
	}
	return strings.Join(out, "\n")
}

// TestRollingRestart restarts the three brokers one after the other under
// load, each stopped cleanly (SIGTERM) and back before the next.
func TestRollingRestart(t *testing.T) {
	o := newOutbox(t, "rolling")
	startRelay(t, o.args()...)
	l := startLoad(o, 30, 3*time.Millisecond)
	topic := o.name + ".order"
	consume(t, topic, 200, time.Minute)
	began := time.Now()
	for node := 1; node <= 3; node++ {
		down(t, node, true)
		time.Sleep(2 * time.Second)
		up(t, node)
		time.Sleep(3 * time.Second) // it catches up and rejoins the in-sync replicas
	}
	recovery := waitFlowing(t, o, time.Minute)
	n := l.finish()
	msgs := consume(t, topic, n, 2*time.Minute)
	dups := check(t, l, msgs)
	t.Logf("rolling restart of 3 brokers in %s under load: %d events, %d duplicates; caught up %s after the last",
		time.Since(began).Round(time.Second), n, dups, recovery.Round(100*time.Millisecond))
}

// TestNetworkCut blackholes the relay's way to the cluster (the proxies the
// brokers advertise), then restores it.
func TestNetworkCut(t *testing.T) {
	o := newOutbox(t, "netcut")
	startRelay(t, o.args()...)
	l := startLoad(o, 20, 5*time.Millisecond)
	topic := o.name + ".order"
	consume(t, topic, 200, time.Minute)
	cut := 0
	for _, p := range proxies {
		cut += p.Blackhole()
	}
	time.Sleep(time.Second)
	first := o.CurrentLSN(t)
	time.Sleep(15 * time.Second)
	if got := o.Confirmed(t); got > first {
		t.Errorf("slot confirmed %s during the cut, past %s", got, first)
	}
	for _, p := range proxies {
		p.Restore()
	}
	recovery := waitFlowing(t, o, 2*time.Minute)
	n := l.finish()
	msgs := consume(t, topic, n, 2*time.Minute)
	dups := check(t, l, msgs)
	t.Logf("network to the cluster blackholed for 16 s (%d connections): slot held; every row published %s after the restore; %d events, %d duplicates",
		cut, recovery.Round(100*time.Millisecond), n, dups)
}

// TestProvisioningOnCluster: with auto-creation off, the relay creates the
// event and dead-letter topics with the replication and configs asked for.
func TestProvisioningOnCluster(t *testing.T) {
	o := newOutbox(t, "provision")
	startRelay(t, o.args("--topic-partitions", "6", "--topic-config", "retention.ms=86400000")...)
	if _, err := o.db.Exec(context.Background(), "INSERT INTO "+o.name+" (aggregate_type, aggregate_id, event_type, payload) VALUES ('order', 'k', 'e', '{\"n\": 0}')"); err != nil {
		t.Fatal(err)
	}
	consume(t, o.name+".order", 1, time.Minute)
	client := &kafka.Client{Addr: kafka.TCP(strings.Split(brokers, ",")...), Timeout: 10 * time.Second}
	for _, topic := range []string{o.name + ".order", o.name + ".dlq"} {
		md, err := client.Metadata(context.Background(), &kafka.MetadataRequest{Topics: []string{topic}})
		if err != nil || len(md.Topics) != 1 || md.Topics[0].Error != nil {
			t.Fatalf("%s: %v", topic, err)
		}
		parts := md.Topics[0].Partitions
		res, err := client.DescribeConfigs(context.Background(), &kafka.DescribeConfigsRequest{Resources: []kafka.DescribeConfigRequestResource{{
			ResourceType: kafka.ResourceTypeTopic, ResourceName: topic, ConfigNames: []string{"min.insync.replicas", "retention.ms"}}}})
		if err != nil || len(res.Resources) != 1 {
			t.Fatalf("configs of %s: %v", topic, err)
		}
		cfg := map[string]string{}
		for _, e := range res.Resources[0].ConfigEntries {
			cfg[e.ConfigName] = e.ConfigValue
		}
		if len(parts) != 6 || len(parts[0].Replicas) != 3 || cfg["min.insync.replicas"] != "2" || cfg["retention.ms"] != "86400000" {
			t.Errorf("%s: %d partitions, replication %d, %v; want 6, 3, min.insync.replicas=2, retention.ms=86400000", topic, len(parts), len(parts[0].Replicas), cfg)
		}
	}
}
