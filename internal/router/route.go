package router

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"

	"github.com/oncehook/oncehook/internal/ledger"
	"github.com/oncehook/oncehook/internal/settings"
	"github.com/oncehook/oncehook/internal/store"
	"github.com/oncehook/oncehook/internal/telemetry"
	"github.com/oncehook/oncehook/internal/tracing"
	"go.opentelemetry.io/otel/trace"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/oncehook/oncehook/db"
	"github.com/oncehook/oncehook/internal/batch"
)

// Router claims received events and inserts one action per business operation.
type Router struct {
	pool       *pgxpool.Pool
	cfg        *settings.Config
	logger     *slog.Logger
	poll       time.Duration
	wake       batch.Signal
	performers *batch.Wakeup                    // woken once a batch created actions
	lanes      *ledger.Lanes                    // the clients it claims events for in turn
	store      store.Store                      // what Citus does differently
	routes     map[string][]settings.ActionRule // each source's rules, predecessors first; the config does not change while it runs
	paths      map[string]*docPaths             // what each source's rules read of an event's document
}

// Routing runs in one loop per process: a second loop's inserts would contend with
// the first's for the same index pages. The loop waits a moment before a batch that
// may not fill, so that a wave of deliveries is routed by one transaction rather
// than by one each. After a full batch it takes larger ones, since a batch costs
// Postgres much the same whatever its size (planning, its commit), so a backlog
// drains in fewer transactions.
const (
	routeBatch       = 50
	routeBatchBehind = 200
)

// Params is what a Router needs; the engine fills it from its own.
type Params struct {
	Pool   *pgxpool.Pool
	Config *settings.Config
	Logger *slog.Logger
	Poll   time.Duration // fallback polling when no notification arrives
}

// New returns the router of p; performers wakes every process's performers once a
// batch created actions, mode tells whether the database is Citus.
func New(p Params, st store.Store, performers *batch.Wakeup) *Router {
	return &Router{pool: p.Pool, cfg: p.Config, logger: p.Logger, poll: p.Poll, store: st,
		wake: batch.NewSignal(), performers: performers,
		routes: rulesBySource(p.Config.Actions), paths: pathsBySource(p.Config.Actions),
		lanes: ledger.NewLanes(p.Config, p.Logger, func(ctx context.Context) ([]string, error) {
			return db.New(p.Pool).EventQueueClients(ctx)
		})}
}

// Wake makes the router look for received events now.
func (rt *Router) Wake() { rt.wake.Send() }

// RouteLoop routes received events until ctx ends: a batch whenever it is woken
// or the poll passes, and at once again while batches come back full.
func (rt *Router) RouteLoop(ctx context.Context) {
	full := false
	batch.Loop(ctx, rt.logger, rt.poll, rt.wake, "route", func(ctx context.Context) (int, error) {
		if !full {
			batch.Sleep(ctx, batch.RouteWait)
		}
		size := routeBatch
		if full {
			size = routeBatchBehind
		}
		n, err := rt.RouteBatch(ctx, size)
		full = n == size
		return n, err
	})
}

// RouteBatch claims up to n received events and turns each into actions, in one
// short transaction. It returns how many events it routed. It goes round the
// clients (see lanes): the batch starts with the next client's events and takes the
// following clients' for the rest of its room.
func (rt *Router) RouteBatch(ctx context.Context, n int) (int, error) {
	clients := rt.lanes.Round(ctx)
	routed, err := rt.routeBatch(ctx, clients, n, false)
	if errors.Is(err, errContentRefused) {
		// Some event's content cannot be stored. Route the batch again with each
		// event in a savepoint of its own, so that event is set aside and the
		// others go through.
		routed, err = rt.routeBatch(ctx, clients, n, true)
	}
	return routed, err
}

// errContentRefused marks a batch that failed on an event's content, not on storage.
var errContentRefused = errors.New("an event's content was refused by the database")

// refusedOr marks err as errContentRefused when the database refused data.
func refusedOr(err error) error {
	if _, refused := db.Refused(err); refused {
		return fmt.Errorf("%w: %w", errContentRefused, err)
	}
	return err
}

