package producer

import (
	"context"
	"time"

	"github.com/segmentio/kafka-go"
	"github.com/segmentio/kafka-go/protocol"
)

// Clients makes a kafka-go client of a list of brokers, connecting as the
// relay's security settings say (sink.Security): its transport guards
// every answer (internal/kwire) and does the TLS and SASL.
type Clients interface {
	Client(brokers []string) *kafka.Client
}

// Cluster is a connection to the brokers for what exactly-once asks of
// them outside a sink writer: the transaction coordinator (NewTxn), the
// checkpoint topic (EnsureCheckpointTopic, ReadCheckpoint,
// NewCheckpointWriter) and what check reads (ReadTxnSupport). Its callers
// thus hold no Kafka client of their own. Close closes its idle
// connections; a Cluster used again afterwards opens new ones.
type Cluster struct {
	client *kafka.Client
}

// Connect returns a Cluster of brokers that connects as clients says;
// timeout, when positive, bounds each request in place of the client's
// own bound.
func Connect(clients Clients, brokers []string, timeout time.Duration) *Cluster {
	client := clients.Client(brokers)
	if timeout > 0 {
		client.Timeout = timeout
	}
	return NewCluster(client)
}

// NewCluster returns a Cluster that sends its requests through client.
func NewCluster(client *kafka.Client) *Cluster { return &Cluster{client: client} }

// NewTxn returns a transactional producer whose requests go through the
// Cluster's connections; cfg's Addr and Transport are the Cluster's.
func (c *Cluster) NewTxn(cfg TxnConfig) (*Txn, error) {
	cfg.Addr, cfg.Transport = c.client.Addr, c.client.Transport
	return NewTxn(cfg)
}

// roundTrip sends msg through the client's transport, bounded by the
// client's timeout, as kafka-go's Client does with its own requests.
func (c *Cluster) roundTrip(ctx context.Context, msg protocol.Message) (protocol.Message, error) {
	if c.client.Timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, c.client.Timeout)
		defer cancel()
	}
	transport := c.client.Transport
	if transport == nil {
		transport = kafka.DefaultTransport
	}
	return transport.RoundTrip(ctx, c.client.Addr, msg)
}

// Close closes the Cluster's idle broker connections.
func (c *Cluster) Close() {
	if t, ok := c.client.Transport.(*kafka.Transport); ok {
		t.CloseIdleConnections()
	}
}
