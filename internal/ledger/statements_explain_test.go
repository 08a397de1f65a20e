package ledger_test

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/oncehook/oncehook/db"
	"github.com/oncehook/oncehook/db/dbtest"
	"github.com/oncehook/oncehook/internal/partitions"
)

// workerStatement is one statement the ingest path or a worker runs: call sends
// it through the sqlc method with the arguments the worker gives it.
type workerStatement struct {
	name string // the query's name
	// client: its plan names the client in a scan of the client's rows on a
	// single Postgres too.
	client bool
	// mode: the statement runs on "single" Postgres only, on "citus" only (its
	// form for a sharded database), or on both ("").
	mode string
	// fansOut says why it runs on every shard on Citus: it reads no row it locks
	// or writes, only which clients have work.
	fansOut string
	call    func(ctx context.Context, q *db.Queries, sharded bool)
}

// workerStatements is every statement of ingest, route, perform, record,
// reconcile and the wake-ups, by name (TestWorkerStatementsListed checks that
// every one those files run is here).
func workerStatements() []workerStatement {
	return slices.Concat(ingestStatements(), routeStatements(), routeRuleStatements(), performStatements(),
		recordStatements(), reconcileStatements(), modeStatements())
}

// The arguments the statements are explained with: a worker's, for one client.
const wsClient = "acme"

var (
	wsOne, wsNow, wsWorker = int64(1), time.Now(), "w1"
	wsJSON, wsSum          = json.RawMessage(`{"a":1}`), []byte{1}
)

// ingestStatements are the statements of ingest.
func ingestStatements() []workerStatement {
	return []workerStatement{
		{name: "EventInsertBatch", mode: "single", call: func(ctx context.Context, q *db.Queries, _ bool) {
			_, _ = q.EventInsertBatch(ctx, db.EventInsertBatchParams{Clients: []string{wsClient}, Environments: []string{"live"},
				Sources: []string{"shop"}, SourceEventIds: []string{"e1"}, Types: []string{"t"}, Bodies: [][]byte{wsJSON},
				Payloads: [][]byte{wsJSON}, BodySha256s: [][]byte{wsSum}, Headers: []json.RawMessage{wsJSON},
				OccurredAts: []string{""}, Deliveries: []int32{1}, Conflicts: []bool{false}, Vias: []string{"webhook"},
				Day: partitions.Day(wsNow)})
		}},
		{name: "EventInsertOne", mode: "citus", call: func(ctx context.Context, q *db.Queries, _ bool) {
			_, _ = q.EventInsertOne(ctx, db.EventInsertOneParams{Client: wsClient, Environment: "live", Source: "shop",
				SourceEventID: "e1", Type: "t", Day: partitions.Day(wsNow), BodySha256: wsSum, Deliveries: 1, Via: "webhook"})
		}},
		{name: "EventBodyInsertOne", mode: "citus", call: func(ctx context.Context, q *db.Queries, _ bool) {
			_ = q.EventBodyInsertOne(ctx, db.EventBodyInsertOneParams{Client: wsClient, EventID: wsOne,
				Day: partitions.Day(wsNow), Body: wsJSON, Payload: wsJSON, Headers: wsJSON})
		}},
		{name: "EventConflictInsert", call: func(ctx context.Context, q *db.Queries, _ bool) {
			_ = q.EventConflictInsert(ctx, db.EventConflictInsertParams{Client: wsClient, EventID: 1, Body: wsJSON, BodySha256: wsSum, Headers: wsJSON})
		}},
	}
}

