package producer

import (
	"context"
	"crypto/rand"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"
)

// TestPublishPlacesEachMessage: a message naming its partition goes
// there, one ByKey to its key's partition as the relay places it (murmur2,
// as the Java client), with its key, value, headers and time; a message
// the broker refuses fails alone, with the broker's error.
func TestPublishPlacesEachMessage(t *testing.T) {
	cluster, c := newTopicCluster(t, 4)
	if err := cluster.CreateTopic("small", 1, map[string]string{"max.message.bytes": "1000"}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	at := time.UnixMilli(1700000000123)
	byKey := func(key string) int32 {
		return int32((&kafka.Murmur2Balancer{}).Balance(kafka.Message{Key: []byte(key)}, 0, 1, 2, 3))
	}
	var msgs []Message
	want := map[string]int32{}
	for i, key := range []string{"a", "b", "c", "d", "e"} {
		for _, p := range []int32{ByKey, (byKey(key) + 1) % 4} {
			id := fmt.Sprintf("%s-%d", key, len(msgs))
			msgs = append(msgs, Message{Topic: "t", Partition: p, Key: []byte(key), Value: []byte(id), Time: at.Add(time.Duration(i) * time.Millisecond),
				Headers: []Header{{Key: "id", Value: []byte(id)}}})
			want[id] = p
			if p == ByKey {
				want[id] = byKey(key)
			}
		}
	}
	large := make([]byte, 5000) // incompressible: lz4 must not make it fit
	_, _ = rand.Read(large)
	msgs = append(msgs, Message{Topic: "small", Partition: ByKey, Value: large})
	pub := c.NewPublisher(100)
	defer pub.Close()
	errs := pub.Publish(ctx, msgs)
	for i, err := range errs {
		if last := i == len(msgs)-1; last != (err != nil) || last && !strings.Contains(err.Error(), "Message Size Too Large") {
			t.Errorf("message %d to %s: %v", i, msgs[i].Topic, err)
		}
	}
	got, _ := readAll(ctx, t, c, 1<<20)
	if len(got) != len(want) {
		t.Fatalf("read %d messages, want %d", len(got), len(want))
	}
	for _, m := range got {
		id := string(m.Value)
		if m.Partition != want[id] || len(m.Headers) != 1 || string(m.Headers[0].Value) != id || string(m.Key) != id[:1] || !m.Time.Equal(msgs[0].Time.Add(time.Duration(id[0]-'a')*time.Millisecond)) {
			t.Errorf("%s: %s, want in partition %d with its key, id header and time", id, show(m), want[id])
		}
	}
}
