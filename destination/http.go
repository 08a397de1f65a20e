package destination

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptrace"
	"net/url"
	"strconv"
	"strings"
	"sync/atomic"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/oncehook/oncehook"
)

const (
	// maxReplyBytes bounds what is read of any reply: the evidence we keep is an id
	// and a document, and a destination gone wrong must not fill the worker's memory.
	maxReplyBytes = 1 << 20
	// maxExcerptBytes bounds the destination's words kept as a reason.
	maxExcerptBytes = 300
	// connectionCheckRef is the reference Check looks up: it exists nowhere, so any
	// answer but a refusal proves the credentials are accepted.
	connectionCheckRef = "oncehook-connection-check"
)

// HTTP performs actions as JSON requests to an HTTP API (DESIGN.md
// section 4, "Destination http").
type HTTP struct {
	d       oncehook.Destination
	client  *http.Client // for lookups and checks
	perform *http.Client // the same transport, following no redirects
	now     func() time.Time
	oauth   *OAuth // nil unless auth.oauth2 (see oauth.go)
}

// NewHTTP returns the client for the http destination d, sending through
// client (http.DefaultClient when nil). Perform never follows a redirect: the client
// would repeat a POST as a GET and could read a listing as a confirmation.
func NewHTTP(d oncehook.Destination, client *http.Client) *HTTP {
	if client == nil {
		client = http.DefaultClient
	}
	if d.Create.Method == "" {
		d.Create.Method = http.MethodPost
	}
	if d.Idempotency.Header == "" {
		d.Idempotency.Header = oncehook.DefaultIdempotencyHeader
	}
	if d.ResultID == "" {
		d.ResultID = oncehook.DefaultResultID
	}
	if d.Timeout <= 0 {
		d.Timeout = oncehook.DefaultTimeout
	}
	perform := *client
	perform.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	return &HTTP{d: d, client: client, perform: &perform, now: time.Now}
}

// Capabilities reports a lookup when one is configured, and the key memory of the
// idempotency header, which is always sent.
func (h *HTTP) Capabilities() oncehook.Capabilities {
	return oncehook.Capabilities{
		Lookup:       h.d.Lookup.URL != "",
		StrongLookup: h.d.Lookup.URL != "" && h.d.Lookup.Consistency == oncehook.ConsistencyStrong,
		KeyMemory:    h.d.Idempotency.TTL,
	}
}

// performOnce sends the create request once and classifies the reply through the
// decision table. Whether the request bytes went out decides what a failure means:
// before, nothing can have happened (throttled); after, anything may have (unsure).
// Perform (http_oauth.go) adds the OAuth2 access token and its refresh.
func (h *HTTP) performOnce(ctx context.Context, c oncehook.Call) oncehook.Outcome {
	body, err := h.body(c)
	if err != nil {
		return oncehook.Outcome{Observed: oncehook.ObsRejected, Detail: err.Error()}
	}
	ctx, cancel := context.WithTimeout(ctx, h.d.Timeout)
	defer cancel()
	var wrote atomic.Bool
	ctx = httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{
		WroteRequest: func(i httptrace.WroteRequestInfo) {
			if i.Err == nil {
				wrote.Store(true)
			}
		},
	})
	req, err := http.NewRequestWithContext(ctx, h.d.Create.Method, h.d.Create.URL, bytes.NewReader(body))
	if err != nil {
		return oncehook.Outcome{Observed: oncehook.ObsRejected, Detail: h.scrub(fmt.Sprintf("build the request: %v", err))}
	}
	h.authorize(req)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set(h.d.Idempotency.Header, c.OperationKey)
	resp, err := h.perform.Do(req)
	if err != nil {
		if wrote.Load() {
			return oncehook.Outcome{Observed: oncehook.ObsUnsure, Detail: h.scrub(fmt.Sprintf(
				"no reply after the request was sent (%v): it may have been performed", err))}
		}
		return oncehook.Outcome{Observed: oncehook.ObsThrottled, Detail: h.scrub(fmt.Sprintf("not sent: %v", err))}
	}
	defer resp.Body.Close()
	reply, readErr := io.ReadAll(io.LimitReader(resp.Body, maxReplyBytes))
	return h.classify(resp, reply, readErr)
}

