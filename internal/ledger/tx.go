package ledger

import (
	"context"
	"sync"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/oncehook/oncehook/db"
)

// TxBegin begins a transaction for fn: the shape of db.WithTxIndexPlanned.
type TxBegin func(ctx context.Context, b db.TxBeginner, fn func(q *db.Queries) error) error

// DatabaseMode is whether the database is distributed by Citus, asked once it
// answers (DatabaseMode). The workers' claims name their client for Citus to
// route them to one shard; on a single Postgres they leave it to the rows they
// join, so that each claimed row is looked up by its key whatever the table's
// statistics say (see ActionClaim).
type DatabaseMode struct {
	pool *pgxpool.Pool
	mu   sync.Mutex
	mode string
}

// NewDatabaseMode returns the mode of the database behind pool, asked when first needed.
func NewDatabaseMode(pool *pgxpool.Pool) *DatabaseMode { return &DatabaseMode{pool: pool} }

// Sharded reports whether the database is distributed by Citus, asking it the
// first time it answers.
func (m *DatabaseMode) Sharded(ctx context.Context) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.mode == "" {
		if mode, err := db.New(m.pool).DatabaseMode(ctx); err == nil {
			m.mode = mode
		}
	}
	return m.mode == "citus"
}

// Splittable says whether a group write that failed with err is worth writing
// again item by item: not when storage is unavailable, which would fail each one
// alone too, but when the database refused something, which may be one item's.
func Splittable(err error) bool { return !db.IsUnavailable(err) }
