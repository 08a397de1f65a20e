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
	"strings"
	"sync/atomic"
	"time"
	"unicode"
	"unicode/utf8"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/propagation"

	"github.com/oncehook/oncehook/internal/jsonpointer"
	"github.com/oncehook/oncehook/internal/ledger"
	"github.com/oncehook/oncehook/internal/settings"
	"github.com/oncehook/oncehook/internal/telemetry"
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

// HTTP performs actions as JSON requests to an HTTP API (docs/configuration.md
// and docs/destinations.md).
type HTTP struct {
	d       settings.Destination
	client  *http.Client // for lookups and checks
	perform *http.Client // the same transport, following no redirects
	now     func() time.Time
	secrets *settings.Secrets // every secret the process holds, for scrub
	oauth   *OAuth            // nil unless auth.oauth2 (see oauth.go)
}

// NewHTTP returns the client for the http destination d, sending through
// client (http.DefaultClient when nil). d is used as the config loader made it,
// defaults applied. Perform never follows a redirect: the client would repeat a
// POST as a GET and could read a listing as a confirmation.
func NewHTTP(d settings.Destination, client *http.Client) *HTTP {
	if client == nil {
		client = http.DefaultClient
	}
	perform := *client
	perform.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	secrets := &settings.Secrets{}
	secrets.AddAuth(d.Auth)
	return &HTTP{d: d, client: client, perform: &perform, now: time.Now, secrets: secrets}
}

// Capabilities reports a lookup when one is configured, and the key memory the
// destination declares (none by default).
func (h *HTTP) Capabilities() ledger.Capabilities {
	lk := h.d.Lookup
	return ledger.Capabilities{
		Lookup:       lk.URL != "",
		StrongLookup: lk.URL != "" && lk.Consistency == settings.ConsistencyStrong,
		KeyMemory:    h.d.Idempotency.TTL,
		Settle:       lk.Settle,
		SettleRetry:  lk.SettleRetry,
	}
}

// Perform sends the create request once (see performOnce). With OAuth2 it first
// gets a live access token; a refusal (401, 403, or an errors rule meaning
// unauthorized) then means the token ended early (a provider such as Salesforce
// gives no expiry), and since a refusal performed nothing the token
// is refreshed once and the same call, with the same key, is sent once more, all
// within this one attempt. Only a refresh the token endpoint refuses, or a fresh
// token refused again, is "credentials refused" (held); a token endpoint that is
// down is a temporary failure before anything was sent.
func (h *HTTP) Perform(ctx context.Context, c ledger.Call) ledger.Outcome {
	if h.oauth == nil {
		return h.performOnce(ctx, c)
	}
	tok, err := h.oauth.Access(ctx)
	if err != nil {
		return refreshOutcome(err)
	}
	out := h.performOnce(withAccess(ctx, tok), c)
	if out.Observed != ledger.ObsUnauthorized { // 401, 403, or an errors rule meaning unauthorized
		return out
	}
	if tok, err = h.oauth.RefreshAfter(ctx, tok); err != nil {
		return refreshOutcome(err)
	}
	return h.performOnce(withAccess(ctx, tok), c)
}

