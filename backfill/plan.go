package backfill

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/outbox-cdc/outbox-cdc/decode"
	"github.com/outbox-cdc/outbox-cdc/slot"
)

// A backfill publishes the rows a polling relay left pending (those its
// Spec's Where selects) before the slot streams: read in the slot's
// exported snapshot, they are exactly the rows committed before the slot's
// consistent point, and the slot streams exactly those committed after.
// Progress is kept in ProgressTable, with the snapshot the backfill began
// in, so that a backfill cut short resumes on restart reading exactly the
// rows that snapshot saw (in a snapshot of its own, up to the last row the
// first one saw), and one that finished is not run again.

// Config is what a backfill needs of the relay's configuration.
type Config struct {
	URL string // the database the slot is in
	// Target is the publication, the slot and the outbox tables; a slot
	// created here is created failover-enabled as Target says.
	Target slot.Target
	// Specs are Target.Tables' backfills, index for index; a table whose
	// Spec has no Where has none.
	Specs []Spec
	// Force backfills again on an existing slot, in a snapshot of its own:
	// rows the slot also streams are published twice.
	Force bool
	// ConfirmInterval is how often progress is recorded (at most every
	// 10 ms): after a crash, only rows acknowledged since are published
	// again.
	ConfirmInterval time.Duration
	// DrainTimeout bounds the wait for a table's last acknowledgements.
	DrainTimeout time.Duration
	Logger       *slog.Logger // nil: slog.Default()
	// Progress, when set, is told a table's progress each time it is
	// recorded (for metrics).
	Progress func(table string, total, done int64)
	// Committed, with a Committer entry (exactly-once), returns the
	// progress it last committed (nil: none). It is asked once, under the
	// backfill's lock, and only when a backfill cut short resumes: asking
	// may fence the instance that holds the transactional id (in
	// exactly-once, the one streaming the slot).
	Committed func(context.Context) (*Progress, error)
	// CommitInterval is how often a Committer entry commits.
	CommitInterval time.Duration
	// Heal makes the backfill a heal of a lost slot (--on-slot-lost heal):
	// under the lock, a slot that is still invalidated is dropped
	// (slot.DropLost; one a racing instance has created anew is kept) and
	// created anew exporting its snapshot, every table recorded pending
	// again over what the lost slot's backfills left (their done rows
	// would otherwise say there is nothing to do). The orders are chosen
	// and the heal recorded (BeforeCreate) before the drop (slotSteps). On
	// a slot that exists, a heal cut short resumes and one another
	// instance finished is done, as any backfill.
	Heal bool
	// BeforeCreate, when set, is called under the lock once the tables are
	// recorded pending and before the slot is created (and before a lost
	// one is dropped): the heal records and announces itself there, so
	// that only the instance that heals does, once.
	BeforeCreate func(context.Context) error
	// CleanGap: the entry's commits clean the rows they hold (--cleanup),
	// so a resume past rows committed and not recorded cleans them
	// (GapCleaner).
	CleanGap bool
}

// job is one table to backfill.
type job struct {
	table decode.Table
	where Predicate
	order Order // as configured; resolved when the backfill begins
	state State
	gap   *gap // rows committed, perhaps not cleaned (Plan.committed)
}

// Plan is a backfill decided on: the tables due, the progress store
// (locked: one instance backfills a slot, another waits, then finds it
// done), and the slot's exported snapshot when the slot was just created.
type Plan struct {
	cfg      Config
	log      *slog.Logger
	store    *Store
	exported *Exported // nil unless Prepare created the slot
	due      []job
	// The progress cfg.Committed returned, once asked.
	asked bool
	last  *Progress
}

// Prepare decides which tables are due on the server conn reaches. Without
// the slot it records every table pending, then creates the slot
// exporting its snapshot; with it, a table is due only when its backfill
// was cut short (resumed) or Force asks. A predicate, an order or a table
// that does not fit is refused (slot.ErrNotReady) before any slot is
// created. Close the Plan once streaming is prepared.
func Prepare(ctx context.Context, conn *pgx.Conn, cfg Config) (*Plan, error) {
	jobs, err := checkJobs(ctx, conn, cfg)
	if err != nil {
		return nil, err
	}
	p := &Plan{cfg: cfg, log: cfg.Logger}
	if p.log == nil {
		p.log = slog.Default()
	}
	// In the first table's schema, where status looks.
	if p.store, err = OpenStore(ctx, cfg.URL, cfg.Target.Tables[0].Schema, cfg.Target.Slot); err != nil {
		return nil, err
	}
	if err := p.decide(ctx, conn, jobs); err != nil {
		p.Close()
		return nil, err
	}
	return p, nil
}

