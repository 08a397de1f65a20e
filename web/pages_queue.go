package web

import (
	"net/http"
	"net/url"
	"slices"

	"github.com/labstack/echo/v4"

	"github.com/oncehook/oncehook"
	"github.com/oncehook/oncehook/views"
)

// queuePageSize is a screenful: enough to work through, small enough to read.
const queuePageSize = 50

// queueTitles are the headings of the three queues.
var queueTitles = map[string]string{
	oncehook.QueueFailed:      "Failed: needs a person",
	oncehook.QueueUncertain:   "Uncertain: reconcile before any repeat",
	oncehook.QueueOutstanding: "Outstanding: the workers have it",
}

// queueFilter is the filter of a queue request, from its query string or form.
func queueFilter(c echo.Context) views.Filter {
	return views.Filter{State: c.FormValue("state"), Source: c.FormValue("source"), Action: c.FormValue("action"),
		Destination: c.FormValue("destination"), Owner: c.FormValue("owner"),
		Client: c.FormValue("client"), Q: c.FormValue("q")}
}

// queueScope is what a queue path selects: the states and, for /mine, the owner.
// The owner of /mine is always the person asking, whatever the form says.
func queueScope(c echo.Context) (path string, states []string, f views.Filter, err error) {
	f = queueFilter(c)
	if q := c.Param("queue"); q != "" {
		st, ok := oncehook.QueueStates[q]
		if !ok {
			return "", nil, f, oncehook.Errorf(oncehook.ENOTFOUND, "There is no queue named %q.", q)
		}
		st, err = withinStates(st, f.State)
		return "/queue/" + q, st, f, err
	}
	f.Owner = userOf(c).Email
	st, err := withinStates(oncehook.OpenStates(), f.State)
	return "/mine", st, f, err
}

// withinStates narrows a queue's states to one of them, when one is asked for.
func withinStates(states []string, state string) ([]string, error) {
	if state == "" {
		return states, nil
	}
	if !slices.Contains(states, state) {
		return nil, oncehook.Errorf(oncehook.EINVALID, "This queue has no actions in state %q.", state)
	}
	return []string{state}, nil
}

func actionFilter(states []string, f views.Filter) oncehook.ActionFilter {
	return oncehook.ActionFilter{States: states, Source: f.Source, Name: f.Action, Owner: f.Owner,
		Destination: f.Destination, Client: f.Client, Q: f.Q}
}

// filterValues is a filter as a query string carries it, empty fields left out.
func filterValues(f views.Filter) url.Values {
	v := url.Values{}
	for k, val := range map[string]string{"state": f.State, "source": f.Source, "action": f.Action, "destination": f.Destination,
		"owner": f.Owner, "client": f.Client, "q": f.Q} {
		if val != "" {
			v.Set(k, val)
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

// queuePage serves /queue/{queue}; for an htmx request, only the table.
func (s *Server) queuePage(c echo.Context) error {
	return s.showQueue(c, true)
}

// minePage serves /mine: everything open that is assigned to me.
func (s *Server) minePage(c echo.Context) error {
	return s.showQueue(c, false)
}

func (s *Server) showQueue(c echo.Context, showFilter bool) error {
	path, states, f, err := queueScope(c)
	if err != nil {
		return err
	}
	cursor := c.QueryParam("cursor")
	af := actionFilter(states, f)
	af.Cursor, af.Limit = cursor, queuePageSize
	page, err := s.review.ListActions(c.Request().Context(), af)
	if err != nil {
		return err
	}
	table := views.QueueTable{Filter: f, Rows: s.actionRows(page.Actions), RefreshURL: queueURL(path, f, cursor)}
	if err := s.flagOwners(c, table.Rows); err != nil {
		return err
	}
	if page.NextCursor != "" {
		table.NextURL = queueURL(path, f, page.NextCursor)
	}
	if cursor != "" {
		table.FirstURL = queueURL(path, f, "")
	}
	if isFragment(c) {
		return s.render(c, http.StatusOK, views.QueueRows(table, path))
	}
	m := views.QueuePage{Path: path, Filter: f, ShowFilter: showFilter, Table: table,
		CanAssign: actorOf(c).Role == oncehook.RoleAdmin}
	section := c.Param("queue")
	if section == "" {
		section, m.Title, m.Intro = "mine", "Assigned to me", "Open actions whose owner is you."
	} else {
		m.Title = queueTitles[section]
	}
	if st := oncehook.QueueStates[section]; len(st) > 1 {
		for _, x := range st {
			m.States = append(m.States, views.Option{Value: x, Label: x})
		}
	}
	if err := s.filterOptions(c, &m); err != nil {
		return err
	}
	return s.render(c, http.StatusOK, views.Queue(s.layout(c, m.Title, section), m))
}

// filterOptions fills the filter's choices from the config and the users.
func (s *Server) filterOptions(c echo.Context, m *views.QueuePage) error {
	var clients, owners []string
	for _, src := range s.cfg.Sources {
		m.Sources = append(m.Sources, views.Option{Value: src.Name, Label: src.Name})
		clients = append(clients, src.Client)
	}
	for _, a := range s.cfg.Actions {
		m.Actions = append(m.Actions, views.Option{Value: a.Name, Label: a.Name})
		owners = append(owners, a.Owner)
	}
	for _, d := range s.cfg.Destinations {
		m.Destinations = append(m.Destinations, views.Option{Value: d.Name, Label: d.Name})
		owners = append(owners, d.Owner)
	}
	people, err := s.assignees(c)
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