// body is the params object with the operation key added as the reference field.
// Numbers stay json.Number so that amounts and ids pass through digit for digit.
func (h *HTTP) body(c oncehook.Call) ([]byte, error) {
	if c.OperationKey == "" {
		return nil, fmt.Errorf("the call has no operation key")
	}
	fields := map[string]any{}
	if p := bytes.TrimSpace(c.Params); len(p) > 0 && !bytes.Equal(p, []byte("null")) {
		dec := json.NewDecoder(bytes.NewReader(p))
		dec.UseNumber()
		if err := dec.Decode(&fields); err != nil {
			return nil, fmt.Errorf("params are not a JSON object: %w", err)
		}
	}
	if h.d.ReferenceField != "" {
		fields[h.d.ReferenceField] = c.OperationKey
	}
	b, err := json.Marshal(fields)
	if err != nil {
		return nil, fmt.Errorf("encode params: %w", err)
	}
	return b, nil
}

// classify maps a reply to its row of the decision table.
func (h *HTTP) classify(resp *http.Response, reply []byte, readErr error) oncehook.Outcome {
	s := resp.StatusCode
	o := oncehook.Outcome{HTTPStatus: s, Detail: h.statusDetail(s, reply)}
	switch {
	case s >= 200 && s < 300:
		o.Observed = oncehook.ObsSuccess
		o.ExternalRef, o.Result, o.Detail = h.evidence(s, reply, readErr)
	case s == http.StatusUnauthorized || s == http.StatusForbidden:
		o.Observed = oncehook.ObsUnauthorized
	case s == http.StatusConflict:
		o.Observed = oncehook.ObsInFlight
	case s == http.StatusTooManyRequests || s == http.StatusServiceUnavailable:
		o.Observed = oncehook.ObsThrottled
		o.RetryAfter = parseRetryAfter(resp.Header.Get("Retry-After"), h.now())
	case s >= 400 && s < 500:
		o.Observed = oncehook.ObsRejected
	default:
		// Other 5xx, and redirects the configured URL should not produce: the
		// destination may have acted, so it is reconciled, never assumed.
		o.Observed = oncehook.ObsUnsure
	}
	return o
}

// evidence reads the record id out of a 2xx reply. A reply without one is still a
// success, since the destination said so; the detail says what is missing.
func (h *HTTP) evidence(status int, reply []byte, readErr error) (string, json.RawMessage, string) {
	if readErr != nil {
		return "", nil, h.scrub(fmt.Sprintf("HTTP %d, but the reply could not be read (%v), so no record id is known", status, readErr))
	}
	doc, err := decodeReply(reply)
	if err != nil {
		return "", nil, fmt.Sprintf("HTTP %d, but the reply is not JSON, so no record id is known", status)
	}
	var result bytes.Buffer
	if err := json.Compact(&result, reply); err != nil {
		return "", nil, fmt.Sprintf("HTTP %d, but the reply is not JSON, so no record id is known", status)
	}
	ref, ok := oncehook.PointerString(doc, h.d.ResultID)
	if !ok {
		return "", result.Bytes(), fmt.Sprintf("HTTP %d, but the reply has no record id at %s", status, h.d.ResultID)
	}
	return ref, result.Bytes(), ""
}

// Lookup asks the lookup URL for the record carrying operationKey. A 404 or a reply
// without a record means absent; any other answer proves nothing and is Unsure.
func (h *HTTP) Lookup(ctx context.Context, operationKey string) oncehook.LookupResult {
	if h.d.Lookup.URL == "" {
		return oncehook.LookupResult{Unsure: true, Detail: "this destination has no lookup"}
	}
	status, reply, err := h.get(ctx, http.MethodGet, h.lookupURL(operationKey))
	if err != nil {
		return oncehook.LookupResult{Unsure: true, Detail: h.scrub(fmt.Sprintf("lookup failed: %v", err))}
	}
	r := oncehook.LookupResult{HTTPStatus: status}
	switch status {
	case http.StatusOK:
	case http.StatusNotFound:
		r.Detail = "HTTP 404: no record with this reference"
		return r
	default:
		r.Unsure, r.Detail = true, "lookup answered "+h.statusDetail(status, reply)
		return r
	}
	doc, err := decodeReply(reply)
	if err != nil {
		r.Unsure, r.Detail = true, "lookup answered HTTP 200 with a reply that is not JSON"
		return r
	}
	records, ok := doc.([]any)
	if !ok {
		records = []any{doc}
	}
	others := 0
	for _, rec := range records {
		if h.otherOperation(rec, operationKey) {
			others++
			continue
		}
		if ref, ok := oncehook.PointerString(rec, h.d.ResultID); ok {
			raw, err := json.Marshal(rec)
			if err != nil {
				r.Unsure, r.Detail = true, fmt.Sprintf("encode the record found: %v", err)
				return r
			}
			r.Found, r.ExternalRef, r.Result = true, ref, raw
			return r
		}
	}
	if others > 0 {
		// A lookup that ignores the reference lists other operations' records; its
		// silence about ours proves nothing.
		r.Unsure, r.Detail = true, fmt.Sprintf("lookup listed %d records of other operations: check that its URL filters by {ref}", others)
		return r
	}
	r.Detail = "HTTP 200: no record with this reference"
	return r
}

