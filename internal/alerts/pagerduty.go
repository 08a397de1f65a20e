package alerts

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/oncehook/oncehook/internal/settings"
)

// PagerDuty's Events API v2: one event per change, POST to its enqueue URL,
// answered 202. An outage is one incident: "trigger" when it begins and
// "resolve" when it is over, both with the outage's dedup_key, so that retries
// and a resolve find the same incident.
// https://developer.pagerduty.com/docs/events-api-v2/trigger-events/

// PagerDutyEventsURL is where Events API v2 events go unless a channel names
// another (its url: PagerDuty's EU service, or a stand-in).
const PagerDutyEventsURL = "https://events.pagerduty.com/v2/enqueue"

// pagerDutyEvent is the event a sends to PagerDuty.
func pagerDutyEvent(ch settings.AlertChannel, a Alert) map[string]any {
	ev := map[string]any{
		"routing_key":  ch.RoutingKey,
		"dedup_key":    a.DedupKey(),
		"event_action": "resolve",
		"client":       "oncehook",
	}
	if a.URL != "" {
		ev["client_url"] = a.URL
	}
	if !a.Down() {
		return ev
	}
	ev["event_action"] = "trigger"
	waiting := map[string]int64{}
	for _, w := range a.Waiting {
		waiting[w.Client] = w.Actions
	}
	summary := a.Summary()
	if len(summary) > 1024 {
		summary = summary[:1021] + "..."
	}
	ev["payload"] = map[string]any{
		"summary":   summary,
		"source":    a.Destination,
		"severity":  ch.Severity,
		"timestamp": a.OpenedAt.UTC().Format("2006-01-02T15:04:05.000Z"),
		"component": a.Destination,
		"group":     "oncehook destinations",
		"class":     "destination down",
		"custom_details": map[string]any{
			"last_error":        a.Reason,
			"waiting_actions":   a.WaitingTotal(),
			"waiting_by_client": waiting,
			"opened_by":         a.OpenedBy,
			"since":             a.OpenedAt.UTC().Format("2006-01-02T15:04:05Z"),
		},
	}
	if a.URL != "" {
		ev["links"] = []any{map[string]any{"href": a.URL, "text": a.Destination + " in oncehook"}}
	}
	return ev
}

// postPagerDuty sends a's event to the channel's Events API.
func (s *Sender) postPagerDuty(ctx context.Context, ch settings.AlertChannel, a Alert) (int, error) {
	body, err := json.Marshal(pagerDutyEvent(ch, a))
	if err != nil {
		return 0, fmt.Errorf("encode the PagerDuty event: %w", err)
	}
	target := ch.EventsURL
	if target == "" {
		target = PagerDutyEventsURL
	}
	status, err := s.post(ctx, target, nil, body)
	if err != nil {
		return status, fmt.Errorf("PagerDuty %w", err)
	}
	return status, nil
}