// routeStatements are the statements of route.
func routeStatements() []workerStatement {
	return []workerStatement{
		{name: "EventClaimReceived", client: true, call: func(ctx context.Context, q *db.Queries, sharded bool) {
			_, _ = q.EventClaimReceived(ctx, db.EventClaimReceivedParams{Client: wsClient, MaxEvents: 50, Sharded: sharded})
		}},
		{name: "EventSetStatuses", call: func(ctx context.Context, q *db.Queries, sharded bool) {
			_ = q.EventSetStatuses(ctx, db.EventSetStatusesParams{Sharded: sharded, Client: wsClient, Clients: []string{wsClient},
				Ids: []int64{1}, Statuses: []string{"routed"}, Reasons: []string{""}})
		}},
		{name: "ActionInsert", mode: "single", call: func(ctx context.Context, q *db.Queries, _ bool) {
			_, _ = q.ActionInsert(ctx, db.ActionInsertParams{HeldState: "held", ReadyState: "pending", Clients: []string{wsClient},
				Environments: []string{"live"}, Sources: []string{"shop"}, Names: []string{"n"}, BusinessKeys: []string{"k"},
				KeyParts: []json.RawMessage{wsJSON}, OperationKeys: []string{"op"}, Destinations: []string{"crm"},
				Params: []json.RawMessage{wsJSON}, ParamsSha256s: [][]byte{wsSum}, Owners: []string{""}, AfterIds: []int64{1},
				Resources: []string{""}, OccurredAts: []time.Time{wsNow}, HasOccurredAts: []bool{true},
				MaxAttempts: []int32{5}, WithinSeconds: []float64{60}, CutoverStates: []string{""}, CutoverReasons: []string{""}})
		}},
		{name: "DestinationDisconnectedList", call: func(ctx context.Context, q *db.Queries, _ bool) {
			_, _ = q.DestinationDisconnectedList(ctx)
		}},
		{name: "ActionInsertOne", mode: "citus", call: func(ctx context.Context, q *db.Queries, _ bool) {
			q.ActionInsertOne(ctx, []db.ActionInsertOneParams{{Client: wsClient, Environment: "live", Source: "shop", Name: "n",
				BusinessKey: "k", KeyParts: wsJSON, OperationKey: "op", Destination: "crm", Params: wsJSON, ParamsSha256: wsSum,
				State: "pending", AfterID: &wsOne, OccurredAt: &wsNow, MaxAttempts: 5, WithinSeconds: 60, Due: true}}).Query(nil)
		}},
		{name: "ActionGetByKey", client: true, call: func(ctx context.Context, q *db.Queries, _ bool) {
			_, _ = q.ActionGetByKey(ctx, db.ActionGetByKeyParams{Client: wsClient, ID: 1})
		}},
		{name: "ActionGetByOperationKey", client: true, call: func(ctx context.Context, q *db.Queries, _ bool) {
			_, _ = q.ActionGetByOperationKey(ctx, db.ActionGetByOperationKeyParams{Client: wsClient, OperationKey: "op"})
		}},
		{name: "ActionRecordRouted", client: true, call: func(ctx context.Context, q *db.Queries, _ bool) {
			_ = q.ActionRecordRouted(ctx, db.ActionRecordRoutedParams{State: "held", Reason: "r", NextAttemptAt: wsNow,
				Client: wsClient, ID: 1, States: []string{"pending"}})
		}},
		{name: "ActionEventLinks", mode: "single", call: func(ctx context.Context, q *db.Queries, _ bool) {
			_ = q.ActionEventLinks(ctx, db.ActionEventLinksParams{Clients: []string{wsClient}, ActionIds: []int64{1},
				EventIds: []int64{1}, Params: []json.RawMessage{wsJSON}, ParamsSha256s: [][]byte{wsSum}, Conflicts: []bool{false}})
		}},
		{name: "ActionEventLinkOne", mode: "citus", call: func(ctx context.Context, q *db.Queries, _ bool) {
			q.ActionEventLinkOne(ctx, []db.ActionEventLinkOneParams{{Client: wsClient, ActionID: 1, EventID: 1, Params: wsJSON,
				ParamsSha256: wsSum}}).Exec(nil)
		}},
	}
}

