package web

import (
	"context"
	"encoding/csv"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/oncehook/oncehook/internal/ledger"
	"github.com/oncehook/oncehook/internal/review"
	"github.com/oncehook/oncehook/internal/settings"
	"github.com/oncehook/oncehook/views"
)

// queuePage serves /queue/{queue}; for an htmx request, only the table.
func (s *Server) queuePage(c echo.Context) error {
	return s.showQueue(c, true)
}

// minePage serves /mine: everything open that is assigned to me.
func (s *Server) minePage(c echo.Context) error {
	return s.showQueue(c, false)
}

// actionsPage serves /actions: every action in every state, with counts per
// state, the cross-queue search and the history.
func (s *Server) actionsPage(c echo.Context) error {
	return s.showQueue(c, true)
}

func (s *Server) showQueue(c echo.Context, showFilter bool) error {
	path, states, f, err := queueScope(c)
	if err != nil {
		return err
	}
	af, err := actionFilter(states, f)
	if err != nil {
		return err
	}
	if c.QueryParam("format") == "csv" {
		return s.exportCSV(c, path, af)
	}
	cursor := c.QueryParam("cursor")
	af.Cursor, af.Limit = cursor, queuePageSize
	m := views.QueuePage{Path: path, Filter: f, ShowFilter: showFilter,
		CanAssign: actorOf(c).Role == settings.RoleAdmin}
	section, all := queueHeading(&m, path, c.Param("queue"))
	counts := s.startCounts(c, af, all)
	page, err := s.review(c).ListActions(c.Request().Context(), af)
	if err != nil {
		return err
	}
	table, err := s.queueTable(c, path, f, states, cursor, page)
	if err != nil {
		return err
	}
	if err := fillCounts(&table, path, af, counts); err != nil {
		return err
	}
	if q := c.Param("queue"); q != "" {
		if table.Causes, err = s.causeRows(c, q, path); err != nil {
			return err
		}
	}
	if isFragment(c) {
		return s.render(c, http.StatusOK, views.QueueRows(table, path))
	}
	m.Table = table
	if len(all) > 1 {
		for _, x := range all {
			m.States = append(m.States, views.Option{Value: x, Label: x})
		}
	}
	if section == ledger.QueueOutstanding {
		if m.Intro, err = s.review(c).OutstandingWords(c.Request().Context()); err != nil {
			return err
		}
	}
	if err := s.filterOptions(c, &m); err != nil {
		return err
	}
	l := s.layout(c, m.Title, section)
	l.Live = true // its table polls itself
	return s.render(c, http.StatusOK, views.Queue(l, m))
}

// queueTable is the table of page, what f selects from cursor on, with its links:
// to refresh it, to the next and the first page, and to the CSV export.
func (s *Server) queueTable(c echo.Context, path string, f views.Filter, states []string, cursor string,
	page review.ActionPage) (views.QueueTable, error) {
	rows, err := s.actionRows(c, page.Actions)
	if err != nil {
		return views.QueueTable{}, err
	}
	table := views.QueueTable{CanAct: actorOf(c).MayAct(), Filter: f, Rows: rows, RefreshURL: queueURL(path, f, cursor),
		Sorts: tableSorts(path, f, states)}
	if err := s.flagOwners(c, table.Rows); err != nil {
		return table, err
	}
	if page.NextCursor != "" {
		table.NextURL = queueURL(path, f, page.NextCursor)
	}
	if page.ReasonWalked {
		table.ReasonWalk = review.ReasonWalk
	}
	if cursor != "" {
		table.FirstURL = queueURL(path, f, "")
	}
	csvValues := filterValues(f)
	csvValues.Set("format", "csv")
	table.CSVURL = withQuery(path, csvValues)
	return table, nil
}

// queueHeading sets m's title and introduction for path, a queue's (queue names
// it), /mine or /actions, and returns the layout's section and every state the
// page covers.
func queueHeading(m *views.QueuePage, path, queue string) (section string, all []string) {
	section, all = queue, ledger.QueueStates[queue]
	switch path {
	case "/mine":
		section, m.Title, m.Intro = "mine", "Assigned to me", "Open actions whose owner is you."
		all = ledger.OpenStates()
	case "/actions":
		section, m.Title = "actions", "All actions"
		m.Intro = "Every action in every state, confirmed, resolved and cancelled included. The search looks in every queue."
		all = ledger.AllStates
	default:
		m.Title = queueTitles[section]
	}
	return section, all
}

