package producer

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/segmentio/kafka-go"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/outbox-cdc/outbox-cdc/checkpoint"
	"github.com/outbox-cdc/outbox-cdc/internal/outage"
	"github.com/outbox-cdc/outbox-cdc/internal/outage/outagetest"
)

// stubTxn is a transaction whose partitions are added already and whose
// verdict on a refusal is the refusal itself: what Write does with the
// broker's answers is all that is under test.
type stubTxn struct{}

func (stubTxn) TransactionalID() string { return "txn" }
func (stubTxn) Header(seq int32) BatchHeader {
	return BatchHeader{ProducerID: 7, ProducerEpoch: 0, BaseSequence: seq, Transactional: true}
}
func (stubTxn) Added(string, int32) bool                                { return true }
func (stubTxn) AddPartitions(context.Context, map[string][]int32) error { return nil }
func (stubTxn) Refused(err error) error                                 { return err }
func (stubTxn) Outage() *outage.Tracker                                 { return nil }

// TestCheckpointWriteDuplicateSequence: the broker's DUPLICATE_SEQUENCE answer means
// it holds the batch already only for a batch sent again; to a first
// attempt it means another writer used the partition's sequence (a row
// routed into the checkpoint topic), and the record was not written.
func TestCheckpointWriteDuplicateSequence(t *testing.T) {
	for _, tt := range []struct {
		name    string
		answers []kerr.Error // the broker's answers to the produce requests, in order
		wantErr error        // nil: written
	}{
		{"first attempt", []kerr.Error{*kerr.DuplicateSequenceNumber}, kafka.DuplicateSequenceNumber},
		{"retry of a timed-out batch", []kerr.Error{*kerr.RequestTimedOut, *kerr.DuplicateSequenceNumber}, nil},
	} {
		t.Run(tt.name, func(t *testing.T) {
			cluster, cl := newCheckpointCluster(t, 1)
			var n atomic.Int32
			cluster.ControlKey(int16(kmsg.Produce), func(req kmsg.Request) (kmsg.Response, error, bool) {
				cluster.KeepControl()
				i := int(n.Add(1)) - 1
				if i >= len(tt.answers) {
					return nil, nil, false
				}
				pr := req.(*kmsg.ProduceRequest)
				res := pr.ResponseKind().(*kmsg.ProduceResponse)
				for _, rt := range pr.Topics {
					st := kmsg.NewProduceResponseTopic()
					st.Topic = rt.Topic
					for _, rp := range rt.Partitions {
						sp := kmsg.NewProduceResponseTopicPartition()
						sp.Partition, sp.ErrorCode = rp.Partition, tt.answers[i].Code
						st.Partitions = append(st.Partitions, sp)
					}
					res.Topics = append(res.Topics, st)
				}
				return res, nil, true
			})
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			w, err := cl.NewCheckpointWriter(ctx, stubTxn{}, ckptTopic, "slot")
			if err != nil {
				t.Fatal(err)
			}
			err = w.Write(ctx, checkpoint.Record{SystemID: "7312345678901234567", Slot: "slot", Timeline: 1, CommitLSN: pglogrepl.LSN(42), EndLSN: pglogrepl.LSN(43)})
			if tt.wantErr == nil && err != nil || tt.wantErr != nil && !errors.Is(err, tt.wantErr) {
				t.Fatalf("Write: %v, want %v", err, tt.wantErr)
			}
			if got := int(n.Load()); got != len(tt.answers) {
				t.Errorf("%d produce requests, want %d", got, len(tt.answers))
			}
		})
	}
}

// TestCheckpointWriteOutageLogged: a checkpoint record the partition's leader
// refuses for longer than the tracker's grace, retried until written, is one warning naming
// the request and one line saying it recovered and after how long, told
// by the tracker of the record's transaction.
func TestCheckpointWriteOutageLogged(t *testing.T) {
	// The writer retries after 25-50 ms, then each wait doubles: its fourth
	// retry comes 175-350 ms after the first refusal, within the outage and
	// past the grace whatever the jitter.
	const grace, lasts = 100 * time.Millisecond, 400 * time.Millisecond
	cluster, cl := newCheckpointCluster(t, 1)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	logs := &outagetest.Log{}
	txn, err := cl.NewTxn(TxnConfig{TransactionalID: "outage",
		Timeout: 30 * time.Second, RetryBackoff: 5 * time.Millisecond, Logger: logs.Logger(), Outage: outage.NewAfter(logs.Logger(), grace)})
	if err != nil {
		t.Fatal(err)
	}
	if err := txn.Init(ctx); err != nil {
		t.Fatal(err)
	}
	if err := txn.Begin(); err != nil {
		t.Fatal(err)
	}
	w, err := cl.NewCheckpointWriter(ctx, txn, ckptTopic, "slot")
	if err != nil {
		t.Fatal(err)
	}
	var first atomic.Int64
	refused := cluster.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.Produce}, Err: kerr.NotEnoughReplicas, Count: -1, When: func(kmsg.Request) bool {
		now := time.Now().UnixNano()
		first.CompareAndSwap(0, now)
		return now-first.Load() < int64(lasts)
	}})
	if err := w.Write(ctx, checkpoint.Record{SystemID: "7312345678901234567", Slot: "slot", Timeline: 1, CommitLSN: 42, EndLSN: 43}); err != nil {
		t.Fatal(err)
	}
	if err := txn.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if refused.Hits() < 2 {
		t.Fatalf("%d produce requests refused, want several", refused.Hits())
	}
	logs.Check(t, outagetest.Outage{Request: "produce (checkpoint)", Lasted: lasts})
}