// routeRuleStatements are the statements of the route's rules: stale events,
// cancellations and the audit trail.
func routeRuleStatements() []workerStatement {
	return []workerStatement{
		{name: "ActionCancelByResource", client: true, call: func(ctx context.Context, q *db.Queries, _ bool) {
			_, _ = q.ActionCancelByResource(ctx, db.ActionCancelByResourceParams{Reason: "r", Client: wsClient, Source: "shop",
				Resource: "res", Names: []string{"n"}, States: []string{"pending"}})
		}},
		{name: "ResourceEnsure", call: func(ctx context.Context, q *db.Queries, _ bool) {
			_ = q.ResourceEnsure(ctx, db.ResourceEnsureParams{Client: wsClient, Source: "shop", Resource: "res"})
		}},
		{name: "ResourceGetForUpdate", client: true, call: func(ctx context.Context, q *db.Queries, _ bool) {
			_, _ = q.ResourceGetForUpdate(ctx, db.ResourceGetForUpdateParams{Client: wsClient, Source: "shop", Resource: "res"})
		}},
		{name: "ResourceSeen", client: true, call: func(ctx context.Context, q *db.Queries, _ bool) {
			_ = q.ResourceSeen(ctx, db.ResourceSeenParams{Client: wsClient, Source: "shop", Resource: "res", OccurredAt: &wsNow})
		}},
		{name: "ResourceCancel", mode: "single", client: true, call: func(ctx context.Context, q *db.Queries, _ bool) {
			_ = q.ResourceCancel(ctx, db.ResourceCancelParams{Client: wsClient, Source: "shop", Resource: "res", OccurredAt: &wsNow})
		}},
		{name: "ResourceCancelSharded", mode: "citus", call: func(ctx context.Context, q *db.Queries, _ bool) {
			_ = q.ResourceCancelSharded(ctx, db.ResourceCancelShardedParams{Client: wsClient, Source: "shop", Resource: "res", OccurredAt: &wsNow})
		}},
		{name: "ActionRowsDay", client: true, call: func(ctx context.Context, q *db.Queries, _ bool) {
			_, _ = q.ActionRowsDay(ctx, db.ActionRowsDayParams{Client: wsClient, ID: 1})
		}},
		{name: "AuditInsert", call: func(ctx context.Context, q *db.Queries, _ bool) {
			_ = q.AuditInsert(ctx, db.AuditInsertParams{Client: wsClient, ActionID: 1, Actor: "router", Act: "cancel", Note: "n",
				Detail: wsJSON, PartDay: wsNow})
		}},
		{name: "ActionCancelSuccessors", client: true, call: func(ctx context.Context, q *db.Queries, _ bool) {
			_, _ = q.ActionCancelSuccessors(ctx, db.ActionCancelSuccessorsParams{Reason: "r", Client: wsClient, AfterID: &wsOne})
		}},
	}
}

// performStatements are the statements of perform.
func performStatements() []workerStatement {
	return []workerStatement{
		{name: "ActionClaim", mode: "single", client: true, call: func(ctx context.Context, q *db.Queries, sharded bool) {
			_, _ = q.ActionClaim(ctx, db.ActionClaimParams{Client: wsClient, Callable: []string{"crm"}, FillNames: []string{},
				OnlyDestinations: []string{}, SkipDestinations: []string{}, MaxActions: 16, Worker: wsWorker,
				LeaseSeconds: 30, Sharded: sharded})
		}},
		{name: "ActionClaimSharded", mode: "citus", call: func(ctx context.Context, q *db.Queries, _ bool) {
			_, _ = q.ActionClaimSharded(ctx, db.ActionClaimShardedParams{Client: wsClient, Callable: []string{"crm"},
				FillNames: []string{}, OnlyDestinations: []string{}, SkipDestinations: []string{}, MaxActions: 16,
				Worker: wsWorker, LeaseSeconds: 30})
		}},
		{name: "AttemptStartEach", mode: "citus", call: func(ctx context.Context, q *db.Queries, _ bool) {
			q.AttemptStartEach(ctx, []db.AttemptStartEachParams{{Client: wsClient, ActionID: 1, Kind: "call",
				OperationKey: "op", Worker: wsWorker}}).QueryRow(nil)
		}},
		{name: "ActionStartCallsSharded", mode: "citus", call: func(ctx context.Context, q *db.Queries, _ bool) {
			_, _ = q.ActionStartCallsSharded(ctx, db.ActionStartCallsShardedParams{Worker: wsWorker, Client: wsClient,
				Clients: []string{wsClient}, Ids: []int64{1}})
		}},
		{name: "ActionStartCalls", mode: "single", call: func(ctx context.Context, q *db.Queries, sharded bool) {
			_, _ = q.ActionStartCalls(ctx, db.ActionStartCallsParams{Worker: wsWorker, Sharded: sharded, Client: wsClient,
				Clients: []string{wsClient}, Ids: []int64{1}})
		}},
		{name: "ActionRenewLease", client: true, call: func(ctx context.Context, q *db.Queries, _ bool) {
			_, _ = q.ActionRenewLease(ctx, db.ActionRenewLeaseParams{LeaseSeconds: 30, Client: wsClient, ID: 1, Worker: &wsWorker, LeaseToken: 1})
		}},
		{name: "EventTraceparentOfAction", client: true, call: func(ctx context.Context, q *db.Queries, _ bool) {
			_, _ = q.EventTraceparentOfAction(ctx, db.EventTraceparentOfActionParams{Client: wsClient, ActionID: 1})
		}},
	}
}

