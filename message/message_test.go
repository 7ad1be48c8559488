package message

import (
	"bytes"
	"encoding/hex"
	"errors"
	"fmt"
	"reflect"
	"testing"
	"time"
)

func sample() Event {
	return Event{
		ID: "0191e7b2-7c5e-7d3a-9c4e-1a2b3c4d5e6f", AggregateType: "order", AggregateID: "o-1", EventType: "OrderPlaced",
		ContentType: "application/json", Time: time.UnixMicro(1_700_000_000_123_456).UTC(),
		Headers: []Header{{"correlation_id", []byte("c-9")}, {"empty", []byte{}}},
		Payload: []byte(`{"total": 42,  "note": "kept as written"}` + "\x00\xff"),
	}
}

func TestRoundTrip(t *testing.T) {
	ev := sample()
	b, err := Append(nil, &ev)
	if err != nil {
		t.Fatal(err)
	}
	if len(b) != Size(&ev) {
		t.Errorf("Size = %d, encoding is %d bytes", Size(&ev), len(b))
	}
	got, err := Decode(b)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, ev) {
		t.Errorf("round trip:\n got %+v\nwant %+v", got, ev)
	}
}

// TestLayout pins version 1 byte for byte, as docs/messages.md and
// sql/outbox_emit.sql write it.
func TestLayout(t *testing.T) {
	ev := Event{ID: "i", AggregateType: "t", AggregateID: "a", EventType: "e", Headers: []Header{{"k", []byte("v")}}, Payload: []byte("{}")}
	b, err := Append(nil, &ev)
	if err != nil {
		t.Fatal(err)
	}
	want := "01" + "0000000169" + "0000000174" + "0000000161" + "0000000165" + "00000000" +
		"0000000000000000" + "00000001" + "000000016b" + "0000000176" + "000000027b7d"
	if got := hex.EncodeToString(b); got != want {
		t.Errorf("encoding\n got %s\nwant %s", got, want)
	}
	got, err := Decode(b)
	if err != nil {
		t.Fatal(err)
	}
	if got.ContentType != DefaultContentType || !got.Time.IsZero() {
		t.Errorf("content type %q, time %v: want the defaults", got.ContentType, got.Time)
	}
}

func TestDecodeRefuses(t *testing.T) {
	ev := sample()
	good, _ := Append(nil, &ev)
	noID := ev
	noID.ID = "x"
	noIDb, _ := Append(nil, &noID)
	noIDb = bytes.Replace(noIDb, []byte{0, 0, 0, 1, 'x'}, []byte{0, 0, 0, 0}, 1)
	badUTF8 := bytes.Replace(bytes.Clone(good), []byte("order"), []byte("ord\xffr"), 1)
	cases := map[string]struct {
		content []byte
		reason  string
	}{
		"empty":          {nil, ReasonMalformed},
		"version 2":      {append([]byte{2}, good[1:]...), ReasonVersion},
		"trailing bytes": {append(bytes.Clone(good), 0), ReasonMalformed},
		"empty id":       {noIDb, ReasonMalformed},
		"not UTF-8":      {badUTF8, ReasonMalformed},
		"huge header count": {func() []byte {
			b, _ := Append(nil, &Event{ID: "i", AggregateID: "a"})
			copy(b[1+4*5+8:], []byte{0xff, 0xff, 0xff, 0xff})
			return b
		}(), ReasonMalformed},
	}
	for i := 1; i < len(good); i++ {
		cases[fmt.Sprintf("truncated to %d bytes", i)] = struct {
			content []byte
			reason  string
		}{good[:i], ReasonMalformed}
	}
	for name, c := range cases {
		_, err := Decode(c.content)
		var fe *FormatError
		if !errors.As(err, &fe) || fe.Reason != c.reason {
			t.Errorf("%s: err %v, want a %s FormatError", name, err, c.reason)
		}
	}
}

func TestAppendRefuses(t *testing.T) {
	for name, ev := range map[string]Event{
		"no id":           {AggregateID: "a"},
		"no aggregate id": {ID: "i"},
		"not UTF-8":       {ID: "i", AggregateID: "a", EventType: "\xff"},
	} {
		if _, err := Append(nil, &ev); err == nil {
			t.Errorf("%s: encoded", name)
		}
	}
}

func FuzzDecode(f *testing.F) {
	ev := sample()
	b, _ := Append(nil, &ev)
	f.Add(b)
	f.Add([]byte{1})
	f.Fuzz(func(t *testing.T, content []byte) {
		got, err := Decode(content)
		if err != nil || got.AggregateID == "" { // the relay dead-letters an empty key
			return
		}
		// What decodes encodes back to the same bytes, once the default
		// content type is taken for what an empty one meant.
		again, err := Append(nil, &got)
		if err != nil {
			t.Fatalf("decoded %+v does not encode: %v", got, err)
		}
		back, err := Decode(again)
		if err != nil || !reflect.DeepEqual(back, got) {
			t.Fatalf("re-decoded %+v, %v; want %+v", back, err, got)
		}
	})
}
