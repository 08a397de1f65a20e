package review

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/oncehook/oncehook/db"
	"github.com/oncehook/oncehook/internal/ledger"
)

// ActionFilter selects actions for a queue page or the API. Empty fields match all.
type ActionFilter struct {
	States      []string
	Source      string
	Name        string
	Owner       string
	Destination string
	Client      string
	Q           string     // business key, operation key, external ref, owner or source event id
	Reason      string     // a part of the reason
	Since       *time.Time // created at or after
	Until       *time.Time // created before
	HTTPStatus  int        // an attempt got this reply status; 0 for any
	Snoozed     string     // "" every action, SnoozedAwake or SnoozedAsleep
	Parked      string     // "" every action, ParkedOut or ParkedOnly
	Imported    bool       // only the actions imported from an earlier system (oncehook import)
	Sort        string     // one of Sorts; "" is SortNewest
	Limit       int
	Cursor      string // from the previous page's NextCursor
}

// What a list keeps of the actions a person snoozed (ActSnooze): the queues'
// default view leaves them out until their time, and a filter shows them.
const (
	SnoozedAwake  = "awake"  // those not snoozed now
	SnoozedAsleep = "asleep" // those snoozed now
)

// What a list keeps of the actions an open breaker parks: the queues' default
// view leaves them out (they are one cause above the table, with their count),
// and a filter shows them.
const (
	ParkedOut  = "out"  // those no open breaker parks
	ParkedOnly = "only" // those an open breaker parks
)

// The orders a list of actions can be read in.
const (
	SortNewest         = "-created"     // newest first: the default
	SortOldest         = "created"      // oldest first
	SortWaitingLongest = "state_since"  // longest in its state first; open actions only
	SortWaitingLeast   = "-state_since" // shortest in its state first; open actions only
)

// Sorts are the orders, as the API and the pages' links name them.
var Sorts = []string{SortNewest, SortOldest, SortWaitingLongest, SortWaitingLeast}

// SortsByWaiting reports whether sort orders by the time in the state, which only
// open actions are listed by.
func SortsByWaiting(sort string) bool { return sort == SortWaitingLongest || sort == SortWaitingLeast }

// ActionPage is one page of actions, in the filter's order.
type ActionPage struct {
	Actions    []ledger.Action
	NextCursor string
	// ReasonWalked: the filter names a part of the reason and a state it
	// covers holds more than ReasonWalk actions, so its older ones were not read
	// for it (see ReasonWalk).
	ReasonWalked bool
}

// ReasonWalk is how many actions of each state, newest first (or in the sort's
// order) under the rest of the filter, a filter by a part of the reason reads:
// no index serves a part of a reason, and a state that holds none would
// otherwise be read whole (16 s at ten million actions). The list says so when
// a state holds more.
const ReasonWalk = 2000

// ListActions returns one page of actions, by keyset pagination in f.Sort's order.
func (r *Review) ListActions(ctx context.Context, f ActionFilter) (ActionPage, error) {
	limit := f.Limit
	if limit <= 0 || limit > 500 {
		limit = 50
	}
	after, err := parseCursor(f.Cursor, f.Sort)
	if err != nil {
		return ActionPage{}, err
	}
	as, err := r.selectActions(ctx, f, after, limit, limit)
	if err != nil {
		return ActionPage{}, err
	}
	page := ActionPage{Actions: as}
	if len(as) == limit {
		page.NextCursor = cursorAfter(as[len(as)-1], f.Sort)
	}
	if f.Reason != "" {
		if page.ReasonWalked, err = r.walksPast(ctx, f.States, ReasonWalk); err != nil {
			return ActionPage{}, err
		}
	}
	return page, nil
}

// MatchingActions returns up to MaxBulk+1 actions that match f, in its order,
// ignoring its cursor and limit, for "all that match the filter"; one more than
// MaxBulk tells the caller the filter is too wide. It runs the very query of
// ListActions, so a bulk act selects exactly what the list pages through.
func (r *Review) MatchingActions(ctx context.Context, f ActionFilter) ([]ledger.Action, error) {
	return r.selectActions(ctx, f, keyset{}, MaxBulk+1, MaxBulk+1)
}

