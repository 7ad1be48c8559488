package producer

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"time"

	"github.com/segmentio/kafka-go"
	"github.com/segmentio/kafka-go/protocol"
	produceAPI "github.com/segmentio/kafka-go/protocol/produce"
	"github.com/segmentio/kafka-go/protocol/rawproduce"

	"github.com/outbox-cdc/outbox-cdc/checkpoint"
	"github.com/outbox-cdc/outbox-cdc/internal/backoff"
	"github.com/outbox-cdc/outbox-cdc/internal/outage"
)

// CheckpointTxn is the transactional producer a CheckpointWriter's
// records belong to: a *Txn.
type CheckpointTxn interface {
	TransactionalID() string
	Header(seq int32) BatchHeader
	Added(topic string, partition int32) bool
	AddPartitions(ctx context.Context, partitions map[string][]int32) error
	Refused(err error) error
	// Outage is told of each attempt to write a record (nil: nothing).
	Outage() *outage.Tracker
}

// CheckpointWriter writes one slot's checkpoint records into the open
// transaction of a Txn: one record per Kafka transaction, to the partition of the
// slot's key. It owns that partition's sequence under the Txn's producer
// id and epoch (nothing else of the producer writes there), so a
// CheckpointWriter lives as long as one InitProducerID.
type CheckpointWriter struct {
	client    *kafka.Client
	txn       CheckpointTxn
	topic     string
	key       string
	partition int32
	seq       int32 // the base sequence of the next record
}

// NewCheckpointWriter returns a CheckpointWriter of key's records to
// topic, which must exist, through the Cluster's connections.
func (c *Cluster) NewCheckpointWriter(ctx context.Context, txn CheckpointTxn, topic, key string) (*CheckpointWriter, error) {
	exists, n, err := c.describeTopic(ctx, topic)
	if err != nil {
		return nil, err
	}
	if !exists || n == 0 {
		return nil, fmt.Errorf("checkpoint topic %s does not exist", topic)
	}
	return &CheckpointWriter{client: c.client, txn: txn, topic: topic, key: key, partition: int32(checkpointPartition(key, n))}, nil
}

// writeTimeout bounds one produce request of a checkpoint record.
const writeTimeout = 30 * time.Second

// Write adds the checkpoint's partition to the open transaction (once)
// and writes rec there, acks=all. Transient failures are retried with the
// same sequence, which the broker writes once, until ctx ends, each
// attempt told to the Txn's outage tracker; a refusal of the producer
// returns the Txn's verdict (TxnError).
func (w *CheckpointWriter) Write(ctx context.Context, rec checkpoint.Record) error {
	value, err := rec.Encode()
	if err != nil {
		return err
	}
	if !w.txn.Added(w.topic, w.partition) {
		if err := w.txn.AddPartitions(ctx, map[string][]int32{w.topic: {w.partition}}); err != nil {
			return fmt.Errorf("add the checkpoint partition to the transaction: %w", err)
		}
	}
	for attempt := 0; ; attempt++ {
		err := w.produce(ctx, value, attempt > 0)
		if err == nil {
			w.txn.Outage().Succeeded()
			w.seq++
			return nil
		}
		var code kafka.Error
		if errors.As(err, &code) && !code.Temporary() {
			return fmt.Errorf("write the checkpoint to %s/%d: %w", w.topic, w.partition, w.txn.Refused(code))
		}
		if ctx.Err() == nil {
			w.txn.Outage().Failed("produce (checkpoint)", err)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("write the checkpoint to %s/%d: %w (last: %w)", w.topic, w.partition, context.Cause(ctx), err)
		case <-time.After(backoff.Delay(attempt, 50*time.Millisecond, time.Second)):
		}
	}
}

// produce sends value as a batch of one record with the writer's
// sequence. A duplicate sequence answering a retry is the broker holding
// the batch already; answering a first attempt it is an error: the
// partition's sequence was used by another writer (a row routed into the
// checkpoint topic shares it), and this record was not written.
func (w *CheckpointWriter) produce(ctx context.Context, value []byte, retry bool) error {
	buf, err := AppendBatch(make([]byte, 4, 128+len(value)), w.txn.Header(w.seq),
		[]Record{{Key: []byte(w.key), Value: value}}, 0)
	if err != nil {
		return fmt.Errorf("encode the checkpoint: %w", err)
	}
	binary.BigEndian.PutUint32(buf, uint32(len(buf)-4))
	rctx, cancel := context.WithTimeout(ctx, writeTimeout+5*time.Second)
	defer cancel()
	res, err := w.client.Transport.RoundTrip(rctx, w.client.Addr, &rawproduce.Request{
		TransactionalID: w.txn.TransactionalID(), Acks: int16(kafka.RequireAll), Timeout: int32(writeTimeout / time.Millisecond),
		Topics: []rawproduce.RequestTopic{{Topic: w.topic, Partitions: []rawproduce.RequestPartition{{
			Partition: w.partition, RecordSet: protocol.RawRecordSet{Reader: bytes.NewReader(buf)}}}}},
	})
	if err != nil {
		return err
	}
	for _, t := range res.(*produceAPI.Response).Topics {
		for _, p := range t.Partitions {
			if t.Topic == w.topic && p.Partition == w.partition {
				switch code := kafka.Error(p.ErrorCode); {
				case code == 0, code == kafka.DuplicateSequenceNumber && retry:
					return nil
				default:
					return code
				}
			}
		}
	}
	return fmt.Errorf("no answer for %s/%d: %w", w.topic, w.partition, protocol.ErrNoPartition)
}

// Topic is the checkpoint topic.
func (w *CheckpointWriter) Topic() string { return w.topic }

// Partition is the partition of the writer's key.
func (w *CheckpointWriter) Partition() int32 { return w.partition }
