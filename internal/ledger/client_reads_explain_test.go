package ledger_test

import (
	"context"
	"regexp"
	"testing"
	"time"

	"github.com/oncehook/oncehook/db"
	"github.com/oncehook/oncehook/db/dbtest"
)

// clientReads are the dashboard's and the API's reads that, on Citus, run once
// for each client the reader sees (db.EachClient): each must be routed whole to
// that client's shard, as one task, or it would read every shard once per client
// (and a walk with a limit could not run there at all).
var clientReads = []struct {
	name string
	call func(ctx context.Context, q *db.Queries)
}{
	{"ActionList", func(ctx context.Context, q *db.Queries) {
		_, _ = q.ActionList(ctx, db.ActionListParams{Client: wsClient, States: []string{}, AllClients: true,
			ScopeClients: []string{}, Clients: []string{wsClient}, Sources: []string{"shop"}, Sort: "-created",
			StateRows: 50, MaxRows: 50})
	}},
	{"ActionList", func(ctx context.Context, q *db.Queries) { // a search: every subquery too
		_, _ = q.ActionList(ctx, db.ActionListParams{Client: wsClient, States: []string{"failed", "held"}, AllClients: true,
			ScopeClients: []string{}, Q: "enq_1", Clients: []string{wsClient}, Sources: []string{"shop"}, Sort: "state_since",
			HttpStatus: 422, StateRows: 101, MaxRows: 202})
	}},
	{"ActionCountByStateOfClient", func(ctx context.Context, q *db.Queries) {
		_, _ = q.ActionCountByStateOfClient(ctx, wsClient)
	}},
	{"DashboardTrendQueues", func(ctx context.Context, q *db.Queries) {
		_, _ = q.DashboardTrendQueues(ctx, db.DashboardTrendQueuesParams{Starts: []time.Time{time.Now().Add(-time.Hour), time.Now()},
			BucketSeconds: 3600, ScopeClients: []string{wsClient}})
	}},
	{"DashboardSourceStats", func(ctx context.Context, q *db.Queries) {
		_, _ = q.DashboardSourceStats(ctx, db.DashboardSourceStatsParams{Client: wsClient, Sources: []string{"shop", "shop2"}})
	}},
}

// TestClientReadsRunAsOneTask: each read that runs client by client names the
// client in every scan; on Citus each is one task, on the client's shard.
func TestClientReadsRunAsOneTask(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := dbtest.New(t)
	tx, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx) //nolint:errcheck // only looked into
	names := regexp.MustCompile(`(Index Cond|Filter): .*client = (ANY \('\{acme\}'|'acme')`)
	for _, r := range clientReads {
		e := &explainer{t: t, tx: tx, plans: map[string]string{}}
		r.call(ctx, db.New(e))
		plan, ok := e.plans[r.name]
		if !ok {
			t.Errorf("%s: the call sent no statement of that name", r.name)
			continue
		}
		if !dbtest.OnCitus() {
			if !names.MatchString(plan) {
				t.Errorf("%s does not name the client in its scans:\n%s", r.name, plan)
			}
			continue
		}
		counts := regexp.MustCompile(`Task Count: (\d+)`).FindAllStringSubmatch(plan, -1)
		if len(counts) != 1 || counts[0][1] != "1" {
			t.Errorf("%s is not one task on the client's shard:\n%s", r.name, plan)
		}
	}
}
