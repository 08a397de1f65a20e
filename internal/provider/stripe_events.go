package provider

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/oncehook/oncehook/internal/ledger"
)

// stripeMaxTypes is how many types[] Stripe's List Events accepts in one request.
const stripeMaxTypes = 20

// stripePageSize is the largest limit Stripe's lists accept.
const stripePageSize = 100

// StripeEvents lists a Stripe account's events (GET /v1/events) for backfill.
type StripeEvents struct {
	apiURL, key string
	types       []string
	client      *http.Client
}

// NewStripeEvents returns a lister of the events of types; with no types it lists
// nothing (a source whose rules use no type has nothing to miss).
func NewStripeEvents(apiURL, key string, types []string, client *http.Client) *StripeEvents {
	return &StripeEvents{apiURL: strings.TrimRight(apiURL, "/"), key: key, types: types, client: client}
}

// List returns one page of events created at or after since, newest first. More
// than 20 types are listed 20 at a time: the cursor is "<group>:<last event id>".
func (s *StripeEvents) List(ctx context.Context, since time.Time, cursor string) (ledger.BackfillPage, error) {
	group, after := 0, ""
	if g, a, ok := strings.Cut(cursor, ":"); ok {
		group, _ = strconv.Atoi(g)
		after = a
	}
	if group*stripeMaxTypes >= len(s.types) {
		return ledger.BackfillPage{}, nil
	}
	types := s.types[group*stripeMaxTypes : min(len(s.types), (group+1)*stripeMaxTypes)]
	q := url.Values{}
	q.Set("limit", strconv.Itoa(stripePageSize))
	q.Set("created[gte]", strconv.FormatInt(since.Unix(), 10))
	for _, t := range types {
		q.Add("types[]", t)
	}
	if after != "" {
		q.Set("starting_after", after)
	}
	req, err := newRequest(ctx, http.MethodGet, s.apiURL+"/v1/events?"+q.Encode(), s.key)
	if err != nil {
		return ledger.BackfillPage{}, err
	}
	var reply struct {
		Object  string            `json:"object"`
		Data    []json.RawMessage `json:"data"`
		HasMore bool              `json:"has_more"`
	}
	if _, err := call(s.client, req, "Stripe", &reply); err != nil {
		return ledger.BackfillPage{}, err
	}
	if reply.Object != "list" {
		return ledger.BackfillPage{}, &ledger.ProviderError{Status: 200, Message: "Stripe's reply to the events list is not a list"}
	}
	page := ledger.BackfillPage{Items: make([]ledger.BackfillItem, 0, len(reply.Data))}
	for _, raw := range reply.Data {
		var ev struct {
			ID      string `json:"id"`
			Type    string `json:"type"`
			Created int64  `json:"created"`
		}
		if err := json.Unmarshal(raw, &ev); err != nil || ev.ID == "" {
			return ledger.BackfillPage{}, &ledger.ProviderError{Status: 200, Message: "Stripe listed an event without an id"}
		}
		// The element as listed, without the list's indentation around it.
		var body bytes.Buffer
		if err := json.Compact(&body, raw); err != nil {
			return ledger.BackfillPage{}, &ledger.ProviderError{Status: 200, Message: "Stripe listed an event that is not JSON"}
		}
		page.Items = append(page.Items, ledger.BackfillItem{ID: ev.ID, Type: ev.Type,
			OccurredAt: time.Unix(ev.Created, 0).UTC(), Body: body.Bytes()})
	}
	switch {
	case reply.HasMore && len(page.Items) > 0:
		page.Next = strconv.Itoa(group) + ":" + page.Items[len(page.Items)-1].ID
	case (group+1)*stripeMaxTypes < len(s.types):
		page.Next = strconv.Itoa(group+1) + ":"
	}
	return page, nil
}

// Redeliver is never asked of Stripe: its list carries each event itself.
func (s *StripeEvents) Redeliver(context.Context, string) error {
	return &ledger.ProviderError{Message: "Stripe events are stored from the list, not redelivered"}
}
