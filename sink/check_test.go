package sink

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/outbox-cdc/outbox-cdc/internal/checklist"
)

// TestCheckJudgesTheBrokersTopics: Check reports the cluster reached, a
// fixed template's topic that exists with its partitions, replication and
// min.insync.replicas, and a dead-letter topic that does not exist and
// will not be created as a failure with its fix; an address nobody
// answers on is a failed "kafka reachable" with a hint.
func TestCheckJudgesTheBrokersTopics(t *testing.T) {
	cluster, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(3, "orders"))
	if err != nil {
		t.Fatal(err)
	}
	defer cluster.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	items := Check(ctx, CheckConfig{Brokers: cluster.ListenAddrs(), Templates: []string{"orders"}, DeadLetterTopic: "dlq"})
	want := []struct {
		name   string
		status checklist.Status
		detail string
	}{
		{"kafka reachable", checklist.OK, "1 broker(s)"},
		{"event topic", checklist.OK, "orders exists, 3 partitions, replication factor 1, min.insync.replicas 1"},
		{"dead-letter topic", checklist.Fail, "dlq does not exist, and will not be created"},
	}
	if len(items) != len(want) {
		t.Fatalf("items %+v, want %d", items, len(want))
	}
	for i, w := range want {
		it := items[i]
		if it.Name != w.name || it.Status != w.status || !strings.Contains(it.Detail, w.detail) {
			t.Errorf("item %d: %+v, want %s %v containing %q", i, it, w.name, w.status, w.detail)
		}
	}
	if items[2].Fix == "" {
		t.Errorf("the missing dead-letter topic has no fix: %+v", items[2])
	}
	t.Logf("event topic: %s", items[1].Detail)

	closed := "127.0.0.1:1"
	items = Check(ctx, CheckConfig{Brokers: []string{closed}, Templates: []string{"orders"}})
	if len(items) != 1 || items[0].Name != "kafka reachable" || items[0].Status != checklist.Fail || items[0].Fix == "" {
		t.Errorf("unreachable: %+v, want one failed kafka reachable with a fix", items)
	}
}
