package ledger

import (
	"context"
	"sync"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/oncehook/oncehook/db"
)

// txBegin begins a transaction for fn: the shape of db.WithTxIndexPlanned.
type txBegin func(ctx context.Context, b db.TxBeginner, fn func(q *db.Queries) error) error

// planned returns how the performer's transactions of a kind are begun: with the
// planner settings of db/plan.go on a single Postgres, and on Citus as
// transactions whose statements are planned for each call, where a generic plan
// made on the coordinator cannot name the one shard a statement reads (Citus
// refuses to plan it) and each worker plans its shard's statement itself.
func (pf *Performer) planned(ctx context.Context, single txBegin) txBegin {
	if !pf.mode.sharded(ctx) {
		return single
	}
	return func(ctx context.Context, _ db.TxBeginner, fn func(q *db.Queries) error) error {
		return db.WithTxPlannedPerCall(ctx, pf.pool, fn)
	}
}

// databaseMode is whether the database is distributed by Citus, asked once it
// answers (DatabaseMode). The workers' claims name their client for Citus to
// route them to one shard; on a single Postgres they leave it to the rows they
// join, so that each claimed row is looked up by its key whatever the table's
// statistics say (see ActionClaim).
type databaseMode struct {
	pool *pgxpool.Pool
	mu   sync.Mutex
	mode string
}

func (m *databaseMode) sharded(ctx context.Context) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.mode == "" {
		if mode, err := db.New(m.pool).DatabaseMode(ctx); err == nil {
			m.mode = mode
		}
	}
	return m.mode == "citus"
}