// routeBatch routes one batch, up to n events of the clients in turn. Routing is
// all-or-nothing for the batch unless eachInSavepoint is set, which costs a
// savepoint per event: the cheap way is tried first.
func (rt *Router) routeBatch(ctx context.Context, clients []string, n int, eachInSavepoint bool) (int, error) {
	// Sequential scans priced out: the queue's statistics may say it is empty
	// while it fills. Planned per call: the router's first claims on a new
	// database run against empty tables, and a generic plan made then (a
	// sequential scan of the inbox) would be kept while a burst fills it (see
	// db.ScanFree).
	tx, q, err := db.Begin(ctx, rt.pool, db.ScanFree)
	if err != nil {
		return 0, err
	}
	defer tx.Rollback(context.WithoutCancel(ctx)) //nolint:errcheck // no-op after commit
	total, created := 0, 0
	for _, client := range clients {
		if total == n {
			break
		}
		b, err := rt.routeClient(ctx, tx, q, client, n-total, eachInSavepoint)
		if err != nil {
			return 0, err
		}
		total, created = total+len(b.statuses.Ids), created+b.created
	}
	if err := tx.Commit(ctx); err != nil {
		return 0, fmt.Errorf("commit transaction: %w", err)
	}
	if created > 0 {
		rt.performers.Send()
	}
	return total, nil
}

// routeClient claims up to n of one client's received events and routes them;
// every statement it sends names that client.
func (rt *Router) routeClient(ctx context.Context, tx pgx.Tx, q *db.Queries, client string, n int, eachInSavepoint bool) (*batchRouting, error) {
	claimed, err := rt.store.ClaimEvents(ctx, q, client, n)
	if err != nil {
		return nil, fmt.Errorf("claim events: %w", err)
	}
	events := make([]db.Event, len(claimed))
	for i, c := range claimed {
		events[i] = db.Event(c)
	}
	b := newBatchRouting(len(events))
	if len(events) == 0 {
		return b, nil
	}
	if err := rt.routeEvents(ctx, tx, q, events, eachInSavepoint, b); err != nil {
		return nil, refusedOr(err)
	}
	if err := rt.linkEvents(ctx, q, b.links); err != nil {
		return nil, refusedOr(err)
	}
	b.statuses.Client = client
	if err := rt.store.SetEventStatuses(ctx, q, b.statuses); err != nil {
		return nil, fmt.Errorf("set event statuses: %w", err)
	}
	return b, nil
}

// batchRouting gathers what a batch's events became, for the statements that
// write it at the end of the batch.
type batchRouting struct {
	links    db.ActionEventLinksParams
	statuses db.EventSetStatusesParams
	created  int
}

func newBatchRouting(n int) *batchRouting {
	return &batchRouting{statuses: db.EventSetStatusesParams{
		Clients: make([]string, 0, n), Ids: make([]int64, 0, n),
		Statuses: make([]string, 0, n), Reasons: make([]string, 0, n),
	}}
}

func (b *batchRouting) add(ev db.Event, r routing) {
	traceRoute(ev, r)
	b.created += r.created
	b.statuses.Clients = append(b.statuses.Clients, ev.Client)
	b.statuses.Ids = append(b.statuses.Ids, ev.ID)
	b.statuses.Statuses = append(b.statuses.Statuses, r.status)
	b.statuses.Reasons = append(b.statuses.Reasons, r.reason())
}

// routeEvents routes each event of a batch in order into b. Unless each event is
// routed in a savepoint of its own (eachInSavepoint), runs of events that only ask for independent actions send their inserts together
// (routeRun); any other event is routed on its own.
func (rt *Router) routeEvents(ctx context.Context, tx pgx.Tx, q *db.Queries, events []db.Event, eachInSavepoint bool, b *batchRouting) error {
	var run []db.Event
	flush := func() error {
		if len(run) == 0 {
			return nil
		}
		routed, err := rt.routeRun(ctx, q, run)
		if err != nil {
			return err
		}
		for i, r := range routed {
			r.links(&b.links)
			b.add(run[i], r)
		}
		run = run[:0]
		return nil
	}
	for _, ev := range events {
		if !eachInSavepoint && rt.independent(ev) {
			run = append(run, ev)
			continue
		}
		if err := flush(); err != nil {
			return err
		}
		var r routing
		var err error
		if eachInSavepoint {
			r, err = rt.routeSetAside(ctx, tx, ev)
		} else {
			r, err = rt.routeEvent(ctx, q, ev)
			r.links(&b.links)
		}
		if err != nil {
			return fmt.Errorf("route event %d: %w", ev.ID, err)
		}
		b.add(ev, r)
	}
	return flush()
}

// linkEvents writes the links between events and the actions they asked for.
func (rt *Router) linkEvents(ctx context.Context, q *db.Queries, links db.ActionEventLinksParams) error {
	if len(links.ActionIds) == 0 {
		return nil
	}
	if err := rt.store.LinkEvents(ctx, q, links); err != nil {
		return fmt.Errorf("link events to actions: %w", err)
	}
	return nil
}

