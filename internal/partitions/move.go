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
	held, err := db.WithSessionLock(ctx, pool, moveLock, wait, func(q *db.Queries) error {
		clients, err := s.EventClients(ctx, q)
		if err != nil {
			return fmt.Errorf("list the clients with events: %w", err)
		}
		for _, client := range clients {
			if err := moveClient(ctx, q, client, &r, progress); err != nil {
				return err
			}
		}
		return nil
	})
	r.Busy = err == nil && !held
	return r, err
}

// moveClient is MoveOld for one client's events, adding what it moved to r.
func moveClient(ctx context.Context, q *db.Queries, client string, r *Moved, progress func(total int)) error {
	for after := int64(0); ; {
		day := Day(time.Now())
		var row db.EventBodiesMoveOldRow
		err := Retry(ctx, q, day, func() (err error) {
			row, err = q.EventBodiesMoveOld(ctx, db.EventBodiesMoveOldParams{Client: client, After: after, Batch: moveBatch, Day: day})
			return err
		})
		if err != nil {
			return fmt.Errorf("move the bodies of %s's events after id %d: %w", client, after, err)
		}
		if row.Moved == 0 {
			return nil
		}
		r.Bodies += int(row.Moved)
		after = row.LastID
		if progress != nil {
			progress(r.Bodies)
		}
	}
}
