package decode

import (
	"encoding/binary"
	"errors"
	"testing"
	"time"

	"github.com/jackc/pglogrepl"

	"github.com/outbox-cdc/outbox-cdc/message"
)

// logicalMsg builds a pgoutput Message message.
func logicalMsg(transactional bool, lsn pglogrepl.LSN, prefix string, content []byte) []byte {
	b := []byte{'M', 0}
	if transactional {
		b[1] = 1
	}
	b = binary.BigEndian.AppendUint64(b, uint64(lsn))
	b = append(append(b, prefix...), 0)
	b = binary.BigEndian.AppendUint32(b, uint32(len(content)))
	return append(b, content...)
}

func encoded(t *testing.T, ev message.Event) []byte {
	t.Helper()
	b, err := message.Append(nil, &ev)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestDecodeMessages(t *testing.T) {
	d := New(Table{Schema: "public", Name: "outbox", Columns: defaultCols})
	d.DecodeMessages("outbox")
	at := time.Date(2026, 11, 23, 10, 0, 0, 0, time.UTC)
	ev := message.Event{ID: "e-1", AggregateType: "order", AggregateID: "o-1", EventType: "OrderPaid",
		Headers: []message.Header{{Key: "z", Value: []byte("1")}, {Key: "id", Value: []byte("spoofed")}, {Key: "a", Value: []byte("2")}}, Payload: []byte(`{"paid":  true}`)}
	res := decodeAll(t, d,
		beginMsg(0x3000, at, 77),
		logicalMsg(true, 0x2100, "outbox", encoded(t, ev)),
		logicalMsg(true, 0x2200, "not-ours", encoded(t, ev)),
		commitMsg(0x3000, 0x3010, at))
	if res[1].Kind != KindEvent || res[1].Standalone {
		t.Fatalf("transactional message: %+v, want an event of its transaction", res[1])
	}
	got := res[1].Event
	switch {
	case got.ID != "e-1" || got.AggregateID != "o-1" || got.EventType != "OrderPaid" || got.AggregateType != "order":
		t.Errorf("event %+v", got)
	case string(got.Payload) != `{"paid":  true}`:
		t.Errorf("payload %q, want it byte for byte", got.Payload)
	case got.CommitLSN != 0x3000 || got.Xid != 77 || !got.CommitTime.Equal(at) || !got.Time.Equal(at):
		t.Errorf("commit %s xid %d time %s/%s, want the transaction's", got.CommitLSN, got.Xid, got.CommitTime, got.Time)
	case got.ContentType != message.DefaultContentType || !got.Message || got.Table != MessageSource+"outbox":
		t.Errorf("content type %q, message %v, source %q", got.ContentType, got.Message, got.Table)
	case len(got.Headers) != 2 || got.Headers[0].Key != "a" || got.Headers[1].Key != "z":
		t.Errorf("headers %+v, want a and z sorted, the reserved id left out", got.Headers)
	}
	if res[2].Kind != KindSkip {
		t.Errorf("another prefix: kind %d, want skip", res[2].Kind)
	}

	// Non-transactional: an event of its own, confirmed at the message.
	res = decodeAll(t, d, logicalMsg(false, 0x4000, "outbox", encoded(t, ev)))
	if r := res[0]; r.Kind != KindEvent || !r.Standalone || r.End != 0x4000 || r.Event.CommitLSN != 0x4000 {
		t.Errorf("non-transactional message: %+v, want a standalone event ending at 0/4000", r)
	}

	// Messages off: skipped like any other.
	off := New(Table{Schema: "public", Name: "outbox", Columns: defaultCols})
	if res := decodeAll(t, off, logicalMsg(true, 0x2100, "outbox", encoded(t, ev))); res[0].Kind != KindSkip {
		t.Errorf("with messages off: kind %d, want skip", res[0].Kind)
	}
}

func TestDecodeBadMessages(t *testing.T) {
	d := New()
	d.DecodeMessages("outbox")
	good := encoded(t, message.Event{ID: "e-1", AggregateID: "o-1", Payload: []byte("{}")})
	for name, c := range map[string]struct {
		content []byte
		reason  string
	}{
		"version 9": {append([]byte{9}, good[1:]...), message.ReasonVersion},
		"truncated": {good[:len(good)-1], message.ReasonMalformed},
		"empty":     {nil, message.ReasonMalformed},
		"empty key": {encodedNoKey(), ReasonEmptyAggregateID},
	} {
		res, err := d.Decode(logicalMsg(false, 0x5000, "outbox", c.content))
		var rowErr *InvalidRowError
		if !errors.As(err, &rowErr) {
			t.Errorf("%s: %v, want an *InvalidRowError", name, err)
			continue
		}
		if rowErr.Reason != c.reason || rowErr.Table != MessageSource+"outbox" || rowErr.CommitLSN != 0x5000 {
			t.Errorf("%s: reason %q table %q lsn %s, want %q from %q at 0/5000", name, rowErr.Reason, rowErr.Table, rowErr.CommitLSN, c.reason, MessageSource+"outbox")
		}
		if v, ok := rowErr.Column(rowErr.Mapping.Payload); !ok || string(v) != string(c.content) {
			t.Errorf("%s: the dead letter's value %q, want the content as it was", name, v)
		}
		if !res.Standalone || res.End != 0x5000 {
			t.Errorf("%s: result %+v, want standalone at 0/5000 so that the dead letter is confirmed", name, res)
		}
	}
}

// encodedNoKey is a well-formed version 1 message whose aggregate id is
// empty, which Append refuses to write.
func encodedNoKey() []byte {
	str := func(b []byte, s string) []byte { return append(binary.BigEndian.AppendUint32(b, uint32(len(s))), s...) }
	b := []byte{message.Version1}
	for _, s := range []string{"e-3", "order", "", "E", ""} {
		b = str(b, s)
	}
	b = binary.BigEndian.AppendUint64(b, 0)
	b = binary.BigEndian.AppendUint32(b, 0)
	return str(b, "{}")
}
