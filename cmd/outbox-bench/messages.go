package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/outbox-cdc/outbox-cdc/outbox"
)

// The -messages scenario: events as outbox rows against events as
// transactional logical decoding messages, on the writer's side (commits a
// second and WAL bytes per event, one event per transaction) and on the
// relay's (a backlog drained, beside the bare reader's decode ceiling).

// Ways a service writes an event.
const (
	modeRow        = "row (Writer.Write)"
	modeMessage    = "message (Writer.Emit)"
	modeMessageSQL = "message (outbox_emit SQL)"
)

// writeResult is one writer run.
type writeResult struct {
	Mode          string
	Events        int
	CommitsPerSec float64
	WALPerEvent   float64 // bytes of WAL written per event, commit records included
}

// messageDrain is one backlog drained by outbox-cdc.
type messageDrain struct {
	Kind        string // rows or messages
	N           int
	DecodeRate  float64 // events/s, the bare reader
	RelayRate   float64 // events/s, outbox-cdc until the slot confirms the last commit
	Ratio       float64 // RelayRate / DecodeRate
	CPUPer100k  float64 // relay CPU seconds per 100,000 events
	PeakRSSMiB  float64
	WALPerEvent float64 // bytes of WAL the backlog took per event
}

type messagesReport struct {
	Machine, Command string
	Runs             int
	Writers          int
	Writes           []writeResult
	Drains           []messageDrain
}

// eventPayload is about 280 bytes of JSON, shaped like the drain's.
func eventPayload(i int) json.RawMessage {
	return fmt.Appendf(nil, `{"order_id": "%032x", "customer": "customer-%d", "amount": %d, "currency": "EUR", "status": "created", "items": [{"sku": "sku-%d", "qty": %d}], "note": "%s"}`,
		i, i%1000, i%10000, i%97, 1+i%5, strings.Repeat("n", 120))
}

func (b *bench) runMessages(ctx context.Context, root string, runs, events, writers, backlog int, out string) error {
	sqlFile, err := os.ReadFile(filepath.Join(root, "sql", "outbox_emit.sql"))
	if err != nil {
		return err
	}
	if _, err := b.db.Exec(ctx, string(sqlFile), pgx.QueryExecModeSimpleProtocol); err != nil {
		return fmt.Errorf("install sql/outbox_emit.sql: %w", err)
	}
	pool, err := pgxpool.New(ctx, b.pgURL+"&pool_max_conns="+fmt.Sprint(writers))
	if err != nil {
		return err
	}
	defer pool.Close()
	rep := messagesReport{Machine: machine(), Command: "go run ./cmd/outbox-bench " + strings.Join(os.Args[1:], " "), Runs: runs, Writers: writers}
	modes := []string{modeRow, modeMessage, modeMessageSQL}
	for round := range runs {
		order := modes
		if round%2 == 1 { // whoever goes first warms the server for the others
			order = []string{modeMessageSQL, modeMessage, modeRow}
		}
		for _, mode := range order {
			r, err := b.writeEvents(ctx, pool, mode, events, writers)
			if err != nil {
				return fmt.Errorf("%s, round %d: %w", mode, round+1, err)
			}
			fmt.Fprintf(os.Stderr, "write %-26s round %d: %.0f commits/s, %.0f WAL bytes/event\n", mode, round+1, r.CommitsPerSec, r.WALPerEvent)
			rep.Writes = append(rep.Writes, r)
		}
		kinds := []string{"rows", "messages"}
		if round%2 == 1 {
			kinds = []string{"messages", "rows"}
		}
		for _, kind := range kinds {
			d, err := b.drainKind(ctx, kind, backlog)
			if err != nil {
				return fmt.Errorf("drain of %s, round %d: %w", kind, round+1, err)
			}
			fmt.Fprintf(os.Stderr, "drain %-8s round %d: decode %.0f/s, outbox-cdc %.0f/s (%.2f), %.2f CPU s/100k, RSS %.1f MiB, %.0f WAL bytes/event\n",
				kind, round+1, d.DecodeRate, d.RelayRate, d.Ratio, d.CPUPer100k, d.PeakRSSMiB, d.WALPerEvent)
			rep.Drains = append(rep.Drains, d)
		}
	}
	rep.print(os.Stdout)
	if err := os.MkdirAll(out, 0o755); err != nil {
		return err
	}
	f, err := os.Create(filepath.Join(out, "messages.json"))
	if err != nil {
		return err
	}
	defer f.Close()
	enc := json.NewEncoder(f)
	enc.SetIndent("", "  ")
	return enc.Encode(rep)
}

