package producer

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"math/rand/v2"
	"reflect"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"
	"github.com/segmentio/kafka-go/compress"
	"github.com/segmentio/kafka-go/protocol"
	"github.com/twmb/franz-go/pkg/kmsg"
)

var codecs = []compress.Compression{0, compress.Gzip, compress.Snappy, compress.Lz4, compress.Zstd}

// decoded is a batch read back by kafka-go's decoder.
type decoded struct {
	batch   *protocol.RecordBatch
	records []Record
}

// decode reads b (one batch, no size prefix) with kafka-go's decoder.
func decode(t *testing.T, b []byte) decoded {
	t.Helper()
	framed := binary.BigEndian.AppendUint32(nil, uint32(len(b)))
	framed = append(framed, b...)
	var rs protocol.RecordSet
	if _, err := rs.ReadFrom(bytes.NewReader(framed)); err != nil {
		t.Fatalf("kafka-go cannot read the batch: %v", err)
	}
	stream, ok := rs.Records.(*protocol.RecordStream)
	if !ok || len(stream.Records) != 1 {
		t.Fatalf("want one batch, got %T", rs.Records)
	}
	batch, ok := stream.Records[0].(*protocol.RecordBatch)
	if !ok {
		t.Fatalf("want a record batch, got %T", stream.Records[0])
	}
	var out decoded
	out.batch = batch
	for {
		r, err := batch.ReadRecord()
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			t.Fatalf("read record: %v", err)
		}
		key, err := protocol.ReadAll(r.Key)
		if err != nil {
			t.Fatal(err)
		}
		value, err := protocol.ReadAll(r.Value)
		if err != nil {
			t.Fatal(err)
		}
		if r.Offset != int64(len(out.records)) {
			t.Fatalf("record %d has offset %d", len(out.records), r.Offset)
		}
		out.records = append(out.records, Record{Key: key, Value: value, Headers: r.Headers, Time: r.Time})
	}
}

func sameRecord(a, b Record) error {
	if (a.Key == nil) != (b.Key == nil) || !bytes.Equal(a.Key, b.Key) {
		return fmt.Errorf("key %q (nil %t), want %q (nil %t)", b.Key, b.Key == nil, a.Key, a.Key == nil)
	}
	if (a.Value == nil) != (b.Value == nil) || !bytes.Equal(a.Value, b.Value) {
		return fmt.Errorf("value %q (nil %t), want %q (nil %t)", b.Value, b.Value == nil, a.Value, a.Value == nil)
	}
	if len(a.Headers) != len(b.Headers) {
		return fmt.Errorf("%d headers, want %d", len(b.Headers), len(a.Headers))
	}
	for i := range a.Headers {
		if a.Headers[i].Key != b.Headers[i].Key || !bytes.Equal(a.Headers[i].Value, b.Headers[i].Value) {
			return fmt.Errorf("header %d is %v, want %v", i, b.Headers[i], a.Headers[i])
		}
	}
	if !a.Time.IsZero() && a.Time.UnixMilli() != b.Time.UnixMilli() {
		return fmt.Errorf("time %v, want %v", b.Time, a.Time)
	}
	return nil
}

func TestRoundTrip(t *testing.T) {
	t0 := time.UnixMilli(1_700_000_000_123)
	many := make([]Record, 2000)
	for i := range many {
		many[i] = Record{Key: fmt.Appendf(nil, "key-%d", i%17), Value: bytes.Repeat([]byte{byte(i)}, i%300),
			Time: t0.Add(time.Duration(i%50-25) * time.Millisecond)}
	}
	cases := []struct {
		name    string
		records []Record
	}{
		{"one", []Record{{Key: []byte("k"), Value: []byte("v"), Time: t0}}},
		{"null key and value", []Record{{Time: t0}}},
		{"empty key and value", []Record{{Key: []byte{}, Value: []byte{}, Time: t0}}},
		{"null value after a value", []Record{{Key: []byte("a"), Value: []byte("x"), Time: t0}, {Key: []byte("a"), Time: t0}}},
		{"headers", []Record{{Key: []byte("k"), Value: []byte("v"), Time: t0, Headers: []kafka.Header{
			{Key: "ce_id", Value: []byte("1")}, {Key: "", Value: []byte("no name")}, {Key: "tombstone"}}}}},
		{"time earlier than the first", []Record{{Value: []byte("a"), Time: t0}, {Value: []byte("b"), Time: t0.Add(-time.Hour)}}},
		{"many", many},
	}
	for _, c := range cases {
		for _, codec := range codecs {
			t.Run(fmt.Sprintf("%s/%s", c.name, codec), func(t *testing.T) {
				h := BatchHeader{ProducerID: 42, ProducerEpoch: 7, BaseSequence: 1000}
				b, err := AppendBatch(nil, h, c.records, codec)
				if err != nil {
					t.Fatal(err)
				}
				got := decode(t, b)
				if got.batch.ProducerID != 42 || got.batch.ProducerEpoch != 7 || got.batch.BaseSequence != 1000 {
					t.Errorf("producer fields %d/%d/%d, want 42/7/1000", got.batch.ProducerID, got.batch.ProducerEpoch, got.batch.BaseSequence)
				}
				if got.batch.Attributes.Compression() != codec || got.batch.Attributes.Transactional() {
					t.Errorf("attributes %v, want %v", got.batch.Attributes, codec)
				}
				if len(got.records) != len(c.records) {
					t.Fatalf("%d records, want %d", len(got.records), len(c.records))
				}
				for i := range c.records {
					if err := sameRecord(c.records[i], got.records[i]); err != nil {
						t.Fatalf("record %d: %v", i, err)
					}
				}
				checkHeader(t, b, h, c.records)
			})
		}
	}
}

