package web

import (
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/oncehook/oncehook/internal/ledger"
	"github.com/oncehook/oncehook/internal/review"
)

const actorKey = "actor"

func actorOf(c echo.Context) ledger.Actor {
	a, _ := c.Get(actorKey).(ledger.Actor)
	return a
}

func pathID(c echo.Context) (int64, error) {
	n, err := strconv.ParseInt(c.Param("id"), 10, 64)
	if err != nil || n <= 0 {
		return 0, ledger.Errorf(ledger.ENOTFOUND, "No such id: %q.", c.Param("id"))
	}
	return n, nil
}

// pathAction reads the action named by the path's {id}, with its events, attempts
// and audit trail.
func (s *Server) pathAction(c echo.Context) (review.ActionDetail, error) {
	n, err := pathID(c)
	if err != nil {
		return review.ActionDetail{}, err
	}
	return s.item(c).GetAction(c.Request().Context(), n)
}

func queryInt(c echo.Context, name string) (int, error) {
	v := c.QueryParam(name)
	if v == "" {
		return 0, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 0 {
		return 0, ledger.Errorf(ledger.EINVALID, "%s must be a positive number.", name)
	}
	return n, nil
}

func (s *Server) apiListActions(c echo.Context) error {
	limit, err := queryInt(c, "limit")
	if err != nil {
		return err
	}
	f := review.ActionFilter{Source: c.QueryParam("source"), Name: c.QueryParam("name"),
		Owner: c.QueryParam("owner"), Q: c.QueryParam("q"), Limit: limit, Cursor: c.QueryParam("cursor"),
		Destination: c.QueryParam("destination"), Client: c.QueryParam("client"), Sort: c.QueryParam("sort"),
		Snoozed: c.QueryParam("snoozed")}
	if st := c.QueryParam("state"); st != "" {
		for _, one := range strings.Split(st, ",") {
			if one == "" {
				continue
			}
			if states, ok := ledger.QueueStates[one]; ok && one != ledger.StateFailed && one != ledger.StateUncertain {
				f.States = append(f.States, states...) // a queue name: outstanding
				continue
			}
			f.States = append(f.States, one)
		}
	}
	page, err := s.review(c).ListActions(c.Request().Context(), f)
	if err != nil {
		return err
	}
	out := struct {
		Actions    []actionJSON `json:"actions"`
		NextCursor string       `json:"next_cursor"`
	}{NextCursor: page.NextCursor}
	if out.Actions, err = s.actionsJSON(c, page.Actions); err != nil {
		return err
	}
	return c.JSON(http.StatusOK, out)
}

// actionsJSON are as with their steps, computed together.
func (s *Server) actionsJSON(c echo.Context, as []ledger.Action) ([]actionJSON, error) {
	steps, err := s.review(c).NextSteps(c.Request().Context(), as)
	if err != nil {
		return nil, err
	}
	out := make([]actionJSON, 0, len(as))
	for _, a := range as {
		out = append(out, toActionJSON(a, steps[a.ID]))
	}
	return out, nil
}

func (s *Server) apiGetAction(c echo.Context) error {
	d, err := s.pathAction(c)
	if err != nil {
		return err
	}
	return s.apiActionDetail(c, d)
}

// apiActionDetail answers with the action, its step and its corrections.
func (s *Server) apiActionDetail(c echo.Context, d review.ActionDetail) error {
	ctx := c.Request().Context()
	step, err := s.review(c).NextStep(ctx, d.Action)
	if err != nil {
		return err
	}
	corrections, err := s.review(c).Corrections(ctx, d.Action)
	if err != nil {
		return err
	}
	followOns, err := s.review(c).FollowOns(ctx, d.Action)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, toActionDetailJSON(d, step, corrections, followOns))
}

// correctBody is the JSON body of POST /api/v1/actions/{id}/correct.
type correctBody struct {
	Params json.RawMessage `json:"params"`
	Note   string          `json:"note"`
}

