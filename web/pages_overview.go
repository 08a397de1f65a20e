package web

import (
	"fmt"
	"net/http"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/oncehook/oncehook/internal/ledger"
	"github.com/oncehook/oncehook/internal/review"
	"github.com/oncehook/oncehook/internal/settings"
	"github.com/oncehook/oncehook/views"
)

// overviewPage serves "/".
func (s *Server) overviewPage(c echo.Context) error {
	ctx := c.Request().Context()
	w, err := s.waiting(c)
	if err != nil {
		return err
	}
	mine, err := s.review(c).ListActions(ctx, review.ActionFilter{States: ledger.OpenStates(), Owner: userOf(c).Email,
		Snoozed: review.SnoozedAwake, Parked: review.ParkedOut, Limit: 10})
	if err != nil {
		return err
	}
	srcs, err := s.sourceRows(c)
	if err != nil {
		return err
	}
	dests, err := s.destinationRows(c)
	if err != nil {
		return err
	}
	m := views.OverviewPage{Sources: srcs, Destinations: dests, Cutovers: s.cutoverLines()}
	if m.Mine, err = s.actionRows(c, mine.Actions); err != nil {
		return err
	}
	if err := s.flagOwners(c, m.Mine); err != nil {
		return err
	}
	causes, err := s.causeRows(c, "", "")
	if err != nil {
		return err
	}
	now := s.now()
	for _, q := range w.Queues {
		card := views.QueueCard{Name: q.Name, URL: "/queue/" + q.Name, Count: q.Count, About: q.About, More: q.More}
		for _, k := range causes {
			if ledger.QueueOf(k.State) == q.Name {
				card.Causes = append(card.Causes, k)
			}
		}
		if q.Count > 0 {
			card.Oldest = ageOf(now, q.Oldest)
		}
		m.Queues = append(m.Queues, card)
	}
	return s.render(c, http.StatusOK, views.Overview(live(c, s.layout(c, "Overview", "overview")), m))
}

// schemes says how each provider's deliveries are verified, for the sources page.
var schemes = map[string]string{
	ledger.ProviderStripe:           "Stripe-Signature, HMAC-SHA256 of timestamp.body",
	ledger.ProviderGitHub:           "X-Hub-Signature-256, HMAC-SHA256 of the body",
	ledger.ProviderShopify:          "X-Shopify-Hmac-Sha256, base64 HMAC-SHA256 of the body",
	ledger.ProviderStandardWebhooks: "webhook-signature, HMAC-SHA256 of id.timestamp.body",
}

func (s *Server) sourceRows(c echo.Context) ([]views.SourceRow, error) {
	srcs, err := s.review(c).Sources(c.Request().Context())
	if err != nil {
		return nil, err
	}
	rows := make([]views.SourceRow, 0, len(srcs))
	for _, src := range srcs {
		r := views.SourceRow{
			Name: src.Name, Client: src.Client, Provider: src.Provider, Scheme: schemes[src.Provider],
			Account: src.Account, Environment: src.Environment, IngestURL: s.cfg.BaseURL + "/hooks/" + src.Name,
			Events: src.Events, Deliveries: src.Deliveries, Conflicts: src.Conflicts, About: src.About,
			DuplicateRate: fmt.Sprintf("%.0f%%", src.DuplicateRate*100),
		}
		if src.LastDelivery != nil {
			r.LastDelivery, r.LastAge = stamp(*src.LastDelivery), ageOf(s.now(), *src.LastDelivery)
		}
		rows = append(rows, r)
	}
	return rows, nil
}

func (s *Server) destinationRows(c echo.Context) ([]views.DestinationRow, error) {
	ds, err := s.review(c).DestinationsInDetail(c.Request().Context())
	if err != nil {
		return nil, err
	}
	known, err := s.review(c).AccountHolders(c.Request().Context())
	if err != nil {
		return nil, err
	}
	rows := make([]views.DestinationRow, 0, len(ds))
	for _, d := range ds {
		rows = append(rows, views.DestinationRow{Name: d.Name, Type: d.Type, Status: d.Status, Reason: d.Reason, Owner: d.Owner,
			NoAccount: d.Owner != "" && !known[strings.ToLower(d.Owner)],
			Held:      d.Held, HeldURL: queueURL("/queue/"+ledger.QueueOutstanding, views.Filter{State: ledger.StateHeld, Destination: d.Name}, ""),
			Breaker: breakerView(d)})
	}
	return rows, nil
}

