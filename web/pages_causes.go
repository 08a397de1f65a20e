package web

import (
	"github.com/labstack/echo/v4"

	"github.com/oncehook/oncehook/internal/ledger"
	"github.com/oncehook/oncehook/views"
)

// causeRows are queue's open actions grouped by what holds them, each a link to
// the queue at path filtered to them and with its fix; every queue's for "".
func (s *Server) causeRows(c echo.Context, queue, path string) ([]views.CauseRow, error) {
	w, err := s.waiting(c)
	if err != nil {
		return nil, err
	}
	now := s.now()
	var out []views.CauseRow
	for _, k := range w.Causes {
		if queue != "" && k.Queue != queue {
			continue
		}
		p := path
		if p == "" {
			p = "/queue/" + k.Queue
		}
		f := views.Filter{State: k.State, Destination: k.Destination, Reason: k.Reason, Client: k.Unconfigured}
		if len(ledger.QueueStates[k.Queue]) == 1 {
			f.State = ""
		}
		r := views.CauseRow{Label: k.Label, Count: k.Count, About: k.About, More: k.More, State: k.State, Fix: k.Fix, URL: queueURL(p, f, ""),
			Oldest: ageOf(now, k.Oldest)}
		if k.State == ledger.StateHeld && k.Unconfigured == "" {
			r.FixURL = "/destinations"
		}
		if k.Breaker != nil { // every parked action of the destination, whatever its state
			r.State, r.FixURL = "waiting", "/destinations"
			r.URL = queueURL(p, views.Filter{Destination: k.Destination, Parked: "only"}, "")
		}
		out = append(out, r)
	}
	return out, nil
}