// recordStatements are the statements of record.
func recordStatements() []workerStatement {
	return []workerStatement{
		{name: "ActionRecordBatch", call: func(ctx context.Context, q *db.Queries, sharded bool) {
			_, _ = q.ActionRecordBatch(ctx, db.ActionRecordBatchParams{Clients: []string{wsClient}, Ids: []int64{1},
				AttemptIds: []int64{1}, Observed: []string{"success"}, HttpStatuses: []int32{201}, Errors: []string{""},
				States: []string{"confirmed"}, Reasons: []string{""}, NextAttemptAts: []time.Time{wsNow},
				ExternalRefs: []string{"ref"}, Results: []string{""}, Owners: []string{""}, LeaseTokens: []int64{1}, AttemptsBack: []int32{0},
				Sharded: sharded, Client: wsClient, Worker: wsWorker})
		}},
		{name: "DestinationDisconnect", call: func(ctx context.Context, q *db.Queries, _ bool) {
			_, _ = q.DestinationDisconnect(ctx, db.DestinationDisconnectParams{Name: "crm", Reason: "r", CalledAt: wsNow})
		}},
		{name: "ActionHoldDestination", call: func(ctx context.Context, q *db.Queries, sharded bool) {
			_, _ = q.ActionHoldDestination(ctx, db.ActionHoldDestinationParams{Reason: "r", Destination: "crm",
				States: []string{"pending"}, Sharded: sharded, Client: wsClient})
		}},
	}
}

// reconcileStatements are the statements of reconcile and recovery.
func reconcileStatements() []workerStatement {
	return []workerStatement{
		{name: "ActionLockExpiredLeases", client: true, call: func(ctx context.Context, q *db.Queries, _ bool) {
			_, _ = q.ActionLockExpiredLeases(ctx, wsClient)
		}},
		{name: "AttemptStart", call: func(ctx context.Context, q *db.Queries, _ bool) {
			_, _ = q.AttemptStart(ctx, db.AttemptStartParams{Client: wsClient, ActionID: 1, Kind: "lookup", OperationKey: "op",
				Worker: wsWorker, PartDay: wsNow})
		}},
		{name: "AttemptAbandonStarted", client: true, call: func(ctx context.Context, q *db.Queries, _ bool) {
			_ = q.AttemptAbandonStarted(ctx, db.AttemptAbandonStartedParams{Client: wsClient, ActionID: 1})
		}},
		{name: "ActionRecoverLeases", call: func(ctx context.Context, q *db.Queries, sharded bool) {
			_, _ = q.ActionRecoverLeases(ctx, db.ActionRecoverLeasesParams{Sharded: sharded, Client: wsClient, Clients: []string{wsClient},
				Ids: []int64{1}, States: []string{"pending"}, Reasons: []string{""}, NextAttemptAts: []time.Time{wsNow}})
		}},
		{name: "ActionReleaseStrayHeld", call: func(ctx context.Context, q *db.Queries, sharded bool) {
			_, _ = q.ActionReleaseStrayHeld(ctx, db.ActionReleaseStrayHeldParams{Sharded: sharded, Client: wsClient})
		}},
		{name: "ActionReleaseLeases", call: func(ctx context.Context, q *db.Queries, sharded bool) {
			_, _ = q.ActionReleaseLeases(ctx, db.ActionReleaseLeasesParams{Worker: &wsWorker, Sharded: sharded, Client: wsClient})
		}},
	}
}

