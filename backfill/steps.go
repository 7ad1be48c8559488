package backfill

import (
	"context"

	"github.com/jackc/pgx/v5"

	"github.com/outbox-cdc/outbox-cdc/slot"
)

// step is one thing decide does, in the order slotSteps gives.
type step int

const (
	// stepChoose resolves each table's order, which may refuse: before a
	// slot pins WAL, and before a lost one is dropped.
	stepChoose step = iota
	// stepPending records every table pending, then calls BeforeCreate
	// (where a heal records its start).
	stepPending
	stepDrop     // drop the lost slot (Heal)
	stepCreate   // create the slot exporting its snapshot
	stepExisting // decide each table on the slot that exists
)

func (s step) String() string {
	return [...]string{"choose the orders", "record pending", "drop the lost slot", "create the slot", "decide on the slot"}[s]
}

// slotSteps are decide's steps on a slot in the state loss says
// (slot.LossNone: it exists and can stream).
func slotSteps(loss slot.Loss, heal, force bool) []step {
	switch {
	case heal && loss != slot.LossNone && loss != slot.LossMissing:
		// Nothing is dropped before the record says a heal is due: a
		// refusal (an order) or a crash after the drop would leave only a
		// missing slot, which the next start may take for a first start.
		return []step{stepChoose, stepPending, stepDrop, stepCreate}
	case loss == slot.LossMissing:
		return []step{stepChoose, stepPending, stepCreate}
	case force:
		return []step{stepChoose, stepExisting}
	}
	return []step{stepExisting}
}

// do does st.
func (p *Plan) do(ctx context.Context, conn *pgx.Conn, st step, jobs []job, states map[string]State) error {
	switch st {
	case stepChoose:
		for i := range jobs {
			var err error
			if jobs[i].order, err = ChooseOrder(ctx, conn, jobs[i].table, jobs[i].order); err != nil {
				return err
			}
		}
	case stepPending:
		return p.pending(ctx, jobs)
	case stepDrop:
		return p.dropLost(ctx, conn)
	case stepCreate:
		return p.createSlot(ctx, conn, jobs)
	case stepExisting:
		for _, j := range jobs {
			if err := p.onExisting(ctx, conn, j, states); err != nil {
				return err
			}
		}
	}
	return nil
}

// pending records every table pending before the slot is created, and
// calls BeforeCreate: a crash from here on finds the backfill unfinished,
// and finishes it.
func (p *Plan) pending(ctx context.Context, jobs []job) error {
	for _, j := range jobs {
		if err := p.store.Save(ctx, State{Table: j.table.Qualified(), Phase: PhasePending}); err != nil {
			return err
		}
	}
	if p.cfg.BeforeCreate != nil {
		return p.cfg.BeforeCreate(ctx)
	}
	return nil
}
