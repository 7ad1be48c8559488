package producer

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"slices"
	"time"

	"github.com/segmentio/kafka-go"
	"github.com/segmentio/kafka-go/protocol"
	produceAPI "github.com/segmentio/kafka-go/protocol/produce"
	"github.com/segmentio/kafka-go/protocol/rawproduce"
)

// produceRequest stamps each batch with its partition's producer fields
// (see stamp) and encodes it with the producer core, into one produce
// request, acks=all. It returns the request and how many records it holds.
func (w *Writer) produceRequest(batches []batch) (*rawproduce.Request, int, error) {
	st := w.idem.state(w.transactional())
	for i := range batches {
		batches[i].p.reserve(&batches[i], st)
	}
	if err := w.enlist(batches); err != nil {
		return nil, 0, err
	}
	req := &rawproduce.Request{Acks: int16(kafka.RequireAll), Timeout: int32(produceTimeout / time.Millisecond)}
	if w.transactional() {
		req.TransactionalID = w.cfg.Transaction.TransactionalID()
	}
	records := 0
	for _, b := range batches {
		rs, err := w.encode(b.h, b.msgs)
		if err != nil {
			return nil, 0, fmt.Errorf("produce to %s/%d: %w", b.p.tp.topic, b.p.tp.id, err)
		}
		part := rawproduce.RequestPartition{Partition: int32(b.p.tp.id), RecordSet: rs}
		records += len(b.msgs)
		if i := slices.IndexFunc(req.Topics, func(t rawproduce.RequestTopic) bool { return t.Topic == b.p.tp.topic }); i >= 0 {
			req.Topics[i].Partitions = append(req.Topics[i].Partitions, part)
			continue
		}
		req.Topics = append(req.Topics, rawproduce.RequestTopic{Topic: b.p.tp.topic, Partitions: []rawproduce.RequestPartition{part}})
	}
	return req, records, nil
}

// encode returns msgs as one record batch carrying h, framed (its length
// first) as a produce request holds it. Each request gets bytes of its own:
// kafka-go may still read a request's bytes after its round trip returned
// (a cancelled request), so they are not pooled.
func (w *Writer) encode(h BatchHeader, msgs []Outgoing) (protocol.RawRecordSet, error) {
	records := make([]Record, len(msgs))
	size := 4 + 61
	for i := range msgs {
		m := &msgs[i]
		records[i] = Record{Key: m.Key, Value: m.Value, Headers: m.Headers, Time: m.Time}
		size += recordSize(m) + 16 + 8*len(m.Headers)
	}
	buf := make([]byte, 4, size)
	buf, err := AppendBatch(buf, h, records, w.codec&7)
	if err != nil {
		return protocol.RawRecordSet{}, fmt.Errorf("encode a batch of %d records: %w", len(msgs), err)
	}
	binary.BigEndian.PutUint32(buf, uint32(len(buf)-4))
	return protocol.RawRecordSet{Reader: bytes.NewReader(buf)}, nil
}

// answers returns each partition's error code in res; a duplicate sequence
// number is an acknowledgement (the broker has the batch already).
func answers(res *produceAPI.Response) map[topicPartition]int16 {
	codes := map[topicPartition]int16{}
	for _, t := range res.Topics {
		for _, p := range t.Partitions {
			code := p.ErrorCode
			if kafka.Error(code) == kafka.DuplicateSequenceNumber {
				code = 0
			}
			codes[topicPartition{t.Topic, int(p.Partition)}] = code
		}
	}
	return codes
}
