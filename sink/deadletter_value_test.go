package sink

import (
	"bytes"
	"testing"

	"github.com/outbox-cdc/outbox-cdc/decode"
)

// TestDeadLetterKeepsValue: an event whose dead letter would not fit
// --max-message-bytes with its value (fit sends it without) is told apart,
// with room left for the dead letter's own headers.
func TestDeadLetterKeepsValue(t *testing.T) {
	topic, _ := ParseTopic("events")
	w := NewWriter(Config{Brokers: []string{"127.0.0.1:1"}, Topic: topic, MaxMessageBytes: 64 << 10}, func(uint64, string, error) {})
	defer w.Close(testContext(t, 0))
	for _, tt := range []struct {
		payload int
		want    bool
	}{
		{1 << 10, true},
		{56 << 10, true},
		{61 << 10, false}, // fits a record, but not beside a dead letter's headers
		{64 << 10, false},
		{1 << 20, false},
	} {
		ev := &decode.Event{ID: "1", AggregateID: "a", Payload: bytes.Repeat([]byte("x"), tt.payload)}
		if got := w.DeadLetterKeepsValue(ev); got != tt.want {
			t.Errorf("payload of %d bytes: %v, want %v", tt.payload, got, tt.want)
		}
	}
}
