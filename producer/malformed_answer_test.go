package producer

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/segmentio/kafka-go/protocol"
	"github.com/segmentio/kafka-go/protocol/apiversions"
	"github.com/segmentio/kafka-go/protocol/initproducerid"
	"github.com/segmentio/kafka-go/protocol/rawproduce"
)

// frame is a response frame: its size prefix, correlation id and rest.
func frame(id int32, rest ...[]byte) []byte {
	b := binary.BigEndian.AppendUint32(make([]byte, 4), uint32(id))
	for _, r := range rest {
		b = append(b, r...)
	}
	binary.BigEndian.PutUint32(b, uint32(len(b)-4))
	return b
}

func be16(v int16) []byte     { return binary.BigEndian.AppendUint16(nil, uint16(v)) }
func be32(v int32) []byte     { return binary.BigEndian.AppendUint32(nil, uint32(v)) }
func be64(v int64) []byte     { return binary.BigEndian.AppendUint64(nil, uint64(v)) }
func uvarint(v uint64) []byte { return binary.AppendUvarint(nil, v) }

// brokerVersions is what the fake broker advertises: InitProducerId v4
// (flexible) and Produce v8 (not), as a current broker does.
var brokerVersions = []apiversions.ApiKeyResponse{
	{ApiKey: int16(protocol.Produce), MinVersion: 0, MaxVersion: 9},
	{ApiKey: int16(protocol.Metadata), MinVersion: 0, MaxVersion: 12},
	{ApiKey: int16(protocol.InitProducerId), MinVersion: 0, MaxVersion: 4},
}

// fakeBroker answers ApiVersions with brokerVersions, then every other
// request with answer(correlation id). It reports on closed once the
// client closes its connection.
func fakeBroker(t *testing.T, answer func(id int32) []byte) (addr string, closed <-chan struct{}) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	served := make(chan struct{})
	t.Cleanup(func() { _ = ln.Close(); <-served })
	go func() {
		defer close(served)
		nc, err := ln.Accept()
		if err != nil {
			return
		}
		defer nc.Close()
		_ = nc.SetDeadline(time.Now().Add(20 * time.Second))
		for {
			version, id, _, msg, err := protocol.ReadRequest(nc)
			if err != nil {
				close(done) // the client closed the connection (or it timed out)
				return
			}
			var out []byte
			if msg.ApiKey() == protocol.ApiVersions {
				var b bytes.Buffer
				_ = protocol.WriteResponse(&b, version, id, &apiversions.Response{ApiKeys: brokerVersions})
				out = b.Bytes()
			} else {
				out = answer(id)
			}
			if _, err := nc.Write(out); err != nil {
				return
			}
		}
	}()
	return ln.Addr().String(), done
}

// TestMalformedAnswerBreaksOnlyTheConnection: an answer whose lengths do
// not fit in it (or a frame past any sane size) fails the request that
// awaited it with an error naming the answer malformed, and breaks its
// connection as a disconnection does, instead of crashing the process in
// kafka-go's decoder (a panic on a negative length, or a fatal
// out-of-memory for a huge count).
func TestMalformedAnswerBreaksOnlyTheConnection(t *testing.T) {
	initPID := &initproducerid.Request{TransactionTimeoutMs: 60_000, ProducerID: -1, ProducerEpoch: -1}
	produce := &rawproduce.Request{Acks: -1, Timeout: 1000}
	pidBody := [][]byte{be32(0), be16(0), be64(1), be16(0), uvarint(0)} // throttle, error, id, epoch, no tags
	tests := []struct {
		name   string
		req    protocol.Message
		answer func(id int32) []byte
		want   string
	}{
		{"tagged-field count of 2^64-1", initPID, func(id int32) []byte {
			return frame(id, append([][]byte{uvarint(1<<64 - 1)}, pidBody...)...)
		}, "InitProducerId v4"},
		{"tagged-field size of 2^64-1", initPID, func(id int32) []byte {
			return frame(id, append([][]byte{uvarint(1), uvarint(0), uvarint(1<<64 - 1)}, pidBody...)...)
		}, "InitProducerId v4"},
		{"array count of 0x7fffffff", produce, func(id int32) []byte {
			return frame(id, be32(0x7fffffff), be32(0))
		}, "Produce v8"},
		{"string past the frame", produce, func(id int32) []byte {
			return frame(id, be32(1), be16(1000), []byte("topic"))
		}, "Produce v8"},
		{"frame of 2 GiB", produce, func(id int32) []byte {
			return append(be32(-1<<31), be32(id)...)
		}, "Produce v8"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			addr, closed := fakeBroker(t, tt.answer)
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			conn, err := Dialer{ClientID: "test"}.DialConn(ctx, addr, 1)
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			call, err := conn.Send(tt.req, time.Now().Add(10*time.Second))
			if err != nil {
				t.Fatal(err)
			}
			res, err := call.Result()
			if err == nil {
				t.Fatalf("the malformed answer was decoded: %+v", res)
			}
			if !strings.Contains(err.Error(), "malformed "+tt.want+" answer") {
				t.Errorf("err = %v, want one saying the %s answer was malformed", err, tt.want)
			}
			if errors.Is(err, io.ErrUnexpectedEOF) {
				t.Errorf("err = %v: a truncated answer, not a malformed one", err)
			}
			if !conn.Broken() {
				t.Error("the connection still takes requests")
			}
			select {
			case <-closed:
			case <-time.After(5 * time.Second):
				t.Error("the connection was not closed")
			}
		})
	}
}
