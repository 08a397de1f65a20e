package web

import (
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/oncehook/oncehook/internal/ledger"
	"github.com/oncehook/oncehook/internal/review"
	"github.com/oncehook/oncehook/views"
)

// queuePageSize is a screenful: enough to work through, small enough to read.
const queuePageSize = 50

// queueTitles are the headings of the three queues.
var queueTitles = map[string]string{
	ledger.QueueFailed:      "Failed: needs a person",
	ledger.QueueUncertain:   "Uncertain: reconcile before any repeat",
	ledger.QueueOutstanding: "Outstanding: not done yet",
}

// queueFilter is the filter of a queue request, from its query string or form.
func queueFilter(c echo.Context) views.Filter {
	return views.Filter{State: c.FormValue("state"), Source: c.FormValue("source"), Action: c.FormValue("action"),
		Destination: c.FormValue("destination"), Owner: c.FormValue("owner"),
		Client: c.FormValue("client"), Q: strings.TrimSpace(c.FormValue("q")), Reason: c.FormValue("reason"),
		Since: c.FormValue("since"), Until: c.FormValue("until"), HTTPStatus: c.FormValue("http_status"),
		Snoozed: c.FormValue("snoozed"), Parked: c.FormValue("parked"), Imported: c.FormValue("imported"),
		Sort: c.FormValue("sort")}
}

// queueScope is what a queue path selects: the states and, for /mine, the owner.
// The owner of /mine is always the person asking, whatever the form says; /actions
// is every action, in every state.
func queueScope(c echo.Context) (path string, states []string, f views.Filter, err error) {
	f = queueFilter(c)
	if q := c.Param("queue"); q != "" {
		st, ok := ledger.QueueStates[q]
		if !ok {
			return "", nil, f, ledger.Errorf(ledger.ENOTFOUND, "There is no queue named %q.", q)
		}
		st, err = withinStates(st, f.State)
		return "/queue/" + q, st, f, err
	}
	if strings.HasPrefix(c.Path(), "/actions") {
		st, err := withinStates(ledger.AllStates, f.State)
		return "/actions", st, f, err
	}
	f.Owner = userOf(c).Email
	st, err := withinStates(ledger.OpenStates(), f.State)
	return "/mine", st, f, err
}

// withinStates narrows a queue's states to one of them, when one is asked for.
func withinStates(states []string, state string) ([]string, error) {
	if state == "" {
		return states, nil
	}
	if !slices.Contains(states, state) {
		return nil, ledger.Errorf(ledger.EINVALID, "This queue has no actions in state %q.", state)
	}
	return []string{state}, nil
}

// actionFilter is the ledger's filter for a page's: EINVALID for a time or a
// status that does not parse.
func actionFilter(states []string, f views.Filter) (review.ActionFilter, error) {
	af := review.ActionFilter{States: states, Source: f.Source, Name: f.Action, Owner: f.Owner,
		Destination: f.Destination, Client: f.Client, Q: f.Q, Reason: f.Reason, Sort: f.Sort}
	switch f.Snoozed {
	case "": // the default view: a snoozed action is back at its time
		af.Snoozed = review.SnoozedAwake
	case "only":
		af.Snoozed = review.SnoozedAsleep
	case "all":
	default:
		return af, ledger.Errorf(ledger.EINVALID, "snoozed is \"only\" or \"all\", or empty to leave the snoozed out.")
	}
	switch f.Imported {
	case "":
	case "only":
		af.Imported = true
	default:
		return af, ledger.Errorf(ledger.EINVALID, "imported is \"only\", or empty for every action.")
	}
	switch f.Parked {
	case "": // the default view: what an open breaker parks is one cause above the table
		af.Parked = review.ParkedOut
	case "only":
		af.Parked = review.ParkedOnly
	case "all":
	default:
		return af, ledger.Errorf(ledger.EINVALID, "parked is \"only\" or \"all\", or empty to leave the parked out.")
	}
	var err error
	if af.Since, err = parseWhen("from", f.Since); err != nil {
		return af, err
	}
	if af.Until, err = parseWhen("until", f.Until); err != nil {
		return af, err
	}
	if f.HTTPStatus != "" {
		n, err := strconv.Atoi(f.HTTPStatus)
		if err != nil || n < 100 || n > 999 {
			return af, ledger.Errorf(ledger.EINVALID, "The HTTP status %q is not a number like 422.", f.HTTPStatus)
		}
		af.HTTPStatus = n
	}
	return af, nil
}

