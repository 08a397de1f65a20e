package sandbox

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"time"
)

// Resend is the emails API with a Bearer key and an Idempotency-Key it remembers
// for 24 hours: the same key and body within that time get the first reply and send
// nothing; the same key with another body is 409 invalid_idempotent_request; a key
// still being processed is 409 concurrent_idempotent_requests. SetNow moves its
// clock past the memory.
type Resend struct {
	*Store
	keys map[string]*resendKey
}

type resendKey struct {
	body  []byte
	reply []byte // nil while the first request is in progress
	at    time.Time
}

// ResendKeyMemory is how long Resend remembers an idempotency key.
const ResendKeyMemory = 24 * time.Hour

// NewResend returns an empty account accepting the API key token.
func NewResend(token string) *Resend {
	return &Resend{Store: newStore(token), keys: map[string]*resendKey{}}
}

// Handler serves POST /emails and GET /domains.
func (s *Resend) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /emails", s.send)
	mux.HandleFunc("GET /domains", func(w http.ResponseWriter, r *http.Request) {
		writeAny(w, 200, map[string]any{"data": []map[string]any{{"name": "example.com", "status": "verified"}}})
	})
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch auth := r.Header.Get("Authorization"); {
		case auth == "":
			resendError(w, 401, "missing_api_key", "Missing API key in the authorization header.")
		case !s.authorized(func(string) string { return auth }, func(t string) string { return "Bearer " + t }):
			resendError(w, 403, "invalid_api_key", "API key is invalid.")
		default:
			mux.ServeHTTP(w, r)
		}
	})
}

func resendError(w http.ResponseWriter, status int, name, msg string) {
	writeAny(w, status, map[string]any{"statusCode": status, "name": name, "message": msg})
}

func (s *Resend) send(w http.ResponseWriter, r *http.Request) {
	raw, body, ok := readEmail(w, r)
	if !ok {
		return
	}
	key := r.Header.Get("Idempotency-Key")
	if len(key) > 256 {
		resendError(w, 400, "invalid_idempotency_key", "The key must be between 1-256 chars.")
		return
	}
	if key != "" && !s.claimKey(w, key, raw) {
		return
	}
	s.create(w, r, func(w http.ResponseWriter, reset time.Duration) {
		s.forget(key)
		w.Header().Set("retry-after", seconds(reset))
		w.Header().Set("ratelimit-reset", seconds(reset))
		w.Header().Set("ratelimit-remaining", "0")
		resendError(w, 429, "rate_limit_exceeded", "Too many requests. You can only make 2 requests per second.")
	}, func() func(http.ResponseWriter) {
		rec := s.add(key, body, func(n int) string { return fmt.Sprintf("49a3999c-0ce1-4ea6-ab68-%012d", n) })
		reply, _ := json.Marshal(map[string]any{"id": rec.ID})
		if key != "" {
			s.mu.Lock()
			s.keys[key].reply = reply // a success is remembered under its key
			s.mu.Unlock()
		}
		return func(w http.ResponseWriter) {
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write(reply)
		}
	})
}

// readEmail reads the email's body, as sent and decoded; when it is not JSON or
// lacks a required field it answers 422 and ok is false.
func readEmail(w http.ResponseWriter, r *http.Request) (raw []byte, body map[string]any, ok bool) {
	raw, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
	if err != nil {
		return nil, nil, false
	}
	r.Body = io.NopCloser(bytes.NewReader(raw))
	if body, err = decodeJSON(r); err != nil {
		resendError(w, 422, "validation_error", "Invalid JSON body.")
		return nil, nil, false
	}
	for _, k := range []string{"from", "to", "subject"} {
		if _, ok := body[k]; !ok {
			resendError(w, 422, "missing_required_field", fmt.Sprintf("The `%s` field is missing.", k))
			return nil, nil, false
		}
	}
	return raw, body, true
}

// claimKey claims key for this request, whose body is raw. When the key is
// remembered it answers instead, and claimed is false: 409 while its first request
// is in progress or when raw differs from that request's body, else that reply.
func (s *Resend) claimKey(w http.ResponseWriter, key string, raw []byte) (claimed bool) {
	s.mu.Lock()
	e, ok := s.keys[key]
	if ok && e.reply != nil && s.now().Sub(e.at) >= ResendKeyMemory {
		ok = false // forgotten
	}
	switch {
	case ok && e.reply == nil:
		s.mu.Unlock()
		resendError(w, 409, "concurrent_idempotent_requests", "Same idempotency key used while original request is still in progress.")
		return false
	case ok && !bytes.Equal(e.body, raw):
		s.mu.Unlock()
		resendError(w, 409, "invalid_idempotent_request", "Same idempotency key used with a different request payload.")
		return false
	case ok:
		reply := e.reply
		s.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(reply)
		return false
	}
	s.keys[key] = &resendKey{body: raw, at: s.now()}
	s.mu.Unlock()
	return true
}

// forget drops a key whose request stored nothing.
func (s *Resend) forget(key string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if e, ok := s.keys[key]; ok && e.reply == nil {
		delete(s.keys, key)
	}
}
