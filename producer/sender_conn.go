package producer

import (
	"context"
	"fmt"
	"time"

	"github.com/segmentio/kafka-go"
	"github.com/segmentio/kafka-go/protocol"
	produceAPI "github.com/segmentio/kafka-go/protocol/produce"
	"github.com/segmentio/kafka-go/protocol/rawproduce"
)

// A sender's connection: requests written on it (send, write), their
// answers settled in order (receive), closed when idle or abandoned.

// send writes one produce request of batches, acks=all, on the sender's
// connection, and hands it to receive, which settles each partition's
// batch by its own answer. A request that cannot leave (the writer
// abandoned, no producer id yet, no connection) settles its batches with
// that failure at once.
func (s *sender) send(batches []batch) {
	w := s.w
	err := w.hold() // abandoned while held: nothing more goes out
	if err == nil {
		err = w.ensureSession()
	}
	var req *rawproduce.Request
	records := 0
	if err == nil {
		if req, records, err = w.produceRequest(batches); err != nil && w.refusedInTransaction(err) == nil {
			err = &Error{Err: err}
		}
	}
	var call *Call
	if err == nil {
		call, err = s.write(req)
	}
	if err != nil {
		for _, b := range batches {
			s.settle(b, err)
		}
		return
	}
	w.cfg.Observer.Request(len(batches), records)
	w.index.sending(s.wentOut(), 0)
	for _, b := range batches {
		b.p.sent(s.conn)
	}
	s.out <- requestOut{call: call, batches: batches, sent: time.Now()} // room for every request out
}

// write sends req on the sender's connection, dialing it first if need be.
func (s *sender) write(req *rawproduce.Request) (*Call, error) {
	w := s.w
	if s.conn != nil && s.conn.Broken() {
		s.closeConn()
	}
	if s.conn == nil {
		addr, ok := w.index.addr(s.broker)
		if !ok {
			return nil, fmt.Errorf("broker %d: no address in the metadata: %w", s.broker, kafka.LeaderNotAvailable)
		}
		conn, err := w.dialer.DialConn(w.abandon, addr, w.depth)
		if err != nil {
			return nil, fmt.Errorf("broker %d: %w", s.broker, err)
		}
		// Abandoned, the requests out fail at once, and a write blocked
		// on a broker that stopped reading returns.
		s.conn, s.unwatch = conn, context.AfterFunc(w.abandon, conn.Close)
	}
	s.lastUsed = time.Now()
	call, err := s.conn.Send(req, time.Now().Add(produceTimeout+5*time.Second))
	if err != nil {
		return nil, fmt.Errorf("broker %d: %w", s.broker, err)
	}
	return call, nil
}

// receive settles the requests out, in the order they left, each once
// its answer (or its connection's failure) is in; it returns once run
// closed out.
func (s *sender) receive() {
	for r := range s.out {
		res, err := r.call.Result()
		rtt := r.call.Answered().Sub(r.sent) // not the settling of earlier answers (a producer id renewed there)
		errs := make([]error, len(r.batches))
		if err == nil {
			codes := answers(res.(*produceAPI.Response))
			for i, b := range r.batches {
				code, ok := codes[b.p.tp]
				switch {
				case !ok:
					errs[i] = fmt.Errorf("no answer for partition %d: %w", b.p.tp.id, protocol.ErrNoPartition)
				case code != 0:
					errs[i] = kafka.Error(code)
				}
			}
		} else {
			for i := range errs {
				errs[i] = err
			}
		}
		for i, b := range r.batches {
			s.settle(b, errs[i])
		}
		s.answered(rtt)
		s.signal()
	}
}

// closeIdle closes the connection once it carried nothing for idleConn.
func (s *sender) closeIdle() {
	if out, _ := s.outstanding(); s.conn != nil && out == 0 && time.Since(s.lastUsed) >= idleConn {
		s.closeConn()
	}
}

// quiet reports whether no request is out: only then does the idle timer
// run (an answer, not the timer, wakes a sender with requests out).
func (s *sender) quiet() bool {
	out, _ := s.outstanding()
	return out == 0
}

// closeConn closes the sender's connection, if any: the requests out on
// it fail.
func (s *sender) closeConn() {
	if s.conn == nil {
		return
	}
	s.unwatch()
	s.conn.Close()
	s.conn = nil
}