// parseWhen reads a date ("2026-01-02") or a date and time ("2026-01-02T15:04",
// as a datetime-local field sends it), in UTC.
func parseWhen(what, v string) (*time.Time, error) {
	if v == "" {
		return nil, nil
	}
	for _, layout := range []string{"2006-01-02T15:04", "2006-01-02T15:04:05", "2006-01-02", time.RFC3339} {
		if t, err := time.ParseInLocation(layout, v, time.UTC); err == nil {
			return &t, nil
		}
	}
	return nil, ledger.Errorf(ledger.EINVALID, "The %s time %q is not a date like 2026-01-02 or 2026-01-02T15:04.", what, v)
}

// filterValues is a filter as a query string carries it, empty fields left out.
func filterValues(f views.Filter) url.Values {
	v := url.Values{}
	for _, p := range f.Pairs() {
		if p[1] != "" {
			v.Set(p[0], p[1])
		}
	}
	return v
}

// withQuery is path with the query v, if any.
func withQuery(path string, v url.Values) string {
	if len(v) == 0 {
		return path
	}
	return path + "?" + v.Encode()
}

// queueURL is a queue page with its filter and an optional cursor.
func queueURL(path string, f views.Filter, cursor string) string {
	v := filterValues(f)
	if cursor != "" {
		v.Set("cursor", cursor)
	}
	return withQuery(path, v)
}

// tableSorts are the sorting headings of a list of states: by creation always, by
// waiting time where every state listed is open (closed actions wait for nothing).
func tableSorts(path string, f views.Filter, states []string) views.TableSorts {
	heading := func(first, other, firstHint, otherHint string) views.SortHeader {
		current := f.Sort
		if current == "" {
			current = review.SortNewest
		}
		next, h := first, views.SortHeader{Hint: firstHint}
		switch current {
		case first:
			next, h.Hint = other, otherHint
			h.Order = sortOrder(first)
		case other:
			h.Order = sortOrder(other)
		}
		g := f
		g.Sort = next
		if next == review.SortNewest {
			g.Sort = ""
		}
		h.URL = queueURL(path, g, "")
		return h
	}
	ts := views.TableSorts{Created: heading(review.SortNewest, review.SortOldest,
		"sort newest first", "sort oldest first")}
	if review.ClosedAmong(states) != "" {
		return ts
	}
	ts.Age = heading(review.SortWaitingLongest, review.SortWaitingLeast,
		"sort by the longest waiting first", "sort by the shortest waiting first")
	return ts
}

// sortOrder is how a sort's column reads, for aria-sort: newest first is the
// creation times descending, longest waiting first the ages descending.
func sortOrder(sort string) string {
	if sort == review.SortOldest || sort == review.SortWaitingLeast {
		return "ascending"
	}
	return "descending"
}

// filterOptions fills the filter's choices from the config and the users.
func (s *Server) filterOptions(c echo.Context, m *views.QueuePage) error {
	var owners []string
	cat := s.review(c).Catalog()
	for _, src := range cat.Sources {
		m.Sources = append(m.Sources, views.Option{Value: src, Label: src})
	}
	for _, a := range s.cfg.Actions {
		if slices.Contains(cat.Actions, a.Name) {
			m.Actions = append(m.Actions, views.Option{Value: a.Name, Label: a.Name})
			owners = append(owners, a.Owner)
		}
	}
	for _, d := range s.cfg.Destinations {
		if slices.Contains(cat.Destinations, d.Name) {
			m.Destinations = append(m.Destinations, views.Option{Value: d.Name, Label: d.Name})
			owners = append(owners, d.Owner)
		}
	}
	clients := cat.Clients
	people, err := s.assignees(c, cat.Clients...)
	if err != nil {
		return err
	}
	m.Assignees = people
	for _, p := range people {
		owners = append(owners, p.Value)
	}
	slices.Sort(clients)
	for _, cl := range slices.Compact(clients) {
		m.Clients = append(m.Clients, views.Option{Value: cl, Label: cl})
	}
	slices.Sort(owners)
	for _, o := range slices.Compact(owners) {
		if o != "" {
			m.Owners = append(m.Owners, views.Option{Value: o, Label: o})
		}
	}
	return nil
}
