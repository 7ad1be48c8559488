package producer

import (
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"time"

	"github.com/segmentio/kafka-go"
	"github.com/segmentio/kafka-go/protocol"
	fetchAPI "github.com/segmentio/kafka-go/protocol/fetch"
)

// fetch sends one fetch of partition p at offset, of at most maxBytes of
// it (read_committed; read_uncommitted for a topic read, want.whole), and
// scans the answer for want's records as it arrives (see scan). kafka-go's
// own decoding cannot serve here: Client.Fetch drops the response's
// aborted transactions, and the transport decodes a whole
// response before handing it over, each batch in a 64 KiB page of its own,
// so that a fetch of one neighbour's small transactions costs some 150
// times its size in memory. This one goes through the client's transport
// all the same (its connections, TLS, SASL, the partition's leader), as a
// message that reads its own answer off the connection (kafka-go's
// protocol.RawExchanger): memory stays at one batch, whatever maxBytes.
func fetch(ctx context.Context, client *kafka.Client, topic string, p int, offset int64, maxBytes int32, want *scan) (*scanned, error) {
	if client.Timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, client.Timeout)
		defer cancel()
	}
	transport := client.Transport
	if transport == nil {
		transport = kafka.DefaultTransport
	}
	clientID := kafka.DefaultClientID
	if t, ok := transport.(*kafka.Transport); ok && t.ClientID != "" {
		clientID = t.ClientID
	}
	// The exchange runs on the transport's goroutine, and may still run
	// after ctx ends: it writes only into what it returns, and reads a copy
	// of want.
	isolation := kafka.ReadCommitted
	if want.whole {
		isolation = kafka.ReadUncommitted
	}
	ex := &exchange{clientID: clientID, want: *want, Request: &fetchAPI.Request{
		ReplicaID: -1, MaxWaitTime: int32(fetchWait / time.Millisecond), MinBytes: 1, MaxBytes: fetchResponseMaxBytes,
		IsolationLevel: int8(isolation), SessionID: -1, SessionEpoch: -1,
		Topics: []fetchAPI.RequestTopic{{Topic: topic, Partitions: []fetchAPI.RequestPartition{{
			Partition: int32(p), CurrentLeaderEpoch: -1, FetchOffset: offset, LogStartOffset: -1, PartitionMaxBytes: maxBytes,
		}}}},
	}}
	// The caller's error names the topic, partition and offset.
	m, err := transport.RoundTrip(ctx, client.Addr, ex)
	if err != nil {
		return nil, err
	}
	res, ok := m.(*scanned)
	if !ok {
		return nil, fmt.Errorf("unexpected fetch answer %T", m)
	}
	if res.errorCode != 0 {
		return nil, kafka.Error(res.errorCode)
	}
	return res, nil
}

// exchange is a fetch request that reads its own response. Its embedded
// request routes it to the partition's leader (protocol.BrokerMessage) and
// encodes it.
type exchange struct {
	*fetchAPI.Request
	clientID string
	version  int16 // negotiated with the broker, given to Required
	want     scan
}

// Required records the fetch version the connection negotiated; the
// exchange is always raw.
func (ex *exchange) Required(versions map[protocol.ApiKey]int16) bool {
	ex.version = versions[protocol.Fetch]
	return true
}

// Fetch versions the exchange reads: read_committed came in v4, and v12
// changed to the flexible encoding, which kafka-go (at most v11) never
// negotiates.
const (
	minFetchVersion = 4
	maxFetchVersion = 11
)

// RawExchange writes the request and reads its response whole: an error
// leaves the connection in the middle of a response, and the transport
// closes a connection after an error.
func (ex *exchange) RawExchange(rw io.ReadWriter) (protocol.Message, error) {
	if ex.version < minFetchVersion || ex.version > maxFetchVersion {
		return nil, fmt.Errorf("the broker offers fetch v%d; reading a topic needs v%d to v%d (Kafka 0.11 or newer)",
			ex.version, minFetchVersion, maxFetchVersion)
	}
	const correlationID = 1 // one request at a time on the connection
	if err := protocol.WriteRequest(rw, ex.version, correlationID, ex.clientID, ex.Request); err != nil {
		return nil, err
	}
	var head [8]byte
	if _, err := io.ReadFull(rw, head[:]); err != nil {
		return nil, err
	}
	size := int64(int32(binary.BigEndian.Uint32(head[:4]))) - 4
	if id := int32(binary.BigEndian.Uint32(head[4:])); id != correlationID || size < 0 {
		return nil, fmt.Errorf("fetch response: correlation id %d (want %d), size %d", id, correlationID, size)
	}
	w := &wire{r: &io.LimitedReader{R: rw, N: size}}
	res, err := ex.read(w)
	if err == nil {
		err = w.err
	}
	if err != nil {
		return nil, fmt.Errorf("fetch response: %w", err)
	}
	if _, err := io.Copy(io.Discard, w.r); err != nil { // fields after the one partition
		return nil, fmt.Errorf("fetch response: %w", err)
	}
	return res, nil
}

