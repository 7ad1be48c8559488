package producer

import (
	"errors"
	"fmt"
	"io"
	"math"
	"syscall"
	"testing"

	"github.com/segmentio/kafka-go"
	"github.com/segmentio/kafka-go/protocol"
	"github.com/segmentio/kafka-go/protocol/rawproduce"
)

func TestAddSequence(t *testing.T) {
	for _, c := range []struct {
		seq  int32
		n    int
		want int32
	}{
		{0, 1, 1},
		{100, 20, 120},
		{math.MaxInt32 - 5, 5, math.MaxInt32},
		{math.MaxInt32 - 5, 6, 0},
		{math.MaxInt32 - 5, 10, 4},
		{math.MaxInt32, 1, 0},
	} {
		if got := addSequence(c.seq, c.n); got != c.want {
			t.Errorf("addSequence(%d, %d) = %d, want %d", c.seq, c.n, got, c.want)
		}
	}
}

// TestLeaderMoved: kafka-go's transport refusing to route a raw produce
// request (its metadata saw a leader move the writer's has not) makes the
// writer look the topic up again, as the broker's own NOT_LEADER does.
func TestLeaderMoved(t *testing.T) {
	for _, tc := range []struct {
		name string
		err  error
		want bool
	}{
		{"transport: mismatching leaders", fmt.Errorf("produce: %w", rawproduce.NewError(errors.New("mismatching leaders (1!=2)"))), true},
		{"transport: no leader", rawproduce.NewError(protocol.NewErrNoLeader("t", 0)), true},
		{"broker: not leader", kafka.NotLeaderForPartition, true},
		{"broker: unknown partition", fmt.Errorf("x: %w", kafka.UnknownTopicOrPartition), true},
		{"timeout", kafka.RequestTimedOut, false},
		{"too large", kafka.MessageSizeTooLarge, false},
	} {
		if got := leaderMoved(tc.err); got != tc.want {
			t.Errorf("%s: leaderMoved = %v, want %v", tc.name, got, tc.want)
		}
	}
}

// TestDisconnected: a retry asks where the leader is after no answer at
// all, never after the broker's own refusal (a Kafka error code).
func TestDisconnected(t *testing.T) {
	for _, tc := range []struct {
		name string
		err  error
		want bool
	}{
		{"connection closed", fmt.Errorf("read the answer to a Produce request: %w", io.ErrUnexpectedEOF), true},
		{"connection refused", fmt.Errorf("broker 2: %w", syscall.ECONNREFUSED), true},
		{"broker: timeout", fmt.Errorf("produce: %w", kafka.RequestTimedOut), false},
		{"broker: not enough replicas", kafka.NotEnoughReplicas, false},
		{"none", nil, false},
	} {
		if got := disconnected(tc.err); got != tc.want {
			t.Errorf("%s: disconnected = %v, want %v", tc.name, got, tc.want)
		}
	}
}
