package replication

import (
	"context"
	"errors"
	"testing"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgproto3"
)

// TestSystemOnTheWire asks a real pgconn connection whose server end is a
// pipe: the server reads IDENTIFY_SYSTEM as Postgres would and answers with
// its row, or with an error.
func TestSystemOnTheWire(t *testing.T) {
	row := func(b *pgproto3.Backend) {
		fields := []pgproto3.FieldDescription{{Name: []byte("systemid")}, {Name: []byte("timeline")}, {Name: []byte("xlogpos")}, {Name: []byte("dbname")}}
		b.Send(&pgproto3.RowDescription{Fields: fields})
		b.Send(&pgproto3.DataRow{Values: [][]byte{[]byte("7312345678901234567"), []byte("3"), []byte("0/16B3748"), []byte("app")}})
		b.Send(&pgproto3.CommandComplete{CommandTag: []byte("IDENTIFY_SYSTEM")})
	}
	refuse := func(b *pgproto3.Backend) {
		b.Send(&pgproto3.ErrorResponse{Severity: "ERROR", Code: "42501", Message: "must be superuser or replication role"})
	}
	tests := []struct {
		name    string
		answer  func(*pgproto3.Backend)
		want    System
		wantErr string // SQLSTATE of the *pgconn.PgError wrapped
	}{
		{"answered", row, System{ID: "7312345678901234567", Timeline: 3, WALEnd: 0x16B3748, Database: "app"}, ""},
		{"refused", refuse, System{}, "42501"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			query := make(chan string, 1)
			pc := servedConn(t, func(b *pgproto3.Backend) { // the server: one query, one answer
				msg, err := b.Receive()
				if q, ok := msg.(*pgproto3.Query); ok && err == nil {
					query <- q.String
				}
				close(query)
				tt.answer(b)
				b.Send(&pgproto3.ReadyForQuery{TxStatus: 'I'})
				_ = b.Flush()
			})
			defer pc.Close(context.Background())
			s := newStream(testConfig(), pgConn{pc}, &fakeProgress{})
			got, err := s.System(context.Background())
			if q := <-query; q != "IDENTIFY_SYSTEM" {
				t.Errorf("server read %q, want IDENTIFY_SYSTEM", q)
			}
			var pgErr *pgconn.PgError
			switch {
			case tt.wantErr == "" && err != nil:
				t.Fatalf("system: %v", err)
			case tt.wantErr != "" && (!errors.As(err, &pgErr) || pgErr.Code != tt.wantErr):
				t.Fatalf("system: %v, want a Postgres error %s", err, tt.wantErr)
			case got != tt.want:
				t.Errorf("system %+v, want %+v", got, tt.want)
			}
		})
	}
}

// TestSystemBeforeStart: once streaming, the connection takes no command,
// so System refuses instead of corrupting the stream.
func TestSystemBeforeStart(t *testing.T) {
	progress := &fakeProgress{confirmed: start}
	conn := newFakeConn(progress)
	conn.system = pglogrepl.IdentifySystemResult{SystemID: "1", Timeline: 2, XLogPos: start, DBName: "app"}
	s := newStream(testConfig(), conn, progress)
	got, err := s.System(context.Background())
	if want := (System{ID: "1", Timeline: 2, WALEnd: start, Database: "app"}); err != nil || got != want {
		t.Fatalf("before start: %+v, %v; want %+v", got, err, want)
	}
	if err := s.Start(context.Background(), start); err != nil {
		t.Fatal(err)
	}
	defer s.Close(context.Background())
	if _, err := s.System(context.Background()); err == nil {
		t.Fatal("System while streaming: no error")
	}
}
