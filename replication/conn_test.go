package replication

import (
	"context"
	"encoding/binary"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgproto3"
)

// TestStatusOnTheWire closes a stream on a real pgconn connection whose
// server end is a pipe, and reads the final status update as Postgres
// would: through pglogrepl, a zero flush position would become the write
// position.
func TestStatusOnTheWire(t *testing.T) {
	tests := []struct {
		name                  string
		confirmed             pglogrepl.LSN
		write, flush, applied pglogrepl.LSN
	}{
		{"nothing confirmed yet", 0, 0, 0, 0},
		{"confirmed behind received", start - 0x100, start, start - 0x100, start - 0x100},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			read := make(chan []byte, 1)
			pc := servedConn(t, func(b *pgproto3.Backend) { // the server: the first message sent
				defer close(read)
				if msg, err := b.Receive(); err == nil {
					if cd, ok := msg.(*pgproto3.CopyData); ok {
						read <- slices.Clone(cd.Data)
					}
				}
			})
			s := newStream(testConfig(), pgConn{pc}, &fakeProgress{confirmed: tt.confirmed})
			s.received, s.streaming = start, true
			if err := s.Close(context.Background()); err != nil {
				t.Fatalf("close: %v", err)
			}
			data := <-read
			if len(data) != 34 || data[0] != pglogrepl.StandbyStatusUpdateByteID {
				t.Fatalf("server read %x, want a standby status update", data)
			}
			u := func(i int) pglogrepl.LSN { return pglogrepl.LSN(binary.BigEndian.Uint64(data[1+8*i:])) }
			if u(0) != tt.write || u(1) != tt.flush || u(2) != tt.applied {
				t.Errorf("on the wire: write %s flush %s apply %s, want %s %s %s", u(0), u(1), u(2), tt.write, tt.flush, tt.applied)
			}
		})
	}
}

func TestStartAndClose(t *testing.T) {
	tests := []struct {
		name      string
		startErr  error
		wantErr   error
		wantSent  int // status updates sent by Close
		wantStart string
	}{
		{"streaming", nil, nil, 1, `publication_names '"it''s ""x"""'`},
		{"slot in use", &pgconn.PgError{Code: "55006", Message: `replication slot "outbox" is active for PID 42`}, ErrSlotActive, 0, ""},
		{"slot missing", &pgconn.PgError{Code: "42704", Message: `replication slot "outbox" does not exist`}, nil, 0, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			progress := &fakeProgress{confirmed: start - 0x10}
			conn := newFakeConn(progress)
			conn.startErr = tt.startErr
			cfg := testConfig()
			cfg.Publication = `it's "x"`
			s := newStream(cfg, conn, progress)
			err := s.Start(context.Background(), start)
			switch {
			case tt.startErr == nil && err != nil:
				t.Fatalf("start: %v", err)
			case tt.startErr != nil && (err == nil || !strings.Contains(err.Error(), tt.startErr.(*pgconn.PgError).Message)):
				t.Errorf("start: %v, want the server's message", err)
			case tt.wantErr != nil && !errors.Is(err, tt.wantErr):
				t.Errorf("start: %v, want %v", err, tt.wantErr)
			case tt.startErr != nil && tt.wantErr == nil && errors.Is(err, ErrSlotActive):
				t.Errorf("start: %v is not a slot in use", err)
			}
			if tt.wantStart != "" && !slices.Contains(conn.started, tt.wantStart) {
				t.Errorf("plugin arguments %q, want %s", conn.started, tt.wantStart)
			}
			for range 2 { // safe to call twice
				if err := s.Close(context.Background()); err != nil {
					t.Fatalf("close: %v", err)
				}
			}
			sent := conn.statuses()
			if len(sent) != tt.wantSent || !conn.IsClosed() {
				t.Fatalf("close sent %d status updates, closed %v; want %d, closed", len(sent), conn.IsClosed(), tt.wantSent)
			}
			checkFlushIsConfirmed(t, sent)
		})
	}
}