// otherOperation reports whether rec carries a reference field naming another key.
func (h *HTTP) otherOperation(rec any, key string) bool {
	if h.d.ReferenceField == "" {
		return false
	}
	m, ok := rec.(map[string]any)
	if !ok {
		return false
	}
	ref, ok := m[h.d.ReferenceField].(string)
	return ok && ref != key
}

// Check re-checks the credentials with a harmless request: the lookup of a reference
// that does not exist, or else OPTIONS on the create URL. Only 401 and 403 count as a
// refusal; the error of any other failure says what went wrong.
func (h *HTTP) Check(ctx context.Context) error {
	method, target := http.MethodOptions, h.d.Create.URL
	if h.d.Lookup.URL != "" {
		method, target = http.MethodGet, h.lookupURL(connectionCheckRef)
	}
	status, _, err := h.get(ctx, method, target)
	if err != nil {
		return fmt.Errorf("the destination could not be reached: %w", err)
	}
	if status == http.StatusUnauthorized || status == http.StatusForbidden {
		return fmt.Errorf("the destination refused the credentials (HTTP %d)", status)
	}
	return nil
}

func (h *HTTP) lookupURL(key string) string {
	return strings.ReplaceAll(h.d.Lookup.URL, "{ref}", url.QueryEscape(key))
}

// getOnce sends a bodiless request within the destination's timeout and returns the
// status and at most maxReplyBytes of the reply.
func (h *HTTP) getOnce(ctx context.Context, method, target string) (int, []byte, error) {
	ctx, cancel := context.WithTimeout(ctx, h.d.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, target, nil)
	if err != nil {
		return 0, nil, fmt.Errorf("build the request: %w", err)
	}
	h.authorize(req)
	req.Header.Set("Accept", "application/json")
	resp, err := h.client.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	reply, err := io.ReadAll(io.LimitReader(resp.Body, maxReplyBytes))
	if err != nil {
		return 0, nil, fmt.Errorf("read the reply: %w", err)
	}
	return resp.StatusCode, reply, nil
}

func (h *HTTP) authorize(req *http.Request) {
	if tok := accessFrom(req.Context()); tok != "" {
		req.Header.Set("Authorization", "Bearer "+tok)
	} else if h.d.Auth.Token != "" {
		req.Header.Set("Authorization", "Bearer "+h.d.Auth.Token)
	}
}

// statusDetail is "HTTP 422: <the reply's first words>", never a header value.
func (h *HTTP) statusDetail(status int, reply []byte) string {
	if e := replyExcerpt(reply); e != "" {
		return h.scrub(fmt.Sprintf("HTTP %d: %s", status, e))
	}
	return fmt.Sprintf("HTTP %d", status)
}

// scrub removes the token from text a person or a log will read: a destination
// may echo the request, and transport errors may quote it.
func (h *HTTP) scrub(s string) string {
	s = h.oauth.scrub(s)
	if h.d.Auth.Token == "" {
		return s
	}
	return strings.ReplaceAll(s, h.d.Auth.Token, oncehook.Redacted)
}

// decodeReply decodes one JSON document, keeping numbers exact.
func decodeReply(b []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, fmt.Errorf("decode reply: %w", err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, fmt.Errorf("decode reply: data after the document")
	}
	return v, nil
}

// parseRetryAfter reads a Retry-After value: delta-seconds or an HTTP date. Anything
// else, or a date already past, is 0: the worker's own backoff applies.
func parseRetryAfter(v string, now time.Time) time.Duration {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0
	}
	if n, err := strconv.ParseUint(v, 10, 32); err == nil {
		return time.Duration(n) * time.Second
	}
	if t, err := http.ParseTime(v); err == nil && t.After(now) {
		return t.Sub(now)
	}
	return 0
}

// replyExcerpt is the start of a reply as one line of valid UTF-8, at most
// maxExcerptBytes long (plus an ellipsis when cut), for people to read as the reason.
func replyExcerpt(b []byte) string {
	b = b[:min(len(b), 4*maxExcerptBytes)]
	s := strings.Map(func(r rune) rune {
		if unicode.IsControl(r) {
			return ' '
		}
		return r
	}, strings.ToValidUTF8(string(b), ""))
	s = strings.Join(strings.Fields(s), " ")
	if len(s) <= maxExcerptBytes {
		return s
	}
	cut := maxExcerptBytes
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}
