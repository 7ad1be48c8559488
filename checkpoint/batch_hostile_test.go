package checkpoint

import (
	"bytes"
	"compress/gzip"
	"encoding/binary"
	"hash/crc32"
	"testing"
)

// TestBatchRefusesAnOversizedCompressedRecord: a compressed batch whose
// CRC holds (it covers the compressed bytes only) may still inflate to a
// record claiming any length. Reading it is an error, not an allocation of
// that length: fetch runs on kafka-go's connection goroutine, where a
// panic ends the process.
func TestBatchRefusesAnOversizedCompressedRecord(t *testing.T) {
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

	s := &scan{key: []byte(keyA), from: 0, end: 10, out: &scanned{}, aborted: newAbortedIndex(nil)}
	var err error
	func() {
		defer func() {
			if p := recover(); p != nil {
				t.Fatalf("a record claiming %d bytes: panic %v; want an error", int64(1<<62), p)
			}
		}()
		err = s.batch(0, b)
	}()
	if err == nil {
		t.Fatal("a record claiming more bytes than its batch inflates to was read")
	}
}
