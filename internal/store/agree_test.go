package store_test

import (
	"context"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/oncehook/oncehook/db"
	"github.com/oncehook/oncehook/internal/store"
)

// forms are the two implementations of the Store, by name.
var forms = map[string]store.Store{"single": store.Single{}, "sharded": store.Sharded{}}

// agree runs each form of one operation in a transaction it rolls back, after
// setup wrote what the case needs, and fails the test when what run returns (the
// operation's answer and the rows it left) differs between the two forms. It
// returns what run returned for the single Postgres's form.
func agree[T any](t *testing.T, pool *pgxpool.Pool, setup func(t *testing.T, tx pgx.Tx), run func(t *testing.T, s store.Store, tx pgx.Tx, q *db.Queries) T) T {
	t.Helper()
	ctx := context.Background()
	got := map[string]T{}
	for name, s := range forms {
		func() {
			tx, err := pool.Begin(ctx)
			if err != nil {
				t.Fatal(err)
			}
			defer tx.Rollback(ctx) //nolint:errcheck // only looked into, then undone
			if setup != nil {
				setup(t, tx)
			}
			got[name] = run(t, s, tx, db.New(tx))
		}()
	}
	if diff := cmp.Diff(got["single"], got["sharded"]); diff != "" {
		t.Errorf("the two forms disagree (-single +sharded):\n%s", diff)
	}
	return got["single"]
}

// exec runs sql in tx with args, failing the test on an error.
func exec(t *testing.T, tx pgx.Tx, sql string, args ...any) {
	t.Helper()
	if _, err := tx.Exec(context.Background(), sql, args...); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
}
