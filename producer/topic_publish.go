package producer

import (
	"context"
	"errors"
	"time"

	"github.com/segmentio/kafka-go"
)

// ConnectAs is Connect with the Cluster naming itself clientID to the
// brokers, so that their logs and quotas tell its requests from the
// relay's (a command's, such as `outbox-cdc dlq`).
func ConnectAs(clients Clients, brokers []string, timeout time.Duration, clientID string) *Cluster {
	c := Connect(clients, brokers, timeout)
	if t, ok := c.client.Transport.(*kafka.Transport); ok && clientID != "" {
		t.ClientID = clientID // a transport of its own (Clients.Client), not used yet
	}
	return c
}

// Publisher publishes records outside any transaction, acks=all, lz4
// compressed, each to the partition its Message names or by its key
// (ByKey). It is for a command that publishes records read elsewhere (a
// dead letter's replay), not for the relay's stream, and knows nothing of
// what the records mean.
type Publisher struct {
	w *kafka.Writer
}

// NewPublisher returns a Publisher through the Cluster's connections that
// sends up to batch records of a partition in one request. Close it.
func (c *Cluster) NewPublisher(batch int) *Publisher {
	return &Publisher{w: &kafka.Writer{Addr: c.client.Addr, Transport: c.client.Transport, Balancer: byPartition{key: &kafka.Murmur2Balancer{}},
		RequiredAcks: kafka.RequireAll, BatchSize: max(batch, 1), BatchBytes: 1 << 30, BatchTimeout: time.Millisecond,
		Compression: kafka.Lz4}}
}

// Publish publishes records and waits for the brokers' answers: it
// returns each record's error, nil for one the brokers took. The records
// of one partition are sent in their order. A record's error is the
// broker's (its text the broker's, a kafka.Error) or what stopped the
// request; records are not retried here.
func (p *Publisher) Publish(ctx context.Context, records []Message) []error {
	msgs := make([]kafka.Message, len(records))
	for i, r := range records {
		msgs[i] = kafka.Message{Topic: r.Topic, Key: r.Key, Value: r.Value, Time: r.Time, WriterData: publishPartition(r.Partition)}
		for _, h := range r.Headers {
			msgs[i].Headers = append(msgs[i].Headers, kafka.Header{Key: h.Key, Value: h.Value})
		}
	}
	return writeErrors(p.w.WriteMessages(ctx, msgs...), len(msgs))
}

// Close closes the Publisher's writer.
func (p *Publisher) Close() error { return p.w.Close() }

// writeErrors is each message's error from WriteMessages' error.
func writeErrors(err error, n int) []error {
	var we kafka.WriteErrors
	if errors.As(err, &we) && len(we) == n {
		return we
	}
	errs := make([]error, n)
	for i := range errs {
		errs[i] = err
	}
	return errs
}

// publishPartition is a published message's Message.Partition (Message.WriterData,
// read by byPartition).
type publishPartition int32

// byPartition places a message in the partition its message named, else
// (ByKey) by its key as the relay does.
type byPartition struct{ key *kafka.Murmur2Balancer }

func (b byPartition) Balance(m kafka.Message, partitions ...int) int {
	if p, ok := m.WriterData.(publishPartition); ok && p != publishPartition(ByKey) {
		return int(p) // a partition the topic lacks: the broker refuses it
	}
	return b.key.Balance(m, partitions...)
}