// routeSetAside routes one event inside a savepoint, its links included. An event
// whose content the database refuses to store as an action (a NUL in a key, a number
// beyond numeric, a resource too long for its index) is set aside as ignored, with
// the reason, instead of failing the batch on every try and holding up every event
// behind it.
func (rt *Router) routeSetAside(ctx context.Context, tx pgx.Tx, ev db.Event) (routing, error) {
	var r routing
	err := db.WithTx(ctx, tx, func(q *db.Queries) error {
		var err error
		if r, err = rt.routeEvent(ctx, q, ev); err != nil {
			return err
		}
		var links db.ActionEventLinksParams
		r.links(&links)
		return rt.linkEvents(ctx, q, links)
	})
	pgErr, refused := db.Refused(err)
	if !refused {
		return r, err
	}
	rt.logger.Warn("an event's content cannot be stored as an action; it is ignored", tracing.EventIDs(ev), "err", err)
	r = routing{status: ledger.EventIgnored}
	r.note("its content cannot be stored as an action: %s", ledger.Truncate(pgErr.Message, 300))
	return r, nil
}

// routing is what became of one event.
type routing struct {
	status  string
	reasons []string
	created int
	linked  []actionLink // the actions the event asked for, to be linked to it
}

// actionLink is one action an event asked for, with the params it asked with.
type actionLink struct {
	client            string
	actionID, eventID int64
	params            json.RawMessage
	sum               []byte
	conflict          bool
}

// links adds the event's links to a batch of them.
func (r *routing) links(to *db.ActionEventLinksParams) {
	for _, l := range r.linked {
		to.Clients = append(to.Clients, l.client)
		to.ActionIds = append(to.ActionIds, l.actionID)
		to.EventIds = append(to.EventIds, l.eventID)
		to.Params = append(to.Params, l.params)
		to.ParamsSha256s = append(to.ParamsSha256s, l.sum)
		to.Conflicts = append(to.Conflicts, l.conflict)
	}
}

func (r *routing) note(format string, args ...any) {
	r.reasons = append(r.reasons, fmt.Sprintf(format, args...))
}

func (r *routing) reason() string { return strings.Join(r.reasons, "; ") }

// routeEvent applies the source's rules to one event: cancellations first, then one
// action per matching rule, predecessors before their successors.
func (rt *Router) routeEvent(ctx context.Context, q *db.Queries, ev db.Event) (routing, error) {
	rules, doc, r, ok := rt.prepare(ev)
	if !ok {
		return r, nil
	}
	occurred := ev.OccurredAt
	cancelled, err := rt.applyCancellations(ctx, q, ev, doc, rules, &r)
	if err != nil {
		return r, err
	}
	cancels := slices.ContainsFunc(rules, func(rule settings.ActionRule) bool { return slices.Contains(rule.CancelledBy, ev.Type) })
	switch {
	case cancelled == 1:
		r.status = ledger.EventRouted
		r.note("cancelled 1 action not yet performed")
	case cancelled > 1:
		r.status = ledger.EventRouted
		r.note("cancelled %d actions not yet performed", cancelled)
	case cancels && len(r.reasons) == 0:
		r.note("no action of its resource was left to cancel")
	}
	ids := map[string]int64{} // rule name -> action id, for successors
	matched := false
	for _, rule := range rules {
		if !slices.Contains(rule.On, ev.Type) {
			continue
		}
		matched = true
		if !whenHolds(rule, doc, &r) {
			continue
		}
		if err := rt.routeRule(ctx, q, ev, doc, rule, occurred, ids, &r); err != nil {
			return r, err
		}
	}
	if !matched && !cancels {
		r.note("no action rule for event type %q", ev.Type)
	}
	return r, nil
}

// routeRun routes a run of independent events, in order, with their action inserts
// written by one statement instead of one each.
func (rt *Router) routeRun(ctx context.Context, q *db.Queries, run []db.Event) ([]routing, error) {
	routed := make([]routing, len(run))
	var intents []actionIntent
	var eventOf []int // index in run of each intent's event
	for i, ev := range run {
		rules, doc, r, ok := rt.prepare(ev)
		routed[i] = r
		if !ok {
			continue
		}
		matched := false
		for _, rule := range rules {
			if !slices.Contains(rule.On, ev.Type) {
				continue
			}
			matched = true
			if !whenHolds(rule, doc, &routed[i]) {
				continue
			}
			parts, ok := keyParts(doc, rule, &routed[i])
			if !ok {
				continue
			}
			in, err := rt.intent(ev, doc, rule, parts, 0, "", ruleTime(doc, rule, ev.OccurredAt))
			if err != nil {
				return nil, fmt.Errorf("route event %d: %w", ev.ID, err)
			}
			intents, eventOf = append(intents, in), append(eventOf, i)
		}
		if !matched {
			routed[i].note("no action rule for event type %q", ev.Type)
		}
	}
	ids, err := insertActions(ctx, q, rt.store, intents)
	if err != nil {
		return nil, fmt.Errorf("route events %d to %d: %w", run[0].ID, run[len(run)-1].ID, err)
	}
	for i, in := range intents {
		ev := run[eventOf[i]]
		if _, err := rt.linkToAction(ctx, q, ev, in, ids[i], &routed[eventOf[i]]); err != nil {
			return nil, fmt.Errorf("route event %d: %w", ev.ID, err)
		}
	}
	return routed, nil
}

