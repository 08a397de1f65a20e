// Package sandbox holds in-process destinations that honour oncehook's destination
// contract: a CRM API and a mail sink. Tests and the demo run against them, and their
// faults make every row of the decision table reachable on purpose.
package sandbox

import (
	"crypto/subtle"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"slices"
	"sync"
	"time"
)

// IdempotencyHeader is the request header the CRM reads the idempotency key from.
const IdempotencyHeader = "Idempotency-Key"

// CRMParams configures a CRM. Token "" accepts any request; KeyTTL 0 means 24h;
// Now nil means time.Now. IgnoreKeys makes it a CRM that reads no idempotency key,
// as most real ones: every create stores a record.
type CRMParams struct {
	Token      string
	KeyTTL     time.Duration
	Now        func() time.Time
	IgnoreKeys bool
	// Authorize, when set, decides instead of Token (an OAuth2 server's check).
	Authorize func(*http.Request) bool
}

// Record is one stored opportunity.
type Record struct {
	ID             string
	Fields         map[string]any
	IdempotencyKey string
	CreatedAt      time.Time
}

// RequestLog is one request the CRM answered. Status is 0 when the client left
// before a reply was written, or the connection was dropped (Fault.Drop).
type RequestLog struct {
	Method         string
	Path           string
	IdempotencyKey string
	Status         int
}

// CreateRequest is one create request the CRM read, past the credentials check:
// the key and the source_ref it carried, and the id of the record it stored ("" when
// it stored none: refused, replayed, in conflict with one in progress, or faulted
// before storing).
type CreateRequest struct {
	IdempotencyKey string
	Ref            string
	Stored         string
}

// CRM is an in-memory opportunities API with bearer tokens, idempotency keys, a
// lookup by source_ref, and a schedule of faults. It is safe for concurrent use.
type CRM struct {
	ttl        time.Duration
	now        func() time.Time
	ignoreKeys bool
	authorize  func(*http.Request) bool

	mu       sync.Mutex
	token    string
	next     int
	records  []Record
	keys     map[string]*keyEntry
	faults   []Fault
	requests []RequestLog
	creates  []CreateRequest

	lookupDownUntil time.Time // lookups answer 503 until then (see LookupOutage)
}

// keyEntry is what the CRM remembers of an idempotency key: a request still being
// processed (reply nil), or the stored reply that repeats answer with.
type keyEntry struct {
	reply *storedReply
	at    time.Time
}

type storedReply struct {
	status int
	body   []byte
}

// NewCRM returns an empty CRM.
func NewCRM(p CRMParams) *CRM {
	if p.KeyTTL <= 0 {
		p.KeyTTL = 24 * time.Hour
	}
	if p.Now == nil {
		p.Now = time.Now
	}
	return &CRM{ttl: p.KeyTTL, now: p.Now, token: p.Token, keys: map[string]*keyEntry{}, ignoreKeys: p.IgnoreKeys,
		authorize: p.Authorize}
}

// Handler serves POST /opportunities, GET /opportunities?source_ref=X and
// GET /opportunities/{id}. Every route, and any other method, needs the bearer token
// first, so that a credentials check with OPTIONS sees a refusal.
func (c *CRM) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /opportunities", c.create)
	mux.HandleFunc("GET /opportunities", c.list)
	mux.HandleFunc("GET /opportunities/{id}", c.get)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodGet && r.URL.Path == InspectPath {
			c.inspect(w)
			return
		}
		sw := &statusWriter{ResponseWriter: w}
		defer c.logRequest(r, sw)
		if !c.authorized(r) {
			writeError(sw, http.StatusUnauthorized, "missing or invalid bearer token")
			return
		}
		mux.ServeHTTP(sw, r)
	})
}

// SetToken replaces the accepted token, as a credential rotation would.
func (c *CRM) SetToken(token string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.token = token
}