// startCounts starts reading how many actions each of the page's states holds,
// under its filter and search, while the page's rows are read (under a search
// at ten million actions each read takes some 20 ms; one after the other they
// took a page past 50 ms); the function it returns waits for them. Without a
// filter, the states' own counts (past 1,000 the planner's estimate, marked
// "about"); with one, counted along the list's query up to
// review.FilterCountCap ("100+").
func (s *Server) startCounts(c echo.Context, af review.ActionFilter, states []string) func() ([]review.FilterCount, error) {
	af.States = nil
	if af.Snoozed == review.SnoozedAwake { // a snooze hides an action from the list, never from the counts
		af.Snoozed = ""
	}
	if af.Parked == review.ParkedOut { // nor does a breaker: a parked action stays in its state
		af.Parked = ""
	}
	rv, ctx := s.review(c), c.Request().Context()
	type result struct {
		counts []review.FilterCount
		err    error
	}
	done := make(chan result, 1)
	go func() {
		var r result
		if af.Filtered() {
			r.counts, r.err = rv.CountMatching(ctx, af, states)
		} else {
			r.counts, r.err = stateTotals(ctx, rv, states)
		}
		done <- r
	}()
	return func() ([]review.FilterCount, error) {
		r := <-done
		return r.counts, r.err
	}
}

// stateTotals are the states' own counts, without a filter.
func stateTotals(ctx context.Context, rv *review.Review, states []string) ([]review.FilterCount, error) {
	summary, err := rv.Summary(ctx)
	if err != nil {
		return nil, err
	}
	byState := map[string]int64{}
	for _, sc := range summary {
		byState[sc.State] = sc.Count
	}
	counts := make([]review.FilterCount, 0, len(states))
	for _, st := range states {
		counts = append(counts, review.FilterCount{State: st, Count: byState[st]})
	}
	return counts, nil
}

// fillCounts fills the table's totals from the counts startCounts read, each
// a link to that state with the rest of the filter kept.
func fillCounts(t *views.QueueTable, path string, af review.ActionFilter, wait func() ([]review.FilterCount, error)) error {
	counts, err := wait()
	if err != nil {
		return err
	}
	for _, n := range counts {
		g := t.Filter
		g.State = n.State
		about := !af.Filtered() && n.Count > review.CountCap
		t.Total += n.Count
		t.TotalAbout, t.TotalMore = t.TotalAbout || about, t.TotalMore || n.More
		t.Counts = append(t.Counts, views.StateTotal{State: n.State, Count: n.Count, About: about, More: n.More,
			URL: queueURL(path, g, "")})
	}
	return nil
}

// csvBatch is how many actions the export reads at a time.
const csvBatch = 500

// exportCSV writes every action the filter selects as CSV, newest first, reading
// them a batch at a time along the list's own query.
func (s *Server) exportCSV(c echo.Context, path string, af review.ActionFilter) error {
	name := "oncehook" + strings.ReplaceAll(path, "/", "-") + "-" + s.now().UTC().Format("20060102-150405") + ".csv"
	h := c.Response().Header()
	h.Set(echo.HeaderContentType, "text/csv; charset=utf-8")
	h.Set(echo.HeaderContentDisposition, `attachment; filename="`+name+`"`)
	c.Response().WriteHeader(http.StatusOK)
	w := csv.NewWriter(c.Response())
	_ = w.Write([]string{"id", "state", "action", "business_key", "operation_key", "source", "client", "destination",
		"owner", "attempts", "reason", "external_ref", "created_at", "in_state_since", "updated_at", "latest_note"})
	af.Limit = csvBatch
	rc := http.NewResponseController(c.Response())
	for {
		// A long export keeps going while each batch is written in time; a
		// reader that stops reading is cut after WriteTimeout.
		_ = rc.SetWriteDeadline(time.Now().Add(WriteTimeout))
		page, err := s.review(c).ListActions(c.Request().Context(), af)
		if err != nil {
			// The header is out: the person gets a short file; the log says why.
			s.logger.ErrorContext(c.Request().Context(), "export actions", "err", err)
			w.Flush()
			return nil
		}
		notes, err := s.review(c).LatestNotes(c.Request().Context(), page.Actions)
		if err != nil {
			s.logger.ErrorContext(c.Request().Context(), "export actions", "err", err)
			w.Flush()
			return nil
		}
		for _, a := range page.Actions {
			_ = w.Write([]string{strconv.FormatInt(a.ID, 10), a.State, a.Name, csvSafe(a.BusinessKey), csvSafe(a.OperationKey),
				a.Source, a.Client, a.Destination, csvSafe(a.Owner), strconv.Itoa(int(a.Attempts)), csvSafe(a.Reason),
				csvSafe(a.ExternalRef), a.CreatedAt.UTC().Format(time.RFC3339), a.StateSince.UTC().Format(time.RFC3339),
				a.UpdatedAt.UTC().Format(time.RFC3339), csvSafe(notes[a.ID].Text)})
		}
		w.Flush()
		if page.NextCursor == "" {
			return w.Error()
		}
		af.Cursor = page.NextCursor
	}
}

// csvSafe keeps a spreadsheet from reading a value from a webhook as a formula.
func csvSafe(v string) string {
	if v != "" && (v[0] == '=' || v[0] == '+' || v[0] == '-' || v[0] == '@' || v[0] == '\t' || v[0] == '\r') {
		return "'" + v
	}
	return v
}
