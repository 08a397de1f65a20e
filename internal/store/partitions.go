package store

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/oncehook/oncehook/db"
)

// The carry forward and the drop of a day's partitions, by retention (see
// EventBodiesCarry, ActionRowsLock, ActionRowsMove and migration 00040).

// CarryBodies is EventBodiesCarry over every client at once.
func (Single) CarryBodies(ctx context.Context, q *db.Queries, p db.EventBodiesCarryParams) (int64, error) {
	p.Sharded, p.Client = false, ""
	return q.EventBodiesCarry(ctx, p)
}

// CarryBodies is EventBodiesCarry one client a statement, on its shard.
func (Sharded) CarryBodies(ctx context.Context, q *db.Queries, p db.EventBodiesCarryParams) (int64, error) {
	return countEach(ctx, q.EventClientsWithRows, func(c string) (int64, error) {
		p.Sharded, p.Client = true, c
		return q.EventBodiesCarry(ctx, p)
	})
}

// CarryActionRows is ActionRowsLock and ActionRowsMove over every client at once.
func (Single) CarryActionRows(ctx context.Context, b db.Beginner, _ *db.Queries, from, to time.Time, batch int32) (int64, error) {
	return carryActionRows(ctx, b, db.ActionRowsLockParams{FromDay: from, Batch: batch}, to)
}

// CarryActionRows is ActionRowsLock and ActionRowsMove one client a
// transaction, on its shard.
func (Sharded) CarryActionRows(ctx context.Context, b db.Beginner, q *db.Queries, from, to time.Time, batch int32) (int64, error) {
	return countEach(ctx, q.ActionClientsWithRows, func(c string) (int64, error) {
		return carryActionRows(ctx, b, db.ActionRowsLockParams{FromDay: from, Batch: batch, Sharded: true, Client: c}, to)
	})
}

// carryActionRows locks a batch of the actions lock names and moves their rows
// into day to, in one transaction: one statement for every client on one
// Postgres, one routed to the client's shards on Citus.
func carryActionRows(ctx context.Context, b db.Beginner, lock db.ActionRowsLockParams, to time.Time) (int64, error) {
	var n int64
	err := db.WithTx(ctx, b, func(q *db.Queries) error {
		locked, err := q.ActionRowsLock(ctx, lock)
		if err != nil || len(locked) == 0 {
			return err
		}
		clients, ids := make([]string, len(locked)), make([]int64, len(locked))
		for i, a := range locked {
			clients[i], ids[i] = a.Client, a.ID
		}
		if lock.Sharded {
			n, err = q.ActionRowsMoveOfClient(ctx, db.ActionRowsMoveOfClientParams{FromDay: lock.FromDay, ToDay: to,
				Client: lock.Client, Ids: ids})
			return err
		}
		n, err = q.ActionRowsMove(ctx, db.ActionRowsMoveParams{FromDay: lock.FromDay, ToDay: to, Clients: clients, Ids: ids})
		return err
	})
	return n, err
}

// DropPartition detaches the partition concurrently (writers and readers of
// the other days go on meanwhile) and drops it; pending finishes a concurrent
// detach that was interrupted.
func (Single) DropPartition(ctx context.Context, pool *pgxpool.Pool, parent, name string, pending bool) error {
	how := " CONCURRENTLY"
	if pending {
		how = " FINALIZE"
	}
	return dropPartition(ctx, pool, parent, name, how)
}

// DropPartition detaches and drops the partition: Citus detaches none
// concurrently.
func (Sharded) DropPartition(ctx context.Context, pool *pgxpool.Pool, parent, name string, pending bool) error {
	how := ""
	if pending {
		how = " FINALIZE"
	}
	return dropPartition(ctx, pool, parent, name, how)
}

// dropPartition detaches name from parent as how says, then drops it. A
// concurrent detach runs in no transaction: each statement on its own.
func dropPartition(ctx context.Context, pool *pgxpool.Pool, parent, name, how string) error {
	p, n := pgx.Identifier{parent}.Sanitize(), pgx.Identifier{name}.Sanitize()
	if _, err := pool.Exec(ctx, "ALTER TABLE "+p+" DETACH PARTITION "+n+how); err != nil {
		return fmt.Errorf("detach %s from %s: %w", name, parent, err)
	}
	if _, err := pool.Exec(ctx, "DROP TABLE "+n); err != nil {
		return fmt.Errorf("drop %s: %w", name, err)
	}
	return nil
}