// insertActions inserts the actions intents ask for in one call of the store's
// InsertActions and returns, for each intent in order, the id of the action it
// created, or 0 when its operation already had one: before, or from an earlier
// intent of the same call.
func insertActions(ctx context.Context, q *db.Queries, s store.Store, intents []actionIntent) ([]int64, error) {
	if len(intents) == 0 {
		return nil, nil
	}
	p := db.ActionInsertParams{ReadyState: ledger.RuleOf[ledger.ObsCreated].Next, HeldState: ledger.RuleOf[ledger.ObsCreatedDisconnected].Next}
	for _, in := range intents {
		var occurred time.Time // with HasOccurredAts false: NULL
		if in.occurred != nil {
			occurred = *in.occurred
		}
		keyJSON, _ := json.Marshal(in.id.KeyParts)
		p.Clients, p.Environments = append(p.Clients, in.id.Client), append(p.Environments, in.id.Environment)
		p.Sources, p.Names = append(p.Sources, in.source), append(p.Names, in.rule.Name)
		p.BusinessKeys, p.KeyParts = append(p.BusinessKeys, in.id.BusinessKey()), append(p.KeyParts, keyJSON)
		p.OperationKeys, p.Destinations = append(p.OperationKeys, in.id.OperationKey()), append(p.Destinations, in.rule.Destination)
		p.Params, p.ParamsSha256s = append(p.Params, in.params), append(p.ParamsSha256s, in.sum)
		p.Owners, p.AfterIds, p.Resources = append(p.Owners, in.owner), append(p.AfterIds, in.afterID), append(p.Resources, in.resource)
		p.OccurredAts, p.HasOccurredAts = append(p.OccurredAts, occurred), append(p.HasOccurredAts, in.occurred != nil)
		p.MaxAttempts = append(p.MaxAttempts, int32(in.rule.Retry.Attempts))
		p.WithinSeconds = append(p.WithinSeconds, in.rule.Retry.Within.Seconds())
		state, reason := "", ""
		if in.cutover != nil {
			state, reason = in.cutover.State, ledger.Truncate(in.cutover.Reason, 1000)
		}
		p.CutoverStates, p.CutoverReasons = append(p.CutoverStates, state), append(p.CutoverReasons, reason)
	}
	rows, err := s.InsertActions(ctx, q, p)
	if err != nil {
		return nil, fmt.Errorf("insert actions: %w", err)
	}
	type operation struct{ client, key string }
	created := make(map[operation]int64, len(rows))
	for _, r := range rows {
		created[operation{r.Client, r.OperationKey}] = r.ID
	}
	ids := make([]int64, len(intents))
	for i, in := range intents {
		op := operation{in.id.Client, p.OperationKeys[i]}
		ids[i] = created[op]
		delete(created, op) // a later intent for the same operation finds it existing
	}
	return ids, nil
}

// traceRoute records the router's span for one routed event: a child of its
// delivery's span, naming the actions the event asked for.
func traceRoute(ev db.Event, r routing) {
	if !telemetry.Enabled() {
		return
	}
	var headers map[string]string
	_ = json.Unmarshal(ev.Headers, &headers) // stored by the inbox as an object
	ctx := tracing.StoredTraceContext(context.Background(), headers[tracing.TraceparentHeader])
	ids := make([]int64, 0, len(r.linked))
	for _, l := range r.linked {
		ids = append(ids, l.actionID)
	}
	_, span := telemetry.Tracer().Start(ctx, "oncehook.route", trace.WithSpanKind(trace.SpanKindInternal),
		trace.WithAttributes(tracing.AttrEventID.Int64(ev.ID), tracing.AttrEventStatus.String(r.status), tracing.AttrActionIDs.Int64Slice(ids)))
	span.End()
}
