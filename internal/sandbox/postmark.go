package sandbox

import (
	"fmt"
	"net/http"
	"strings"
	"time"
)

// Postmark is the email API with a server token in X-Postmark-Server-Token,
// PascalCase fields, Metadata, and a message search (GET /messages/outbound with
// metadata_<key>=) that shows a message only once its index caught up (SetLag),
// and only in the message stream its messagestream names (outbound by default,
// the stream a message without MessageStream is sent on).
// Errors are 422 {"ErrorCode", "Message"}; a From outside the confirmed sender
// domain is ErrorCode 400. It has no idempotency keys.
type Postmark struct {
	*Store
	domain string // the confirmed sender domain
}

// NewPostmark returns a server accepting token that sends from domain.
func NewPostmark(token, domain string) *Postmark {
	return &Postmark{Store: newStore(token), domain: domain}
}

// Handler serves /email, /messages/outbound and /server.
func (p *Postmark) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /email", p.send)
	mux.HandleFunc("GET /messages/outbound", p.messages)
	mux.HandleFunc("GET /server", func(w http.ResponseWriter, r *http.Request) {
		writeAny(w, 200, map[string]any{"ID": 1, "Name": "Sandbox"})
	})
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !p.authorized(func(string) string { return r.Header.Get("X-Postmark-Server-Token") }, func(t string) string { return t }) {
			postmarkError(w, 401, 10, "The Server Token you provided in the X-Postmark-Server-Token request header was invalid.")
			return
		}
		if r.Header.Get("Accept") != "application/json" {
			postmarkError(w, 422, 409, "Request must set Accept: application/json")
			return
		}
		mux.ServeHTTP(w, r)
	})
}

func postmarkError(w http.ResponseWriter, status, code int, msg string) {
	writeAny(w, status, map[string]any{"ErrorCode": code, "Message": msg})
}

func (p *Postmark) send(w http.ResponseWriter, r *http.Request) {
	body, err := decodeJSON(r)
	if err != nil {
		postmarkError(w, 422, 402, "Received invalid JSON input.")
		return
	}
	from, _ := str(body, "From")
	to, _ := str(body, "To")
	_, text := str(body, "TextBody")
	_, html := str(body, "HtmlBody")
	if from == "" || to == "" || !text && !html {
		postmarkError(w, 422, 300, "Invalid email request: From, To and a TextBody or HtmlBody are required")
		return
	}
	if !strings.HasSuffix(from, "@"+p.domain) && !strings.HasSuffix(from, "@"+p.domain+">") {
		postmarkError(w, 422, 400, fmt.Sprintf("The 'From' address you supplied (%s) is not a Sender Signature on your account.", from))
		return
	}
	ref := ""
	if md, ok := obj(body, "Metadata"); ok {
		for _, v := range md {
			if _, ok := v.(string); !ok {
				postmarkError(w, 422, 300, "Invalid email request: Metadata values must be strings")
				return
			}
		}
		ref, _ = str(md, "oncehook_ref")
	}
	p.create(w, r, func(w http.ResponseWriter, _ time.Duration) {
		postmarkError(w, 429, 429, "Rate limit exceeded: reduce your sending rate.")
	}, func() func(http.ResponseWriter) {
		rec := p.add(ref, body, func(n int) string { return fmt.Sprintf("b7bc2f4a-e38e-4336-af7d-%012d", n) })
		return func(w http.ResponseWriter) {
			writeAny(w, 200, map[string]any{"To": to, "SubmittedAt": rec.At.Format(time.RFC3339Nano),
				"MessageID": rec.ID, "ErrorCode": 0, "Message": "OK"})
		}
	})
}

// messages answers the outbound message search; count and offset are required.
func (p *Postmark) messages(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	if q.Get("count") == "" || q.Get("offset") == "" {
		postmarkError(w, 422, 300, "The count and offset parameters are required")
		return
	}
	key, value := "", ""
	for k := range q {
		if strings.HasPrefix(k, "metadata_") {
			key, value = strings.TrimPrefix(k, "metadata_"), q.Get(k)
		}
	}
	stream := q.Get("messagestream")
	if stream == "" {
		stream = "outbound"
	}
	recs := p.search(func(rec APIRecord) bool {
		if sent, _ := str(rec.Body, "MessageStream"); sent != stream && (sent != "" || stream != "outbound") {
			return false
		}
		if key == "" {
			return true
		}
		md, _ := obj(rec.Body, "Metadata")
		v, _ := str(md, key)
		return v == value
	})
	msgs := []map[string]any{}
	for _, rec := range recs {
		to, _ := str(rec.Body, "To")
		subject, _ := str(rec.Body, "Subject")
		md, _ := obj(rec.Body, "Metadata")
		msgs = append(msgs, map[string]any{"MessageID": rec.ID, "To": []map[string]any{{"Email": to}},
			"Subject": subject, "Status": "Sent", "Metadata": md, "ReceivedAt": rec.At.Format(time.RFC3339),
			"MessageStream": stream})
	}
	writeAny(w, 200, map[string]any{"TotalCount": len(msgs), "Messages": msgs})
}