// Created says whether Prepare created the slot (and the backfill reads
// its exported snapshot).
func (p *Plan) Created() bool { return p.exported != nil }

// Due says whether some table is to be backfilled.
func (p *Plan) Due() bool { return len(p.due) > 0 }

// Close releases the store (and its lock) and the exporting connection.
func (p *Plan) Close() {
	if p.exported != nil {
		p.exported.Close()
	}
	p.store.Close()
}

// Check refuses, as Prepare would, a backfill that could not run on the
// server conn reaches (a predicate, an order or a table that does not
// fit: slot.ErrNotReady), without locking, recording or creating
// anything: a relay that may heal checks its heal at start, before any
// slot is lost and dropped.
func Check(ctx context.Context, conn *pgx.Conn, cfg Config) error {
	jobs, err := checkJobs(ctx, conn, cfg)
	if err != nil {
		return err
	}
	for _, j := range jobs {
		if _, err := ChooseOrder(ctx, conn, j.table, j.order); err != nil {
			return err
		}
	}
	return nil
}

// checkJobs checks each table's predicate and order.
func checkJobs(ctx context.Context, conn *pgx.Conn, cfg Config) ([]job, error) {
	var jobs []job
	for i, spec := range cfg.Specs {
		if spec.Where == "" {
			continue
		}
		tb := cfg.Target.Tables[i]
		narrowed, err := withRowFilter(spec.Where, spec.RowFilter)
		if err != nil {
			return nil, fmt.Errorf("%w: %s: %w", slot.ErrNotReady, tb.Qualified(), err)
		}
		where, err := CheckPredicate(ctx, conn, tb, narrowed)
		if err != nil {
			return nil, err
		}
		order := OrderAuto
		if spec.Order != "" {
			if order, err = ParseOrder(string(spec.Order)); err != nil {
				return nil, fmt.Errorf("%w: %s: %w", slot.ErrNotReady, tb.Qualified(), err)
			}
		}
		jobs = append(jobs, job{table: tb, where: where, order: order})
	}
	return jobs, nil
}

// decide reads what was recorded and picks the tables due.
func (p *Plan) decide(ctx context.Context, conn *pgx.Conn, jobs []job) error {
	if err := p.store.Lock(ctx); err != nil {
		return err
	}
	states, err := p.store.Load(ctx)
	if err != nil {
		return err
	}
	if err := unfinishedElsewhere(ctx, conn, p.cfg.Target.Slot, jobs, states); err != nil {
		return err
	}
	loss, err := slot.SlotLoss(ctx, conn, p.cfg.Target.Slot)
	if err != nil {
		return err
	}
	for _, st := range slotSteps(loss, p.cfg.Heal, p.cfg.Force) {
		if err := p.do(ctx, conn, st, jobs, states); err != nil {
			return err
		}
	}
	return nil
}

// createSlot creates the slot exporting its snapshot, and makes every
// table due from the slot's consistent point.
func (p *Plan) createSlot(ctx context.Context, conn *pgx.Conn, jobs []job) error {
	failover, err := slot.WantFailover(ctx, conn, p.cfg.Target)
	if err != nil {
		return err
	}
	if p.exported, err = CreateSlotExporting(ctx, p.cfg.URL, p.cfg.Target.Slot, failover); err != nil {
		return err
	}
	p.log.Info("created the slot, exporting its snapshot for the backfill", slog.String("slot", p.cfg.Target.Slot),
		slog.String("consistent_point", p.exported.ConsistentPoint.String()))
	for _, j := range jobs {
		j.state = State{Table: j.table.Qualified(), Phase: PhaseRunning,
			ConsistentPoint: p.exported.ConsistentPoint, Order: j.order}
		p.due = append(p.due, j)
	}
	return nil
}

