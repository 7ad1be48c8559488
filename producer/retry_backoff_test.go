package producer

import (
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// requestCount counts the produce requests a writer sent.
type requestCount struct {
	nopObserver
	n atomic.Int32
}

func (r *requestCount) Request(int, int) { r.n.Add(1) }

// TestRetryDueBesideSlowRequest: one broker leads three topics. "retry"'s
// batch is refused once (NOT_ENOUGH_REPLICAS) and waits out its backoff;
// meanwhile "held"'s full batch goes and the broker holds it, and "trickle"
// gets one event, not full and not yet due (BatchTimeout is long). The
// sender waits for the held answer or for what falls due first: the
// retry's backoff ends long before either, and the retry must leave then,
// beside the held request. Found by review: the sender, waiting beside a
// request out, woke only for its answer or a full batch, so a retry fell
// due unseen (here until the broker let the held request go, 5 s).
func TestRetryDueBesideSlowRequest(t *testing.T) {
	besideOthersWhenShort(t)
	cluster := newFakeCluster(t, kfake.NumBrokers(1), kfake.SeedTopics(1, "retry", "held", "trickle"))
	refused, release := make(chan struct{}), make(chan struct{})
	var refusals, holds atomic.Int32
	cluster.ControlKey(int16(kmsg.Produce), func(req kmsg.Request) (kmsg.Response, error, bool) {
		cluster.KeepControl()
		for _, tp := range req.(*kmsg.ProduceRequest).Topics {
			switch {
			case tp.Topic == "retry" && refusals.Add(1) == 2: // the first is the warm-up's
				close(refused)
				res := req.ResponseKind().(*kmsg.ProduceResponse)
				rt := kmsg.NewProduceResponseTopic()
				rt.Topic = tp.Topic
				rp := kmsg.NewProduceResponseTopicPartition()
				rp.ErrorCode = kerr.NotEnoughReplicas.Code
				rt.Partitions = append(rt.Partitions, rp)
				res.Topics = append(res.Topics, rt)
				return res, nil, true
			case tp.Topic == "held" && holds.Add(1) == 2:
				cluster.SleepControl(func() {
					select {
					case <-release:
					case <-time.After(5 * time.Second):
					}
				})
			}
		}
		return nil, nil, false
	})
	defer func() {
		select {
		case <-release:
		default:
			close(release)
		}
	}()
	requests := &requestCount{}
	const events = 3 + 2 + 2 + 1
	f := newFates(events)
	w := newTestWriter(testConfig{Brokers: cluster.ListenAddrs(), BatchSize: 2, BatchTimeout: 10 * time.Second,
		MissingTopicTimeout: 10 * time.Second, Observer: requests}, f.done)
	ctx := testContext(t, 30*time.Second)
	token := uint64(0)
	publish := func(topic string) {
		ev := &event{ID: fmt.Sprint(token), AggregateType: topic, AggregateID: "k", EventType: "e", Payload: []byte("x")}
		if err := w.PublishTo(ctx, topic, ev, token); err != nil {
			t.Fatal(err)
		}
		token++
	}
	w.Flush(true)                                                // the warm-up leaves without waiting out BatchTimeout
	for _, topic := range []string{"retry", "held", "trickle"} { // learned, and each producer known to the broker
		publish(topic)
	}
	waitAcked(ctx, t, f, 3)
	w.Flush(false)
	base := requests.n.Load()
	publish("retry")
	publish("retry") // full: leaves at once, and is refused
	<-refused
	publish("held")
	publish("held") // full: leaves at once, and is held
	publish("trickle")
	// The refused request, the held one, then the retry: its backoff is
	// 50–100 ms; the held answer comes after 5 s, the trickle's due after 10.
	deadline := time.After(3 * time.Second)
	for requests.n.Load() < base+3 {
		select {
		case <-deadline:
			t.Fatalf("the retry did not leave while the broker held another request (%d requests after the warm-up)", requests.n.Load()-base)
		case <-time.After(5 * time.Millisecond):
		}
	}
	close(release)
	w.Flush(true) // the trickle's event leaves now
	f.wait(ctx, t, w)
}
