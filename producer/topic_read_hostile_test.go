package producer

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/binary"
	"hash/crc32"
	"runtime"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// recordBytes is a record as a batch holds it, its length first; headers
// is the headers' count and bytes, as written.
func recordBytes(offsetDelta int64, key, value, headers []byte) []byte {
	var body []byte
	body = append(body, 0)              // attributes
	body = binary.AppendVarint(body, 0) // timestamp delta
	body = binary.AppendVarint(body, offsetDelta)
	for _, f := range [][]byte{key, value} {
		body = binary.AppendVarint(body, int64(len(f)))
		body = append(body, f...)
	}
	body = append(body, headers...)
	return append(binary.AppendVarint(nil, int64(len(body))), body...)
}

// batchBytes is a batch at base offset 0 of count records whose bytes are
// records (gzipped when zip), with a CRC that holds.
func batchBytes(count int32, records []byte, zip bool) []byte {
	b := make([]byte, batchHeader)
	b[magicAt] = 2
	binary.BigEndian.PutUint32(b[11:15], uint32(max(count-1, 0))) // last offset delta
	binary.BigEndian.PutUint64(b[31:39], ^uint64(0))              // producer id -1
	binary.BigEndian.PutUint32(b[45:49], uint32(count))
	if zip {
		binary.BigEndian.PutUint16(b[9:11], 1)
		var zipped bytes.Buffer
		zw := gzip.NewWriter(&zipped)
		zw.Write(records)
		zw.Close()
		records = zipped.Bytes()
	}
	b = append(b, records...)
	binary.BigEndian.PutUint32(b[5:9], crc32.Checksum(b[9:], castagnoli))
	return append(binary.BigEndian.AppendUint32(binary.BigEndian.AppendUint64(nil, 0), uint32(len(b))), b...)
}

// answerFetches has cluster answer every fetch of t/0 with batch.
func answerFetches(cluster *kfake.Cluster, batch []byte) {
	cluster.ControlKey(int16(kmsg.Fetch), func(req kmsg.Request) (kmsg.Response, error, bool) {
		cluster.KeepControl()
		fr := req.(*kmsg.FetchRequest)
		res := fr.ResponseKind().(*kmsg.FetchResponse)
		rt := kmsg.NewFetchResponseTopic()
		rt.Topic = fr.Topics[0].Topic
		rp := kmsg.NewFetchResponseTopicPartition()
		rp.Partition, rp.HighWatermark, rp.LastStableOffset, rp.RecordBatches = 0, 1<<20, 1<<20, batch
		rt.Partitions = append(rt.Partitions, rp)
		res.Topics = append(res.Topics, rt)
		return res, nil, true
	})
}

// TestReadTopicRefusesWhatItCannotHold: a broker's answer whose CRC holds
// may still claim lengths and counts its bytes do not have, or inflate to
// far more than it weighs. A topic read of it fails, or keeps what it asked
// for, without allocating what the answer claims: it is decoded on
// kafka-go's connection goroutine, where a panic or an out-of-memory ends
// the process.
func TestReadTopicRefusesWhatItCannotHold(t *testing.T) {
	manyEmpty := make([]byte, 0, 200000*8)
	for i := range 200000 {
		manyEmpty = append(manyEmpty, recordBytes(int64(i), nil, nil, []byte{0})...)
	}
	manyHeaders := binary.AppendVarint(nil, 1<<20)
	for range 1 << 20 {
		manyHeaders = append(manyHeaders, 0, 0) // an empty key and value
	}
	for _, tt := range []struct {
		name    string
		batch   []byte
		fails   bool
		atMost  int // records kept, when it does not fail
		maxHeap uint64
	}{
		{"a compressed record claiming 2^62 bytes", batchBytes(1, append(binary.AppendVarint(nil, 1<<62), "short"...), true), true, 0, 8 << 20},
		{"a compressed record claiming 90 MiB, holding 5 bytes", batchBytes(1, append(binary.AppendVarint(nil, 90<<20), "short"...), true), true, 0, 8 << 20},
		{"a record claiming 2^40 headers", batchBytes(1, recordBytes(0, []byte("k"), nil, binary.AppendVarint(nil, 1<<40)), false), true, 0, 8 << 20},
		{"a header its record has no room for", batchBytes(1, recordBytes(0, nil, nil, append(binary.AppendVarint(nil, 1), 0x7e)), false), true, 0, 8 << 20},
		{"200,000 empty records inflating from a few KiB", batchBytes(200000, manyEmpty, true), false, 64 << 10 / messageCost, 32 << 20},
		{"a record of a million empty headers", batchBytes(1, recordBytes(0, nil, nil, manyHeaders), true), false, 1, 128 << 20},
	} {
		t.Run(tt.name, func(t *testing.T) {
			cluster, c := newTopicCluster(t, 1)
			answerFetches(cluster, tt.batch)
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			var before, after runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&before)
			msgs, next, err := c.ReadTopic(ctx, "t", 0, 0, 1<<20, 64<<10)
			runtime.ReadMemStats(&after)
			if tt.fails != (err != nil) || len(msgs) > tt.atMost || !tt.fails && (len(msgs) == 0 || next != int64(len(msgs))) {
				t.Errorf("read: %d messages, next %d, %v; want fails %v, at most %d kept, next past them", len(msgs), next, err, tt.fails, tt.atMost)
			}
			if grew := after.TotalAlloc - before.TotalAlloc; grew > tt.maxHeap {
				t.Errorf("read allocated %d MiB, want at most %d", grew>>20, tt.maxHeap>>20)
			}
			t.Log(len(msgs), err)
		})
	}
}
