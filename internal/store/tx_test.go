package store_test

import (
	"context"
	"errors"
	"testing"

	"github.com/oncehook/oncehook/db"
	"github.com/oncehook/oncehook/db/dbtest"
	"github.com/oncehook/oncehook/internal/store"
)

// TestInTxFormsAgree: each form's transaction, under each plan, commits what fn
// wrote (a resource's cancellation) when fn returns nil and nothing when it fails; the forms differ in how the
// statements are planned, never in what they commit.
func TestInTxFormsAgree(t *testing.T) {
	t.Parallel()
	dbtest.SinglePostgresOnly(t, "the single Postgres's plans are not Citus's: the forms are compared where both run")
	pool := dbtest.New(t)
	ctx := context.Background()
	refused := errors.New("refused")
	got := map[string][]string{}
	for name, s := range forms {
		for _, plan := range []store.Plan{store.Indexed, store.Keyed} {
			for _, fail := range []bool{false, true} {
				resource := name + map[store.Plan]string{store.Indexed: "-indexed", store.Keyed: "-keyed"}[plan] +
					map[bool]string{false: "-kept", true: "-refused"}[fail]
				if _, err := pool.Exec(ctx, `INSERT INTO resources (client, source, resource) VALUES ('acme', 's', $1)`, resource); err != nil {
					t.Fatal(err)
				}
				err := s.InTx(ctx, pool, plan, func(q *db.Queries) error {
					if err := s.CancelResource(ctx, q, db.ResourceCancelParams{Client: "acme", Source: "s", Resource: resource}); err != nil {
						return err
					}
					if fail {
						return refused
					}
					return nil
				})
				if fail != errors.Is(err, refused) || !fail && err != nil {
					t.Fatalf("%s %s: %v", name, resource, err)
				}
			}
		}
		rows, err := pool.Query(ctx, `SELECT substr(resource, length($1) + 1) FROM resources
			WHERE resource LIKE $1 || '-%' AND cancelled_at IS NOT NULL ORDER BY 1`, name)
		if err != nil {
			t.Fatal(err)
		}
		for rows.Next() {
			var r string
			if err := rows.Scan(&r); err != nil {
				t.Fatal(err)
			}
			got[name] = append(got[name], r)
		}
		rows.Close()
	}
	want := []string{"-indexed-kept", "-keyed-kept"}
	for name, rs := range got {
		if len(rs) != 2 || rs[0] != want[0] || rs[1] != want[1] {
			t.Errorf("%s committed %v, want %v", name, rs, want)
		}
	}
	if len(got) != 2 {
		t.Errorf("committed by %d forms, want both", len(got))
	}
}
