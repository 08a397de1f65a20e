package ledger_test

import (
	"context"
	"strings"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/oncehook/oncehook/db/dbtest"
	"github.com/oncehook/oncehook/internal/review"
	"github.com/oncehook/oncehook/internal/settings"
)

// lastQuery records the statements a pool sends, to explain them afterwards.
type lastQuery struct {
	mu   sync.Mutex
	sql  string
	args []any
}

func (l *lastQuery) TraceQueryStart(ctx context.Context, _ *pgx.Conn, d pgx.TraceQueryStartData) context.Context {
	l.mu.Lock()
	defer l.mu.Unlock()
	if strings.Contains(d.SQL, "name: ActionList ") {
		l.sql, l.args = d.SQL, nil
		for _, a := range d.Args {
			if _, mode := a.(pgx.QueryExecMode); !mode {
				l.args = append(l.args, a)
			}
		}
	}
	return ctx
}

func (l *lastQuery) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

// TestSearchByParamValueUsesItsIndex: a search for a value of the params (an
// email, in any case; an amount) finds the action, and among many actions the
// list's own query finds it through actions_param_values_idx.
func TestSearchByParamValueUsesItsIndex(t *testing.T) {
	dbtest.SinglePostgresOnly(t, "it reads the single-Postgres plan of ActionList (on Citus it runs client by client, each planned on its client's shard)")
	t.Parallel()
	pool := dbtest.New(t)
	ctx := context.Background()
	fillActions(t, pool, 1, 30000, `(ARRAY['failed','confirmed','held'])[1 + i % 3]`)
	if _, err := pool.Exec(ctx, `UPDATE actions SET params = jsonb_build_object('to', 'Customer' || id || '@Example.com',
		'amount', 1000 + id, 'nested', jsonb_build_object('order', 'ord_' || id))`); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, `ANALYZE actions`); err != nil {
		t.Fatal(err)
	}
	cfg := pool.Config().Copy()
	trace := &lastQuery{}
	cfg.ConnConfig.Tracer = trace
	traced, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer traced.Close()
	rv := review.New(traced, &settings.Config{Sources: []settings.Source{{Name: "s0", Client: "c0"}, {Name: "s1", Client: "c1"}}}, nil)

	for _, q := range []string{"enq_12345", "customer12345@example.com", "13345", "ORD_12345"} {
		page, err := rv.ListActions(ctx, review.ActionFilter{Q: q, Limit: 10})
		if err != nil {
			t.Fatal(err)
		}
		if len(page.Actions) != 1 || page.Actions[0].BusinessKey != "enq_12345" {
			t.Errorf("search %q found %d actions (%v), want enq_12345", q, len(page.Actions), page.Actions)
		}
	}
	trace.mu.Lock()
	sql, args := trace.sql, trace.args
	trace.mu.Unlock()
	var plan string
	if err := pool.QueryRow(ctx, "EXPLAIN (FORMAT JSON) "+sql, append([]any{pgx.QueryExecModeExec}, args...)...).Scan(&plan); err != nil {
		t.Fatalf("explain the search: %v", err)
	}
	if !strings.Contains(plan, "actions_param_values_idx") {
		t.Errorf("the search by a param value does not use actions_param_values_idx:\n%s", plan)
	}
}