// onExisting decides j on a slot that exists: done before, resumed,
// none recorded, or forced again.
func (p *Plan) onExisting(ctx context.Context, conn *pgx.Conn, j job, states map[string]State) error {
	st, ok := states[j.table.Qualified()]
	switch {
	case p.cfg.Force:
		p.log.Warn("--backfill-force: backfilling again on an existing slot; rows it also streams are published twice",
			slog.String("table", j.table.Qualified()), slog.String("where", j.where.String()))
		var err error
		if j.state, err = p.forced(ctx, conn, j); err != nil {
			return err
		}
	case !ok:
		p.log.Info("--backfill-where: the slot exists and no backfill of it is recorded, so none runs (--backfill-force runs one)",
			slog.String("table", j.table.Qualified()), slog.String("slot", p.cfg.Target.Slot))
		return nil
	case st.Phase == PhaseDone:
		p.log.Info("--backfill-where: the backfill was done before; nothing to do", slog.String("table", j.table.Qualified()),
			slog.Int64("rows", st.Done), slog.Time("finished", st.Updated))
		return nil
	default:
		if st.ConsistentPoint == 0 {
			// Cut short before its point was recorded (the slot created,
			// the record still pending): nothing has confirmed the slot
			// since, so its position is that point.
			point, err := slot.Confirmed(ctx, conn, p.cfg.Target.Slot)
			if err != nil {
				return err
			}
			st.ConsistentPoint = point
		}
		if st.Phase == PhaseForced {
			// Resumed without the flag: an instance about to stream waits
			// for it from now on (relay's reprepare), before it fences.
			st.Phase = PhaseRunning
			if err := p.store.Save(ctx, st); err != nil {
				return err
			}
		}
		st, finished, err := p.committed(ctx, &j, st)
		if err != nil || finished {
			return err
		}
		if j.state, err = p.resumed(ctx, conn, j, st); err != nil {
			return err
		}
	}
	p.due = append(p.due, j)
	return nil
}

// forced records j's forced backfill before any table is read: a run cut
// short, then started without --backfill-force, must resume every table
// it forces, not only those it reached. Its point is the slot's position
// (stamped on its events as their commit LSN: at or before whatever the
// slot streams next); since that may be an earlier backfill's point, the
// server's current snapshot names it too (it moves past every earlier
// one: each backfill wrote its progress since), so that a resume in
// exactly-once never takes an earlier backfill's commits for its own.
func (p *Plan) forced(ctx context.Context, conn *pgx.Conn, j job) (State, error) {
	point, err := slot.Confirmed(ctx, conn, p.cfg.Target.Slot)
	if err != nil {
		return State{}, err
	}
	var snapshot string
	if err := conn.QueryRow(ctx, `SELECT pg_current_snapshot()::text`).Scan(&snapshot); err != nil {
		return State{}, fmt.Errorf("read the current snapshot: %w", err)
	}
	st := State{Table: j.table.Qualified(), Phase: PhaseForced, ConsistentPoint: point, Order: j.order, Snapshot: snapshot}
	return st, p.store.Save(ctx, st)
}

// unfinishedElsewhere refuses to go on when a backfill of the slot was cut
// short on a table that no longer has its recorded name (renamed since):
// under its new name no record would be found, and no backfill would run,
// leaving the rest of its rows to no one.
func unfinishedElsewhere(ctx context.Context, conn *pgx.Conn, slotName string, jobs []job, states map[string]State) error {
	for _, st := range states {
		if st.Phase == PhaseDone || slices.ContainsFunc(jobs, func(j job) bool { return j.table.Qualified() == st.Table }) {
			continue
		}
		schema, name, _ := strings.Cut(st.Table, ".")
		var exists bool
		if err := conn.QueryRow(ctx, `SELECT to_regclass($1) IS NOT NULL`, pgx.Identifier{schema, name}.Sanitize()).Scan(&exists); err != nil {
			return fmt.Errorf("look up %s: %w", st.Table, err)
		}
		if !exists {
			return fmt.Errorf("%w: the backfill of %s on slot %q was cut short (%d of %d rows) and no table has that name now (renamed?); "+
				"name the table as recorded, or move the record to its new name: UPDATE %s SET outbox_table = 'SCHEMA.NEW_NAME' WHERE slot = '%s' AND outbox_table = '%s'",
				slot.ErrNotReady, st.Table, slotName, st.Done, st.Total, ProgressTable, slotName, st.Table)
		}
	}
	return nil
}

// dropLost drops the slot if it is still invalidated (Config.Heal).
func (p *Plan) dropLost(ctx context.Context, conn *pgx.Conn) error {
	dropped, err := slot.DropLost(ctx, conn, p.cfg.Target.Slot)
	if dropped {
		p.log.Info("dropped the invalidated slot, to create it anew", slog.String("slot", p.cfg.Target.Slot))
	}
	return err
}