// apiCorrect serves POST /api/v1/actions/{id}/correct: corrected params for a
// rejected action, waiting for approval. It answers with the action's detail.
func (s *Server) apiCorrect(c echo.Context) error {
	n, err := pathID(c)
	if err != nil {
		return err
	}
	var body correctBody
	if err := c.Bind(&body); err != nil || len(body.Params) == 0 {
		return ledger.Errorf(ledger.EINVALID, "The body must be a JSON object with params (the corrected parameters) and an optional note.")
	}
	if _, err := s.item(c).Correct(c.Request().Context(), actorOf(c), n, body.Params, body.Note); err != nil {
		return err
	}
	d, err := s.item(c).GetAction(c.Request().Context(), n)
	if err != nil {
		return err
	}
	return s.apiActionDetail(c, d)
}

// apiDecideCorrection serves POST /api/v1/actions/{id}/approve-correction and
// /refuse-correction, with an optional {"note": ...}.
func (s *Server) apiDecideCorrection(approve bool) echo.HandlerFunc {
	return func(c echo.Context) error {
		n, err := pathID(c)
		if err != nil {
			return err
		}
		var body actBody
		if c.Request().ContentLength != 0 {
			if err := c.Bind(&body); err != nil {
				return ledger.Errorf(ledger.EINVALID, "The body must be a JSON object with an optional note.")
			}
		}
		if _, err := s.item(c).DecideCorrection(c.Request().Context(), actorOf(c), n, approve, body.Note); err != nil {
			return err
		}
		d, err := s.item(c).GetAction(c.Request().Context(), n)
		if err != nil {
			return err
		}
		return s.apiActionDetail(c, d)
	}
}

// actBody is the JSON body of the manual acts.
type actBody struct {
	Note               string     `json:"note"`
	ExternalRef        string     `json:"external_ref"`
	Owner              string     `json:"owner"`
	CheckedDestination bool       `json:"checked_destination"`
	Until              *time.Time `json:"until"` // a snooze's end (RFC 3339)
}

// apiAct serves POST /api/v1/actions/{id}/{act}.
func (s *Server) apiAct(c echo.Context) error {
	n, err := pathID(c)
	if err != nil {
		return err
	}
	var body actBody
	if c.Request().ContentLength != 0 {
		if err := c.Bind(&body); err != nil {
			return ledger.Errorf(ledger.EINVALID, "The body must be a JSON object with note, external_ref, owner, checked_destination or until.")
		}
	}
	p := review.ActParams{Note: body.Note, ExternalRef: body.ExternalRef, Owner: body.Owner, CheckedDestination: body.CheckedDestination}
	if body.Until != nil {
		p.Until = *body.Until
	}
	a, err := s.item(c).Do(c.Request().Context(), actorOf(c), c.Param("act"), n, p)
	if err != nil {
		return err
	}
	step, err := s.review(c).NextStep(c.Request().Context(), a)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, toActionJSON(a, step))
}

func (s *Server) apiSummary(c echo.Context) error {
	counts, err := s.review(c).Summary(c.Request().Context())
	if err != nil {
		return err
	}
	byState := map[string]int64{}
	byQueue := map[string]int64{ledger.QueueOutstanding: 0, ledger.QueueUncertain: 0, ledger.QueueFailed: 0}
	for _, st := range []string{ledger.StatePending, ledger.StateProcessing, ledger.StateRetrying, ledger.StateHeld,
		ledger.StateUncertain, ledger.StateFailed, ledger.StateConfirmed, ledger.StateResolved, ledger.StateCancelled} {
		byState[st] = 0
	}
	for _, sc := range counts {
		byState[sc.State] = sc.Count
		if q := ledger.QueueOf(sc.State); q != "" {
			byQueue[q] += sc.Count
		}
	}
	return c.JSON(http.StatusOK, map[string]any{"states": byState, "queues": byQueue})
}