// selectActions is the one place an ActionFilter becomes SQL (ActionList): the
// list, its pages, bulk acts and the counts under a filter all go through it. It
// reads at most perState actions of each state and limit in all.
func (r *Review) selectActions(ctx context.Context, f ActionFilter, after keyset, perState, limit int) ([]ledger.Action, error) {
	if err := ledger.CheckText("filter", append([]string{f.Source, f.Name, f.Owner, f.Destination, f.Client, f.Q, f.Reason}, f.States...)...); err != nil {
		return nil, err
	}
	sort, err := checkSort(f)
	if err != nil {
		return nil, err
	}
	if f.Snoozed != "" && f.Snoozed != SnoozedAwake && f.Snoozed != SnoozedAsleep {
		return nil, ledger.Errorf(ledger.EINVALID, "snoozed is %q or %q, or empty for every action.", SnoozedAwake, SnoozedAsleep)
	}
	if f.Parked != "" && f.Parked != ParkedOut && f.Parked != ParkedOnly {
		return nil, ledger.Errorf(ledger.EINVALID, "parked is %q or %q, or empty for every action.", ParkedOut, ParkedOnly)
	}
	states := f.States
	if states == nil {
		states = []string{}
	}
	clients, sources := r.searchScope()
	rows, err := r.store.ListActions(ctx, r.pool, db.ActionListParams{
		States: states, Source: f.Source, Name: f.Name, Owner: f.Owner, Destination: f.Destination,
		Client: f.Client, Q: f.Q, Clients: clients, Sources: sources,
		AllClients: r.scope.All, ScopeClients: r.scope.Clients,
		Reason: f.Reason, Since: f.Since, Until: f.Until, HttpStatus: int32(f.HTTPStatus),
		Snoozed: f.Snoozed, SnoozeNow: r.now(), Parked: f.Parked, ImportedOnly: f.Imported,
		Sort: sort, PersonStates: SortsByWaiting(sort) && onlyPersonStates(f.States),
		CursorID: after.id, CursorAt: after.at, StateRows: int32(perState), MaxRows: int32(limit), ReasonWalk: ReasonWalk,
	}, r.readClients)
	if err != nil {
		return nil, fmt.Errorf("list actions: %w", err)
	}
	return ledger.ActionsOf(rows), nil
}

// searchScope is the configured clients and sources the reader sees: they lead the
// keys a search probes for an operation key or an event id.
func (r *Review) searchScope() (clients, sources []string) {
	clients, sources = []string{}, []string{}
	for _, s := range r.cfg.Sources {
		if !r.scope.Sees(s.Client) {
			continue
		}
		if !slices.Contains(clients, s.Client) {
			clients = append(clients, s.Client)
		}
		sources = append(sources, s.Name)
	}
	return clients, sources
}

// checkSort is f's order, "" meaning newest first; EINVALID for an order that is
// not one of Sorts, or waiting time with a closed state asked for.
func checkSort(f ActionFilter) (string, error) {
	if f.Sort == "" {
		return SortNewest, nil
	}
	if !slices.Contains(Sorts, f.Sort) {
		return "", ledger.Errorf(ledger.EINVALID, "Actions can be sorted by %s, not %q.", strings.Join(Sorts, ", "), f.Sort)
	}
	if closed := ClosedAmong(f.States); SortsByWaiting(f.Sort) && closed != "" {
		return "", ledger.Errorf(ledger.EINVALID, "Only open actions wait in their state: sorting by waiting time lists no %s ones.", closed)
	}
	return f.Sort, nil
}

// ClosedAmong is the first of states that is not open, or "": where it is "", a
// list of those states can be sorted by waiting time.
func ClosedAmong(states []string) string {
	for _, s := range states {
		if !slices.Contains(ledger.OpenStates(), s) {
			return s
		}
	}
	return ""
}

// onlyPersonStates reports whether states are some of PersonStates and nothing else.
func onlyPersonStates(states []string) bool {
	for _, s := range states {
		if !slices.Contains(ledger.PersonStates, s) {
			return false
		}
	}
	return len(states) > 0
}

// keyset is where a page starts: after the row with this id (and this time in its
// state, for an order by waiting time). Zero for the first page.
type keyset struct {
	id *int64
	at *time.Time
}

// cursorAfter is the cursor of the page after a, in sort's order: the id, or the
// time a entered its state in microseconds and the id.
func cursorAfter(a ledger.Action, sort string) string {
	if SortsByWaiting(sort) {
		return fmt.Sprintf("%d.%d", a.StateSince.UnixMicro(), a.ID)
	}
	return strconv.FormatInt(a.ID, 10)
}

func parseCursor(c, sort string) (keyset, error) {
	if c == "" {
		return keyset{}, nil
	}
	bad := ledger.Errorf(ledger.EINVALID, "The cursor %q is not one this server gave out for this order.", c)
	idText := c
	var k keyset
	if SortsByWaiting(sort) {
		micros, rest, ok := strings.Cut(c, ".")
		us, err := strconv.ParseInt(micros, 10, 64)
		if !ok || err != nil {
			return keyset{}, bad
		}
		at := time.UnixMicro(us).UTC()
		k.at, idText = &at, rest
	}
	id, err := strconv.ParseInt(idText, 10, 64)
	if err != nil || id <= 0 {
		return keyset{}, bad
	}
	k.id = &id
	return k, nil
}

// ActionDetail is an action with everything that explains it.
type ActionDetail struct {
	Action   ledger.Action
	Events   []ledger.LinkedEvent
	Attempts []ledger.Attempt
	Audit    []ledger.AuditEntry
}

