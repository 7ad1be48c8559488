package integration

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"
)

// TestCheckExactlyOnce walks an operator through exactly-once on the
// package's broker (one Kafka 3.9 node, no authorizer): check reports what
// transactions need, and a missing checkpoint topic; a transaction timeout
// above the broker's maximum fails; setup --print says it would create the
// topic, setup creates it compacted, and check then finds it, and the
// transaction state log once a transactional id was taken. At-least-once
// prints none of these lines.
func TestCheckExactlyOnce(t *testing.T) {
	o := newOutbox(t, "checkeo", defaultColumns)
	ckpt := "ckpt_" + o.name // not under the event topics' prefix
	base := o.args()         // at least once, even in make test-exactly, whose --delivery this drops
	for _, flag := range []string{"--status-interval", "--http-addr", "--delivery", "--checkpoint-topic"} {
		base = without(base, flag)
	}
	exactly := append(append([]string(nil), base...), "--delivery", "exactly-once", "--checkpoint-topic", ckpt)
	assert := func(what, out string, wants ...string) {
		t.Helper()
		for _, want := range wants {
			if !strings.Contains(out, want) {
				t.Errorf("%s lacks %q", what, want)
			}
		}
	}

	code, out := runOnce(t, append([]string{"check"}, exactly...)...)
	t.Logf("check --delivery exactly-once (exit %d):\n%s", code, out)
	assert("check", out,
		"[ok  ] transaction support: FindCoordinator v", "InitProducerId v", "on every broker (1)",
		"[ok  ] transaction state log: __transaction_state ", // exists when another test ran exactly-once first
		"[ok  ] transaction timeout: --transaction-timeout 1m0s, within the brokers' transaction.max.timeout.ms 900000 (15m0s)",
		"[ok  ] checkpoint topic: "+ckpt+" does not exist yet; run (or setup) creates it: 1 partition, compacted",
		"[ok  ] transactional id ACLs: the cluster has no authorizer: any client may use transactional id outbox-cdc.",
		"all ")
	if code != 0 {
		t.Errorf("check: exit %d, want 0", code)
	}

	code, out = runOnce(t, append([]string{"check"}, append(exactly, "--transaction-timeout", "20m")...)...)
	t.Logf("check --transaction-timeout 20m (exit %d):\n%s", code, out)
	assert("check with a 20m timeout", out,
		"[FAIL] transaction timeout: --transaction-timeout 20m0s exceeds the brokers' transaction.max.timeout.ms 900000 (15m0s): InitProducerId is refused with INVALID_TRANSACTION_TIMEOUT",
		"fix: --transaction-timeout 15m0s or less")
	if code != 1 {
		t.Errorf("check with a 20m timeout: exit %d, want 1", code)
	}

	setup := []string{"setup", "--postgres-url", pg.URL, "--kafka-brokers", broker.Brokers, "--table", "public." + o.name,
		"--publication", o.name, "--slot", o.name, "--delivery", "exactly-once", "--checkpoint-topic", ckpt}
	code, out = runOnce(t, append(setup, "--print")...)
	t.Logf("setup --print (exit %d):\n%s", code, out)
	assert("setup --print", out, "-- kafka: create topic "+ckpt+" (partitions 1, replication factor the broker's default, cleanup.policy=compact) unless it exists")
	code, out = runOnce(t, setup...)
	t.Logf("setup (exit %d):\n%s", code, out)
	assert("setup", out, "done: created topic "+ckpt+" (partitions 1")
	if code != 0 {
		t.Errorf("setup: exit %d, want 0", code)
	}

	code, out = runOnce(t, append([]string{"check"}, exactly...)...)
	t.Logf("check after setup (exit %d):\n%s", code, out)
	assert("check after setup", out, "[ok  ] checkpoint topic: "+ckpt+" exists, compacted, 1 partition(s), replication factor 1")

	takeTransactionalID(t, "probe-"+o.name) // creates __transaction_state, if no test did
	_, out = runOnce(t, append([]string{"check"}, exactly...)...)
	assert("check after a transactional id was taken", out,
		"[ok  ] transaction state log: __transaction_state exists, 50 partitions, replication factor 1, transaction.state.log.min.isr 1")

	_, out = runOnce(t, append([]string{"check"}, base...)...)
	if strings.Contains(out, "transaction support") || strings.Contains(out, "checkpoint topic") {
		t.Errorf("check at-least-once prints exactly-once's items:\n%s", out)
	}
}

// takeTransactionalID takes id on the package's broker (InitProducerId),
// retrying while the broker creates its transaction state log.
func takeTransactionalID(t *testing.T, id string) {
	t.Helper()
	transport := &kafka.Transport{}
	defer transport.CloseIdleConnections()
	client := &kafka.Client{Addr: kafka.TCP(broker.Brokers), Timeout: 10 * time.Second, Transport: transport}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	for {
		res, err := client.InitProducerID(ctx, &kafka.InitProducerIDRequest{TransactionalID: id, TransactionTimeoutMs: 60000})
		if err == nil {
			err = res.Error
		}
		if err == nil {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("take transactional id %s: %v", id, err)
		case <-time.After(200 * time.Millisecond):
		}
	}
}
