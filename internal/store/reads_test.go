package store_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/oncehook/oncehook/db"
	"github.com/oncehook/oncehook/db/dbtest"
	"github.com/oncehook/oncehook/internal/ledger"
	"github.com/oncehook/oncehook/internal/settings"
	"github.com/oncehook/oncehook/internal/store"
)

// The reads run by both forms on the world, committed (a read across clients
// shares the pool's connections), with the events of two sources, one a
// client.

// readWorld commits the world and its events, and returns the actions' and the
// events' ids by name.
func readWorld(t *testing.T) (*pgxpool.Pool, worldIDs, map[string]int64) {
	t.Helper()
	dbtest.SinglePostgresOnly(t, "the single Postgres's form does not run on Citus: the forms are compared where both run")
	pool := dbtest.New(t)
	ctx := context.Background()
	tx, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx) //nolint:errcheck // no-op after the commit
	ids := world(t, tx)
	events := map[string]int64{}
	for _, e := range []struct{ client, source, id string }{
		{"acme", "acme-stripe", "evt_1"}, {"acme", "acme-stripe", "evt_2"}, {"beta", "beta-shop", "evt_1"},
	} {
		var id int64
		if err := tx.QueryRow(ctx, `INSERT INTO events (client, environment, source, source_event_id, type, body, payload,
			body_sha256, headers, deliveries) VALUES ($1, 'live', $2, $3, 'order.paid', '{}', '{}', '\x00', '{}', 2)
			RETURNING id`, e.client, e.source, e.id).Scan(&id); err != nil {
			t.Fatal(err)
		}
		events[e.client+"/"+e.id] = id
	}
	exec(t, tx, `UPDATE events SET status = 'routed'`)
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	return pool, ids, events
}

// each runs read with both forms and fails when their answers differ.
func each[T any](t *testing.T, read func(s store.Store) (T, error)) T {
	t.Helper()
	got := map[string]T{}
	for name, s := range forms {
		v, err := read(s)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		got[name] = v
	}
	if diff := cmp.Diff(got["single"], got["sharded"]); diff != "" {
		t.Errorf("the two forms disagree (-single +sharded):\n%s", diff)
	}
	return got["single"]
}

func TestListActionsFormsAgree(t *testing.T) {
	t.Parallel()
	pool, _, _ := readWorld(t)
	ctx := context.Background()
	base := db.ActionListParams{States: []string{}, AllClients: true, StateRows: 100, MaxRows: 100}
	cases := map[string]func(p *db.ActionListParams){
		"every action, newest first": func(*db.ActionListParams) {},
		"oldest first":               func(p *db.ActionListParams) { p.Sort = "created" },
		"longest in its state":       func(p *db.ActionListParams) { p.Sort = "state_since" },
		"one client":                 func(p *db.ActionListParams) { p.Client = "beta" },
		"two states, two a state":    func(p *db.ActionListParams) { p.States, p.StateRows = []string{"pending", "processing"}, 2 },
		"three in all":               func(p *db.ActionListParams) { p.MaxRows = 3 },
		"a reader of acme":           func(p *db.ActionListParams) { p.AllClients, p.ScopeClients = false, []string{"acme"} },
	}
	for name, change := range cases {
		t.Run(name, func(t *testing.T) {
			p := base
			change(&p)
			clients := bothClients
			if !p.AllClients {
				clients = func(context.Context) ([]string, error) { return p.ScopeClients, nil }
			}
			got := each(t, func(s store.Store) ([]string, error) {
				rows, err := s.ListActions(ctx, pool, p, clients)
				var names []string
				for _, a := range rows {
					names = append(names, a.Client+"/"+a.Name)
				}
				return names, err
			})
			if len(got) == 0 {
				t.Error("nothing listed")
			}
		})
	}
}

func TestCountByStateFormsAgree(t *testing.T) {
	t.Parallel()
	pool, _, _ := readWorld(t)
	ctx := context.Background()
	acme := ledger.Scope{Clients: []string{"acme"}}
	for name, sc := range map[string]ledger.Scope{"every client": ledger.EveryClient, "acme": acme} {
		t.Run(name, func(t *testing.T) {
			clients := bothClients
			if !sc.All {
				clients = func(context.Context) ([]string, error) { return sc.Clients, nil }
			}
			each(t, func(s store.Store) ([]db.ActionCountByStateRow, error) {
				return s.CountByState(ctx, pool, sc, clients, nil)
			})
		})
	}
}

