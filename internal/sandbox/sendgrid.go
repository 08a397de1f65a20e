package sandbox

import (
	"fmt"
	"net/http"
	"strings"
	"time"
)

// SendGrid is v3 mail/send with a Bearer API key: personalizations with their to
// lists, from, content, string-only custom_args; 202 with an empty body and the id
// in X-Message-Id; a From outside the verified sender domain is 403 with field
// "from"; 429 carries X-RateLimit-Reset as a Unix time. No idempotency, no lookup.
type SendGrid struct {
	*Store
	domain string // the verified sender domain
}

// NewSendGrid returns an empty account accepting the API key token that sends from
// domain.
func NewSendGrid(token, domain string) *SendGrid {
	return &SendGrid{Store: newStore(token), domain: domain}
}

// Handler serves /v3/mail/send and /v3/scopes.
func (s *SendGrid) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v3/mail/send", s.send)
	mux.HandleFunc("GET /v3/scopes", func(w http.ResponseWriter, r *http.Request) {
		writeAny(w, 200, map[string]any{"scopes": []string{"mail.send"}})
	})
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !s.authorized(func(string) string { return r.Header.Get("Authorization") }, func(t string) string { return "Bearer " + t }) {
			sendgridError(w, 401, nil, "The provided authorization grant is invalid, expired, or revoked")
			return
		}
		mux.ServeHTTP(w, r)
	})
}

func sendgridError(w http.ResponseWriter, status int, field any, msg string) {
	writeAny(w, status, map[string]any{"errors": []map[string]any{{"message": msg, "field": field, "help": nil}}})
}

func (s *SendGrid) send(w http.ResponseWriter, r *http.Request) {
	body, err := decodeJSON(r)
	if err != nil {
		sendgridError(w, 400, nil, "Bad Request")
		return
	}
	if msg, field := s.invalid(body); msg != "" {
		sendgridError(w, 400, field, msg)
		return
	}
	from, _ := obj(body, "from")
	if email, _ := str(from, "email"); !strings.HasSuffix(email, "@"+s.domain) {
		sendgridError(w, 403, "from", "The from address does not match a verified Sender Identity. Mail cannot be sent until this error is resolved.")
		return
	}
	args, _ := obj(body, "custom_args")
	ref, _ := str(args, "oncehook_ref")
	s.create(w, r, func(w http.ResponseWriter, reset time.Duration) {
		w.Header().Set("X-RateLimit-Limit", "600")
		w.Header().Set("X-RateLimit-Remaining", "0")
		w.Header().Set("X-RateLimit-Reset", fmt.Sprint(s.now().Add(reset).Add(time.Second-1).Unix()))
		sendgridError(w, 429, nil, "too many requests")
	}, func() func(http.ResponseWriter) {
		rec := s.add(ref, body, func(n int) string { return fmt.Sprintf("W86EgYT6SQKk0lRflfLRsA%04d", n) })
		return func(w http.ResponseWriter) {
			w.Header().Set("X-Message-Id", rec.ID)
			w.WriteHeader(http.StatusAccepted)
		}
	})
}

// invalid reports the first problem SendGrid would refuse with 400, and its field.
func (s *SendGrid) invalid(body map[string]any) (string, any) {
	ps, _ := body["personalizations"].([]any)
	if len(ps) == 0 {
		return "The personalizations field is required and must have at least one personalization.", "personalizations"
	}
	for _, p := range ps {
		pm, _ := p.(map[string]any)
		to, _ := pm["to"].([]any)
		if len(to) == 0 {
			return "The to array is required for all personalization objects, and must have at least one email object with a valid email address.", "personalizations.0.to"
		}
		for _, t := range to {
			tm, _ := t.(map[string]any)
			if e, _ := str(tm, "email"); !strings.Contains(e, "@") {
				return "Does not contain a valid address.", "personalizations.0.to.0.email"
			}
		}
	}
	if from, ok := obj(body, "from"); !ok || from["email"] == nil {
		return "The from email does not contain a valid address.", "from.email"
	}
	if _, ok := str(body, "subject"); !ok {
		return "The subject is required.", "subject"
	}
	content, _ := body["content"].([]any)
	if len(content) == 0 {
		return "Unless a valid template_id is provided, the content parameter is required.", "content"
	}
	if args, ok := body["custom_args"]; ok {
		m, isObj := args.(map[string]any)
		if !isObj {
			return "Invalid type. Expected: object, given: " + fmt.Sprintf("%T", args), "custom_args"
		}
		for _, v := range m {
			if _, ok := v.(string); !ok {
				return "Bad Request", nil // SendGrid's useless answer to a non-string custom arg
			}
		}
	}
	return "", nil
}
