package dlq

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestListFailsOnAPartitionLeftUnanswered: when the brokers' offsets
// answer for one partition of the dead-letter topic names another, a list
// fails naming the partition left out (once), instead of listing the
// other partitions and leaving its dead letters out.
func TestListFailsOnAPartitionLeftUnanswered(t *testing.T) {
	cluster, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(2, "dlq"))
	if err != nil {
		t.Fatal(err)
	}
	defer cluster.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cl, err := kgo.NewClient(kgo.SeedBrokers(cluster.ListenAddrs()...), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	for p := range int32(2) {
		if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "dlq", Partition: p, Value: []byte("{}")}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	cluster.ControlKey(int16(kmsg.ListOffsets), func(req kmsg.Request) (kmsg.Response, error, bool) {
		lr := req.(*kmsg.ListOffsetsRequest)
		if len(lr.Topics) != 1 || len(lr.Topics[0].Partitions) != 1 || lr.Topics[0].Partitions[0].Partition != 1 {
			return nil, nil, false
		}
		cluster.KeepControl()
		res := lr.ResponseKind().(*kmsg.ListOffsetsResponse)
		rt := kmsg.NewListOffsetsResponseTopic()
		rt.Topic = "dlq"
		rp := kmsg.NewListOffsetsResponseTopicPartition()
		rp.Partition, rp.Offset, rp.Timestamp = 0, 1, -1
		rt.Partitions = append(rt.Partitions, rp)
		res.Topics = append(res.Topics, rt)
		return res, nil, true
	})
	entries, err := List(ctx, Config{Brokers: cluster.ListenAddrs(), Topic: "dlq"}, Everything)
	const want = "dead-letter topic: offsets of dlq/1: not in the broker's answer"
	if err == nil || err.Error() != want {
		t.Errorf("list: %d entries, %v; want %q", len(entries), err, want)
	}
}
