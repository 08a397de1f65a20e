package ledger

import (
	"context"
	"fmt"
	"time"

	"github.com/oncehook/oncehook/db"
	"github.com/oncehook/oncehook/internal/settings"
)

// An outage is one fact: a destination's breaker opened at a time and closed at
// another (migration 00041). Its alerts, one per channel when it begins and one
// when it is over, are written in the transaction that changes the breaker and
// sent later by the alert worker, so that a channel that is down delays only its
// own alerts and never the breaker or the work.

// The kinds of alert.
const (
	AlertDown      = "down"
	AlertRecovered = "recovered"
)

// AlertPlan is where a destination's outages are told: its channels, and the
// quiet time within which a breaker that opens again after closing continues
// the same outage.
type AlertPlan struct {
	Channels []string
	Quiet    time.Duration
}

// AlertPlanOf is the alert plan of destination under cfg.
func AlertPlanOf(cfg *settings.Config, destination string) AlertPlan {
	return AlertPlan{Channels: cfg.AlertChannelsOf(destination), Quiet: cfg.Alerts.Quiet}
}

// beginOutage records that destination's breaker opened, in the transaction
// that opened it: the outage going on, or one that closed within the quiet time
// (flapping), goes on and its recovery is not announced; else a new outage
// begins with a down alert for each channel.
func beginOutage(ctx context.Context, q *db.Queries, destination, reason, by string, plan AlertPlan) error {
	id, err := q.OutageContinue(ctx, db.OutageContinueParams{Destination: destination, QuietSeconds: plan.Quiet.Seconds()})
	if err == nil {
		if _, err := q.AlertsCancelRecovered(ctx, id); err != nil {
			return fmt.Errorf("continue the outage of %s: %w", destination, err)
		}
		return nil
	}
	if !db.IsNotFound(err) {
		return fmt.Errorf("continue the outage of %s: %w", destination, err)
	}
	id, err = q.OutageBegin(ctx, db.OutageBeginParams{Destination: destination, Reason: reason, OpenedBy: by})
	if err != nil {
		return fmt.Errorf("begin an outage of %s: %w", destination, err)
	}
	return addAlerts(ctx, q, id, destination, AlertDown, plan.Channels, 0)
}

// endOutage records that destination's breaker closed, in the transaction that
// closed it: its outage is over, and a recovered alert for each channel is due
// once the quiet time has passed without the breaker opening again. A breaker
// opened before outages were recorded has none to end.
func endOutage(ctx context.Context, q *db.Queries, destination string, plan AlertPlan) error {
	id, err := q.OutageEnd(ctx, destination)
	if db.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("end the outage of %s: %w", destination, err)
	}
	return addAlerts(ctx, q, id, destination, AlertRecovered, plan.Channels, plan.Quiet)
}

func addAlerts(ctx context.Context, q *db.Queries, outage int64, destination, kind string, channels []string, after time.Duration) error {
	if len(channels) == 0 {
		return nil
	}
	if _, err := q.AlertsAdd(ctx, db.AlertsAddParams{OutageID: outage, Destination: destination, Kind: kind,
		Channels: channels, DelaySeconds: after.Seconds()}); err != nil {
		return fmt.Errorf("write the %s alerts of %s: %w", kind, destination, err)
	}
	return nil
}

// Outage is one outage of a destination with what was told of it.
type Outage struct {
	ID       int64
	OpenedAt time.Time
	ClosedAt *time.Time
	Reopened int
	Reason   string
	OpenedBy string
	Alerts   []Alert
}

// Alert is one alert of an outage on one channel, with its attempts.
type Alert struct {
	Channel  string
	Kind     string // AlertDown or AlertRecovered
	State    string // pending, sent, failed or cancelled
	DueAt    time.Time
	SentAt   *time.Time
	Attempts []AlertAttempt
}

// AlertAttempt is one attempt to send an alert: sent, or failed and why.
type AlertAttempt struct {
	At         time.Time
	OK         bool
	HTTPStatus int
	Error      string
}

// Outages reads the destination's latest n outages, newest first, each with
// its alerts and their attempts.
func Outages(ctx context.Context, q *db.Queries, destination string, n int) ([]Outage, error) {
	rows, err := q.OutageList(ctx, db.OutageListParams{Destination: destination, MaxRows: int32(n)})
	if err != nil || len(rows) == 0 {
		return nil, err
	}
	out := make([]Outage, len(rows))
	byID := map[int64]*Outage{}
	ids := make([]int64, len(rows))
	for i, r := range rows {
		out[i] = Outage{ID: r.ID, OpenedAt: r.OpenedAt, ClosedAt: r.ClosedAt, Reopened: int(r.Reopened), Reason: r.Reason,
			OpenedBy: r.OpenedBy}
		byID[r.ID], ids[i] = &out[i], r.ID
	}
	alerts, err := q.AlertListOfOutages(ctx, ids)
	if err != nil {
		return nil, fmt.Errorf("read the alerts of %s's outages: %w", destination, err)
	}
	alertIDs := make([]int64, len(alerts))
	for i, a := range alerts {
		alertIDs[i] = a.ID
	}
	attempts, err := q.AlertAttemptList(ctx, alertIDs)
	if err != nil {
		return nil, fmt.Errorf("read the attempts of %s's alerts: %w", destination, err)
	}
	tries := map[int64][]AlertAttempt{}
	for _, t := range attempts {
		at := AlertAttempt{At: t.At, OK: t.Ok, Error: t.Error}
		if t.HttpStatus != nil {
			at.HTTPStatus = int(*t.HttpStatus)
		}
		tries[t.AlertID] = append(tries[t.AlertID], at)
	}
	for _, a := range alerts {
		o := byID[a.OutageID]
		o.Alerts = append(o.Alerts, Alert{Channel: a.Channel, Kind: a.Kind, State: a.State, DueAt: a.DueAt, SentAt: a.SentAt,
			Attempts: tries[a.ID]})
	}
	return out, nil
}
