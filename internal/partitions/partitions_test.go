package partitions_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/oncehook/oncehook/db"
	"github.com/oncehook/oncehook/db/dbtest"
	"github.com/oncehook/oncehook/internal/partitions"
)

// dayPartitions lists the partitions of the tables partitioned by day as their
// bounds say them.
func dayPartitions(t *testing.T, pool db.DBTX) map[string]string {
	t.Helper()
	rows, err := pool.Query(context.Background(), `SELECT c.relname, pg_get_expr(c.relpartbound, c.oid)
		FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
		WHERE i.inhparent::regclass::text = ANY($1)`, partitions.Tables)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	out := map[string]string{}
	for rows.Next() {
		var name, bound string
		if err := rows.Scan(&name, &bound); err != nil {
			t.Fatal(err)
		}
		out[name] = bound
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestMakeAheadMakesEachDayOnceAndNoDefault: a server that starts after a long
// stop (here: 40 days on) makes the day before, its day and the Lead days after,
// one partition a day bounded by that day, none a DEFAULT; eight servers
// starting at once make each day once between them; a second round makes none.
func TestMakeAheadMakesEachDayOnceAndNoDefault(t *testing.T) {
	t.Parallel()
	pool := dbtest.New(t)
	ctx := context.Background()
	later := time.Now().AddDate(0, 0, 40)
	var wg sync.WaitGroup
	made := make([]int, 8)
	errs := make([]error, 8)
	for i := range made {
		wg.Add(1)
		go func() { defer wg.Done(); made[i], errs[i] = partitions.MakeAhead(ctx, db.New(pool), later) }()
	}
	wg.Wait()
	total := 0
	for i := range made {
		if errs[i] != nil {
			t.Fatalf("server %d: %v", i, errs[i])
		}
		total += made[i]
	}
	if want := (partitions.Lead + 2) * len(partitions.Tables); total != want {
		t.Errorf("eight servers made %d partitions between them, want %d (each day once)", total, want)
	}
	parts := dayPartitions(t, pool)
	day := partitions.Day(later)
	for _, table := range partitions.Tables {
		for d := -1; d <= partitions.Lead; d++ {
			from := day.AddDate(0, 0, d)
			name := table + "_" + from.Format("20060102")
			want := "FOR VALUES FROM ('" + from.Format(time.DateOnly) + "') TO ('" + from.AddDate(0, 0, 1).Format(time.DateOnly) + "')"
			if parts[name] != want {
				t.Errorf("%s: %q, want %q", name, parts[name], want)
			}
		}
	}
	for name, bound := range parts {
		if bound == "DEFAULT" {
			t.Errorf("%s is a DEFAULT partition", name)
		}
	}
	if n, err := partitions.MakeAhead(ctx, db.New(pool), later); err != nil || n != 0 {
		t.Errorf("a second round made %d (%v), want none", n, err)
	}
}

// TestRetryMakesTheMissingDay: an insert into a day with no partition fails as
// Missing, stores nothing, and Retry makes the day and stores it once.
func TestRetryMakesTheMissingDay(t *testing.T) {
	t.Parallel()
	pool := dbtest.New(t)
	ctx := context.Background()
	day := partitions.Day(time.Now().AddDate(0, 0, 100))
	insert := func() error {
		_, err := pool.Exec(ctx, `INSERT INTO event_bodies (client, event_id, day, body) VALUES ('acme', 1, $1, 'x')`, day)
		return err
	}
	if err := insert(); !partitions.Missing(err) {
		t.Fatalf("an insert into a day without a partition: %v, want a missing partition", err)
	}
	calls := 0
	err := partitions.Retry(ctx, db.New(pool), day, func() error { calls++; return insert() })
	if err != nil || calls != 2 {
		t.Fatalf("retry: %v after %d calls, want stored on the second", err, calls)
	}
	var n int
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM event_bodies WHERE day = $1`, day).Scan(&n); err != nil || n != 1 {
		t.Errorf("%d rows of the day (%v), want 1", n, err)
	}
	if err := partitions.Retry(ctx, db.New(pool), day, func() error { return context.Canceled }); err != context.Canceled {
		t.Errorf("retry of another error: %v, want it as it was", err)
	}
}
