package kafkago

import (
	"errors"
	"testing"

	"github.com/segmentio/kafka-go"

	"github.com/outbox-cdc/outbox-cdc/inbox"
)

func TestFromMessage(t *testing.T) {
	tests := []struct {
		name    string
		headers []kafka.Header
		want    inbox.Record
		wantErr error
	}{
		{
			name:    "id header",
			headers: []kafka.Header{{Key: "type", Value: []byte("OrderPaid")}, {Key: "id", Value: []byte("e-1")}},
			want:    inbox.Record{EventID: "e-1", Topic: "orders", Partition: 2, Offset: 7},
		},
		{name: "no id header", headers: []kafka.Header{{Key: "type", Value: []byte("OrderPaid")}}, wantErr: inbox.ErrNoID},
		{name: "no headers", wantErr: inbox.ErrNoID},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := FromMessage(kafka.Message{Topic: "orders", Partition: 2, Offset: 7, Headers: tt.headers})
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("err = %v, want %v", err, tt.wantErr)
			}
			if got != tt.want {
				t.Errorf("record %+v, want %+v", got, tt.want)
			}
		})
	}
}
