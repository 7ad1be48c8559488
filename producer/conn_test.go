package producer

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"
	"github.com/segmentio/kafka-go/protocol"
	"github.com/segmentio/kafka-go/protocol/initproducerid"
	produceAPI "github.com/segmentio/kafka-go/protocol/produce"
	"github.com/segmentio/kafka-go/protocol/rawproduce"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// dialTest dials the first broker of c for depth requests at once.
func dialTest(t *testing.T, c *kfake.Cluster, depth int) *Conn {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn, err := Dialer{ClientID: "test"}.DialConn(ctx, c.ListenAddrs()[0], depth)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(conn.Close)
	return conn
}

// producerID asks for an idempotent producer id on conn.
func producerID(t *testing.T, conn *Conn) (int64, int16) {
	t.Helper()
	call, err := conn.Send(&initproducerid.Request{TransactionTimeoutMs: 60_000, ProducerID: -1, ProducerEpoch: -1}, time.Now().Add(10*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	res, err := call.Result()
	if err != nil {
		t.Fatal(err)
	}
	r := res.(*initproducerid.Response)
	if r.ErrorCode != 0 {
		t.Fatalf("init producer id: %v", kafka.Error(r.ErrorCode))
	}
	return r.ProducerID, r.ProducerEpoch
}

// produceRequest is one idempotent batch of n records to txnTopic's
// partition 0, from base sequence seq.
func produceRequest(t *testing.T, id int64, epoch int16, seq int32, n int) *rawproduce.Request {
	t.Helper()
	records := make([]Record, n)
	for i := range records {
		records[i] = Record{Value: fmt.Appendf(nil, "%d", int(seq)+i)}
	}
	b, err := AppendBatch(make([]byte, 4), BatchHeader{ProducerID: id, ProducerEpoch: epoch, BaseSequence: seq}, records, 0)
	if err != nil {
		t.Fatal(err)
	}
	binary.BigEndian.PutUint32(b, uint32(len(b)-4))
	return &rawproduce.Request{Acks: -1, Timeout: 10_000, Topics: []rawproduce.RequestTopic{{Topic: txnTopic,
		Partitions: []rawproduce.RequestPartition{{Partition: 0, RecordSet: protocol.RawRecordSet{Reader: bytes.NewReader(b)}}}}}}
}

// TestConnPipelines: five batches of one partition sent back to back, each
// before the previous is answered, are answered in order, each written
// once at the offset its sequence implies. Over kafka-go's Transport, the
// concurrent requests would go on several connections, and a batch
// arriving before its predecessor is refused (OUT_OF_ORDER_SEQUENCE_NUMBER).
func TestConnPipelines(t *testing.T) {
	c := newCluster(t, 1)
	conn := dialTest(t, c, 5)
	id, epoch := producerID(t, conn)
	deadline := time.Now().Add(10 * time.Second)
	var calls []*Call
	for i := range 5 {
		call, err := conn.Send(produceRequest(t, id, epoch, int32(3*i), 3), deadline)
		if err != nil {
			t.Fatalf("send batch %d: %v", i, err)
		}
		calls = append(calls, call)
	}
	for i, call := range calls {
		res, err := call.Result()
		if err != nil {
			t.Fatalf("batch %d: %v", i, err)
		}
		p := res.(*produceAPI.Response).Topics[0].Partitions[0]
		if p.ErrorCode != 0 || p.BaseOffset != int64(3*i) {
			t.Errorf("batch %d: error %v, base offset %d; want none, %d", i, kafka.Error(p.ErrorCode), p.BaseOffset, 3*i)
		}
	}
}

// holdProduce keeps the cluster's answers to produce requests until the
// returned func is called (or the test ends).
func holdProduce(t *testing.T, c *kfake.Cluster) (release func()) {
	gate := make(chan struct{})
	closed := false
	release = func() {
		if !closed {
			closed = true
			close(gate)
		}
	}
	t.Cleanup(release)
	c.ControlKey(int16(kmsg.Produce), func(kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		c.SleepControl(func() { <-gate })
		return nil, nil, false
	})
	return release
}

// TestConnFailures: a request past depth is refused at once; a request
// unanswered past its deadline breaks the connection, fails every request
// out, and the connection takes no more; Close fails what is out.
func TestConnFailures(t *testing.T) {
	t.Run("depth", func(t *testing.T) {
		c := newCluster(t, 1)
		conn := dialTest(t, c, 1)
		id, epoch := producerID(t, conn)
		defer holdProduce(t, c)()
		if _, err := conn.Send(produceRequest(t, id, epoch, 0, 1), time.Now().Add(10*time.Second)); err != nil {
			t.Fatal(err)
		}
		if _, err := conn.Send(produceRequest(t, id, epoch, 1, 1), time.Now().Add(10*time.Second)); !errors.Is(err, ErrTooManyInFlight) {
			t.Fatalf("second request on a connection of depth 1: %v, want ErrTooManyInFlight", err)
		}
	})
	t.Run("deadline", func(t *testing.T) {
		c := newCluster(t, 1)
		conn := dialTest(t, c, 5)
		id, epoch := producerID(t, conn)
		defer holdProduce(t, c)()
		first, err := conn.Send(produceRequest(t, id, epoch, 0, 1), time.Now().Add(200*time.Millisecond))
		if err != nil {
			t.Fatal(err)
		}
		second, err := conn.Send(produceRequest(t, id, epoch, 1, 1), time.Now().Add(10*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		for i, call := range []*Call{first, second} {
			if _, err := call.Result(); err == nil {
				t.Errorf("request %d: answered, want the deadline's failure", i)
			}
		}
		if !conn.Broken() {
			t.Error("the connection is not broken after a deadline passed")
		}
		if _, err := conn.Send(produceRequest(t, id, epoch, 2, 1), time.Now().Add(time.Second)); err == nil {
			t.Error("a broken connection took a request")
		}
	})
	t.Run("close", func(t *testing.T) {
		c := newCluster(t, 1)
		conn := dialTest(t, c, 5)
		id, epoch := producerID(t, conn)
		defer holdProduce(t, c)()
		call, err := conn.Send(produceRequest(t, id, epoch, 0, 1), time.Now().Add(10*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		conn.Close()
		if _, err := call.Result(); !errors.Is(err, ErrClosed) {
			t.Errorf("request out at Close: %v, want ErrClosed", err)
		}
		conn.Close() // twice is safe
	})
}