// ForgetKeys drops every remembered idempotency key, as the passing of the key
// memory would; keys of requests still in progress stay.
func (c *CRM) ForgetKeys() {
	c.mu.Lock()
	defer c.mu.Unlock()
	maps.DeleteFunc(c.keys, func(_ string, e *keyEntry) bool { return e.reply != nil })
}

// Len returns how many records are stored, without copying them.
func (c *CRM) Len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.records)
}

// Records returns a copy of the stored records in creation order. Field values are
// shared, which is safe because the CRM never changes a stored record.
func (c *CRM) Records() []Record {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := slices.Clone(c.records)
	for i := range out {
		out[i].Fields = maps.Clone(out[i].Fields)
	}
	return out
}

// CountByRef returns how many records carry source_ref ref.
func (c *CRM) CountByRef(ref string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.byRef(ref))
}

// Creates returns the create requests read so far, in the order they ended.
func (c *CRM) Creates() []CreateRequest {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.creates)
}

// Requests returns the requests answered so far, in order.
func (c *CRM) Requests() []RequestLog {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.requests)
}

func (c *CRM) create(w http.ResponseWriter, r *http.Request) {
	fields, err := decodeObject(http.MaxBytesReader(w, r.Body, 1<<20))
	if err != nil {
		writeError(w, http.StatusBadRequest, "the body must be a JSON object")
		return
	}
	key := r.Header.Get(IdempotencyHeader)
	logged := CreateRequest{IdempotencyKey: key}
	logged.Ref, _ = fields["source_ref"].(string)
	defer func() {
		c.mu.Lock()
		defer c.mu.Unlock()
		c.creates = append(c.creates, logged)
	}()
	if c.ignoreKeys {
		key = ""
	}
	replay, busy := c.claim(key)
	if busy {
		writeError(w, http.StatusConflict, "a request with this idempotency key is in progress")
		return
	}
	f := c.takeFault(http.MethodPost, fields)
	if !f.AfterCommit {
		if !f.hold(r.Context()) {
			c.release(key, replay) // the client left before anything was stored
			return
		}
		if f.Status != 0 || f.Drop {
			c.release(key, replay)
			if f.Drop {
				drop(w)
				return
			}
			f.write(w)
			return
		}
	}
	reply := replay
	if reply == nil {
		reply, logged.Stored = c.commit(key, fields)
	}
	if f.AfterCommit && !f.hold(r.Context()) {
		return
	}
	if f.Status != 0 || f.Drop {
		f.write(w)
		return
	}
	if replay != nil {
		w.Header().Set("Idempotent-Replayed", "true")
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(reply.status)
	_, _ = w.Write(reply.body)
}

// claim reserves key for this request. It returns the stored reply when the key is
// remembered, or busy when another request holds it. An empty key claims nothing.
func (c *CRM) claim(key string) (replay *storedReply, busy bool) {
	if key == "" {
		return nil, false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.keys[key]; ok {
		if e.reply == nil {
			return nil, true
		}
		if c.now().Before(e.at.Add(c.ttl)) {
			return e.reply, false
		}
	}
	c.keys[key] = &keyEntry{}
	return nil, false
}

// release gives up a claim that stored nothing, so the key can be used again.
func (c *CRM) release(key string, replay *storedReply) {
	if key == "" || replay != nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.keys[key]; ok && e.reply == nil {
		delete(c.keys, key)
	}
}

// commit stores a new record and, under key, the reply that repeats will get. It
// returns the reply and the record's id.
func (c *CRM) commit(key string, fields map[string]any) (*storedReply, string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.next++
	rec := Record{ID: fmt.Sprintf("opp_%d", c.next), Fields: fields, IdempotencyKey: key, CreatedAt: c.now()}
	c.records = append(c.records, rec)
	body, _ := json.Marshal(recordView(rec)) // decoded JSON values always encode
	reply := &storedReply{status: http.StatusCreated, body: body}
	if key != "" {
		c.keys[key] = &keyEntry{reply: reply, at: rec.CreatedAt}
	}
	return reply, rec.ID
}

func (c *CRM) list(w http.ResponseWriter, r *http.Request) {
	c.mu.Lock()
	down := c.now().Before(c.lookupDownUntil)
	c.mu.Unlock()
	if down {
		writeError(w, http.StatusServiceUnavailable, "search is down for maintenance")
		return
	}
	if c.lookupFaulted(w, r) {
		return
	}
	c.mu.Lock()
	recs := c.records
	if ref := r.URL.Query().Get("source_ref"); r.URL.Query().Has("source_ref") {
		recs = c.byRef(ref)
	}
	views := make([]map[string]any, 0, len(recs))
	for _, rec := range recs {
		views = append(views, recordView(rec))
	}
	c.mu.Unlock()
	writeJSON(w, http.StatusOK, views)
}

func (c *CRM) get(w http.ResponseWriter, r *http.Request) {
	if c.lookupFaulted(w, r) {
		return
	}
	c.mu.Lock()
	i := slices.IndexFunc(c.records, func(rec Record) bool { return rec.ID == r.PathValue("id") })
	var view map[string]any
	if i >= 0 {
		view = recordView(c.records[i])
	}
	c.mu.Unlock()
	if view == nil {
		writeError(w, http.StatusNotFound, "no such opportunity")
		return
	}
	writeJSON(w, http.StatusOK, view)
}

// byRef returns the records whose source_ref is ref; c.mu must be held.
func (c *CRM) byRef(ref string) []Record {
	var out []Record
	for _, rec := range c.records {
		if v, ok := rec.Fields["source_ref"].(string); ok && v == ref {
			out = append(out, rec)
		}
	}
	return out
}

func (c *CRM) authorized(r *http.Request) bool {
	if c.authorize != nil {
		return c.authorize(r)
	}
	c.mu.Lock()
	token := c.token
	c.mu.Unlock()
	return token == "" || subtle.ConstantTimeCompare([]byte(r.Header.Get("Authorization")), []byte("Bearer "+token)) == 1
}

func (c *CRM) logRequest(r *http.Request, sw *statusWriter) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.requests = append(c.requests, RequestLog{Method: r.Method, Path: r.URL.Path,
		IdempotencyKey: r.Header.Get(IdempotencyHeader), Status: sw.status})
}

// recordView is a record as the API shows it: its fields and its id.
func recordView(rec Record) map[string]any {
	v := maps.Clone(rec.Fields)
	if v == nil {
		v = map[string]any{}
	}
	v["id"] = rec.ID
	return v
}

func decodeObject(r io.Reader) (map[string]any, error) {
	dec := json.NewDecoder(r)
	dec.UseNumber() // amounts and ids come back exactly as sent
	var m map[string]any
	if err := dec.Decode(&m); err != nil || m == nil {
		return nil, fmt.Errorf("decode body: not a JSON object")
	}
	return m, nil
}

// drop closes the request's connection without writing a reply: the server
// recovers http.ErrAbortHandler silently and hangs up.
func drop(http.ResponseWriter) { panic(http.ErrAbortHandler) }

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func writeError(w http.ResponseWriter, status int, msg string) {
	writeJSON(w, status, map[string]string{"error": msg})
}

// statusWriter remembers the status written, for the request log.
type statusWriter struct {
	http.ResponseWriter
	status int
}

// Unwrap lets http.ResponseController reach the connection (Fault.Drop).
func (s *statusWriter) Unwrap() http.ResponseWriter { return s.ResponseWriter }

func (s *statusWriter) WriteHeader(code int) {
	if s.status == 0 {
		s.status = code
	}
	s.ResponseWriter.WriteHeader(code)
}

func (s *statusWriter) Write(b []byte) (int, error) {
	if s.status == 0 {
		s.status = http.StatusOK
	}
	return s.ResponseWriter.Write(b)
}
