// Package partitions keeps the tables that grow with traffic partitioned by day
// ready to write into: their daily partitions are made ahead, at start and on a
// schedule, and an insert that finds its day missing has it made and is tried
// again (see migration 00038 and docs/operations.md).
package partitions

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/oncehook/oncehook/db"
)

// Tables are the tables partitioned by day, each by a date column its rows
// are given when written.
var Tables = []string{"event_bodies", "attempts", "audit"}

// Lead is how many days ahead of today the partitions are made: a server down
// for less than that finds its days ready when it comes back.
const Lead = 8

// Every is how often a running server makes the partitions ahead.
const Every = time.Hour

// Day is t's partition day: its date in UTC, at midnight UTC.
func Day(t time.Time) time.Time {
	y, m, d := t.UTC().Date()
	return time.Date(y, m, d, 0, 0, 0, 0, time.UTC)
}

// Make makes every table's partitions from first's day to last's, those missing,
// and returns how many it made.
func Make(ctx context.Context, q *db.Queries, first, last time.Time) (int, error) {
	made := 0
	for _, t := range Tables {
		n, err := q.PartitionsMake(ctx, db.PartitionsMakeParams{Parent: t, FirstDay: Day(first), LastDay: Day(last)})
		if err != nil {
			return made, fmt.Errorf("make the partitions of %s from %s to %s: %w",
				t, Day(first).Format(time.DateOnly), Day(last).Format(time.DateOnly), err)
		}
		made += int(n)
	}
	return made, nil
}

// MakeAhead makes the partitions from yesterday (now's day before) to Lead days
// after now's day.
func MakeAhead(ctx context.Context, q *db.Queries, now time.Time) (int, error) {
	day := Day(now)
	return Make(ctx, q, day.AddDate(0, 0, -1), day.AddDate(0, 0, Lead))
}

// Missing reports whether err is an insert's into a table partitioned by day
// whose row has no partition.
func Missing(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && pe.Code == "23514" && strings.HasPrefix(pe.Message, "no partition of relation")
}

// Retry runs write and, when it fails for a missing partition, makes day's
// partitions and runs it once more. write must have left nothing behind when it
// failed (one statement, or a transaction rolled back).
func Retry(ctx context.Context, q *db.Queries, day time.Time, write func() error) error {
	err := write()
	if !Missing(err) {
		return err
	}
	if _, err := Make(ctx, q, day, day); err != nil {
		return err
	}
	return write()
}

// Keep makes the partitions ahead now and every Every until ctx ends, logging
// what it made and what failed (the next round tries again; an insert makes
// its own day meanwhile).
func Keep(ctx context.Context, q *db.Queries, logger *slog.Logger) {
	t := time.NewTicker(Every)
	defer t.Stop()
	for {
		made, err := MakeAhead(ctx, q, time.Now())
		switch {
		case err != nil && ctx.Err() == nil:
			logger.Warn("make partitions ahead", "err", err)
		case made > 0:
			logger.Info("made partitions ahead", "partitions", made, "days", Lead)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}