// checkHeader reads b's header with franz-go's kmsg, an independent
// decoder, and checks every field and the CRC.
func checkHeader(t *testing.T, b []byte, h BatchHeader, records []Record) {
	t.Helper()
	var kb kmsg.RecordBatch
	if err := kb.ReadFrom(b); err != nil {
		t.Fatalf("kmsg cannot read the batch: %v", err)
	}
	minT, maxT := records[0].Time.UnixMilli(), records[0].Time.UnixMilli()
	for _, r := range records {
		maxT = max(maxT, r.Time.UnixMilli())
		minT = min(minT, r.Time.UnixMilli())
	}
	want := kmsg.RecordBatch{FirstOffset: 0, Length: int32(len(b) - 12), PartitionLeaderEpoch: -1, Magic: 2,
		CRC: int32(crc32.Checksum(b[21:], crc32.MakeTable(crc32.Castagnoli))), Attributes: kb.Attributes,
		LastOffsetDelta: int32(len(records) - 1), FirstTimestamp: records[0].Time.UnixMilli(), MaxTimestamp: maxT,
		ProducerID: h.ProducerID, ProducerEpoch: h.ProducerEpoch, FirstSequence: h.BaseSequence, NumRecords: int32(len(records))}
	kb.Records = nil
	if !reflect.DeepEqual(kb, want) {
		t.Errorf("header\n got %+v\nwant %+v", kb, want)
	}
}

func TestTransactionalAndNoProducer(t *testing.T) {
	r := []Record{{Value: []byte("v")}}
	b, err := AppendBatch(nil, BatchHeader{ProducerID: 1, Transactional: true}, r, compress.Gzip)
	if err != nil {
		t.Fatal(err)
	}
	if a := decode(t, b).batch.Attributes; !a.Transactional() || a.Compression() != compress.Gzip {
		t.Errorf("attributes %v, want gzip+transactional", a)
	}
	b, err = AppendBatch(nil, NoProducer, r, 0)
	if err != nil {
		t.Fatal(err)
	}
	if got := decode(t, b).batch; got.ProducerID != -1 || got.ProducerEpoch != -1 || got.BaseSequence != -1 {
		t.Errorf("producer fields %d/%d/%d, want -1/-1/-1", got.ProducerID, got.ProducerEpoch, got.BaseSequence)
	}
	if ts := decode(t, b).records[0].Time; time.Since(ts) > time.Minute || ts.After(time.Now()) {
		t.Errorf("a zero time is encoded as %v, want now", ts)
	}
}

func TestAppendKeepsDst(t *testing.T) {
	prefix := []byte("prefix")
	b, err := AppendBatch(prefix, NoProducer, []Record{{Value: []byte("v")}}, compress.Snappy)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.HasPrefix(b, []byte("prefix")) {
		t.Fatalf("dst's bytes were overwritten: %q", b[:6])
	}
	decode(t, b[len(prefix):])
	if _, err := AppendBatch(nil, NoProducer, nil, 0); !errors.Is(err, ErrNoRecords) {
		t.Errorf("no records: err %v, want ErrNoRecords", err)
	}
}

// A corrupted byte anywhere past the CRC field is caught by the decoder.
func TestCRCCoversTheBatch(t *testing.T) {
	b, err := AppendBatch(nil, BatchHeader{ProducerID: 3}, []Record{{Key: []byte("k"), Value: []byte("value")}}, 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, at := range []int{attributesOffset + 1, 45, headerSize - 1, len(b) - 1} {
		bad := bytes.Clone(b)
		bad[at] ^= 0x40
		if crc32.Checksum(bad[attributesOffset:], castagnoli) == binary.BigEndian.Uint32(bad[crcOffset:]) {
			t.Errorf("flipping byte %d leaves the CRC valid", at)
		}
	}
}

func benchRecords() []Record {
	records := make([]Record, 100)
	t0 := time.Now()
	for i := range records {
		v := make([]byte, 260)
		for j := range v {
			v[j] = "abcdefghijklmnopqrstuvwxyz{}:,\""[rand.N(31)]
		}
		records[i] = Record{Key: fmt.Appendf(nil, "aggregate-%06d", i), Value: v, Time: t0,
			Headers: []kafka.Header{{Key: "event_type", Value: []byte("order.created")}}}
	}
	return records
}

// BenchmarkAppendBatch encodes 100 records of ~300 bytes.
func BenchmarkAppendBatch(b *testing.B) {
	records := benchRecords()
	for _, codec := range []compress.Compression{0, compress.Lz4, compress.Zstd} {
		b.Run(fmt.Sprint("codec=", codec), func(b *testing.B) {
			b.ReportAllocs()
			var buf []byte
			for b.Loop() {
				var err error
				if buf, err = AppendBatch(buf[:0], BatchHeader{ProducerID: 1}, records, codec); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkKafkaGo encodes the same records with kafka-go's encoder.
func BenchmarkKafkaGo(b *testing.B) {
	records := benchRecords()
	kr := make([]kafka.Record, len(records))
	for _, codec := range []compress.Compression{0, compress.Lz4, compress.Zstd} {
		b.Run(fmt.Sprint("codec=", codec), func(b *testing.B) {
			b.ReportAllocs()
			var buf bytes.Buffer
			for b.Loop() {
				for i, r := range records {
					kr[i] = kafka.Record{Key: kafka.NewBytes(r.Key), Value: kafka.NewBytes(r.Value), Headers: r.Headers, Time: r.Time}
				}
				buf.Reset()
				rs := protocol.RecordSet{Version: 2, Attributes: protocol.Attributes(codec), Records: kafka.NewRecordReader(kr...)}
				if _, err := rs.WriteTo(&buf); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
