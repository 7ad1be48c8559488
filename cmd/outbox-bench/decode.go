package main

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgproto3"
)

// inServerDecode times the server decoding the backlog behind slot in one
// backend, with pgoutput as the relay asks for it and nothing sent to a
// client but a count: the walsender's work without its network, a rate no
// relay can pass on this machine (streaming it over a socket costs the
// walsender more: see the bare reader's walsender CPU). It peeks (the slot stays where it
// is) and returns rows/s; want is how many rows the backlog holds.
func (b *bench) inServerDecode(ctx context.Context, slot, publication string, want int) (float64, error) {
	began := time.Now()
	var changes int
	err := b.db.QueryRow(ctx, `SELECT count(*) FROM pg_logical_slot_peek_binary_changes($1, NULL, NULL,
		'proto_version', '1', 'publication_names', $2, 'messages', 'true')`, slot, publication).Scan(&changes)
	if err != nil {
		return 0, err
	}
	took := time.Since(began)
	if changes < want {
		return 0, fmt.Errorf("decoded %d changes, fewer than the %d rows of the backlog", changes, want)
	}
	return float64(want) / took.Seconds(), nil
}

// decoded is what the bare reader read of a backlog.
type decoded struct {
	rows         int           // outbox INSERTs, and messages of the publication's prefix
	bytes        int64         // pgoutput bytes received
	end          pglogrepl.LSN // the end of the last transaction
	took         time.Duration
	walsender    float64       // the walsender's CPU seconds while it streamed
	walsenderFor time.Duration // how long that was
}

// decodeCeiling streams slot with nothing but pglogrepl, counting the
// outbox INSERTs (and messages whose prefix is the publication's name)
// until want were seen.
func (b *bench) decodeCeiling(ctx context.Context, slot, publication string, want int) (decoded, error) {
	var d decoded
	conn, err := b.replicationConn(ctx)
	if err != nil {
		return d, err
	}
	defer conn.Close(context.Background())
	began := time.Now()
	err = pglogrepl.StartReplication(ctx, conn, slot, 0, pglogrepl.StartReplicationOptions{
		PluginArgs: []string{"proto_version '1'", "publication_names '" + publication + "'", "messages 'true'"},
	})
	if err != nil {
		return d, err
	}
	walsender := b.walsenderPID(ctx, slot)
	walsenderBefore, walsenderFrom := procCPU(walsender), time.Now()
	ctx, cancel := context.WithTimeout(ctx, 10*time.Minute)
	defer cancel()
	rows, bytes, end := 0, int64(0), pglogrepl.LSN(0)
	for rows < want {
		msg, err := conn.ReceiveMessage(ctx)
		if err != nil {
			return d, err
		}
		cd, ok := msg.(*pgproto3.CopyData)
		if !ok || len(cd.Data) == 0 {
			continue
		}
		switch cd.Data[0] {
		case pglogrepl.PrimaryKeepaliveMessageByteID:
			ka, err := pglogrepl.ParsePrimaryKeepaliveMessage(cd.Data[1:])
			if err == nil && ka.ReplyRequested {
				_ = pglogrepl.SendStandbyStatusUpdate(ctx, conn, pglogrepl.StandbyStatusUpdate{WALWritePosition: ka.ServerWALEnd, WALFlushPosition: end})
			}
		case pglogrepl.XLogDataByteID:
			xld, err := pglogrepl.ParseXLogData(cd.Data[1:])
			if err != nil {
				return d, err
			}
			bytes += int64(len(xld.WALData))
			m, err := pglogrepl.Parse(xld.WALData)
			if err != nil {
				return d, err
			}
			switch m := m.(type) {
			case *pglogrepl.InsertMessage:
				rows++
			case *pglogrepl.LogicalDecodingMessage:
				if m.Prefix == publication { // the messages scenario's prefix
					rows++
				}
			case *pglogrepl.CommitMessage:
				end = m.TransactionEndLSN
			}
		}
	}
	// The last transaction's commit follows its last insert.
	for {
		msg, err := conn.ReceiveMessage(ctx)
		if err != nil {
			return d, err
		}
		if cd, ok := msg.(*pgproto3.CopyData); ok && len(cd.Data) > 0 && cd.Data[0] == pglogrepl.XLogDataByteID {
			xld, _ := pglogrepl.ParseXLogData(cd.Data[1:])
			if m, err := pglogrepl.Parse(xld.WALData); err == nil {
				if c, ok := m.(*pglogrepl.CommitMessage); ok {
					took := time.Since(began)
					return decoded{rows: rows, bytes: bytes, end: c.TransactionEndLSN, took: took,
						walsender: procCPU(walsender) - walsenderBefore, walsenderFor: time.Since(walsenderFrom)}, nil
				}
			}
		}
	}
}

// walsenderPID is the PID of the walsender streaming slot (0 when it
// cannot be read), for its CPU.
func (b *bench) walsenderPID(ctx context.Context, slot string) int {
	var pid *int
	if err := b.db.QueryRow(ctx, "SELECT active_pid FROM pg_replication_slots WHERE slot_name = $1", slot).Scan(&pid); err != nil || pid == nil {
		return 0
	}
	return *pid
}

// replicationConn opens a logical replication connection to the bench's
// database, for a bare reader.
func (b *bench) replicationConn(ctx context.Context) (*pgconn.PgConn, error) {
	cfg, err := pgconn.ParseConfig(b.pgURL)
	if err != nil {
		return nil, err
	}
	cfg.RuntimeParams["replication"] = "database"
	return pgconn.ConnectConfig(ctx, cfg)
}
