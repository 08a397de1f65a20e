package ledger

import (
	"context"

	"github.com/oncehook/oncehook/db"
)

// txBegin begins a transaction for fn: the shape of db.WithTxIndexPlanned.
type txBegin func(ctx context.Context, b db.TxBeginner, fn func(q *db.Queries) error) error

// planned returns how the performer's transactions of a kind are begun: with the
// planner settings of db/plan.go (kept generic plans) on a single Postgres, and as
// plain transactions on Citus, where a generic plan made on the coordinator
// cannot name the one shard a statement reads (Citus refuses to plan it) and each
// worker plans its shard's statement itself.
func (pf *Performer) planned(ctx context.Context, single txBegin) txBegin {
	if !pf.onCitus(ctx) {
		return single
	}
	return func(ctx context.Context, _ db.TxBeginner, fn func(q *db.Queries) error) error {
		return db.WithTx(ctx, pf.pool, fn)
	}
}

// onCitus reports whether the database is distributed by Citus, asked once it
// answers (DatabaseMode).
func (pf *Performer) onCitus(ctx context.Context) bool {
	pf.modeMu.Lock()
	defer pf.modeMu.Unlock()
	if pf.mode == "" {
		if mode, err := db.New(pf.pool).DatabaseMode(ctx); err == nil {
			pf.mode = mode
		}
	}
	return pf.mode == "citus"
}