// GetAction returns one action with its events, attempts and audit trail.
func (r *Review) GetAction(ctx context.Context, id int64) (ActionDetail, error) {
	q := db.New(r.pool)
	a, err := r.actionRow(ctx, q, r.scope, id)
	if db.IsNotFound(err) || err == nil && !r.scope.Sees(a.Client) {
		return ActionDetail{}, ledger.NotFound("Action", id)
	}
	if err != nil {
		return ActionDetail{}, fmt.Errorf("read action: %w", err)
	}
	d := ActionDetail{Action: ledger.ActionOf(a)}
	events, err := q.ActionEventList(ctx, db.ActionEventListParams{Client: a.Client, ActionID: a.ID})
	if err != nil {
		return d, fmt.Errorf("read action events: %w", err)
	}
	attempts, err := q.AttemptList(ctx, db.AttemptListParams{Client: a.Client, ActionID: a.ID})
	if err != nil {
		return d, fmt.Errorf("read attempts: %w", err)
	}
	audit, err := q.AuditList(ctx, db.AuditListParams{Client: a.Client, ActionID: a.ID})
	if err != nil {
		return d, fmt.Errorf("read audit: %w", err)
	}
	d.Events, d.Attempts, d.Audit = ledger.LinkedEventsOf(events), ledger.AttemptsOf(attempts), ledger.AuditOf(audit)
	return d, nil
}

// StateCount is how many actions are in a state and how old the oldest is.
type StateCount struct {
	State  string
	Count  int64
	Oldest time.Time
}

// walksPast reports whether one of states (every state when none is named)
// holds more than n actions of the reader's (past 1,000, the planner's count).
func (r *Review) walksPast(ctx context.Context, states []string, n int64) (bool, error) {
	counts, err := r.Summary(ctx)
	if err != nil {
		return false, err
	}
	for _, c := range counts {
		if c.Count > n && (len(states) == 0 || slices.Contains(states, c.State)) {
			return true, nil
		}
	}
	return false, nil
}

// Summary counts the actions the reader sees by state (the store's
// CountByState); states without actions are left out.
func (r *Review) Summary(ctx context.Context) ([]StateCount, error) {
	rows, err := r.store.CountByState(ctx, r.pool, r.scope, r.readClients, r.estimates)
	if err != nil {
		return nil, fmt.Errorf("count actions: %w", err)
	}
	out := make([]StateCount, 0, len(rows))
	for _, row := range rows {
		out = append(out, StateCount{State: row.State, Count: row.N, Oldest: row.Oldest})
	}
	return out, nil
}

// DestinationStatus is a configured destination with its connection state and
// its breaker.
type DestinationStatus struct {
	Name, Type, Status, Reason, Owner string
	Held                              int64
	Breaker                           ledger.Breaker
	Parked                            int64 // the actions its breaker parks, of the reader's clients
	Transitions                       []ledger.BreakerTransition
	Outages                           []ledger.Outage // its latest outages with their alerts
}

// Destinations lists every configured destination with its status and held count.
func (r *Review) Destinations(ctx context.Context) ([]DestinationStatus, error) {
	rows, err := r.destinationList(ctx)
	if err != nil {
		return nil, fmt.Errorf("list destinations: %w", err)
	}
	byName := map[string]db.DestinationListRow{}
	for _, row := range rows {
		byName[row.Name] = row
	}
	breakers, err := ledger.Breakers(ctx, db.New(r.pool))
	if err != nil {
		return nil, err
	}
	out := make([]DestinationStatus, 0, len(r.cfg.Destinations))
	for _, d := range r.cfg.Destinations {
		if !r.seesDestination(d.Name) {
			continue
		}
		s := DestinationStatus{Name: d.Name, Type: d.Type, Status: "connected", Owner: d.Owner,
			Breaker: ledger.Breaker{Destination: d.Name, State: ledger.BreakerClosed}}
		if row, ok := byName[d.Name]; ok {
			s.Status, s.Reason, s.Held = row.Status, row.Reason, row.Held
		}
		if b, ok := breakers[d.Name]; ok {
			s.Breaker = b
		}
		out = append(out, s)
	}
	return out, nil
}

// DestinationsInDetail is Destinations with what the destinations page and the
// API say of each breaker: the actions an open one parks, and its last changes.
func (r *Review) DestinationsInDetail(ctx context.Context) ([]DestinationStatus, error) {
	out, err := r.Destinations(ctx)
	if err != nil {
		return nil, err
	}
	q := db.New(r.pool)
	for i := range out {
		if err := r.breakerDetail(ctx, q, &out[i]); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// breakerDetail reads what the destinations page says of an open breaker, or
// of one that has changed: how many actions it parks and its last changes.
func (r *Review) breakerDetail(ctx context.Context, q *db.Queries, s *DestinationStatus) error {
	if s.Breaker.Parks() {
		sc, err := r.readScope(ctx)
		if err != nil {
			return err
		}
		if s.Parked, err = q.ActionCountParked(ctx, db.ActionCountParkedParams{Destination: s.Name,
			AllClients: sc.All, ScopeClients: sc.Clients}); err != nil {
			return fmt.Errorf("count the parked actions of %s: %w", s.Name, err)
		}
	}
	if s.Breaker.State != ledger.BreakerClosed || s.Breaker.LastProbeAt != nil {
		var err error
		if s.Transitions, err = ledger.BreakerTransitions(ctx, q, s.Name, 5); err != nil {
			return err
		}
	}
	var err error
	s.Outages, err = ledger.Outages(ctx, q, s.Name, 3)
	return err
}
