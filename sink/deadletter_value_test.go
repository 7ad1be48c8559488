package sink

import (
	"bytes"
	"testing"

	"github.com/outbox-cdc/outbox-cdc/decode"
)

// TestDeadLetterKeepsValue: an event whose dead letter might not have
// carried its value (fit sends it without), with room for the dead
// letter's headers and an error quoting the value, is told apart; without
// a dead-letter topic nothing is dead-lettered.
func TestDeadLetterKeepsValue(t *testing.T) {
	topic, _ := ParseTopic("events")
	done := func(uint64, string, error) {}
	w := NewWriter(Config{Brokers: []string{"127.0.0.1:1"}, Topic: topic, MaxMessageBytes: 64 << 10, DeadLetterTopic: "dlq"}, done)
	defer w.Close(testContext(t, 0))
	none := NewWriter(Config{Brokers: []string{"127.0.0.1:1"}, Topic: topic, MaxMessageBytes: 64 << 10}, done)
	defer none.Close(testContext(t, 0))
	for _, tt := range []struct {
		payload int
		want    bool
	}{
		{1 << 10, true},
		{29 << 10, true},
		{31 << 10, false}, // fits a record, but not twice beside a dead letter's headers
		{64 << 10, false},
		{1 << 20, false},
	} {
		ev := &decode.Event{ID: "1", AggregateID: "a", Payload: bytes.Repeat([]byte("x"), tt.payload)}
		if got := w.DeadLetterKeepsValue(ev); got != tt.want {
			t.Errorf("payload of %d bytes: %v, want %v", tt.payload, got, tt.want)
		}
		if !none.DeadLetterKeepsValue(ev) {
			t.Errorf("payload of %d bytes, no dead-letter topic: false, want true", tt.payload)
		}
	}
}
