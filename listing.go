package oncehook

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/oncehook/oncehook/db"
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
	Limit       int
	Cursor      string // from the previous page's NextCursor
}

// ActionPage is one page of actions, newest first.
type ActionPage struct {
	Actions    []Action
	NextCursor string
}

// ListActions returns one page of actions, by keyset pagination on the id.
func (r *Review) ListActions(ctx context.Context, f ActionFilter) (ActionPage, error) {
	limit := f.Limit
	if limit <= 0 || limit > 500 {
		limit = 50
	}
	before, err := parseCursor(f.Cursor)
	if err != nil {
		return ActionPage{}, err
	}
	as, err := r.selectActions(ctx, f, before, limit)
	if err != nil {
		return ActionPage{}, err
	}
	page := ActionPage{Actions: as}
	if len(as) == limit {
		page.NextCursor = strconv.FormatInt(as[len(as)-1].ID, 10)
	}
	return page, nil
}

// MatchingActions returns up to MaxBulk+1 actions that match f, newest first,
// ignoring its cursor and limit, for "all that match the filter"; one more than
// MaxBulk tells the caller the filter is too wide. It runs the very query of
// ListActions, so a bulk act selects exactly what the list pages through.
func (r *Review) MatchingActions(ctx context.Context, f ActionFilter) ([]Action, error) {
	return r.selectActions(ctx, f, nil, MaxBulk+1)
}

// selectActions is the one place an ActionFilter becomes SQL (ActionList): the
// list, its pages and bulk acts all go through it.
func (r *Review) selectActions(ctx context.Context, f ActionFilter, before *int64, limit int) ([]Action, error) {
	if err := checkText("filter", append([]string{f.Source, f.Name, f.Owner, f.Destination, f.Client, f.Q, f.Reason}, f.States...)...); err != nil {
		return nil, err
	}
	states := f.States
	if states == nil {
		states = []string{}
	}
	rows, err := db.New(r.pool).ActionList(ctx, db.ActionListParams{
		States: states, Source: f.Source, Name: f.Name, Owner: f.Owner, Destination: f.Destination,
		Client: f.Client, Q: f.Q, Reason: f.Reason, Since: f.Since, Until: f.Until, HttpStatus: int32(f.HTTPStatus),
		BeforeID: before, MaxRows: int32(limit),
	})
	if err != nil {
		return nil, fmt.Errorf("list actions: %w", err)
	}
	return actionsOf(rows), nil
}

func parseCursor(c string) (*int64, error) {
	if c == "" {
		return nil, nil
	}
	id, err := strconv.ParseInt(c, 10, 64)
	if err != nil || id <= 0 {
		return nil, Errorf(EINVALID, "The cursor %q is not one this server gave out.", c)
	}
	return &id, nil
}

// ActionDetail is an action with everything that explains it.
type ActionDetail struct {
	Action   Action
	Events   []LinkedEvent
	Attempts []Attempt
	Audit    []AuditEntry
}

// GetAction returns one action with its events, attempts and audit trail.
func (r *Review) GetAction(ctx context.Context, id int64) (ActionDetail, error) {
	q := db.New(r.pool)
	a, err := q.ActionGet(ctx, id)
	if db.IsNotFound(err) {
		return ActionDetail{}, Errorf(ENOTFOUND, "Action %d does not exist.", id)
	}
	if err != nil {
		return ActionDetail{}, fmt.Errorf("read action: %w", err)
	}
	d := ActionDetail{Action: actionOf(a)}
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
	d.Events, d.Attempts, d.Audit = linkedEventsOf(events), attemptsOf(attempts), auditOf(audit)
	return d, nil
}

// StateCount is how many actions are in a state and how old the oldest is.
type StateCount struct {
	State  string
	Count  int64
	Oldest time.Time
}

// Summary counts actions by state.
func (r *Review) Summary(ctx context.Context) ([]StateCount, error) {
	rows, err := db.New(r.pool).ActionCountByState(ctx)
	if err != nil {
		return nil, fmt.Errorf("count actions: %w", err)
	}
	out := make([]StateCount, 0, len(rows))
	for _, row := range rows {
		out = append(out, StateCount{State: row.State, Count: row.N, Oldest: row.Oldest})
	}
	return out, nil
}

// DestinationStatus is a configured destination with its connection state.
type DestinationStatus struct {
	Name, Type, Status, Reason, Owner string
	Held                              int64
}

// Destinations lists every configured destination with its status and held count.
func (r *Review) Destinations(ctx context.Context) ([]DestinationStatus, error) {
	rows, err := db.New(r.pool).DestinationList(ctx)
	if err != nil {
		return nil, fmt.Errorf("list destinations: %w", err)
	}
	byName := map[string]db.DestinationListRow{}
	for _, row := range rows {
		byName[row.Name] = row
	}
	out := make([]DestinationStatus, 0, len(r.cfg.Destinations))
	for _, d := range r.cfg.Destinations {
		s := DestinationStatus{Name: d.Name, Type: d.Type, Status: "connected", Owner: d.Owner}
		if row, ok := byName[d.Name]; ok {
			s.Status, s.Reason, s.Held = row.Status, row.Reason, row.Held
		}
		out = append(out, s)
	}
	return out, nil
}
