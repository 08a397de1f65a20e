package sandbox

import (
	"crypto/subtle"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"
)

// The API sandboxes (hubspot.go, salesforce.go, ...) follow each real API's
// documented shape closely enough that a wrong oncehook config fails: the API's auth
// scheme, body shape, replies, error bodies and lookups. They share a Store: the
// records, the fault schedule and the search index's lag.

// APIFault is one scheduled misbehaviour of an API sandbox, applied to the next
// create request that passes authentication and validation.
type APIFault int

const (
	// StoreThenDrop stores the record and closes the connection without a reply.
	StoreThenDrop APIFault = iota + 1
	// StoreThenHang stores the record and never answers: the client times out.
	StoreThenHang
	// RateLimited answers the API's own rate-limit reply, with its reset header,
	// and stores nothing.
	RateLimited
)

// APIRecord is one record (or message) an API sandbox stored.
type APIRecord struct {
	ID   string
	Ref  string // the operation key as the API holds it
	Body map[string]any
	At   time.Time
}

// Store is what an API sandbox holds. It is safe for concurrent use.
type Store struct {
	mu      sync.Mutex
	now     func() time.Time
	token   string
	records []APIRecord
	creates []time.Time // when each create request arrived (rate-limited ones too)
	faults  []APIFault
	lag     time.Duration
	reset   time.Duration // what the rate-limit reply asks the client to wait
	// authorize, when set, checks the request's Authorization header instead of
	// the token (an OAuth2 server's live access tokens; see SetAuthorize).
	authorize func(*http.Request) bool
}

// SetAuthorize makes the sandbox accept the bearer tokens fn accepts (fn gets a
// request carrying only the Authorization header), as an OAuth2 API does.
func (s *Store) SetAuthorize(fn func(*http.Request) bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.authorize = fn
}

func newStore(token string) *Store {
	return &Store{token: token, now: time.Now, reset: time.Second}
}

// SetToken replaces the accepted credential, as a rotation would.
func (s *Store) SetToken(token string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.token = token
}

// SetLag hides new records from the API's search for d, as a search index does.
func (s *Store) SetLag(d time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.lag = d
}

// SetNow replaces the clock (for key memories that expire).
func (s *Store) SetNow(now func() time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.now = now
}

// SetReset sets the wait the rate-limit reply asks for (default 1s).
func (s *Store) SetReset(d time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.reset = d
}

// Fail queues f for the next create.
func (s *Store) Fail(f APIFault) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.faults = append(s.faults, f)
}

// Len is how many records are stored.
func (s *Store) Len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.records)
}

// CountRef is how many records carry ref.
func (s *Store) CountRef(ref string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, r := range s.records {
		if r.Ref == ref {
			n++
		}
	}
	return n
}

// Seed stores a record made outside oncehook (by hand, or by an attempt whose reply
// was lost long ago), with the sandbox's next id.
func (s *Store) Seed(ref string, body map[string]any) APIRecord {
	return s.add(ref, body, func(n int) string { return fmt.Sprint(9000 + n) })
}

// Records returns a copy of the records in creation order.
func (s *Store) Records() []APIRecord {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.records)
}

// Creates returns when each accepted create request arrived, in order.
func (s *Store) Creates() []time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.creates)
}

func (s *Store) authorized(got, want func(token string) string) bool {
	s.mu.Lock()
	token, authorize := s.token, s.authorize
	s.mu.Unlock()
	if authorize != nil {
		r, _ := http.NewRequest(http.MethodGet, "http://sandbox/", nil)
		r.Header.Set("Authorization", got(token))
		return authorize(r)
	}
	return subtle.ConstantTimeCompare([]byte(got(token)), []byte(want(token))) == 1
}

// create runs the fault schedule around commit, which stores the record and returns
// the reply to write.
func (s *Store) create(w http.ResponseWriter, r *http.Request, limited func(w http.ResponseWriter, reset time.Duration),
	commit func() func(http.ResponseWriter)) {
	s.mu.Lock()
	s.creates = append(s.creates, s.now())
	var f APIFault
	if len(s.faults) > 0 {
		f, s.faults = s.faults[0], s.faults[1:]
	}
	reset := s.reset
	s.mu.Unlock()
	switch f {
	case RateLimited:
		limited(w, reset)
		return
	case StoreThenDrop:
		commit()
		panic(http.ErrAbortHandler) // the server hangs up without a reply
	case StoreThenHang:
		commit()
		<-r.Context().Done()
		return
	}
	commit()(w)
}

// add stores a record with the next id made by id.
func (s *Store) add(ref string, body map[string]any, id func(n int) string) APIRecord {
	s.mu.Lock()
	defer s.mu.Unlock()
	rec := APIRecord{ID: id(len(s.records) + 1), Ref: ref, Body: body, At: s.now()}
	s.records = append(s.records, rec)
	return rec
}

// find returns the records matching, as a strong read sees them.
func (s *Store) find(match func(APIRecord) bool) []APIRecord {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []APIRecord
	for _, r := range s.records {
		if match(r) {
			out = append(out, r)
		}
	}
	return out
}

// search returns the records matching that the lagging index already shows.
func (s *Store) search(match func(APIRecord) bool) []APIRecord {
	s.mu.Lock()
	now, lag := s.now(), s.lag
	s.mu.Unlock()
	var out []APIRecord
	for _, r := range s.find(match) {
		if !now.Before(r.At.Add(lag)) {
			out = append(out, r)
		}
	}
	return out
}

// decodeJSON reads a JSON object body, keeping numbers exact.
func decodeJSON(r *http.Request) (map[string]any, error) {
	if ct := r.Header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
		return nil, fmt.Errorf("content type %q is not application/json", ct)
	}
	return decodeObject(http.MaxBytesReader(nil, r.Body, 1<<20))
}

// decodeForm reads an application/x-www-form-urlencoded body.
func decodeForm(r *http.Request) (url.Values, error) {
	if ct := r.Header.Get("Content-Type"); !strings.HasPrefix(ct, "application/x-www-form-urlencoded") {
		return nil, fmt.Errorf("content type %q is not a form", ct)
	}
	b, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
	if err != nil {
		return nil, err
	}
	return url.ParseQuery(string(b))
}

func writeAny(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func seconds(d time.Duration) string { return fmt.Sprint(int((d + time.Second - 1) / time.Second)) }

// str is the string at key of m, if it is one.
func str(m map[string]any, key string) (string, bool) {
	s, ok := m[key].(string)
	return s, ok
}

func obj(m map[string]any, key string) (map[string]any, bool) {
	o, ok := m[key].(map[string]any)
	return o, ok
}
