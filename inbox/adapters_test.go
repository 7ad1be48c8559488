package inbox_test

import (
	"errors"
	"testing"

	"github.com/segmentio/kafka-go"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/outbox-cdc/outbox-cdc/inbox"
	"github.com/outbox-cdc/outbox-cdc/inbox/franz"
	"github.com/outbox-cdc/outbox-cdc/inbox/kafkago"
)

// TestAdapters: each client's adapter finds the id header and the record's
// place, and a record without one is ErrNoID. (The test imports both
// clients; package inbox itself imports neither.)
func TestAdapters(t *testing.T) {
	adapters := map[string]func(topic string, partition int32, offset int64, headers map[string]string) (inbox.Record, error){
		"kafka-go": func(topic string, partition int32, offset int64, headers map[string]string) (inbox.Record, error) {
			m := kafka.Message{Topic: topic, Partition: int(partition), Offset: offset}
			for _, k := range []string{"type", "id"} {
				if v, ok := headers[k]; ok {
					m.Headers = append(m.Headers, kafka.Header{Key: k, Value: []byte(v)})
				}
			}
			return kafkago.FromMessage(m)
		},
		"franz-go": func(topic string, partition int32, offset int64, headers map[string]string) (inbox.Record, error) {
			r := &kgo.Record{Topic: topic, Partition: partition, Offset: offset}
			for _, k := range []string{"type", "id"} {
				if v, ok := headers[k]; ok {
					r.Headers = append(r.Headers, kgo.RecordHeader{Key: k, Value: []byte(v)})
				}
			}
			return franz.FromRecord(r)
		},
	}
	tests := []struct {
		name    string
		headers map[string]string
		want    inbox.Record
		wantErr error
	}{
		{name: "id header", headers: map[string]string{"type": "OrderPaid", "id": "e-1"}, want: inbox.Record{EventID: "e-1", Topic: "orders", Partition: 2, Offset: 7}},
		{name: "no id header", headers: map[string]string{"type": "OrderPaid"}, wantErr: inbox.ErrNoID},
		{name: "no headers", wantErr: inbox.ErrNoID},
	}
	for client, from := range adapters {
		for _, tt := range tests {
			t.Run(client+"/"+tt.name, func(t *testing.T) {
				got, err := from("orders", 2, 7, tt.headers)
				if !errors.Is(err, tt.wantErr) {
					t.Fatalf("err = %v, want %v", err, tt.wantErr)
				}
				if got != tt.want {
					t.Errorf("record %+v, want %+v", got, tt.want)
				}
			})
		}
	}
}