// breakerView is a destination's breaker for the destinations page.
func breakerView(d review.DestinationStatus) views.BreakerView {
	b := d.Breaker
	v := views.BreakerView{State: b.State, Since: stamp(b.Since), Reason: b.Reason, LastAnswer: b.LastProbe,
		Parked: d.Parked, ParkedURL: queueURL("/queue/"+ledger.QueueOutstanding, views.Filter{Destination: d.Name}, "")}
	if b.OutageAt != nil {
		v.Since = stamp(*b.OutageAt)
	}
	if b.ProbeAt != nil && b.State == ledger.BreakerOpen {
		v.NextProbe = stamp(*b.ProbeAt)
	}
	if b.LastProbeAt != nil {
		v.LastProbe = stamp(*b.LastProbeAt)
	}
	for _, t := range d.Transitions {
		v.Changes = append(v.Changes, views.BreakerChange{At: stamp(t.At), From: t.FromState, To: t.State, Reason: t.Reason})
	}
	for _, o := range d.Outages {
		ov := views.OutageView{Opened: stamp(o.OpenedAt), Reopened: o.Reopened, OpenedBy: o.OpenedBy}
		if o.ClosedAt != nil {
			ov.Closed = stamp(*o.ClosedAt)
		}
		for _, a := range o.Alerts {
			av := views.AlertView{Channel: a.Channel, Kind: a.Kind, State: a.State, Due: stamp(a.DueAt)}
			if a.SentAt != nil {
				av.Sent = stamp(*a.SentAt)
			}
			for _, t := range a.Attempts {
				av.Attempts = append(av.Attempts, views.AlertAttemptView{At: stamp(t.At), OK: t.OK, Status: t.HTTPStatus, Error: t.Error})
			}
			ov.Alerts = append(ov.Alerts, av)
		}
		v.Outages = append(v.Outages, ov)
	}
	return v
}

// sourcesPage serves "/sources".
func (s *Server) sourcesPage(c echo.Context) error {
	rows, err := s.sourceRows(c)
	if err != nil {
		return err
	}
	backfill, err := s.backfillRows(c)
	if err != nil {
		return err
	}
	return s.render(c, http.StatusOK, views.Sources(s.layout(c, "Sources", "sources"), views.SourcesPage{Rows: rows, Backfill: backfill}))
}

// destinationsPage serves "/destinations".
func (s *Server) destinationsPage(c echo.Context) error {
	rows, err := s.destinationRows(c)
	if err != nil {
		return err
	}
	m := views.DestinationsPage{Rows: rows, CanReconnect: actorOf(c).Role == settings.RoleAdmin}
	s.allowAuthorizeForms(c)
	return s.render(c, http.StatusOK, views.Destinations(live(c, s.layout(c, "Destinations", "destinations")), m))
}

// reconnect re-checks a destination's credentials and releases its held actions.
func (s *Server) reconnect(c echo.Context) error {
	if s.review(c).Connects(c.Param("name")) {
		return s.startConnect(c, c.Param("name"))
	}
	n, err := s.review(c).Reconnect(c.Request().Context(), actorOf(c), c.Param("name"))
	if err != nil {
		return err
	}
	s.flash(c, fmt.Sprintf("%s is connected again; %d held actions were released.", c.Param("name"), n))
	return c.Redirect(http.StatusSeeOther, "/destinations")
}

// cutoverLines are the actions under a cutover window that has not ended yet.
func (s *Server) cutoverLines() []views.CutoverLine {
	var out []views.CutoverLine
	now := s.now()
	for _, a := range s.cfg.Actions {
		c := s.cfg.CutoverOf(a)
		if c == nil || !now.Before(c.Until) {
			continue
		}
		d, _ := s.cfg.Destination(a.Destination)
		out = append(out, views.CutoverLine{Action: a.Name, Destination: a.Destination, From: stamp(c.From),
			Until: stamp(c.Until), LooksUp: d.Lookup.URL != ""})
	}
	return out
}