func TestSourceStatsFormsAgree(t *testing.T) {
	t.Parallel()
	pool, _, _ := readWorld(t)
	ctx := context.Background()
	sources := []settings.Source{{Name: "acme-stripe", Client: "acme"}, {Name: "beta-shop", Client: "beta"}, {Name: "unused", Client: "beta"}}
	got := each(t, func(s store.Store) ([]store.SourceCount, error) {
		rows, err := s.SourceStats(ctx, pool, sources, nil)
		slices.SortFunc(rows, func(a, b store.SourceCount) int { return strings.Compare(a.Source, b.Source) })
		return rows, err
	})
	if len(got) != 2 || got[0].Events != 2 || got[0].Deliveries != 4 {
		t.Errorf("source stats %+v, want acme-stripe's 2 events in 4 deliveries, and beta-shop's", got)
	}
}

// Both forms group the open actions alike while no group is past
// store.CausesCounted.
func TestCausesFormsAgree(t *testing.T) {
	t.Parallel()
	pool, _, _ := readWorld(t)
	ctx := context.Background()
	got := each(t, func(s store.Store) ([]store.CauseCount, error) {
		rows, err := s.Causes(ctx, pool, db.DashboardCausesParams{ReasonBytes: 80, AllClients: true, ScopeClients: []string{},
			Configured: []string{"acme", "beta"}})
		slices.SortFunc(rows, func(a, b store.CauseCount) int {
			return strings.Compare(a.State+a.Destination+*a.ReasonStart, b.State+b.Destination+*b.ReasonStart)
		})
		return rows, err
	})
	if len(got) == 0 {
		t.Error("no groups of open actions in the world")
	}
	for _, c := range got {
		if c.About || c.More || c.StateOldest.IsZero() {
			t.Errorf("group %+v: want an exact count and its state's oldest", c)
		}
	}
}