func (s *Server) apiDestinations(c echo.Context) error {
	ds, err := s.review(c).DestinationsInDetail(c.Request().Context())
	if err != nil {
		return err
	}
	type breakerJSON struct {
		State       string     `json:"state"`
		Since       *time.Time `json:"since,omitempty"`
		Reason      string     `json:"reason,omitempty"`
		NextProbeAt *time.Time `json:"next_probe_at,omitempty"`
		LastProbeAt *time.Time `json:"last_probe_at,omitempty"`
		LastProbe   string     `json:"last_probe,omitempty"`
		Parked      int64      `json:"parked"`
	}
	type destJSON struct {
		Name    string      `json:"name"`
		Type    string      `json:"type"`
		Status  string      `json:"status"`
		Owner   string      `json:"owner"`
		Held    int64       `json:"held"`
		Breaker breakerJSON `json:"breaker"`
	}
	out := struct {
		Destinations []destJSON `json:"destinations"`
	}{Destinations: []destJSON{}}
	for _, d := range ds {
		b := d.Breaker
		bj := breakerJSON{State: b.State, Reason: b.Reason, LastProbeAt: b.LastProbeAt, LastProbe: b.LastProbe, Parked: d.Parked}
		if !b.Since.IsZero() {
			bj.Since = &b.Since
		}
		if b.OutageAt != nil {
			bj.Since = b.OutageAt
		}
		if b.State == ledger.BreakerOpen {
			bj.NextProbeAt = b.ProbeAt
		}
		out.Destinations = append(out.Destinations, destJSON{Name: d.Name, Type: d.Type, Status: d.Status, Owner: d.Owner,
			Held: d.Held, Breaker: bj})
	}
	return c.JSON(http.StatusOK, out)
}

func (s *Server) apiReconnect(c echo.Context) error {
	n, err := s.review(c).Reconnect(c.Request().Context(), actorOf(c), c.Param("name"))
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, map[string]any{"name": c.Param("name"), "status": "connected", "released": n})
}

// breakerBody is the body of POST /api/v1/destinations/{name}/breaker.
type breakerBody struct {
	State  string     `json:"state"`
	Reason string     `json:"reason"`
	Until  *time.Time `json:"until"`
}

// apiBreakerChange opens or closes a destination's breaker by hand (admins):
// 200 with the breaker's state, its until, what a close released, and the
// actions of each client that wait for the destination.
func (s *Server) apiBreakerChange(c echo.Context) error {
	var body breakerBody
	if err := c.Bind(&body); err != nil {
		return ledger.Errorf(ledger.EINVALID, `The body must be a JSON object: {"state": "open" or "closed", "reason": "...", "until": "2026-12-07T16:00:00Z" (optional, open only)}.`)
	}
	res, err := s.review(c).SetBreaker(c.Request().Context(), actorOf(c), c.Param("name"),
		review.BreakerChange{State: body.State, Reason: body.Reason, Until: body.Until})
	if err != nil {
		return err
	}
	type waitingJSON struct {
		Client  string `json:"client"`
		Actions int64  `json:"actions"`
	}
	waiting := make([]waitingJSON, len(res.Waiting))
	for i, w := range res.Waiting {
		waiting[i] = waitingJSON{Client: w.Client, Actions: w.Actions}
	}
	return c.JSON(http.StatusOK, map[string]any{"name": res.Destination, "state": res.State, "until": res.Until,
		"released": res.Released, "waiting": waiting})
}

// eraseBody is POST /api/v1/erase's body: an event's id, or a business key (and
// optionally its client), and why.
type eraseBody struct {
	Event       string `json:"event"`
	BusinessKey string `json:"business_key"`
	Client      string `json:"client"`
	Reason      string `json:"reason"`
}

// apiErase erases on request what an event or a business key holds of a person
// (admins; see review.Erase).
func (s *Server) apiErase(c echo.Context) error {
	var body eraseBody
	if err := c.Bind(&body); err != nil {
		return ledger.Errorf(ledger.EINVALID, `The body must be a JSON object: {"event": "ID"} or {"business_key": "...", "client": "..." (optional)}, with "reason": "...".`)
	}
	req := review.EraseRequest{BusinessKey: body.BusinessKey, Client: body.Client, Reason: body.Reason}
	if body.Event != "" {
		n, err := strconv.ParseInt(body.Event, 10, 64)
		if err != nil || n <= 0 {
			return ledger.Errorf(ledger.EINVALID, "event is an event's id, as the API gives it (a string of digits), not %q.", body.Event)
		}
		req.EventID = n
	}
	out, err := s.review(c).Erase(c.Request().Context(), actorOf(c), req)
	if err != nil {
		return err
	}
	type itemJSON struct {
		Client string `json:"client"`
		ID     string `json:"id"`
	}
	items := func(in []review.ErasedItem) []itemJSON {
		out := make([]itemJSON, len(in))
		for i, x := range in {
			out[i] = itemJSON{Client: x.Client, ID: id(x.ID)}
		}
		return out
	}
	return c.JSON(http.StatusOK, map[string]any{"events": items(out.Events), "actions": items(out.Actions)})
}
