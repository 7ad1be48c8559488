package kwire

import (
	"bytes"
	"encoding/binary"
	"io"
	"net"
	"testing"
	"time"

	"github.com/segmentio/kafka-go/protocol"
	"github.com/segmentio/kafka-go/protocol/metadata"
	"github.com/segmentio/kafka-go/protocol/produce"
	"github.com/segmentio/kafka-go/protocol/saslhandshake"
)

// TestGuardMatchesAnswersToTheirRequests: the guard checks each answer
// against the request it answers, skipping a produce request with acks=0
// (no answer) and SASL v0's raw exchange (no Kafka framing), so that the
// metadata answer after them is checked as one.
func TestGuardMatchesAnswersToTheirRequests(t *testing.T) {
	client, broker := net.Pipe()
	g := Guard(client)
	defer g.Close()
	_ = broker.SetDeadline(time.Now().Add(10 * time.Second))
	_ = g.SetDeadline(time.Now().Add(10 * time.Second))
	raw := func(b []byte) []byte { return append(binary.BigEndian.AppendUint32(nil, uint32(len(b))), b...) }
	go func() { // the broker: reads the four requests, answers three
		defer broker.Close()
		answers := map[int]func() []byte{
			1: func() []byte {
				var b bytes.Buffer
				_ = protocol.WriteResponse(&b, 0, 2, &saslhandshake.Response{Mechanisms: []string{"PLAIN"}})
				return b.Bytes()
			},
			2: func() []byte { return raw([]byte("raw sasl answer")) },
			3: func() []byte {
				var b bytes.Buffer
				_ = protocol.WriteResponse(&b, 1, 4, &metadata.Response{Brokers: []metadata.ResponseBroker{{Host: "h"}}})
				return b.Bytes()
			},
		}
		for i := range 4 {
			if _, err := ReadFrame(broker); err != nil {
				return
			}
			if a := answers[i]; a != nil {
				_, _ = broker.Write(a())
			}
		}
	}()
	write := func(f func() error) {
		t.Helper()
		if err := f(); err != nil {
			t.Fatal(err)
		}
	}
	write(func() error {
		return protocol.WriteRequest(g, 3, 1, "c", &produce.Request{Acks: 0, TransactionalID: "x", Timeout: 1})
	})
	write(func() error { return protocol.WriteRequest(g, 0, 2, "c", &saslhandshake.Request{Mechanism: "PLAIN"}) })
	if _, _, err := protocol.ReadResponse(g, protocol.SaslHandshake, 0); err != nil {
		t.Fatal(err)
	}
	write(func() error { _, err := g.Write(raw([]byte("\x000user\x00password"))); return err })
	answer := make([]byte, 4+len("raw sasl answer"))
	if _, err := io.ReadFull(g, answer); err != nil {
		t.Fatal(err)
	}
	write(func() error { return protocol.WriteRequest(g, 1, 4, "c", &metadata.Request{}) })
	_, res, err := protocol.ReadResponse(g, protocol.Metadata, 1)
	if err != nil {
		t.Fatal(err)
	}
	if got := res.(*metadata.Response).Brokers; len(got) != 1 || got[0].Host != "h" {
		t.Fatalf("metadata answer = %+v", res)
	}
}
