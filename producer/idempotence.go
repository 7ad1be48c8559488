package producer

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"sync"
	"time"

	"github.com/segmentio/kafka-go"
	"github.com/segmentio/kafka-go/protocol"
	"github.com/segmentio/kafka-go/protocol/initproducerid"
)

// The writer is an idempotent producer, as the Java producer is by
// default: each batch carries a producer id, its epoch and the sequence
// number of its first record in its partition, so that the broker writes a
// batch sent twice (its answer lost, a timeout after the write) once.
//
// A partition may have up to MaxInFlightRequests batches out, each with
// the sequences it took when first sent; a retry carries the same records
// with the same sequence (settle). A broker that refuses the sequence of a
// batch sent alone (it lost the producer's state, or the sequences
// diverged) makes the writer ask for a new producer id; the partition
// starts again from sequence 0 under it and its batches are retried, which
// may duplicate them (at least once allows that; the event is never lost).
//
// A broker that refuses producer ids (no IDEMPOTENT_WRITE permission, a
// broker too old) leaves the writer non-idempotent, as it was before, with
// one warning.

// session is a producer id and epoch from InitProducerID.
type session struct {
	id    int64
	epoch int16
}

// sequence is one partition's place in a session: part of the
// partition's state, guarded by its lock (partition.go), which calls the
// methods below.
type sequence struct {
	session
	next int32 // the base sequence of the partition's next batch
	// gen counts the times the sequences stamped after next became void
	// (a batch refused for what it is, see afterSettle): a retry stamped
	// in an older generation is stamped again.
	gen uint32
	// ackedAt is when a batch of this session was last acknowledged: the
	// broker then keeps the producer's state for the partition (see
	// partition.joins).
	ackedAt time.Time
}

// idempotence is the writer's producer identity. Its locks are locked
// only here.
type idempotence struct {
	renew sync.Mutex // one InitProducerID at a time

	mu      sync.Mutex
	asked   bool    // InitProducerID answered, or refused for good
	off     bool    // refused: batches carry no producer id
	current session // the id new partitions (and fenced ones) use
}

// producerState is the producer identity as one look saw it, and
// whether batches are transactional.
type producerState struct {
	asked, off, transactional bool
	current                   session
}

// state returns the producer identity now.
func (id *idempotence) state(transactional bool) producerState {
	id.mu.Lock()
	defer id.mu.Unlock()
	return producerState{asked: id.asked, off: id.off, transactional: transactional, current: id.current}
}

// renewed makes s the producer identity.
func (id *idempotence) renewed(s session) {
	id.mu.Lock()
	defer id.mu.Unlock()
	id.asked, id.current = true, s
}

// refusedForGood leaves the writer without idempotence.
func (id *idempotence) refusedForGood() {
	id.mu.Lock()
	defer id.mu.Unlock()
	id.asked, id.off = true, true
}

// initProducerIDOverride marks initProducerIDRequest in kafka-go's
// protocol tables.
const initProducerIDOverride protocol.OverrideTypeKey = 22

// initProducerIDRequest is kafka-go's InitProducerID request without its
// Transaction method: kafka-go sends that one to the transaction
// coordinator of its transactional id, through a FindCoordinator that a
// producer without a transactional id needs not (and may not be allowed
// to) make. This type goes to any broker, as the Java producer's does.
type initProducerIDRequest initproducerid.Request

func (r *initProducerIDRequest) ApiKey() protocol.ApiKey { return protocol.InitProducerId }

func (r *initProducerIDRequest) TypeKey() protocol.OverrideTypeKey { return initProducerIDOverride }

func init() {
	protocol.RegisterOverride(&initProducerIDRequest{}, &initproducerid.Response{}, initProducerIDOverride)
}

// ensureSession asks for a producer id before the writer's first batch. A
// failure that may pass is returned transient, so the batches are retried.
func (w *Writer) ensureSession() error {
	if w.idem.state(false).asked {
		return nil
	}
	return w.renewSession(session{id: -1, epoch: -1}, nil)
}

// renewSession asks for a new producer id unless the writer's current one
// is no longer old (another partition renewed it meanwhile). cause is the
// broker's refusal of old, nil for the first one.
func (w *Writer) renewSession(old session, cause error) error {
	w.idem.renew.Lock()
	defer w.idem.renew.Unlock()
	if st := w.idem.state(false); st.off || st.asked && st.current != old {
		return nil
	}
	ctx, cancel := context.WithTimeout(w.abandon, 10*time.Second)
	defer cancel()
	s, err := w.initProducerID(ctx)
	if err != nil {
		perr := Classify(err)
		if perr.Transient || w.abandon.Err() != nil {
			return &Error{Err: fmt.Errorf("get a producer id: %w", err), Transient: true}
		}
		w.idem.refusedForGood()
		w.log.Warn("the broker gives no producer id: sending without idempotence (a retried batch may be written twice)", slog.Any("err", err))
		return nil
	}
	w.idem.renewed(s)
	if cause != nil {
		w.log.Warn("the broker refused the producer's sequence: continuing under a new producer id, the refused batch may be written twice",
			slog.Int64("old_producer_id", old.id), slog.Int64("producer_id", s.id), slog.Any("err", cause))
	} else {
		w.log.Debug("idempotent producer", slog.Int64("producer_id", s.id), slog.Int("epoch", int(s.epoch)))
	}
	return nil
}