// writeEvents commits events one per transaction from writers connections,
// the way a service would, and measures commits a second and WAL per event.
func (b *bench) writeEvents(ctx context.Context, pool *pgxpool.Pool, mode string, events, writers int) (writeResult, error) {
	res := writeResult{Mode: mode, Events: events}
	table := fmt.Sprintf("wbench_%d", time.Now().UnixNano()%1e9)
	if _, err := b.db.Exec(ctx, "CREATE TABLE "+table+" "+outboxDDL); err != nil {
		return res, err
	}
	defer b.cleanup(table)
	w := outbox.NewWriter(outbox.Config{Table: "public." + table, MessagePrefix: "bench"})
	write := func(tx pgx.Tx, i int) error {
		ev := outbox.Event{AggregateType: "order", AggregateID: fmt.Sprintf("agg-%d", i%1000), EventType: "created", Payload: eventPayload(i)}
		var err error
		switch mode {
		case modeRow:
			_, err = w.Write(ctx, tx, ev)
		case modeMessage:
			_, err = w.Emit(ctx, tx, ev)
		case modeMessageSQL:
			_, err = tx.Exec(ctx, `SELECT outbox_emit('order', $1, 'created', $2::jsonb, NULL)`, ev.AggregateID, string(ev.Payload.(json.RawMessage)))
		}
		return err
	}
	before, err := b.walInsertLSN(ctx)
	if err != nil {
		return res, err
	}
	began := time.Now()
	var wg sync.WaitGroup
	errs := make(chan error, writers)
	for k := range writers {
		wg.Go(func() {
			for i := k; i < events; i += writers {
				if err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error { return write(tx, i) }); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	took := time.Since(began)
	close(errs)
	if err := <-errs; err != nil {
		return res, err
	}
	after, err := b.walInsertLSN(ctx)
	if err != nil {
		return res, err
	}
	res.CommitsPerSec = float64(events) / took.Seconds()
	res.WALPerEvent = float64(after-before) / float64(events)
	return res, nil
}

func (b *bench) walInsertLSN(ctx context.Context) (pglogrepl.LSN, error) {
	var s string
	if err := b.db.QueryRow(ctx, "SELECT pg_current_wal_insert_lsn()::text").Scan(&s); err != nil {
		return 0, err
	}
	return pglogrepl.ParseLSN(s)
}

// drainKind commits n events (rows, or messages through outbox_emit) in
// transactions of 100 behind two fresh slots; a bare reader decodes one,
// outbox-cdc relays the other.
func (b *bench) drainKind(ctx context.Context, kind string, n int) (messageDrain, error) {
	res := messageDrain{Kind: kind, N: n}
	name := fmt.Sprintf("dbench_%d", time.Now().UnixNano()%1e9)
	pub := fmt.Sprintf("CREATE PUBLICATION %s FOR TABLE %s WITH (publish = 'insert')", name, name)
	fill := fmt.Sprintf(`DO $$ BEGIN FOR t IN 0..%d LOOP
		INSERT INTO %s SELECT gen_random_uuid(), 'order', 'agg-' || (g %% 1000), 'created', %s
		FROM generate_series(t * 100, least(t * 100 + 99, %d - 1)) g;
		COMMIT; END LOOP; END $$`, (n-1)/100, name, payloadSQL, n)
	extra := []string{}
	if kind == "messages" {
		pub = fmt.Sprintf("CREATE PUBLICATION %s WITH (publish = 'insert')", name)
		fill = fmt.Sprintf(`DO $$ BEGIN FOR t IN 0..%d LOOP
			PERFORM outbox_emit_bytes('order', 'agg-' || (g %% 1000), 'created', convert_to((%s)::text, 'UTF8'), 'application/json', NULL, NULL, '%s')
			FROM generate_series(t * 100, least(t * 100 + 99, %d - 1)) g;
			COMMIT; END LOOP; END $$`, (n-1)/100, payloadSQL, name, n)
		extra = []string{"--table", "", "--message-prefix", name}
	}
	for _, sql := range []string{
		"CREATE TABLE " + name + " " + outboxDDL, pub,
		fmt.Sprintf("SELECT pg_create_logical_replication_slot('%s_dec', 'pgoutput')", name),
		fmt.Sprintf("SELECT pg_create_logical_replication_slot('%s_relay', 'pgoutput')", name),
	} {
		if _, err := b.db.Exec(ctx, sql); err != nil {
			return res, fmt.Errorf("%.60s: %w", sql, err)
		}
	}
	defer b.cleanup(name, name+"_dec", name+"_relay")
	before, err := b.walInsertLSN(ctx)
	if err != nil {
		return res, err
	}
	if _, err := b.db.Exec(ctx, fill); err != nil {
		return res, err
	}
	after, err := b.walInsertLSN(ctx)
	if err != nil {
		return res, err
	}
	res.WALPerEvent = float64(after-before) / float64(n)
	dec, err := b.decodeCeiling(ctx, name+"_dec", name, n)
	if err != nil {
		return res, fmt.Errorf("decode ceiling: %w", err)
	}
	res.DecodeRate = float64(dec.rows) / dec.took.Seconds()
	createTopics(ctx, b.brokers, name+".order")
	run, err := b.relayUntil(ctx, name, name+"_relay", dec.end, nil, extra...)
	if err != nil {
		return res, fmt.Errorf("outbox-cdc: %w", err)
	}
	took, usage := run.took, run.usage
	res.RelayRate = float64(n) / took.Seconds()
	res.Ratio = res.RelayRate / res.DecodeRate
	res.PeakRSSMiB = float64(usage.Maxrss) / 1024
	res.CPUPer100k = cpuSeconds(usage) / float64(n) * 100_000
	return res, nil
}

func (r messagesReport) print(w io.Writer) {
	fmt.Fprintf(w, "# rows and messages: %s\n\n%s, %d rounds, medians (min–max)\n\n", r.Command, r.Machine, r.Runs)
	fmt.Fprintf(w, "## Writer: one event per transaction, %d connections\n\n| written as | commits/s | WAL bytes/event |\n|---|---|---|\n", r.Writers)
	for _, mode := range []string{modeRow, modeMessage, modeMessageSQL} {
		var rs []writeResult
		for _, x := range r.Writes {
			if x.Mode == mode {
				rs = append(rs, x)
			}
		}
		fmt.Fprintf(w, "| %s | %s | %s |\n", mode, over(rs, func(x writeResult) float64 { return x.CommitsPerSec }),
			over(rs, func(x writeResult) float64 { return x.WALPerEvent }))
	}
	fmt.Fprintf(w, "\n## Relay: a backlog in transactions of 100\n\n| events as | n | WAL bytes/event | decode ceiling/s | outbox-cdc/s | ratio | CPU s/100k | peak RSS MiB |\n|---|---|---|---|---|---|---|---|\n")
	for _, kind := range []string{"rows", "messages"} {
		var ds []messageDrain
		for _, x := range r.Drains {
			if x.Kind == kind {
				ds = append(ds, x)
			}
		}
		if len(ds) == 0 {
			continue
		}
		fmt.Fprintf(w, "| %s | %d | %s | %s | %s | %s | %s | %s |\n", kind, ds[0].N,
			over(ds, func(x messageDrain) float64 { return x.WALPerEvent }), over(ds, func(x messageDrain) float64 { return x.DecodeRate }),
			over(ds, func(x messageDrain) float64 { return x.RelayRate }), over(ds, func(x messageDrain) float64 { return x.Ratio }),
			over(ds, func(x messageDrain) float64 { return x.CPUPer100k }), over(ds, func(x messageDrain) float64 { return x.PeakRSSMiB }))
	}
}
