package producer

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestNegotiatedVersions pins the versions of the requests exactly-once
// rests on, against a broker that offers the newest (kfake, as Kafka 4.x
// does): transaction protocol v1, where a transaction keeps its producer
// epoch and partitions are added explicitly. A kafka-go upgrade reaching
// transaction protocol v2 (KIP-890: InitProducerId and EndTxn v5 and on, an
// epoch bump per transaction, partitions added implicitly by Produce v12)
// would change what a commit, a fence and a retry mean: it must fail here
// and be adopted on purpose, not silently.
func TestNegotiatedVersions(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	c := newCluster(t, 1)
	var mu sync.Mutex
	seen := map[kmsg.Key]int16{}
	for _, key := range []kmsg.Key{kmsg.InitProducerID, kmsg.AddPartitionsToTxn, kmsg.EndTxn, kmsg.Produce} {
		c.ControlKey(int16(key), func(req kmsg.Request) (kmsg.Response, error, bool) {
			c.KeepControl()
			mu.Lock()
			seen[key] = max(seen[key], req.GetVersion())
			mu.Unlock()
			return nil, nil, false
		})
	}
	// The transaction's own requests, over kafka-go's Transport.
	w, _ := begun(ctx, t, c, "versions", "a")
	if err := w.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	// The relay's produce path: its own pipelined connection.
	conn := dialTest(t, c, 1)
	id, epoch := producerID(t, conn)
	call, err := conn.Send(produceRequest(t, id, epoch, 0, 1), time.Now().Add(10*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := call.Result(); err != nil {
		t.Fatal(err)
	}

	want := map[kmsg.Key]int16{kmsg.InitProducerID: 4, kmsg.AddPartitionsToTxn: 3, kmsg.EndTxn: 3, kmsg.Produce: 8}
	mu.Lock()
	defer mu.Unlock()
	for key, v := range want {
		if seen[key] != v {
			t.Errorf("%s v%d negotiated, pinned at v%d: a change of the transaction protocol must be adopted on purpose", key.Name(), seen[key], v)
		}
	}
}