// read reads a fetch response v4 to v11 for one partition (Kafka's
// FetchResponse.json), scanning its records as they come.
func (ex *exchange) read(w *wire) (*scanned, error) {
	res := &scanned{}
	w.int32() // throttle time
	if ex.version >= 7 {
		res.errorCode = w.int16()
		w.int32() // session id
	}
	if topics := w.int32(); w.err == nil && topics != 1 {
		return nil, fmt.Errorf("%d topics in the answer, want 1", topics)
	}
	asked := ex.Request.Topics[0]
	name := make([]byte, max(w.int16(), 0)) // at most 32 KiB
	w.read(name)
	if w.err == nil && string(name) != asked.Topic {
		return nil, fmt.Errorf("an answer for topic %q, asked for %q", name, asked.Topic)
	}
	if partitions := w.int32(); w.err == nil && partitions != 1 {
		return nil, fmt.Errorf("%d partitions in the answer, want 1", partitions)
	}
	if p := w.int32(); w.err == nil && p != asked.Partitions[0].Partition {
		return nil, fmt.Errorf("an answer for partition %d, asked for %d", p, asked.Partitions[0].Partition)
	}
	if code := w.int16(); code != 0 && res.errorCode == 0 {
		res.errorCode = code
	}
	w.int64() // high watermark
	res.lso = w.int64()
	if ex.version >= 5 {
		w.int64() // log start offset
	}
	n := w.int32()
	if w.err == nil && (n < -1 || int64(n)*16 > w.r.N) {
		return nil, fmt.Errorf("%d aborted transactions in the answer", n)
	}
	aborted := make([]abortedTxn, max(n, 0))
	for i := range aborted {
		aborted[i] = abortedTxn{producer: w.int64(), first: w.int64()}
	}
	if ex.version >= 11 {
		w.int32() // preferred read replica
	}
	size := int64(w.int32())
	if w.err != nil || res.errorCode != 0 || size <= 0 {
		return res, w.err
	}
	if size > w.r.N {
		return nil, fmt.Errorf("records of %d bytes in %d", size, w.r.N)
	}
	sc := ex.want
	sc.out, sc.aborted = res, newAbortedIndex(aborted)
	return res, sc.records(w, size)
}

// wire reads big-endian fields of one response; its first error sticks,
// and later reads return zeros.
type wire struct {
	r   *io.LimitedReader
	buf [8]byte
	err error
}

func (w *wire) fill(n int) []byte {
	if w.err != nil {
		clear(w.buf[:])
		return w.buf[:n]
	}
	if _, err := io.ReadFull(w.r, w.buf[:n]); err != nil {
		w.err = fmt.Errorf("truncated: %w", err)
		clear(w.buf[:])
	}
	return w.buf[:n]
}

func (w *wire) int16() int16 { return int16(binary.BigEndian.Uint16(w.fill(2))) }
func (w *wire) int32() int32 { return int32(binary.BigEndian.Uint32(w.fill(4))) }
func (w *wire) int64() int64 { return int64(binary.BigEndian.Uint64(w.fill(8))) }

// read fills b whole.
func (w *wire) read(b []byte) {
	if w.err != nil {
		return
	}
	if _, err := io.ReadFull(w.r, b); err != nil {
		w.err = fmt.Errorf("truncated: %w", err)
	}
}

// skip discards n bytes (none for a negative n: a null string).
func (w *wire) skip(n int64) {
	if w.err != nil || n <= 0 {
		return
	}
	if _, err := io.CopyN(io.Discard, w.r, n); err != nil {
		w.err = fmt.Errorf("truncated: %w", err)
	}
}

// scanned is what one fetch found: the exchange's response message.
type scanned struct {
	errorCode int16
	lso       int64  // the partition's last stable offset
	batches   int    // batches in the answer: none means nothing stable at the offset yet
	next      int64  // one past the last offset of the last batch
	last      []byte // the value of the newest committed record under the key; nil for a tombstone
	seen      bool   // a committed record under the key was read

	// A topic read's (scan.whole): the records kept, their bytes, and
	// whether it kept all it may (next is then the first record left).
	records []Message
	kept    int64
	full    bool
}

func (*scanned) ApiKey() protocol.ApiKey { return protocol.Fetch }

var (
	_ protocol.RawExchanger  = (*exchange)(nil)
	_ protocol.BrokerMessage = (*exchange)(nil)
)
