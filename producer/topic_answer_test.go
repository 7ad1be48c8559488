package producer

import (
	"context"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// answerListOffsets has cluster answer every ListOffsets request asking
// for partition asked alone with rows of its own: (topic, partition) pairs,
// each with offset 5. Other requests are answered as the broker would.
func answerListOffsets(cluster *kfake.Cluster, asked int32, rows ...row) {
	cluster.ControlKey(int16(kmsg.ListOffsets), func(req kmsg.Request) (kmsg.Response, error, bool) {
		lr := req.(*kmsg.ListOffsetsRequest)
		if len(lr.Topics) != 1 || len(lr.Topics[0].Partitions) != 1 || lr.Topics[0].Partitions[0].Partition != asked {
			return nil, nil, false
		}
		cluster.KeepControl()
		res := lr.ResponseKind().(*kmsg.ListOffsetsResponse)
		for _, r := range rows {
			rt := kmsg.NewListOffsetsResponseTopic()
			rt.Topic = r.topic
			rp := kmsg.NewListOffsetsResponseTopicPartition()
			rp.Partition, rp.Offset, rp.Timestamp = r.partition, 5, -1
			rt.Partitions = append(rt.Partitions, rp)
			res.Topics = append(res.Topics, rt)
		}
		return res, nil, true
	})
}

type row = struct {
	topic     string
	partition int32
}

// TestOffsetsRefuseAnAnswerMissingAPartition: an offsets answer that
// leaves out a partition asked for (answering another partition, one
// never asked for, or another topic in its place) is an error naming the
// partition, not offsets of 0 that make a read of the topic skip it.
func TestOffsetsRefuseAnAnswerMissingAPartition(t *testing.T) {
	for _, tt := range []struct {
		name string
		rows []row
	}{
		{"partition 0 answered twice", []row{{"t", 0}}},
		{"a partition never asked for", []row{{"t", 7}}},
		{"another topic's partition", []row{{"u", 1}}},
		{"no partition", nil},
	} {
		t.Run(tt.name, func(t *testing.T) {
			cluster, c := newTopicCluster(t, 2)
			answerListOffsets(cluster, 1, tt.rows...)
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			offsets, err := c.Offsets(ctx, "t", []int32{0, 1})
			if err == nil || !strings.Contains(err.Error(), "t/1") {
				t.Errorf("offsets of t/0 and t/1: %v, %v; want an error naming t/1", offsets, err)
			}
		})
	}
}

// TestReadCheckpointRefusesAnAnswerMissingItsPartition: the checkpoint
// partition's offsets answered for another partition are an error, not an
// empty partition read as "no checkpoint" (which makes exactly-once trust
// the slot and send events again).
func TestReadCheckpointRefusesAnAnswerMissingItsPartition(t *testing.T) {
	for _, tt := range []struct {
		name string
		rows []row
	}{
		{"a partition never asked for", []row{{ckptTopic, 7}}},
		{"another topic's partition", []row{{"u", 0}}},
		{"no partition", nil},
	} {
		t.Run(tt.name, func(t *testing.T) {
			cluster, cl := newCheckpointCluster(t, 1)
			newProducer(t, cluster, "a").txn(true, keyA, at(t, 10))
			answerListOffsets(cluster, 0, tt.rows...)
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			got, found, err := cl.ReadCheckpoint(ctx, ckptTopic, keyA)
			if want := ckptTopic + "/0"; err == nil || !strings.Contains(err.Error(), want) {
				t.Errorf("read: %+v, found %v, %v; want an error naming %s", got, found, err, want)
			}
		})
	}
}

// TestOffsetsOfEachPartitionAskedFor: offsets asked for a partition twice
// are answered once; the answer holds each partition asked for, no other.
func TestOffsetsOfEachPartitionAskedFor(t *testing.T) {
	cluster, c := newTopicCluster(t, 3)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := franzClient(t, cluster).ProduceSync(ctx, &kgo.Record{Topic: "t", Partition: 2, Value: []byte("v")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	offsets, err := c.Offsets(ctx, "t", []int32{2, 0, 2})
	if err != nil || len(offsets) != 2 || offsets[0] != (Offsets{0, 0}) || offsets[2] != (Offsets{0, 1}) {
		t.Errorf("offsets of t/2, t/0, t/2: %v, %v; want 0: {0 0}, 2: {0 1}", offsets, err)
	}
}

// answerMetadata has cluster answer every metadata request (the
// transport's, which its cache serves Partitions from) with its one broker
// and a topic t of the given partition ids.
func answerMetadata(t *testing.T, cluster *kfake.Cluster, ids ...int32) {
	host, port, err := net.SplitHostPort(cluster.ListenAddrs()[0])
	if err != nil {
		t.Fatal(err)
	}
	portNum, err := strconv.Atoi(port)
	if err != nil {
		t.Fatal(err)
	}
	cluster.ControlKey(int16(kmsg.Metadata), func(req kmsg.Request) (kmsg.Response, error, bool) {
		cluster.KeepControl()
		res := req.(*kmsg.MetadataRequest).ResponseKind().(*kmsg.MetadataResponse)
		b := kmsg.NewMetadataResponseBroker()
		b.NodeID, b.Host, b.Port = 0, host, int32(portNum)
		res.Brokers = append(res.Brokers, b)
		rt := kmsg.NewMetadataResponseTopic()
		rt.Topic = kmsg.StringPtr("t")
		for _, id := range ids {
			rp := kmsg.NewMetadataResponseTopicPartition()
			rp.Partition = id
			rt.Partitions = append(rt.Partitions, rp)
		}
		res.Topics = append(res.Topics, rt)
		return res, nil, true
	})
}

// TestPartitionsRefuseAnAnswerNotOfATopic: a topic's partitions are 0 to
// n-1; a metadata answer naming one twice, or one past its count (so
// leaving another out), is an error, not partitions read twice or skipped.
func TestPartitionsRefuseAnAnswerNotOfATopic(t *testing.T) {
	for _, tt := range []struct {
		name string
		ids  []int32
		want string
	}{
		{"a partition twice", []int32{0, 0}, "t/0"},
		{"a gap", []int32{0, 2}, "t/2"},
		{"a negative id", []int32{-1}, "t/-1"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			cluster, c := newTopicCluster(t, 2)
			answerMetadata(t, cluster, tt.ids...)
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			parts, err := c.Partitions(ctx, "t")
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("partitions of t: %v, %v; want an error naming %s", parts, err, tt.want)
			}
		})
	}
}

// answerFetchesAs has cluster answer every fetch with batch, as topic and
// partition p whatever was asked.
func answerFetchesAs(cluster *kfake.Cluster, topic string, p int32, batch []byte) {
	cluster.ControlKey(int16(kmsg.Fetch), func(req kmsg.Request) (kmsg.Response, error, bool) {
		cluster.KeepControl()
		fr := req.(*kmsg.FetchRequest)
		res := fr.ResponseKind().(*kmsg.FetchResponse)
		rt := kmsg.NewFetchResponseTopic()
		rt.Topic = topic
		rp := kmsg.NewFetchResponseTopicPartition()
		rp.Partition, rp.HighWatermark, rp.LastStableOffset, rp.RecordBatches = p, 1<<20, 1<<20, batch
		rt.Partitions = append(rt.Partitions, rp)
		res.Topics = append(res.Topics, rt)
		return res, nil, true
	})
}

// TestReadTopicRefusesAnotherPartitionsRecords: a fetch answered with the
// records of another partition or topic than asked is an error (naming
// the partition read once), not those records read as the partition's.
func TestReadTopicRefusesAnotherPartitionsRecords(t *testing.T) {
	batch := batchBytes(1, recordBytes(0, []byte("k"), []byte("v"), []byte{0}), false)
	for _, tt := range []struct {
		name  string
		topic string
		p     int32
	}{
		{"another partition", "t", 1},
		{"another topic", "u", 0},
	} {
		t.Run(tt.name, func(t *testing.T) {
			cluster, c := newTopicCluster(t, 2)
			answerFetchesAs(cluster, tt.topic, tt.p, batch)
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			msgs, next, err := c.ReadTopic(ctx, "t", 0, 0, 1<<20, 64<<10)
			if err == nil || strings.Count(err.Error(), "t/0") != 1 {
				t.Errorf("read t/0 answered as %s/%d: %d messages, next %d, %v; want an error naming t/0 once", tt.topic, tt.p, len(msgs), next, err)
			}
		})
	}
}
