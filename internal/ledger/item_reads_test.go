package ledger_test

import (
	"context"
	"regexp"
	"strings"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/oncehook/oncehook/db/dbtest"
	"github.com/oncehook/oncehook/internal/ledger"
	"github.com/oncehook/oncehook/internal/review"
	"github.com/oncehook/oncehook/internal/settings"
)

// statementLog records every named statement a pool sends, with its arguments,
// to explain them afterwards.
type statementLog struct {
	mu    sync.Mutex
	stmts []loggedStatement
}

type loggedStatement struct {
	name string
	sql  string
	args []any
}

func (l *statementLog) TraceQueryStart(ctx context.Context, _ *pgx.Conn, d pgx.TraceQueryStartData) context.Context {
	m := queryName.FindStringSubmatch(d.SQL)
	if m == nil {
		return ctx
	}
	s := loggedStatement{name: m[1], sql: d.SQL}
	for _, a := range d.Args {
		if _, mode := a.(pgx.QueryExecMode); !mode {
			s.args = append(s.args, a)
		}
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.stmts = append(l.stmts, s)
	return ctx
}

func (l *statementLog) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

// take returns the statements logged since the last take.
func (l *statementLog) take() []loggedStatement {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := l.stmts
	l.stmts = nil
	return out
}

// TestReadsOfOneItemRunOnItsShard: an action's page, an act on it, an event's
// page and its replay, read through the URL that names the item's client (as
// every link to an item does) or by a reader of that one client, find the item
// and send no statement that reads more than one shard on Citus: each is one
// task. A URL naming another client finds nothing, as an item the reader does
// not see; one naming none still finds it among the reader's clients.
func TestReadsOfOneItemRunOnItsShard(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := dbtest.New(t)
	fillActions(t, pool, 1, 40, `'failed'`) // c0 and c1, alternately
	if _, err := pool.Exec(ctx, `INSERT INTO events (client, environment, source, source_event_id, type, status, body, body_sha256)
SELECT 'c' || (i % 2), 'live', 's' || (i % 3), 'evt_' || i, 'ping', 'routed', '{}', '\x00'
FROM generate_series(1, 40) AS i`); err != nil {
		t.Fatal(err)
	}
	var actionID, eventID int64
	if err := pool.QueryRow(ctx, `SELECT max(id) FROM actions WHERE client = 'c1'`).Scan(&actionID); err != nil {
		t.Fatal(err)
	}
	if err := pool.QueryRow(ctx, `SELECT max(id) FROM events WHERE client = 'c1'`).Scan(&eventID); err != nil {
		t.Fatal(err)
	}
	cfg := pool.Config().Copy()
	log := &statementLog{}
	cfg.ConnConfig.Tracer = log
	traced, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer traced.Close()
	all := review.New(traced, &settings.Config{Sources: []settings.Source{{Name: "s0", Client: "c0"}, {Name: "s1", Client: "c1"}}}, nil)
	admin := ledger.Actor{Name: "admin@example.com", Role: settings.RoleAdmin}
	operator := ledger.Actor{Name: "op@example.com", Role: settings.RoleOperator, Clients: []string{"c1"}}

	reads := []struct {
		name   string
		review *review.Review
		actor  ledger.Actor
	}{
		{"an admin through the item's URL", all.For(admin).In("c1"), admin},
		{"an operator of the item's client", all.For(operator), operator},
	}
	for i, rd := range reads {
		actionID, eventID := actionID-2*int64(i), eventID-2*int64(i) // c1's too
		log.take()
		d, err := rd.review.GetAction(ctx, actionID)
		if err != nil || d.Action.Client != "c1" {
			t.Fatalf("%s: the action's page: %+v, %v", rd.name, d.Action, err)
		}
		if _, err := rd.review.Do(ctx, rd.actor, review.ActResolve, actionID,
			review.ActParams{Note: "done by hand", ExternalRef: "OPP-1"}); err != nil {
			t.Fatalf("%s: resolve: %v", rd.name, err)
		}
		ev, err := rd.review.GetEvent(ctx, eventID)
		if err != nil || ev.Event.Client != "c1" {
			t.Fatalf("%s: the event's page: %+v, %v", rd.name, ev.Event, err)
		}
		if _, err := rd.review.ReplayEvent(ctx, rd.actor, eventID, "again"); err != nil {
			t.Fatalf("%s: replay: %v", rd.name, err)
		}
		stmts := log.take()
		byKey := 0
		for _, s := range stmts {
			switch s.name {
			case "ActionGet", "EventGet":
				t.Errorf("%s: read %s by its id alone", rd.name, s.name)
			case "ActionGetByKey", "EventGetByKey":
				byKey++
			}
		}
		if byKey != 4 { // the page and the act, the page and the replay: each reads its item once
			t.Errorf("%s: %d reads of an item by client and id, want 4", rd.name, byKey)
		}
		if dbtest.OnCitus() {
			oneTaskEach(t, pool, rd.name, stmts)
		}
	}

	// A URL naming another client than the item's: not found, as for a reader
	// who does not see it. One naming none: found among the reader's clients.
	if _, err := all.For(admin).In("c0").GetAction(ctx, actionID); ledger.ErrorCode(err) != ledger.ENOTFOUND {
		t.Errorf("the action through a URL naming another client: %v, want not found", err)
	}
	if _, err := all.For(admin).In("c0").GetEvent(ctx, eventID); ledger.ErrorCode(err) != ledger.ENOTFOUND {
		t.Errorf("the event through a URL naming another client: %v, want not found", err)
	}
	if _, err := all.For(operator).In("c0").GetAction(ctx, actionID-1); ledger.ErrorCode(err) != ledger.ENOTFOUND {
		t.Errorf("an operator of c1 through a URL naming c0: %v, want not found", err)
	}
	if d, err := all.For(admin).GetAction(ctx, actionID); err != nil || d.Action.ID != actionID {
		t.Errorf("the action through a URL naming no client: %+v, %v", d.Action, err)
	}
}

// oneTaskEach explains each statement on Citus: every one is one task, on one
// shard (a reference table's, or the item's client's).
func oneTaskEach(t *testing.T, pool *pgxpool.Pool, name string, stmts []loggedStatement) {
	t.Helper()
	ctx := context.Background()
	tasks := regexp.MustCompile(`Task Count: (\d+)`)
	for _, s := range stmts {
		rows, err := pool.Query(ctx, "EXPLAIN (COSTS OFF) "+s.sql, append([]any{pgx.QueryExecModeExec}, s.args...)...)
		if err != nil {
			t.Errorf("%s: explain %s: %v", name, s.name, err)
			continue
		}
		lines, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			t.Errorf("%s: explain %s: %v", name, s.name, err)
			continue
		}
		plan := strings.Join(lines, "\n")
		for _, m := range tasks.FindAllStringSubmatch(plan, -1) {
			if m[1] != "1" {
				t.Errorf("%s: %s reads %s shards:\n%s", name, s.name, m[1], plan)
			}
		}
	}
}
