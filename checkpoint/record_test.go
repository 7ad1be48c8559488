package checkpoint

import (
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"
)

func ptr(s string) *string { return &s }

func sample() Record {
	return Record{
		Slot: "outbox_cdc", Database: "app", SystemID: "7312345678901234567", Timeline: 2,
		CommitLSN: 0x16B3748, EndLSN: 0x16B3779, Xid: 4242,
		CommitTime: time.Date(2026, 11, 25, 15, 0, 1, 123456000, time.UTC), Host: "relay-1", PID: 77,
	}
}

func TestEncode(t *testing.T) {
	paris := time.FixedZone("CET", 3600)
	tests := []struct {
		name    string
		edit    func(*Record)
		want    string
		wantErr bool
	}{
		{"compact, versioned, LSNs as Postgres writes them", func(*Record) {},
			`{"v":"1.1","slot":"outbox_cdc","db":"app","sysid":"7312345678901234567","tli":2,"commit_lsn":"0/16B3748","end_lsn":"0/16B3779","xid":4242,"commit_time":"2026-11-25T15:00:01.123456Z","host":"relay-1","pid":77}`, false},
		{"commit time in UTC; Version ignored; no instance", func(r *Record) {
			r.CommitTime, r.Version, r.Host, r.PID = r.CommitTime.In(paris), "9.9", "", 0
		},
			`{"v":"1.1","slot":"outbox_cdc","db":"app","sysid":"7312345678901234567","tli":2,"commit_lsn":"0/16B3748","end_lsn":"0/16B3779","xid":4242,"commit_time":"2026-11-25T15:00:01.123456Z"}`, false},
		{"a backfill's progress", func(r *Record) {
			r.Host, r.PID = "", 0
			r.Backfill = &Backfill{Table: "public.outbox", ConsistentPoint: 0x16B0000, Done: 2, After: []*string{ptr("2026-11-25 15:00:00+00"), nil, ptr("b")}}
		},
			`{"v":"1.1","slot":"outbox_cdc","db":"app","sysid":"7312345678901234567","tli":2,"commit_lsn":"0/16B3748","end_lsn":"0/16B3779","xid":4242,"commit_time":"2026-11-25T15:00:01.123456Z",` +
				`"backfill":{"table":"public.outbox","point":"0/16B0000","done":2,"after":["2026-11-25 15:00:00+00",null,"b"]}}`, false},
		{"a backfill without a key", func(r *Record) { r.Backfill = &Backfill{Table: "public.outbox", ConsistentPoint: 1, Done: 2} }, "", true},
		{"a backfill without a point", func(r *Record) { r.Backfill = &Backfill{Table: "public.outbox"} }, "", true},
		{"no system identifier", func(r *Record) { r.SystemID = "" }, "", true},
		{"no slot", func(r *Record) { r.Slot = "" }, "", true},
		{"timeline 0", func(r *Record) { r.Timeline = 0 }, "", true},
		{"no end", func(r *Record) { r.CommitLSN, r.EndLSN = 0, 0 }, "", true},
		{"end before commit", func(r *Record) { r.EndLSN = r.CommitLSN - 1 }, "", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := sample()
			tt.edit(&r)
			got, err := r.Encode()
			if (err != nil) != tt.wantErr || string(got) != tt.want {
				t.Fatalf("encode: %s, %v; want %s (error %v)", got, err, tt.want, tt.wantErr)
			}
		})
	}
}

