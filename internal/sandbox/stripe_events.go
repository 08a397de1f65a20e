package sandbox

import (
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"sync"
)

// StripeEvent is one event the Stripe sandbox holds.
type StripeEvent struct {
	ID      string
	Type    string
	Created int64
	Object  map[string]any // data.object
}

// JSON is the event as Stripe's API returns it (with the fields a webhook of the
// same event does not carry the same way, such as pending_webhooks).
func (e StripeEvent) JSON() []byte {
	b, _ := json.Marshal(map[string]any{"id": e.ID, "object": "event", "type": e.Type, "created": e.Created,
		"api_version": "2024-06-20", "livemode": false, "pending_webhooks": 0,
		"data": map[string]any{"object": e.Object}})
	return b
}

// StripeAPI is a stateful sandbox of Stripe's List Events (GET /v1/events): the
// events it holds, newest first, filtered by types[] and created[gte], paginated by
// limit and starting_after as Stripe does, with an optional smaller page size and a
// fault for the next requests. It is safe for concurrent use.
type StripeAPI struct {
	Key string // the API key it accepts

	mu       sync.Mutex
	events   []StripeEvent // newest first
	maxPage  int
	fault    *StripeFault
	hold     chan struct{} // while open, list requests wait
	requests []string      // query strings, in order
}

// StripeFault is what the sandbox answers instead of a list, for Times requests.
type StripeFault struct {
	Status     int
	RetryAfter string // Retry-After header, when set
	Times      int
	Hang       chan struct{} // when set, the reply waits until it is closed
}

// Add holds more events; they are listed newest (largest Created) first.
func (s *StripeAPI) Add(evs ...StripeEvent) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.events = append(s.events, evs...)
	slices.SortStableFunc(s.events, func(a, b StripeEvent) int { return int(b.Created - a.Created) })
}

// SetMaxPage caps the page size below the limit the client asks for (0: no cap).
func (s *StripeAPI) SetMaxPage(n int) { s.mu.Lock(); s.maxPage = n; s.mu.Unlock() }

// Fail answers the next f.Times requests with f.
func (s *StripeAPI) Fail(f StripeFault) { s.mu.Lock(); s.fault = &f; s.mu.Unlock() }

// Hold makes list requests wait, once recorded, until release is called; they
// are then answered as usual.
func (s *StripeAPI) Hold() (release func()) {
	ch := make(chan struct{})
	s.mu.Lock()
	s.hold = ch
	s.mu.Unlock()
	return sync.OnceFunc(func() {
		s.mu.Lock()
		s.hold = nil
		s.mu.Unlock()
		close(ch)
	})
}

// Requests returns the query string of every list request so far.
func (s *StripeAPI) Requests() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.requests)
}

// Handler serves GET /v1/events.
func (s *StripeAPI) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/events", s.list)
	return mux
}

func stripeError(w http.ResponseWriter, status int, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]any{"error": map[string]any{"type": "invalid_request_error", "message": msg}})
}

// answered records a list request, waits while the sandbox is held, and answers
// it with the fault due, if any; it reports whether the request is answered.
func (s *StripeAPI) answered(w http.ResponseWriter, r *http.Request) bool {
	s.mu.Lock()
	s.requests = append(s.requests, r.URL.RawQuery)
	f, hold := s.fault, s.hold
	if f != nil {
		if f.Times--; f.Times <= 0 {
			s.fault = nil
		}
	}
	s.mu.Unlock()
	wait := func(ch chan struct{}) bool {
		select {
		case <-ch:
			return true
		case <-r.Context().Done():
			return false
		}
	}
	if hold != nil && !wait(hold) {
		return true
	}
	if f == nil {
		return false
	}
	if f.Hang != nil && !wait(f.Hang) {
		return true
	}
	if f.RetryAfter != "" {
		w.Header().Set("Retry-After", f.RetryAfter)
	}
	stripeError(w, f.Status, fmt.Sprintf("sandbox fault %d", f.Status))
	return true
}

func (s *StripeAPI) list(w http.ResponseWriter, r *http.Request) {
	if s.answered(w, r) {
		return
	}
	if r.Header.Get("Authorization") != "Bearer "+s.Key {
		stripeError(w, http.StatusUnauthorized, "Invalid API Key provided")
		return
	}
	q := r.URL.Query()
	limit := 10
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 100 {
			stripeError(w, http.StatusBadRequest, "limit must be between 1 and 100")
			return
		}
		limit = n
	}
	gte, _ := strconv.ParseInt(q.Get("created[gte]"), 10, 64)
	types := q["types[]"]
	if len(types) > 20 {
		stripeError(w, http.StatusBadRequest, "types may list at most 20")
		return
	}
	after := q.Get("starting_after")
	s.mu.Lock()
	if s.maxPage > 0 {
		limit = min(limit, s.maxPage)
	}
	var match []StripeEvent
	for _, e := range s.events {
		if e.Created >= gte && (len(types) == 0 || slices.Contains(types, e.Type)) {
			match = append(match, e)
		}
	}
	s.mu.Unlock()
	start := 0
	if after != "" {
		i := slices.IndexFunc(match, func(e StripeEvent) bool { return e.ID == after })
		if i < 0 {
			stripeError(w, http.StatusBadRequest, "No such event: "+after)
			return
		}
		start = i + 1
	}
	end := min(len(match), start+limit)
	data := make([]json.RawMessage, 0, end-start)
	for _, e := range match[start:end] {
		data = append(data, e.JSON())
	}
	w.Header().Set("Content-Type", "application/json")
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ") // as Stripe answers
	_ = enc.Encode(map[string]any{"object": "list", "url": "/v1/events", "has_more": end < len(match), "data": data})
}