// initProducerID asks any broker for a producer id without a
// transactional id.
func (w *Writer) initProducerID(ctx context.Context) (session, error) {
	res, err := w.client.Transport.RoundTrip(ctx, w.client.Addr, &initProducerIDRequest{
		TransactionTimeoutMs: 60_000, ProducerID: -1, ProducerEpoch: -1, // as the Java producer sends it; unused without a transactional id
	})
	if err != nil {
		return session{}, fmt.Errorf("init producer id: %w", err)
	}
	r := res.(*initproducerid.Response)
	if r.ErrorCode != 0 {
		return session{}, fmt.Errorf("init producer id: %w", kafka.Error(r.ErrorCode))
	}
	return session{id: r.ProducerID, epoch: r.ProducerEpoch}, nil
}

// stamp returns the producer fields of a partition's next batch, its
// session and sequence (seq, made on first use and returned), without
// taking the sequence (reserve takes it).
func (st producerState) stamp(seq *sequence) (BatchHeader, *sequence) {
	if st.off || !st.asked {
		return NoProducer, seq
	}
	if seq == nil {
		seq = &sequence{session: st.current}
	}
	return BatchHeader{ProducerID: seq.id, ProducerEpoch: seq.epoch, BaseSequence: seq.next, Transactional: st.transactional}, seq
}

// reserve stamps b, a batch not stamped in seq's session and generation,
// with seq's next sequence, and moves seq past it: the batches of a
// partition out at once each have their own. It returns the partition's
// sequence (made on first use).
func (st producerState) reserve(b *batch, seq *sequence) *sequence {
	if b.h.ProducerID >= 0 && seq != nil && b.h.ProducerID == seq.id && b.h.ProducerEpoch == seq.epoch && b.gen == seq.gen {
		return seq // a retry: the same sequence again
	}
	b.h, seq = st.stamp(seq)
	if b.h.ProducerID >= 0 {
		b.gen = seq.gen
		seq.next = addSequence(seq.next, len(b.msgs))
	}
	return seq
}

// refenced returns the partition's sequence once the broker refused old
// for it and the writer renewed its producer id (st): the new session
// from sequence 0, or none once idempotence is off.
func (st producerState) refenced(seq *sequence, old session) *sequence {
	switch {
	case st.off && seq != nil:
		// The broker gives no producer id any more: the batch goes again
		// without one (reserve stamps it afresh), or it would be refused
		// for the old one for ever.
		return nil
	case seq != nil && seq.session == old && st.current != old:
		return &sequence{session: st.current}
	}
	return seq
}

// rewind gives b's sequence, refused for what b is, to the salvage of its
// messages: the sequences stamped after it are void (a new generation).
func (s *sequence) rewind(b batch) {
	if s != nil && b.h.ProducerID == s.id && b.h.ProducerEpoch == s.epoch && b.gen == s.gen {
		s.next = b.h.BaseSequence
		s.gen++
	}
}

// addSequence adds n to a sequence number, wrapping past MaxInt32 to 0 as
// Kafka does.
func addSequence(seq int32, n int) int32 {
	if int64(seq)+int64(n) > math.MaxInt32 {
		return int32(int64(seq) + int64(n) - math.MaxInt32 - 1)
	}
	return seq + int32(n)
}

// fenced reports whether err is the broker refusing a batch's producer id,
// epoch or sequence: what a new producer id cures.
func fenced(err error) bool {
	return errors.Is(err, kafka.OutOfOrderSequenceNumber) || errors.Is(err, kafka.UnknownProducerId) ||
		errors.Is(err, kafka.InvalidProducerEpoch)
}

// refence handles the broker's refusal (err) of h, p's batch: it renews
// the writer's producer id if h still carries it, and moves p to the new
// one, from sequence 0. The caller retries the batch. Called while p's
// batch is out (busy), so nothing else sends for p; the caller (a sender,
// or a salvage) waits for the InitProducerID round trip, at most 10 s,
// which is rare enough not to be worth a goroutine.
func (w *Writer) refence(p *partition, h BatchHeader, err error) error {
	old := session{id: h.ProducerID, epoch: h.ProducerEpoch}
	if rerr := w.renewSession(old, err); rerr != nil {
		return rerr
	}
	p.refenced(old, w.idem.state(w.transactional()))
	return nil
}
