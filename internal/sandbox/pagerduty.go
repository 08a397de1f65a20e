package sandbox

import (
	"encoding/json"
	"fmt"
	"io"
	"mime"
	"net/http"
	"sync"
	"time"
)

// PagerDuty stands in for PagerDuty's Events API v2 as its documentation
// describes it (https://developer.pagerduty.com/docs/events-api-v2/overview/):
// POST /v2/enqueue with a JSON event, answered 202 {"status": "success",
// "message": "Event processed", "dedup_key"}, or 400 {"status": "invalid
// event", "message": "Event object is invalid", "errors": [...]}. An event has a
// routing_key of 32 characters (the integration's), an event_action of
// trigger, acknowledge or resolve, and a dedup_key (at most 255 characters;
// required but for a trigger, which gets one made). A trigger has a payload
// with a summary (at most 1024 characters), a source and a severity of
// critical, error, warning or info, and optionally a timestamp (ISO 8601),
// component, group, class and custom_details (an object). An incident is one
// per routing key and dedup_key: a trigger opens it or adds to it, a resolve
// resolves it.
type PagerDuty struct {
	routingKey string

	mu        sync.Mutex
	events    []PagerDutyEvent
	incidents map[string]*PagerDutyIncident // by dedup_key
}

// PagerDutyEvent is one event the API accepted.
type PagerDutyEvent struct {
	RoutingKey  string         `json:"routing_key"`
	EventAction string         `json:"event_action"`
	DedupKey    string         `json:"dedup_key"`
	Payload     map[string]any `json:"payload"`
	Links       []any          `json:"links"`
	Client      string         `json:"client"`
	ClientURL   string         `json:"client_url"`
	At          time.Time      `json:"-"`
}

// PagerDutyIncident is what the events of one dedup_key made.
type PagerDutyIncident struct {
	Summary  string
	Triggers int
	Resolved bool
}

// NewPagerDuty returns a service whose one integration has routingKey.
func NewPagerDuty(routingKey string) *PagerDuty {
	return &PagerDuty{routingKey: routingKey, incidents: map[string]*PagerDutyIncident{}}
}

// Events returns the events accepted, in order.
func (p *PagerDuty) Events() []PagerDutyEvent {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]PagerDutyEvent(nil), p.events...)
}

// Incident returns the incident of dedupKey.
func (p *PagerDuty) Incident(dedupKey string) (PagerDutyIncident, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	i, ok := p.incidents[dedupKey]
	if !ok {
		return PagerDutyIncident{}, false
	}
	return *i, true
}

func (p *PagerDuty) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost || r.URL.Path != "/v2/enqueue" {
		http.NotFound(w, r)
		return
	}
	ev, errs := p.parse(r)
	w.Header().Set("Content-Type", "application/json")
	if len(errs) > 0 {
		w.WriteHeader(http.StatusBadRequest)
		json.NewEncoder(w).Encode(map[string]any{"status": "invalid event", "message": "Event object is invalid", //nolint:errcheck // best effort
			"errors": errs})
		return
	}
	p.mu.Lock()
	if ev.DedupKey == "" {
		ev.DedupKey = fmt.Sprintf("pd-%d", len(p.events)+1)
	}
	ev.At = time.Now()
	p.events = append(p.events, ev)
	inc := p.incidents[ev.DedupKey]
	switch ev.EventAction {
	case "trigger":
		if inc == nil || inc.Resolved {
			inc = &PagerDutyIncident{Summary: ev.Payload["summary"].(string)}
			p.incidents[ev.DedupKey] = inc
		}
		inc.Triggers++
	case "resolve":
		if inc != nil {
			inc.Resolved = true
		}
	}
	p.mu.Unlock()
	w.WriteHeader(http.StatusAccepted)
	json.NewEncoder(w).Encode(map[string]any{"status": "success", "message": "Event processed", //nolint:errcheck // best effort
		"dedup_key": ev.DedupKey})
}

// parse reads and checks an event; errs says what is wrong, as PagerDuty does.
func (p *PagerDuty) parse(r *http.Request) (ev PagerDutyEvent, errs []string) {
	if mt, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type")); mt != "application/json" {
		return ev, []string{"Content-Type must be application/json"}
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, 512<<10))
	if err != nil || json.Unmarshal(body, &ev) != nil {
		return ev, []string{"Event object is not valid JSON"}
	}
	switch {
	case len(ev.RoutingKey) != 32:
		errs = append(errs, "Length of 'routing_key' is incorrect (should be 32 characters)")
	case ev.RoutingKey != p.routingKey:
		errs = append(errs, "'routing_key' is not the key of an integration")
	}
	switch ev.EventAction {
	case "trigger":
		errs = append(errs, checkPayload(ev.Payload)...)
	case "acknowledge", "resolve":
		if ev.DedupKey == "" {
			errs = append(errs, "'dedup_key' is missing and is required for "+ev.EventAction)
		}
	default:
		errs = append(errs, "'event_action' is invalid (must be one of trigger, acknowledge, resolve)")
	}
	if len(ev.DedupKey) > 255 {
		errs = append(errs, "'dedup_key' is too long (at most 255 characters)")
	}
	for _, l := range ev.Links {
		if m, _ := l.(map[string]any); m["href"] == nil {
			errs = append(errs, "'links' entries need an 'href'")
		}
	}
	return ev, errs
}

func checkPayload(p map[string]any) (errs []string) {
	if p == nil {
		return []string{"'payload' is missing and is required for trigger"}
	}
	summary, _ := p["summary"].(string)
	source, _ := p["source"].(string)
	switch {
	case summary == "":
		errs = append(errs, "'payload.summary' is missing or blank")
	case len(summary) > 1024:
		errs = append(errs, "'payload.summary' is too long (at most 1024 characters)")
	}
	if source == "" {
		errs = append(errs, "'payload.source' is missing or blank")
	}
	switch p["severity"] {
	case "critical", "error", "warning", "info":
	default:
		errs = append(errs, "'payload.severity' is invalid (must be one of critical, error, warning, info)")
	}
	if ts, ok := p["timestamp"]; ok {
		s, _ := ts.(string)
		if _, err := time.Parse(time.RFC3339, s); err != nil {
			errs = append(errs, "'payload.timestamp' is not a valid ISO 8601 timestamp")
		}
	}
	if cd, ok := p["custom_details"]; ok {
		if _, isObject := cd.(map[string]any); !isObject {
			errs = append(errs, "'payload.custom_details' must be an object")
		}
	}
	for _, k := range []string{"component", "group", "class"} {
		if v, ok := p[k]; ok {
			if _, isString := v.(string); !isString {
				errs = append(errs, fmt.Sprintf("'payload.%s' must be a string", k))
			}
		}
	}
	return errs
}
