package testkit

import (
	"reflect"
	"testing"
)

func TestParseLogLine(t *testing.T) {
	tests := []struct {
		name string
		line string
		want LogRecord
	}{
		{"quoted message and plain attributes",
			`time=2025-01-02T03:04:05.000Z level=INFO msg="slot healed" slot=heal_1 cause=wal_removed rows=42 took=1.5s`,
			LogRecord{"time": "2025-01-02T03:04:05.000Z", "level": "INFO", "msg": "slot healed", "slot": "heal_1", "cause": "wal_removed", "rows": "42", "took": "1.5s"}},
		{"a quoted value with spaces, quotes and an equals sign",
			`level=WARN msg="replication slot lost: healing from the outbox" tables="public.a, \"b\"=c" cause=dropped`,
			LogRecord{"level": "WARN", "msg": "replication slot lost: healing from the outbox", "tables": `public.a, "b"=c`, "cause": "dropped"}},
		{"a plain one-word message", `level=INFO msg=streaming slot=s`, LogRecord{"level": "INFO", "msg": "streaming", "slot": "s"}},
		{"not slog's: a race report", `WARNING: DATA RACE`, nil},
		{"an unclosed quote", `level=INFO msg="slot healed`, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := ParseLogLine(tt.line); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("ParseLogLine(%q) = %v, want %v", tt.line, got, tt.want)
			}
		})
	}
}

func TestLogRecordsKeepsOnlyTheMessage(t *testing.T) {
	log := "level=INFO msg=streaming\nlevel=INFO msg=\"slot healed\" rows=1\ngoroutine 1 [running]:\nlevel=INFO msg=\"slot healed\" rows=2\n"
	got := LogRecords(log, "slot healed")
	if len(got) != 2 || got[0]["rows"] != "1" || got[1]["rows"] != "2" {
		t.Errorf("LogRecords = %v, want the two slot healed lines in order", got)
	}
}
