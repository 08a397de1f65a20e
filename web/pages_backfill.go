package web

import (
	"fmt"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/oncehook/oncehook/internal/ledger"
	"github.com/oncehook/oncehook/views"
)

// backfillRows are the sources page's backfill table: what each pass found.
func (s *Server) backfillRows(c echo.Context) ([]views.BackfillRow, error) {
	sts, err := s.review(c).BackfillStatuses(c.Request().Context())
	if err != nil {
		return nil, err
	}
	rows := make([]views.BackfillRow, 0, len(sts))
	for _, st := range sts {
		r := views.BackfillRow{Source: st.Source, Schedule: fmt.Sprintf("%s / %s", st.Every, st.Window),
			LastPass: stamp(st.FinishedAt), Error: st.Error, NextPass: stamp(st.NextAt),
			EventsURL: eventsURL(views.EventFilter{Source: st.Source, Via: ledger.ViaBackfill}, "")}
		switch st.Provider {
		case ledger.ProviderStripe:
			r.How = "lists Stripe's events of the rules' types; stores those the inbox lacks"
			r.Found = fmt.Sprintf("%d listed, %d missing, %d stored", st.Listed, st.Missing, st.Stored)
		case ledger.ProviderGitHub:
			r.How = "lists the hook's deliveries; asks GitHub to redeliver failed ones the inbox lacks"
			r.Found = fmt.Sprintf("%d listed, %d missing, %d redelivered", st.Listed, st.Missing, st.Redelivered)
			if st.Refused > 0 {
				r.Found += fmt.Sprintf("; %d refused by oncehook (4xx), not asked for again: %s",
					st.Refused, strings.Join(st.RefusedIDs, ", "))
			}
		}
		if st.Running {
			r.Found += " (a pass is running)"
		}
		if st.Error != "" && st.Failures > 1 {
			r.Error = fmt.Sprintf("%s (%d passes failed in a row)", st.Error, st.Failures)
		}
		if st.Passes == 0 {
			r.Found = ""
		}
		rows = append(rows, r)
	}
	return rows, nil
}