func TestDecode(t *testing.T) {
	valid := `"slot":"outbox_cdc","db":"app","sysid":"7312345678901234567","tli":2,"commit_lsn":"0/16B3748","end_lsn":"0/16B3779","xid":4242,"commit_time":"2026-11-25T15:00:01.123456Z","host":"relay-1","pid":77`
	want := sample()
	want.Version = "1.0"
	newer := want
	newer.Version = "1.7"
	noXid := want
	noXid.Xid = 0
	tests := []struct {
		name    string
		value   string
		want    Record
		wantErr error
	}{
		{"format 1.0", `{"v":"1.0",` + valid + `}`, want, nil},
		{"a later minor version: new fields ignored", `{"v":"1.7",` + valid + `,"epoch":3}`, newer, nil},
		{"no transaction id: xid 0, which HasXid reports", `{"v":"1.0",` + strings.Replace(valid, `"xid":4242,`, "", 1) + `}`, noXid, nil},
		{"a later major version", `{"v":"2.0",` + valid + `}`, Record{}, ErrUnsupportedVersion},
		{"an earlier major version", `{"v":"0.9",` + valid + `}`, Record{}, ErrUnsupportedVersion},
		{"no version", `{` + valid + `}`, Record{}, ErrBadRecord},
		{"version not MAJOR.MINOR", `{"v":"1",` + valid + `}`, Record{}, ErrBadRecord},
		{"version not text", `{"v":1.0,` + valid + `}`, Record{}, ErrBadRecord},
		{"not JSON", `0/16B3779`, Record{}, ErrBadRecord},
		{"empty", ``, Record{}, ErrBadRecord},
		{"bad LSN", `{"v":"1.0","slot":"s","sysid":"1","tli":1,"commit_lsn":"16B3748","end_lsn":"0/16B3779"}`, Record{}, ErrBadRecord},
		{"end before commit", `{"v":"1.0","slot":"s","sysid":"1","tli":1,"commit_lsn":"0/2","end_lsn":"0/1"}`, Record{}, ErrBadRecord},
		{"no slot", `{"v":"1.0","sysid":"1","tli":1,"commit_lsn":"0/1","end_lsn":"0/2"}`, Record{}, ErrBadRecord},
		{"a backfill's bad point", `{"v":"1.1",` + valid + `,"backfill":{"table":"public.outbox","point":"x","done":0}}`, Record{}, ErrBadRecord},
		{"a backfill without a table", `{"v":"1.1",` + valid + `,"backfill":{"point":"0/1","done":0}}`, Record{}, ErrBadRecord},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Decode([]byte(tt.value))
			if !errors.Is(err, tt.wantErr) || (tt.wantErr == nil && err != nil) {
				t.Fatalf("decode: %v, want %v", err, tt.wantErr)
			}
			if !got.CommitTime.Equal(tt.want.CommitTime) {
				t.Errorf("commit time %s, want %s", got.CommitTime, tt.want.CommitTime)
			}
			got.CommitTime, tt.want.CommitTime = time.Time{}, time.Time{}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("decoded %+v\nwant    %+v", got, tt.want)
			}
		})
	}
}

// TestRoundTrip: what Encode writes, Decode reads back as it was, whatever
// the commit time's zone, with a transaction id or without (xid 0).
func TestRoundTrip(t *testing.T) {
	backfilling := sample()
	backfilling.Backfill = &Backfill{Table: "s.t", ConsistentPoint: 9, Snapshot: "10:12:10,11", Done: 1, After: []*string{nil, ptr("x")}, Finished: true}
	for _, r := range []Record{sample(), {SystemID: "1", Slot: "s", Timeline: 1, CommitLSN: 0, EndLSN: 1}, backfilling} {
		r.CommitTime = r.CommitTime.In(time.FixedZone("X", -7200))
		b, err := r.Encode()
		if err != nil {
			t.Fatal(err)
		}
		got, err := Decode(b)
		if err != nil {
			t.Fatal(err)
		}
		if !got.CommitTime.Equal(r.CommitTime) {
			t.Errorf("commit time %s, want %s", got.CommitTime, r.CommitTime)
		}
		got.CommitTime, r.CommitTime, r.Version = time.Time{}, time.Time{}, FormatVersion
		if !reflect.DeepEqual(got, r) {
			t.Errorf("round trip %+v\nwant       %+v", got, r)
		}
	}
}

func TestKey(t *testing.T) {
	if got := sample().Key(); got != "7312345678901234567/outbox_cdc" {
		t.Errorf("key %q", got)
	}
	if Key("1", "a_b") == Key("1a", "_b") {
		t.Error("keys of different systems and slots collide")
	}
}
