package decode

import (
	"encoding/binary"
	"fmt"
	"time"

	lru "github.com/hashicorp/golang-lru/v2"
	"github.com/jackc/pglogrepl"
)

// relationCacheSize bounds the relation cache. pgoutput sends a Relation
// message once per relation per session (again after a schema change), and
// only published tables reach us, so eviction is not expected; an Insert
// naming an evicted relation is reported as an error, never guessed at.
const relationCacheSize = 4096

// Decoder decodes the pgoutput messages of one replication session, in
// order. It is not safe for concurrent use.
type Decoder struct {
	tables    []Table
	relations *lru.Cache[uint32, *relation]
	prefix    string // of logical decoding messages that are events; empty: none

	// Of the transaction being received.
	commitLSN  pglogrepl.LSN
	commitTime time.Time
	xid        uint32
}

// New returns a decoder for the given outbox tables; inserts into any other
// table are skipped.
func New(tables ...Table) *Decoder {
	cache, err := lru.New[uint32, *relation](relationCacheSize)
	if err != nil {
		panic(err) // only for a size below 1
	}
	return &Decoder{tables: tables, relations: cache}
}

// Decode decodes one pgoutput message, the WALData of one XLogData. The
// returned event owns its bytes: data may be reused once Decode returns.
// A row that cannot become an event yields an *InvalidRowError.
func (d *Decoder) Decode(data []byte) (Result, error) {
	if len(data) == 0 {
		return Result{}, fmt.Errorf("decode pgoutput message: empty")
	}
	switch pglogrepl.MessageType(data[0]) {
	case pglogrepl.MessageTypeInsert:
		return d.insert(data[1:])
	case pglogrepl.MessageTypeBegin:
		var m pglogrepl.BeginMessage
		if err := decodeGuarded(&m, data[1:]); err != nil {
			return Result{}, err
		}
		d.commitLSN, d.commitTime, d.xid = m.FinalLSN, m.CommitTime, m.Xid
		return Result{Kind: KindBegin}, nil
	case pglogrepl.MessageTypeCommit:
		var m pglogrepl.CommitMessage
		if err := decodeGuarded(&m, data[1:]); err != nil {
			return Result{}, err
		}
		return Result{Kind: KindCommit, End: m.TransactionEndLSN}, nil
	case pglogrepl.MessageTypeRelation:
		var m pglogrepl.RelationMessage
		if err := decodeGuarded(&m, data[1:]); err != nil {
			return Result{}, err
		}
		d.relations.Add(m.RelationID, d.newRelation(&m))
		return Result{Kind: KindSkip}, nil
	case pglogrepl.MessageTypeMessage:
		var m pglogrepl.LogicalDecodingMessage
		if err := decodeGuarded(&m, data[1:]); err != nil {
			return Result{}, err
		}
		switch {
		case !m.Transactional && m.Prefix == HeartbeatPrefix:
			return Result{Kind: KindHeartbeat, End: m.LSN}, nil
		case d.prefix != "" && m.Prefix == d.prefix:
			return d.message(&m)
		}
		return Result{Kind: KindSkip}, nil
	case pglogrepl.MessageTypeUpdate, pglogrepl.MessageTypeDelete, pglogrepl.MessageTypeTruncate,
		pglogrepl.MessageTypeType, pglogrepl.MessageTypeOrigin:
		// Only INSERTs are outbox events; an outbox row updated or deleted
		// after its insert was already published as inserted.
		return Result{Kind: KindSkip}, nil
	default:
		return Result{}, fmt.Errorf("decode pgoutput message: unknown type %q (streaming or a newer protocol version?)", data[0])
	}
}

// decodeGuarded runs one of pglogrepl's decoders, which index their input
// without bounds checks: a truncated message becomes an error, not a crash.
func decodeGuarded(m pglogrepl.MessageDecoder, src []byte) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("decode pgoutput %T: malformed message: %v", m, r)
		}
	}()
	if err := m.Decode(src); err != nil {
		return fmt.Errorf("decode pgoutput %T: %w", m, err)
	}
	return nil
}

// insert decodes an Insert message: relation id, 'N', then the new tuple.
func (d *Decoder) insert(src []byte) (Result, error) {
	if len(src) < 7 {
		return Result{}, fmt.Errorf("decode pgoutput insert: %d bytes, want at least 7", len(src))
	}
	relID := binary.BigEndian.Uint32(src)
	if src[4] != 'N' {
		return Result{}, fmt.Errorf("decode pgoutput insert: tuple type %q, want 'N'", src[4])
	}
	rel, ok := d.relations.Get(relID)
	if !ok {
		return Result{}, fmt.Errorf("decode pgoutput insert: relation %d was never described by a Relation message", relID)
	}
	if !rel.outbox {
		return Result{Kind: KindSkip}, nil
	}
	var t tuple
	if err := t.read(src[5:], len(rel.columns)); err != nil {
		return Result{}, fmt.Errorf("decode insert into %s: %w", rel.name, err)
	}
	ev, err := rel.event(&t)
	if err != nil {
		if rowErr, ok := err.(*InvalidRowError); ok {
			rowErr.CommitLSN, rowErr.Xid, rowErr.Mapping = d.commitLSN, d.xid, rel.cols
		}
		return Result{}, err
	}
	ev.CommitLSN, ev.CommitTime, ev.Xid, ev.Table = d.commitLSN, d.commitTime, d.xid, rel.name
	if ev.Time.IsZero() {
		ev.Time = d.commitTime
	}
	return Result{Kind: KindEvent, Event: ev}, nil
}