// modeStatements are the statements of wake-ups, the lanes and the database's mode.
func modeStatements() []workerStatement {
	return []workerStatement{
		{name: "Notify", call: func(ctx context.Context, q *db.Queries, _ bool) { _ = q.Notify(ctx, "oncehook_actions") }},
		{name: "DatabaseMode", call: func(ctx context.Context, q *db.Queries, _ bool) { _, _ = q.DatabaseMode(ctx) }},
		{name: "ActionPark", client: true, call: func(ctx context.Context, q *db.Queries, _ bool) {
			_, _ = q.ActionPark(ctx, db.ActionParkParams{Client: wsClient, Destination: "crm", Until: wsNow})
		}},
		{name: "ActionProbePick", fansOut: "picks a breaker's probe, once a wait: it locks nothing", call: func(ctx context.Context, q *db.Queries, _ bool) {
			_, _ = q.ActionProbePick(ctx, db.ActionProbePickParams{Destination: "crm", HasLookup: true})
		}},
		{name: "ActionClaimProbe", client: true, call: func(ctx context.Context, q *db.Queries, _ bool) {
			_, _ = q.ActionClaimProbe(ctx, db.ActionClaimProbeParams{Worker: wsWorker, LeaseSeconds: 30, Now: wsNow, Client: wsClient, ID: 1})
		}},
		{name: "ActionReleaseParked", mode: "citus", call: func(ctx context.Context, q *db.Queries, sharded bool) {
			_, _ = q.ActionReleaseParked(ctx, db.ActionReleaseParkedParams{Destination: "crm", ReleasedAt: wsNow, Sharded: sharded, Client: wsClient})
		}},
		{name: "ActionClientsWithWork", fansOut: "finds the performer's lanes", call: func(ctx context.Context, q *db.Queries, _ bool) {
			_, _ = q.ActionClientsWithWork(ctx)
		}},
		{name: "EventQueueClients", fansOut: "finds the router's lanes", call: func(ctx context.Context, q *db.Queries, _ bool) {
			_, _ = q.EventQueueClients(ctx)
		}},
	}
}

// Every statement of ingest and the workers, EXPLAINed with a worker's
// arguments: on a single Postgres each reads the client's rows by client where it
// reads them (client), and on a Citus cluster (make test-citus) each that reads or
// writes a distributed table runs as Citus tasks, every one of them one task on
// one shard (Citus runs a statement's modifying parts as subplans, each its own
// task), but for the two reads that find the lanes. The statements a mode does not
// run are left out of it (a Citus form and the single Postgres form it stands for).
func TestWorkerStatementsRunAsOneTask(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := dbtest.New(t)
	onCitus := dbtest.OnCitus()
	tx, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx) //nolint:errcheck // only looked into
	e := &explainer{t: t, tx: tx, plans: map[string]string{}}
	for _, s := range workerStatements() {
		if s.mode == "single" && onCitus || s.mode == "citus" && !onCitus {
			continue
		}
		s.call(ctx, db.New(e), onCitus)
		plan, ok := e.plans[s.name]
		if !ok {
			t.Errorf("%s: the call sent no statement of that name", s.name)
			continue
		}
		if s.client && !onCitus && !regexp.MustCompile(`(Index Cond|Filter): \(+\w*\.?client = 'acme'`).MatchString(plan) {
			t.Errorf("%s does not name the client in its scan of the client's rows:\n%s", s.name, plan)
		}
		if !onCitus {
			continue
		}
		if strings.Contains(plan, "pull to coordinator") || strings.Contains(plan, "repartition") {
			t.Errorf("%s goes through the coordinator:\n%s", s.name, plan)
		}
		counts := regexp.MustCompile(`Task Count: (\d+)`).FindAllStringSubmatch(plan, -1)
		if len(counts) == 0 && strings.Contains(plan, "Citus") {
			t.Errorf("%s: a Citus plan without a task count:\n%s", s.name, plan)
		}
		for _, n := range counts {
			if n[1] != "1" && s.fansOut == "" {
				t.Errorf("%s runs a part as %s tasks, want 1:\n%s", s.name, n[1], plan)
			}
		}
		if len(counts) == 0 && s.name != "Notify" && s.name != "DatabaseMode" {
			t.Errorf("%s: no Citus task in the plan, and it is no statement without a table:\n%s", s.name, plan)
		}
	}
}

