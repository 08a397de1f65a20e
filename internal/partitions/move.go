package partitions

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/oncehook/oncehook/db"
	"github.com/oncehook/oncehook/internal/store"
)

// moveBatch bounds each move: a short transaction, a thousand rows locked at most.
const moveBatch = 1000

// moveLock keeps two movers apart (a session-level advisory lock).
const moveLock = 7262532

// Moved says what one MoveOld did.
type Moved struct {
	Bodies int  // events whose bytes moved out of their rows
	Busy   bool // another process was moving them: nothing done
}

// MoveOld moves the bytes of the events stored before event_bodies (migration
// 00038) out of their rows into today's partition, a client at a time, in
// batches of moveBatch, each its own statement, until none is left or ctx ends.
// progress, if set, hears the running total after each batch. Stopped at any
// point, it has moved whole batches and nothing else: run again, it goes on with
// what is left. Until it is done, readers take the bytes from either place. One
// process moves at a time: with wait, MoveOld waits for another to finish (and
// then finds what it left, if anything); without, it returns at once with Busy.
func MoveOld(ctx context.Context, pool *pgxpool.Pool, s store.Store, wait bool, progress func(total int)) (Moved, error) {
	var r Moved
	conn, err := pool.Acquire(ctx)
	if err != nil {
		return r, fmt.Errorf("acquire a connection to move bodies: %w", err)
	}
	defer conn.Release()
	take := "SELECT pg_try_advisory_lock($1)"
	if wait {
		take = "SELECT pg_advisory_lock($1) IS NOT NULL"
	}
	var locked bool
	if err := conn.QueryRow(ctx, take, moveLock).Scan(&locked); err != nil {
		return r, fmt.Errorf("take the lock to move bodies: %w", err)
	}
	if !locked {
		r.Busy = true
		return r, nil
	}
	defer conn.Exec(context.WithoutCancel(ctx), "SELECT pg_advisory_unlock($1)", moveLock) //nolint:errcheck // released with the session anyway
	q := db.New(conn)
	clients, err := s.EventClients(ctx, q)
	if err != nil {
		return r, fmt.Errorf("list the clients with events: %w", err)
	}
	for _, client := range clients {
		for after := int64(0); ; {
			day := Day(time.Now())
			var row db.EventBodiesMoveOldRow
			err := Retry(ctx, q, day, func() (err error) {
				row, err = q.EventBodiesMoveOld(ctx, db.EventBodiesMoveOldParams{Client: client, After: after, Batch: moveBatch, Day: day})
				return err
			})
			if err != nil {
				return r, fmt.Errorf("move the bodies of %s's events after id %d: %w", client, after, err)
			}
			if row.Moved == 0 {
				break
			}
			r.Bodies += int(row.Moved)
			after = row.LastID
			if progress != nil {
				progress(r.Bodies)
			}
		}
	}
	return r, nil
}
