package producer

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/binary"
	"hash/crc32"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestReadCheckpointRefusesAnOversizedCompressedRecord: a compressed batch
// whose CRC holds (it covers the compressed bytes only) may still inflate
// to a record claiming any length. Reading it is an error, not an
// allocation of that length: the fetch is decoded on kafka-go's connection
// goroutine, where a panic ends the process.
func TestReadCheckpointRefusesAnOversizedCompressedRecord(t *testing.T) {
	var inflated bytes.Buffer
	inflated.Write(binary.AppendVarint(nil, 1<<62)) // the record's length
	inflated.WriteString("short")
	var zipped bytes.Buffer
	zw := gzip.NewWriter(&zipped)
	zw.Write(inflated.Bytes())
	zw.Close()

	b := make([]byte, batchHeader, batchHeader+zipped.Len())
	b[magicAt] = 2
	binary.BigEndian.PutUint16(b[9:11], 1) // gzip
	binary.BigEndian.PutUint64(b[31:39], 7)
	binary.BigEndian.PutUint32(b[45:49], 1) // one record
	b = append(b, zipped.Bytes()...)
	binary.BigEndian.PutUint32(b[5:9], crc32.Checksum(b[9:], castagnoli))
	batch := binary.BigEndian.AppendUint32(binary.BigEndian.AppendUint64(nil, 0), uint32(len(b))) // base offset 0, length
	batch = append(batch, b...)

	cluster, cl := newCheckpointCluster(t, 1)
	newProducer(t, cluster, "a").txn(true, keyA, at(t, 10)) // a partition with records to read back
	cluster.ControlKey(int16(kmsg.Fetch), func(req kmsg.Request) (kmsg.Response, error, bool) {
		cluster.KeepControl()
		fr := req.(*kmsg.FetchRequest)
		res := fr.ResponseKind().(*kmsg.FetchResponse)
		rt := kmsg.NewFetchResponseTopic()
		rt.Topic = fr.Topics[0].Topic
		rp := kmsg.NewFetchResponseTopicPartition()
		rp.Partition, rp.HighWatermark, rp.LastStableOffset, rp.RecordBatches = 0, 2, 2, batch
		rt.Partitions = append(rt.Partitions, rp)
		res.Topics = append(res.Topics, rt)
		return res, nil, true
	})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, _, err := cl.ReadCheckpoint(ctx, ckptTopic, keyA); err == nil {
		t.Fatal("a record claiming more bytes than its batch inflates to was read")
	} else {
		t.Log(err)
	}
}
