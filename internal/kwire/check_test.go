package kwire

import (
	"bytes"
	"errors"
	"testing"
	"time"

	"github.com/segmentio/kafka-go/compress"
	"github.com/segmentio/kafka-go/protocol"
	"github.com/segmentio/kafka-go/protocol/apiversions"
	"github.com/segmentio/kafka-go/protocol/endtxn"
	"github.com/segmentio/kafka-go/protocol/fetch"
	"github.com/segmentio/kafka-go/protocol/initproducerid"
	"github.com/segmentio/kafka-go/protocol/metadata"
	"github.com/segmentio/kafka-go/protocol/produce"
)

type answer struct {
	name    string
	version int16
	msg     protocol.Message
}

func records(t *testing.T, c compress.Compression) protocol.RecordSet {
	t.Helper()
	var rs []protocol.Record
	for _, v := range []string{"a", "bb", "ccc"} {
		rs = append(rs, protocol.Record{Offset: int64(len(v)), Time: time.Unix(1, 0), Key: protocol.NewBytes([]byte("k")),
			Value: protocol.NewBytes([]byte(v)), Headers: []protocol.Header{{Key: "h", Value: []byte(v)}}})
	}
	return protocol.RecordSet{Version: 2, Attributes: protocol.Attributes(c), Records: protocol.NewRecordReader(rs...)}
}

func fetchAnswer(t *testing.T, c compress.Compression) *fetch.Response {
	return &fetch.Response{Topics: []fetch.ResponseTopic{{Topic: "t", Partitions: []fetch.ResponsePartition{{
		HighWatermark: 3, AbortedTransactions: []fetch.ResponseTransaction{{ProducerID: 1}}, RecordSet: records(t, c)}}}}}
}

func encode(t *testing.T, a answer) []byte {
	t.Helper()
	var b bytes.Buffer
	if err := protocol.WriteResponse(&b, a.version, 7, a.msg); err != nil {
		t.Fatalf("%s: %v", a.name, err)
	}
	return b.Bytes()
}

// TestCheckPassesWellFormedAnswers: the answers kafka-go itself writes, of
// every shape the relay reads (flexible or not, tagged fields, record
// batches compressed each way), pass.
func TestCheckPassesWellFormedAnswers(t *testing.T) {
	answers := []answer{
		{"api versions", 0, &apiversions.Response{ApiKeys: []apiversions.ApiKeyResponse{{ApiKey: 0, MaxVersion: 9}}}},
		{"metadata v1", 1, &metadata.Response{Brokers: []metadata.ResponseBroker{{Host: "h", Port: 9092}},
			Topics: []metadata.ResponseTopic{{Name: "t", Partitions: []metadata.ResponsePartition{{ReplicaNodes: []int32{0, 1}}}}}}},
		{"produce v8", 8, &produce.Response{Topics: []produce.ResponseTopic{{Topic: "t", Partitions: []produce.ResponsePartition{{BaseOffset: 4}}}}}},
		{"init producer id v4", 4, &initproducerid.Response{ProducerID: 9}},
		{"end txn v1", 1, &endtxn.Response{}},
		{"fetch v11", 11, fetchAnswer(t, 0)},
		{"fetch v4", 4, fetchAnswer(t, 0)},
	}
	for _, c := range []compress.Compression{compress.Gzip, compress.Snappy, compress.Lz4, compress.Zstd} {
		answers = append(answers, answer{"fetch v11, " + c.String(), 11, fetchAnswer(t, c)})
	}
	for _, a := range answers {
		t.Run(a.name, func(t *testing.T) {
			if err := Check(a.msg.ApiKey(), a.version, encode(t, a)); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// TestCheckRefusesWhatKafkaGoCannotDecodeSafely: every cut of a
// well-formed answer, and a record batch that inflates past its bound,
// are malformed (a cut one may pass only where kafka-go skips what is
// missing: the tail of a record set).
func TestCheckRefusesWhatKafkaGoCannotDecodeSafely(t *testing.T) {
	full := encode(t, answer{"fetch", 11, fetchAnswer(t, compress.Gzip)})
	for n := 4; n < len(full); n++ {
		cut := append([]byte(nil), full[:n]...)
		cut[3] = byte(n - 4) // the frame's size says it is whole
		cut[2] = byte((n - 4) >> 8)
		if err := Check(protocol.Fetch, 11, cut); err == nil {
			t.Errorf("a fetch answer cut to %d of %d bytes passed", n, len(full))
		} else if !errors.As(err, new(*MalformedError)) {
			t.Errorf("cut to %d: %v is no *MalformedError", n, err)
		}
	}
	saved := maxInflated
	maxInflated = 10
	defer func() { maxInflated = saved }()
	err := Check(protocol.Fetch, 11, full)
	if err == nil {
		t.Fatal("a batch inflating past the bound passed")
	}
	t.Log(err)
}
