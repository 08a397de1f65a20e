package store

import (
	"context"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/oncehook/oncehook/db"
)

// Plan is how the statements of a hot transaction are planned on one Postgres.
type Plan int

const (
	// Indexed reuses generic plans made with index paths and nested loops only:
	// the performer's claims (db.IndexPlanned).
	Indexed Plan = iota
	// Keyed reuses generic plans made with lookups by key only: the record of
	// outcomes (db.KeyPlanned).
	Keyed
)

// InTx runs fn in a transaction begun as plan says, and commits it when fn
// returns nil.
func (Single) InTx(ctx context.Context, pool *pgxpool.Pool, plan Plan, fn func(q *db.Queries) error) error {
	if plan == Keyed {
		return db.InTx(ctx, pool, db.KeyPlanned, fn)
	}
	return db.InTx(ctx, pool, db.IndexPlanned, fn)
}

// InTx runs fn in a transaction whose statements are planned for each call,
// whatever the plan: a generic plan made on the coordinator cannot name the one
// shard a statement reads (Citus refuses to plan it), and each worker plans its
// shard's statement itself.
func (Sharded) InTx(ctx context.Context, pool *pgxpool.Pool, _ Plan, fn func(q *db.Queries) error) error {
	return db.InTx(ctx, pool, db.PerCall, fn)
}
