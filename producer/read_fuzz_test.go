package producer

import (
	"bufio"
	"bytes"
	"errors"
	"testing"

	"github.com/segmentio/kafka-go/protocol"

	"github.com/outbox-cdc/outbox-cdc/internal/kwire"
)

// answered are the APIs whose answers the relay reads: the producer's
// (versions, SASL, metadata, produce, producer ids, transactions), topic
// provisioning, and the checkpoint topic's fetches.
var answered = map[protocol.ApiKey]bool{
	protocol.ApiVersions: true, protocol.SaslHandshake: true, protocol.SaslAuthenticate: true,
	protocol.Metadata: true, protocol.Produce: true, protocol.InitProducerId: true,
	protocol.FindCoordinator: true, protocol.AddPartitionsToTxn: true, protocol.AddOffsetsToTxn: true,
	protocol.EndTxn: true, protocol.CreateTopics: true, protocol.ListOffsets: true, protocol.Fetch: true,
}

// FuzzReadResponse: whatever bytes a broker answers with, the response
// reader (the frame read whole, then checked) refuses them as a malformed
// answer, or kafka-go decodes them without a panic.
func FuzzReadResponse(f *testing.F) {
	f.Fuzz(func(t *testing.T, key, version int16, answer []byte) {
		k := protocol.ApiKey(key)
		if !answered[k] {
			return
		}
		frame, err := kwire.ReadFrame(bytes.NewReader(answer))
		if err != nil {
			return // a short or oversized frame: the connection breaks
		}
		if err := kwire.Check(k, version, frame); err != nil {
			if !errors.As(err, new(*kwire.MalformedError)) {
				t.Fatalf("refused with %v, not a *kwire.MalformedError", err)
			}
			return
		}
		// As on a connection: kafka-go reads through a buffered reader.
		_, _, _ = protocol.ReadResponse(bufio.NewReader(bytes.NewReader(frame)), k, version)
	})
}
