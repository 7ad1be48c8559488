package main

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgproto3"
	"github.com/jackc/pgx/v5/pgxpool"
)

var syscallZero = syscall.Signal(0)

// ceilingLatency is the latency ceiling at load l: a bare pglogrepl reader,
// alone, timing each event from its writer's COMMIT return to the decoded
// Commit message of its transaction. No relay can deliver sooner.
func (b *bench) ceilingLatency(ctx context.Context, l load, d time.Duration) (phaseResult, error) {
	res := phaseResult{Relay: "bare reader", Load: l}
	name := fmt.Sprintf("ceil_%d", time.Now().UnixNano()%1e9)
	if _, err := b.db.Exec(ctx, "CREATE TABLE "+name+" "+outboxDDL); err != nil {
		return res, err
	}
	defer b.cleanup(name, name)
	if _, err := b.db.Exec(ctx, fmt.Sprintf("CREATE PUBLICATION %s FOR TABLE %s WITH (publish = 'insert')", name, name)); err != nil {
		return res, err
	}
	if _, err := b.db.Exec(ctx, "SELECT pg_create_logical_replication_slot($1, 'pgoutput')", name); err != nil {
		return res, err
	}
	conn, err := b.replicationConn(ctx)
	if err != nil {
		return res, err
	}
	defer conn.Close(context.Background())
	if err := pglogrepl.StartReplication(ctx, conn, name, 0, pglogrepl.StartReplicationOptions{
		PluginArgs: []string{"proto_version '1'", "publication_names '" + name + "'"},
	}); err != nil {
		return res, err
	}
	t := newTracker()
	rctx, stopReading := context.WithCancel(ctx)
	readErr := make(chan error, 1)
	go func() { readErr <- readCommits(rctx, conn, t) }()
	defer func() { stopReading(); <-readErr }()

	pool, err := pgxpool.New(ctx, b.pgURL)
	if err != nil {
		return res, err
	}
	defer pool.Close()
	wal := b.walsender(ctx, name)
	w0 := procCPU(wal)
	began := time.Now()
	if res.AchievedTx, err = b.write(ctx, pool, name, l, d, t); err != nil {
		return res, err
	}
	if err := t.waitAll(ctx, 2*time.Minute); err != nil {
		return res, err
	}
	w1 := procCPU(wal)
	lat := t.latencies(began.Add(time.Second))
	if len(lat) == 0 {
		return res, fmt.Errorf("no event decoded")
	}
	res.Events = len(t.committed)
	res.P50, res.P99, res.Max = quantile(lat, 0.5), quantile(lat, 0.99), lat[len(lat)-1]
	res.WalsenderUs = (w1 - w0) / float64(res.Events) * 1e6
	return res, nil
}

// readCommits decodes the stream, and at each Commit reports the ids (the
// first column) of its transaction's inserts as received; it confirms what
// it decoded every second.
func readCommits(ctx context.Context, conn *pgconn.PgConn, t *tracker) error {
	var ids []string
	var end pglogrepl.LSN
	next := time.Now().Add(time.Second)
	for {
		rctx, cancel := context.WithDeadline(ctx, next)
		msg, err := conn.ReceiveMessage(rctx)
		cancel()
		if ctx.Err() != nil {
			return nil
		}
		if time.Now().After(next) {
			_ = pglogrepl.SendStandbyStatusUpdate(ctx, conn, pglogrepl.StandbyStatusUpdate{WALWritePosition: end, WALFlushPosition: end, WALApplyPosition: end})
			next = time.Now().Add(time.Second)
		}
		if err != nil {
			if pgconn.Timeout(err) {
				continue
			}
			return err
		}
		cd, ok := msg.(*pgproto3.CopyData)
		if !ok || len(cd.Data) == 0 || cd.Data[0] != pglogrepl.XLogDataByteID {
			continue
		}
		xld, err := pglogrepl.ParseXLogData(cd.Data[1:])
		if err != nil {
			return err
		}
		m, err := pglogrepl.Parse(xld.WALData)
		if err != nil {
			return err
		}
		switch m := m.(type) {
		case *pglogrepl.InsertMessage:
			if len(m.Tuple.Columns) > 0 {
				ids = append(ids, string(m.Tuple.Columns[0].Data))
			}
		case *pglogrepl.CommitMessage:
			now := time.Now()
			for _, id := range ids {
				t.receive(id, now)
			}
			ids, end = ids[:0], m.TransactionEndLSN
		}
	}
}

// requestCount is outbox-cdc's produce request and record counters.
type requestCount struct{ requests, records, sent float64 }

// scrapeRequests reads outbox-cdc's produce counters from its /metrics;
// zero for other relays or when unreachable.
func scrapeRequests(relay, addr string) requestCount {
	var c requestCount
	if !strings.HasPrefix(relay, "outbox-cdc") || addr == "" {
		return c
	}
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		return c
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		name, value, ok := strings.Cut(sc.Text(), " ")
		if !ok {
			continue
		}
		v, _ := strconv.ParseFloat(value, 64)
		switch name {
		case "outbox_cdc_produce_requests_total":
			c.requests = v
		case "outbox_cdc_produce_records_total":
			c.records = v
		case "outbox_cdc_kafka_sent_bytes_total":
			c.sent = v
		}
	}
	return c
}