// performOnce sends the create request once and classifies the reply through the
// decision table. Whether the request bytes went out decides what a failure means:
// before, nothing can have happened (throttled); after, anything may have (unsure).
// Perform adds the OAuth2 access token and its refresh.
func (h *HTTP) performOnce(ctx context.Context, c ledger.Call) ledger.Outcome {
	body, contentType, err := h.createRequest(c)
	if err != nil {
		return ledger.Outcome{Observed: ledger.ObsRejected, Detail: h.scrub(err.Error())}
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
	target := strings.ReplaceAll(h.d.Create.URL, "{ref}", url.PathEscape(c.OperationKey))
	req, err := http.NewRequestWithContext(ctx, h.d.Create.Method, target, bytes.NewReader(body))
	if err != nil {
		return ledger.Outcome{Observed: ledger.ObsRejected, Detail: h.scrub(fmt.Sprintf("build the request: %v", err))}
	}
	// Without GetBody the transport cannot resend the create by itself when a
	// kept-alive connection closes before the answer (it would, for a request with
	// an Idempotency-Key header): every repeat is an attempt the ledger decided.
	req.GetBody = nil
	h.authorize(req)
	propagate(req)
	req.Header.Set("Content-Type", contentType)
	req.Header.Set("Accept", "application/json")
	if h.d.Idempotency.Header != "" {
		req.Header.Set(h.d.Idempotency.Header, c.OperationKey)
	}
	resp, err := h.perform.Do(req)
	if err != nil {
		if wrote.Load() {
			return ledger.Outcome{Observed: ledger.ObsUnsure, Detail: h.scrub(fmt.Sprintf(
				"no reply after the request was sent (%v): it may have been performed", err))}
		}
		return ledger.Outcome{Observed: ledger.ObsThrottled, Detail: h.scrub(fmt.Sprintf("not sent: %v", err))}
	}
	defer resp.Body.Close()
	reply, readErr := io.ReadAll(io.LimitReader(resp.Body, maxReplyBytes))
	return h.classify(resp, reply, readErr)
}

// evidence reads the record id out of a 2xx reply: at the create's result_id
// pointer, or in its header. A reply without one is still a success, since the
// destination said so; the detail says what is missing.
func (h *HTTP) evidence(resp *http.Response, reply []byte, readErr error) (string, json.RawMessage, string) {
	status, rid := resp.StatusCode, h.d.Create.ResultID
	var result json.RawMessage
	doc, jsonErr := decodeReply(reply)
	if readErr == nil && jsonErr == nil {
		var buf bytes.Buffer
		if json.Compact(&buf, reply) == nil {
			result = buf.Bytes()
		}
	}
	if rid.Header != "" {
		if ref := strings.TrimSpace(resp.Header.Get(rid.Header)); ref != "" {
			return ref, result, ""
		}
		return "", result, fmt.Sprintf("HTTP %d, but the reply has no record id in its %s header", status, rid.Header)
	}
	switch {
	case readErr != nil:
		return "", nil, h.scrub(fmt.Sprintf("HTTP %d, but the reply could not be read (%v), so no record id is known", status, readErr))
	case result == nil:
		return "", nil, fmt.Sprintf("HTTP %d, but the reply is not JSON, so no record id is known", status)
	}
	ref, ok := jsonpointer.String(doc, rid.Pointer)
	if !ok {
		return "", result, fmt.Sprintf("HTTP %d, but the reply has no record id at %s", status, rid.Pointer)
	}
	return ref, result, ""
}

// Lookup asks the lookup for the record carrying operationKey. A 404 or a reply
// without our record means absent; any other answer proves nothing and is Unsure.
// A record counts only when its id resolves and, where the lookup names the
// record's reference, that reference is our key: a lookup that ignores its filter
// must not find someone else's record.
func (h *HTTP) Lookup(ctx context.Context, operationKey string) ledger.LookupResult {
	lk := h.d.Lookup
	if lk.URL == "" {
		return ledger.LookupResult{Unsure: true, Detail: "this destination has no lookup"}
	}
	status, reply, err := h.send(ctx, lk.Method, h.lookupURL(operationKey), h.lookupBody(operationKey))
	if err != nil {
		return ledger.LookupResult{Unsure: true, Detail: h.scrub(fmt.Sprintf("lookup failed: %v", err))}
	}
	r := ledger.LookupResult{HTTPStatus: status}
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
	records, listed, ok := h.lookupRecords(doc)
	if !ok {
		r.Unsure, r.Detail = true, fmt.Sprintf("lookup answered HTTP 200 without a list at %s", lk.Records)
		return r
	}
	if lk.Fetch.URL != "" {
		if records, err = h.fetchRecords(ctx, records); err != nil {
			r.Unsure, r.Detail = true, h.scrub(err.Error())
			return r
		}
	}
	return h.findRecord(r, records, operationKey, listed)
}

// maxFetched bounds the records a lookup reads again one by one.
const maxFetched = 10

// fetchRecords reads each listed candidate again by its id (lookup.fetch), so that
// its reference is read from the record itself. A candidate gone since (404) is
// left out; any other failure proves nothing.
func (h *HTTP) fetchRecords(ctx context.Context, listed []any) ([]any, error) {
	f := h.d.Lookup.Fetch
	if len(listed) > maxFetched {
		return nil, fmt.Errorf("lookup listed %d candidates, more than the %d it reads one by one: narrow its search", len(listed), maxFetched)
	}
	var out []any
	for _, cand := range listed {
		id, ok := jsonpointer.String(cand, f.ID)
		if !ok {
			return nil, fmt.Errorf("lookup listed a record without an id at %s", f.ID)
		}
		status, reply, err := h.send(ctx, http.MethodGet, strings.ReplaceAll(f.URL, "{id}", url.PathEscape(id)), nil)
		switch {
		case err != nil:
			return nil, fmt.Errorf("read record %s: %w", id, err)
		case status == http.StatusNotFound:
			continue
		case status != http.StatusOK:
			return nil, fmt.Errorf("read record %s: %s", id, h.statusDetail(status, reply))
		}
		doc, err := decodeReply(reply)
		if err != nil {
			return nil, fmt.Errorf("read record %s: HTTP 200 with a reply that is not JSON", id)
		}
		rec := doc
		if f.Record != "" {
			rec, _ = jsonpointer.Get(doc, f.Record)
		}
		out = append(out, rec)
	}
	return out, nil
}

// lookupRecords are the records in a lookup's reply: the list at the lookup's
// records pointer (ok is false when there is none), else the reply when it is a
// list, else the reply as the one record. listed says they came as a list.
func (h *HTTP) lookupRecords(doc any) (records []any, listed, ok bool) {
	if ptr := h.d.Lookup.Records; ptr != "" {
		v, _ := jsonpointer.Get(doc, ptr)
		records, ok = v.([]any)
		return records, true, ok
	}
	if records, listed = doc.([]any); listed {
		return records, true, true
	}
	return []any{doc}, false, true
}

// findRecord completes r, a lookup's HTTP 200, with the first of records that is
// ours and has an id at the lookup's result pointer, else with why none counts.
func (h *HTTP) findRecord(r ledger.LookupResult, records []any, operationKey string, listed bool) ledger.LookupResult {
	others := 0
	for _, rec := range records {
		if h.otherOperation(rec, operationKey, listed) {
			others++
			continue
		}
		if ref, ok := jsonpointer.String(rec, h.d.Lookup.ResultID); ok {
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
		r.Unsure, r.Detail = true, fmt.Sprintf("lookup listed %d records of other operations: check that it filters by {ref}", others)
		return r
	}
	r.Detail = "HTTP 200: no record with this reference"
	return r
}

// lookupBody is the POST lookup's body template with the key in it; nil for GET.
func (h *HTTP) lookupBody(key string) []byte {
	if h.d.Lookup.Body == nil {
		return nil
	}
	b, _ := json.Marshal(withRef(h.d.Lookup.Body, key)) // decoded YAML values always encode
	return b
}

// otherOperation reports whether rec is not ours: its reference, at the lookup's
// reference pointer (where it must be our key), else at the reference field, names
// another key. In a list of records (a search), a record without the reference
// field is not ours either: a search that ignores its filter, or answers with only
// some properties, must not "find" the first record it lists. A record fetched by
// its reference alone (no list) is ours unless it names another key.
func (h *HTTP) otherOperation(rec any, key string, listed bool) bool {
	if ptr := h.d.Lookup.Reference; ptr != "" {
		ref, ok := jsonpointer.String(rec, ptr)
		return !ok || ref != key
	}
	if h.d.ReferenceField == "" {
		return false
	}
	ref, ok := jsonpointer.String(rec, h.d.ReferenceField)
	if listed {
		return !ok || ref != key
	}
	return ok && ref != key
}

// Check re-checks the credentials with a harmless request: the configured check,
// else the lookup of a reference that exists nowhere, else OPTIONS on the create
// URL. Only 401 and 403 count as a refusal; the error of any other failure says what
// went wrong.
func (h *HTTP) Check(ctx context.Context) error {
	method, target, body := h.checkRequest()
	status, _, err := h.send(ctx, method, target, body)
	if err != nil {
		return fmt.Errorf("the destination could not be reached: %s", h.scrub(err.Error()))
	}
	if status == http.StatusUnauthorized || status == http.StatusForbidden {
		return fmt.Errorf("the destination refused the credentials (HTTP %d)", status)
	}
	return nil
}

// checkRequest is the request Check and CheckHealth send: the check's, else the
// lookup of a key that exists nowhere, else OPTIONS on the create URL.
func (h *HTTP) checkRequest() (method, target string, body []byte) {
	method, target = http.MethodOptions, strings.ReplaceAll(h.d.Create.URL, "{ref}", connectionCheckRef)
	switch {
	case h.d.Check.URL != "":
		method, target = h.d.Check.Method, h.d.Check.URL
	case h.d.Lookup.URL != "":
		method, target, body = h.d.Lookup.Method, h.lookupURL(connectionCheckRef), h.lookupBody(connectionCheckRef)
	}
	return method, target, body
}

// CheckHealth sends Check's request and says whether the destination is up:
// no answer, a 5xx or a 429 is unwell; any other answer (a refusal of the
// credentials too: the destination answered) is well.
func (h *HTTP) CheckHealth(ctx context.Context) (ledger.Health, string) {
	method, target, body := h.checkRequest()
	status, _, err := h.send(ctx, method, target, body)
	switch {
	case err != nil:
		return ledger.Unwell, "no answer: " + h.scrub(err.Error())
	case status >= 500 || status == http.StatusTooManyRequests:
		return ledger.Unwell, fmt.Sprintf("answered HTTP %d", status)
	}
	return ledger.Well, fmt.Sprintf("answered HTTP %d", status)
}

func (h *HTTP) lookupURL(key string) string {
	return strings.ReplaceAll(h.d.Lookup.URL, "{ref}", url.QueryEscape(key))
}

// send is sendOnce with the OAuth2 access token, refreshed once after a 401.
func (h *HTTP) send(ctx context.Context, method, target string, body []byte) (int, []byte, error) {
	if h.oauth == nil {
		return h.sendOnce(ctx, method, target, body)
	}
	tok, err := h.oauth.Access(ctx)
	if err != nil {
		return 0, nil, err
	}
	status, reply, err := h.sendOnce(withAccess(ctx, tok), method, target, body)
	if err != nil || status != http.StatusUnauthorized {
		return status, reply, err
	}
	if tok, err = h.oauth.RefreshAfter(ctx, tok); err != nil {
		return 0, nil, err
	}
	return h.sendOnce(withAccess(ctx, tok), method, target, body)
}

// sendOnce makes a lookup or check request (with a JSON body when one is given) within
// the destination's timeout and returns the status and at most maxReplyBytes of the
// reply. These requests change nothing, so the transport may resend them.
func (h *HTTP) sendOnce(ctx context.Context, method, target string, body []byte) (int, []byte, error) {
	ctx, cancel := context.WithTimeout(ctx, h.d.Timeout)
	defer cancel()
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, target, rd)
	if err != nil {
		return 0, nil, fmt.Errorf("build the request: %w", err)
	}
	h.authorize(req)
	propagate(req)
	req.Header.Set("Accept", "application/json")
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
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

// propagate sends the attempt's trace context (traceparent) while traces are on, so
// that a destination that traces continues the delivery's trace.
func propagate(req *http.Request) {
	if telemetry.Enabled() {
		otel.GetTextMapPropagator().Inject(req.Context(), propagation.HeaderCarrier(req.Header))
	}
}

// authorize sets the destination's credentials: a bearer token, a header of its
// own, or basic auth.
func (h *HTTP) authorize(req *http.Request) {
	a := h.d.Auth
	switch tok := accessFrom(req.Context()); {
	case tok != "":
		req.Header.Set("Authorization", "Bearer "+tok)
	case a.Token != "":
		req.Header.Set("Authorization", "Bearer "+a.Token)
	case a.Header.Name != "":
		req.Header.Set(a.Header.Name, a.Header.Value)
	case a.Basic.PasswordEnv != "" || a.Basic.Password != "":
		req.SetBasicAuth(a.Basic.User(), a.Basic.Password)
	}
}

// scrub removes every secret the process holds from text a person or a log will
// read: a destination may echo the request, and transport errors may quote it.
// Text is scrubbed whole, before any cut.
func (h *HTTP) scrub(s string) string {
	return h.secrets.Scrub(h.oauth.scrub(s))
}

// statusDetail is "HTTP 422: <the reply's first words>", never a header value.
func (h *HTTP) statusDetail(status int, reply []byte) string {
	if e := replyExcerpt([]byte(h.scrub(string(reply)))); e != "" {
		return fmt.Sprintf("HTTP %d: %s", status, e)
	}
	return fmt.Sprintf("HTTP %d", status)
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
