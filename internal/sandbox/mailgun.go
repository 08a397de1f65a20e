package sandbox

import (
	"fmt"
	"net/http"
	"time"
)

// Mailgun is the messages API: HTTP basic auth with user "api" and the key as the
// password (anything else is a plain-text 401 "Forbidden"), a form body (JSON is
// refused), user variables as v:NAME fields, and an id wrapped in <...>. No
// idempotency and no lookup by reference.
type Mailgun struct {
	*Store
	domain string
}

// NewMailgun returns a sending domain accepting the API key token.
func NewMailgun(token, domain string) *Mailgun {
	return &Mailgun{Store: newStore(token), domain: domain}
}

// Handler serves /v3/{domain}/messages and /v3/domains/{domain}.
func (m *Mailgun) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v3/{domain}/messages", m.send)
	mux.HandleFunc("GET /v3/domains/{domain}", func(w http.ResponseWriter, r *http.Request) {
		if r.PathValue("domain") != m.domain {
			writeAny(w, 404, map[string]any{"message": "Domain not found"})
			return
		}
		writeAny(w, 200, map[string]any{"domain": map[string]any{"name": m.domain, "state": "active"}})
	})
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		user, pass, ok := r.BasicAuth()
		if !ok || user != "api" || !m.authorized(func(string) string { return pass }, func(t string) string { return t }) {
			w.Header().Set("Content-Type", "text/plain")
			w.WriteHeader(401)
			_, _ = w.Write([]byte("Forbidden"))
			return
		}
		mux.ServeHTTP(w, r)
	})
}

func (m *Mailgun) send(w http.ResponseWriter, r *http.Request) {
	if r.PathValue("domain") != m.domain {
		writeAny(w, 404, map[string]any{"message": "Domain not found: " + r.PathValue("domain")})
		return
	}
	form, err := decodeForm(r)
	if err != nil {
		writeAny(w, 400, map[string]any{"message": "from parameter is missing"})
		return
	}
	for _, k := range []string{"from", "to", "subject"} {
		if form.Get(k) == "" {
			writeAny(w, 400, map[string]any{"message": k + " parameter is missing"})
			return
		}
	}
	if form.Get("text") == "" && form.Get("html") == "" && form.Get("template") == "" {
		writeAny(w, 400, map[string]any{"message": "Need at least one of 'text', 'html', 'amp-html' or 'template' parameters specified"})
		return
	}
	body := map[string]any{}
	for k, v := range form {
		body[k] = v
	}
	m.create(w, r, func(w http.ResponseWriter, _ time.Duration) {
		writeAny(w, 429, map[string]any{"message": "Too many requests"})
	}, func() func(http.ResponseWriter) {
		rec := m.add(form.Get("v:oncehook_ref"), body, func(n int) string {
			return fmt.Sprintf("<20261201120000.%06d@%s>", n, m.domain)
		})
		return func(w http.ResponseWriter) {
			writeAny(w, 200, map[string]any{"id": rec.ID, "message": "Queued. Thank you."})
		}
	})
}