// The sources' counts are planned for each call's source: Postgres keeps no
// prepared statement of DashboardSourceStatsOne, whose generic plan may read
// every event of the source.
func TestSourceStatsPlannedPerCall(t *testing.T) {
	t.Parallel()
	dbtest.SinglePostgresOnly(t, "the single Postgres's form; on Citus every read across clients is planned per call")
	_, dsn := dbtest.NewDSN(t)
	ctx := context.Background()
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		t.Fatal(err)
	}
	cfg.MaxConns = 1 // the statements' connection is the one asked
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	sources := []settings.Source{{Name: "acme-stripe", Client: "acme"}, {Name: "beta-shop", Client: "beta"}}
	for range 6 { // past the fifth call, after which Postgres would consider a generic plan
		if _, err := (store.Single{}).SourceStats(ctx, pool, sources, nil); err != nil {
			t.Fatal(err)
		}
	}
	var n int
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM pg_prepared_statements
		WHERE statement LIKE '%name: ' || 'DashboardSourceStatsOne%'`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != 0 {
		t.Errorf("DashboardSourceStatsOne is prepared on the connection (%d statements): its generic plan may be kept", n)
	}
}

func TestTrendQueuesFormsAgree(t *testing.T) {
	t.Parallel()
	pool, _, _ := readWorld(t)
	ctx := context.Background()
	starts := []time.Time{time.Now().Add(-time.Hour), time.Now()}
	got := each(t, func(s store.Store) ([]db.DashboardTrendQueuesRow, error) {
		rows, err := s.TrendQueues(ctx, pool, db.DashboardTrendQueuesParams{Starts: starts, AllClients: true,
			BucketSeconds: 3600}, bothClients)
		slices.SortFunc(rows, func(a, b db.DashboardTrendQueuesRow) int {
			return strings.Compare(a.State+a.StartAt.String(), b.State+b.StartAt.String())
		})
		return rows, err
	})
	if len(got) == 0 {
		t.Error("no arrivals counted")
	}
}

func TestStoredClientsFormsAgree(t *testing.T) {
	t.Parallel()
	pool, _, _ := readWorld(t)
	ctx := context.Background()
	q := db.New(pool)
	got := each(t, func(s store.Store) ([]string, error) {
		clients, err := s.StoredClients(ctx, q)
		slices.Sort(clients)
		return clients, err
	})
	if !slices.Equal(got, []string{"acme", "beta"}) {
		t.Errorf("stored clients %v, want acme and beta", got)
	}
}

func TestEventClientsFormsAgree(t *testing.T) {
	t.Parallel()
	pool, _, _ := readWorld(t)
	ctx := context.Background()
	if _, err := pool.Exec(ctx, `INSERT INTO events (client, environment, source, source_event_id, type, body_sha256)
		VALUES ('gamma', 'live', 'shop', 'evt_only_an_event', 't', '\x00')`); err != nil {
		t.Fatal(err)
	}
	q := db.New(pool)
	got := each(t, func(s store.Store) ([]string, error) {
		clients, err := s.EventClients(ctx, q)
		slices.Sort(clients)
		return clients, err
	})
	if !slices.Equal(got, []string{"acme", "beta", "gamma"}) {
		t.Errorf("clients with events %v, want acme, beta and gamma (events, no actions)", got)
	}
}

func TestReadScopeFormsAgree(t *testing.T) {
	t.Parallel()
	pool, _, _ := readWorld(t)
	ctx := context.Background()
	q := db.New(pool)
	acme := ledger.Scope{Clients: []string{"acme"}}
	// The scopes differ by design (Citus spells the clients out); what a
	// read across clients sees with them does not.
	for name, sc := range map[string]ledger.Scope{"every client": ledger.EveryClient, "acme": acme} {
		t.Run(name, func(t *testing.T) {
			each(t, func(s store.Store) ([]db.DestinationListRow, error) {
				read, err := s.ReadScope(ctx, sc, bothClients)
				if err != nil {
					return nil, err
				}
				return store.Single{}.ListDestinations(ctx, q, read)
			})
		})
	}
}

func TestGetActionFormsAgree(t *testing.T) {
	t.Parallel()
	pool, ids, _ := readWorld(t)
	ctx := context.Background()
	q := db.New(pool)
	for _, name := range []string{"a1", "b7"} {
		each(t, func(s store.Store) (string, error) {
			a, err := s.GetAction(ctx, q, ids.action[name], bothClients)
			return a.Client + "/" + a.Name, err
		})
	}
	each(t, func(s store.Store) (bool, error) {
		_, err := s.GetAction(ctx, q, 999_999, bothClients)
		return errors.Is(err, pgx.ErrNoRows), nil
	})
}

func TestGetEventFormsAgree(t *testing.T) {
	t.Parallel()
	pool, _, events := readWorld(t)
	ctx := context.Background()
	q := db.New(pool)
	for _, key := range []string{"acme/evt_2", "beta/evt_1"} {
		each(t, func(s store.Store) (string, error) {
			ev, err := s.GetEvent(ctx, q, events[key], bothClients)
			return ev.Client + "/" + ev.SourceEventID, err
		})
	}
	each(t, func(s store.Store) (bool, error) {
		_, err := s.GetEvent(ctx, q, 999_999, bothClients)
		return errors.Is(err, pgx.ErrNoRows), nil
	})
}

// TestReplayEventsFormsAgree: both forms send the same events back to the
// router, in the order of their ids.
func TestReplayEventsFormsAgree(t *testing.T) {
	t.Parallel()
	pool, _, events := readWorld(t)
	ctx := context.Background()
	agree(t, pool, nil, func(t *testing.T, s store.Store, tx pgx.Tx, q *db.Queries) []string {
		rows, err := s.ReplayEvents(ctx, q, db.EventReplayParams{Clients: []string{"beta", "acme"},
			Ids: []int64{events["beta/evt_1"], events["acme/evt_1"]}})
		if err != nil {
			t.Fatalf("%T: %v", s, err)
		}
		var out []string
		for _, r := range rows {
			out = append(out, r.Client)
		}
		if len(out) != 2 {
			t.Errorf("%T replayed %v, want acme's and beta's", s, out)
		}
		return append(out, storedEventsOf(t, tx)...)
	})
}

// storedEventsOf is each event's client, id, status and whether it waits for the
// router.
func storedEventsOf(t *testing.T, tx pgx.Tx) []string {
	t.Helper()
	var out []string
	for _, e := range storedEvents(t, tx) {
		out = append(out, e.Client+" "+e.SourceEventID+" "+e.Status+" "+map[bool]string{true: "queued", false: ""}[e.Queued])
	}
	return out
}