// explainer stands in for the database under sqlc's methods: each statement they
// send is EXPLAINed with its arguments (in a savepoint), never run, and answers
// with no rows.
type explainer struct {
	t     *testing.T
	tx    pgx.Tx
	plans map[string]string // by the query's name
}

var queryName = regexp.MustCompile(`^-- name: (\w+) :`)

func (e *explainer) explain(ctx context.Context, sql string, args []any) {
	e.t.Helper()
	m := queryName.FindStringSubmatch(sql)
	if m == nil {
		e.t.Fatalf("a statement without sqlc's name: %.80s", sql)
	}
	sp, err := e.tx.Begin(ctx)
	if err != nil {
		e.t.Fatal(err)
	}
	defer sp.Rollback(ctx) //nolint:errcheck // only looked into
	rows, err := sp.Query(ctx, "EXPLAIN (COSTS OFF) "+sql, append([]any{pgx.QueryExecModeDescribeExec}, args...)...)
	if err != nil {
		e.t.Errorf("%s: %v", m[1], err)
		return
	}
	lines, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		e.t.Errorf("%s: %v", m[1], err)
		return
	}
	e.plans[m[1]] = strings.Join(lines, "\n")
}

func (e *explainer) Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	e.explain(ctx, sql, args)
	return pgconn.CommandTag{}, nil
}

func (e *explainer) Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	e.explain(ctx, sql, args)
	return e.tx.Query(ctx, "SELECT WHERE false")
}

func (e *explainer) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	e.explain(ctx, sql, args)
	return e.tx.QueryRow(ctx, "SELECT WHERE false")
}

func (e *explainer) CopyFrom(context.Context, pgx.Identifier, []string, pgx.CopyFromSource) (int64, error) {
	return 0, errors.New("a worker statement copies nothing")
}

func (e *explainer) SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults {
	none := &pgx.Batch{}
	for _, q := range b.QueuedQueries {
		e.explain(ctx, q.SQL, q.Arguments)
		none.Queue("SELECT WHERE false")
	}
	return e.tx.SendBatch(ctx, none)
}

// Every statement the inbox, the router, the performer, the engine and the core's
// files they share (the wake-ups, the lanes, the audit, the traces) send is in workerStatements, so that none is added to
// them without the EXPLAIN of TestWorkerStatementsRunAsOneTask.
func TestWorkerStatementsListed(t *testing.T) {
	t.Parallel()
	listed := map[string]bool{}
	for _, s := range workerStatements() {
		listed[s.name] = true
	}
	methods := reflect.TypeOf(&db.Queries{})
	call := regexp.MustCompile(`\.([A-Z]\w*)\(`)
	var files []string
	for _, pattern := range []string{"../inbox/*.go", "../router/*.go", "../performer/*.go", "../engine/*.go",
		"wakeup.go", "lanes.go", "audit.go", "trace.go", "outcomes.go", "tx.go"} {
		found, err := filepath.Glob(pattern)
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, found...)
	}
	checked := 0
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range call.FindAllStringSubmatch(string(src), -1) {
			if _, isQuery := methods.MethodByName(m[1]); !isQuery || slices.Contains([]string{"WithTx"}, m[1]) {
				continue
			}
			checked++
			if !listed[m[1]] {
				t.Errorf("%s runs %s, which workerStatements does not list", f, m[1])
			}
		}
	}
	if checked < len(listed)/2 {
		t.Fatalf("found %d calls of statements in the workers' files, fewer than the %d listed: the search is broken", checked, len(listed))
	}
}
