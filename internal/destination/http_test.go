package destination

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/oncehook/oncehook/internal/ledger"
	"github.com/oncehook/oncehook/internal/sandbox"
	"github.com/oncehook/oncehook/internal/settings"
)

const crmToken = "crm-test-token-5f1c"

// crmEnv is a sandbox CRM served over real HTTP and a destination pointing at it.
type crmEnv struct {
	crm  *sandbox.CRM
	srv  *httptest.Server
	dest settings.Destination
}

func newCRMEnv(t *testing.T) *crmEnv {
	t.Helper()
	return newCRMEnvWith(t, nil)
}

// newCRMEnvWith is newCRMEnv with the server's settings changed by configure
// before it starts.
func newCRMEnvWith(t *testing.T, configure func(*http.Server)) *crmEnv {
	t.Helper()
	crm := sandbox.NewCRM(sandbox.CRMParams{Token: crmToken})
	srv := httptest.NewUnstartedServer(crm.Handler())
	if configure != nil {
		configure(srv.Config)
	}
	srv.Start()
	t.Cleanup(srv.Close)
	return &crmEnv{crm: crm, srv: srv, dest: settings.Destination{
		Name:           "crm",
		Type:           settings.DestinationHTTP,
		Create:         endpoint(srv.URL + "/opportunities"),
		Auth:           settings.Auth{Token: crmToken},
		Idempotency:    settings.Idempotency{Header: "Idempotency-Key", TTL: 24 * time.Hour},
		ReferenceField: "/source_ref",
		Lookup: settings.Lookup{Method: http.MethodGet, URL: srv.URL + "/opportunities?source_ref={ref}",
			ResultID: "/id", Consistency: settings.ConsistencyStrong},
		Timeout: 5 * time.Second,
	}}
}

// endpoint is a create request to url with the defaults the config loader applies.
func endpoint(url string) settings.Endpoint {
	return settings.Endpoint{Method: http.MethodPost, URL: url, Encoding: settings.EncodingJSON,
		ResultID: settings.ResultID{Pointer: settings.DefaultResultID}}
}

// refusedAddr is the address of a listener that has been closed: connecting is refused.
func refusedAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

var (
	opCall   = ledger.Call{OperationKey: "opk_1", Params: json.RawMessage(`{"enquiry_id":"enq_1","amount":4200}`)}
	opRecord = json.RawMessage(`{"amount":4200,"enquiry_id":"enq_1","id":"opp_1","source_ref":"opk_1"}`)
)

func TestHTTPDestinationPerform(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC)
	tests := []struct {
		name           string
		faults         []sandbox.Fault
		edit           func(t *testing.T, d *settings.Destination)
		params         string // replaces the call's params when set
		want           ledger.Outcome
		detailContains string // when set, Detail is checked by substring instead
		wantRecords    int
	}{
		{name: "CreatedRecordIsConfirmed", wantRecords: 1,
			want: ledger.Outcome{Observed: ledger.ObsSuccess, HTTPStatus: 201, ExternalRef: "opp_1", Result: opRecord}},
		{name: "WrongTokenIsUnauthorized", edit: func(t *testing.T, d *settings.Destination) { d.Auth.Token = "stale" },
			want: ledger.Outcome{Observed: ledger.ObsUnauthorized, HTTPStatus: 401, Detail: `HTTP 401: {"error":"missing or invalid bearer token"}`}},
		{name: "ForbiddenIsUnauthorized", faults: []sandbox.Fault{{Status: 403}},
			want: ledger.Outcome{Observed: ledger.ObsUnauthorized, HTTPStatus: 403, Detail: `HTTP 403: {"error":"Forbidden"}`}},
		{name: "ConflictIsInFlight", faults: []sandbox.Fault{{Status: 409}},
			want: ledger.Outcome{Observed: ledger.ObsInFlight, HTTPStatus: 409, Detail: `HTTP 409: {"error":"Conflict"}`}},
		{name: "TooManyRequestsWaitsRetryAfterSeconds", faults: []sandbox.Fault{{Status: 429, RetryAfter: "7"}},
			want: ledger.Outcome{Observed: ledger.ObsThrottled, HTTPStatus: 429, RetryAfter: 7 * time.Second, Detail: `HTTP 429: {"error":"Too Many Requests"}`}},
		{name: "TooManyRequestsWaitsRetryAfterDate",
			faults: []sandbox.Fault{{Status: 429, RetryAfter: now.Add(90 * time.Second).Format(http.TimeFormat)}},
			want:   ledger.Outcome{Observed: ledger.ObsThrottled, HTTPStatus: 429, RetryAfter: 90 * time.Second, Detail: `HTTP 429: {"error":"Too Many Requests"}`}},
		{name: "UnavailableIsThrottled", faults: []sandbox.Fault{{Status: 503}},
			want: ledger.Outcome{Observed: ledger.ObsThrottled, HTTPStatus: 503, Detail: `HTTP 503: {"error":"Service Unavailable"}`}},
		{name: "UnreadableRetryAfterIsIgnored", faults: []sandbox.Fault{{Status: 503, RetryAfter: "soon"}},
			want: ledger.Outcome{Observed: ledger.ObsThrottled, HTTPStatus: 503, Detail: `HTTP 503: {"error":"Service Unavailable"}`}},
		{name: "PastRetryAfterDateIsIgnored",
			faults: []sandbox.Fault{{Status: 503, RetryAfter: now.Add(-time.Hour).Format(http.TimeFormat)}},
			want:   ledger.Outcome{Observed: ledger.ObsThrottled, HTTPStatus: 503, Detail: `HTTP 503: {"error":"Service Unavailable"}`}},
		{name: "UnprocessableIsRejectedWithReason", faults: []sandbox.Fault{{Status: 422, Message: "amount must be positive"}},
			want: ledger.Outcome{Observed: ledger.ObsRejected, HTTPStatus: 422, Detail: `HTTP 422: {"error":"amount must be positive"}`}},
		{name: "LongReasonIsCut", faults: []sandbox.Fault{{Status: 400, Message: strings.Repeat("é", 400)}},
			want: ledger.Outcome{Observed: ledger.ObsRejected, HTTPStatus: 400,
				Detail: `HTTP 400: {"error":"` + strings.Repeat("é", (maxExcerptBytes-len(`{"error":"`))/2) + "…"}},
		{name: "UnknownPathIsRejected", edit: func(t *testing.T, d *settings.Destination) { d.Create.URL += "/nope/x" },
			want: ledger.Outcome{Observed: ledger.ObsRejected, HTTPStatus: 404, Detail: "HTTP 404: 404 page not found"}},
		{name: "ServerErrorIsUnsure", faults: []sandbox.Fault{{Status: 500}},
			want: ledger.Outcome{Observed: ledger.ObsUnsure, HTTPStatus: 500, Detail: `HTTP 500: {"error":"Internal Server Error"}`}},
		{name: "ServerErrorAfterCommitIsUnsure", faults: []sandbox.Fault{{Status: 502, AfterCommit: true}}, wantRecords: 1,
			want: ledger.Outcome{Observed: ledger.ObsUnsure, HTTPStatus: 502, Detail: `HTTP 502: {"error":"Bad Gateway"}`}},
		{name: "TimeoutAfterCommitIsUnsure", faults: []sandbox.Fault{{AfterCommit: true, Delay: time.Minute}}, wantRecords: 1,
			edit: func(t *testing.T, d *settings.Destination) { d.Timeout = 200 * time.Millisecond },
			want: ledger.Outcome{Observed: ledger.ObsUnsure}, detailContains: "no reply after the request was sent"},
		{name: "TimeoutBeforeCommitIsUnsure", faults: []sandbox.Fault{{Delay: time.Minute}},
			edit: func(t *testing.T, d *settings.Destination) { d.Timeout = 200 * time.Millisecond },
			want: ledger.Outcome{Observed: ledger.ObsUnsure}, detailContains: "it may have been performed"},
		{name: "RefusedConnectionIsThrottled",
			edit: func(t *testing.T, d *settings.Destination) {
				d.Create.URL = "http://" + refusedAddr(t) + "/opportunities"
			},
			want: ledger.Outcome{Observed: ledger.ObsThrottled}, detailContains: "not sent: "},
		{name: "ParamsThatAreNotAnObjectAreRejected", params: `[1,2]`,
			want: ledger.Outcome{Observed: ledger.ObsRejected}, detailContains: "params are not a JSON object"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			e := newCRMEnv(t)
			for _, f := range tt.faults {
				e.crm.Fail(f)
			}
			if tt.edit != nil {
				tt.edit(t, &e.dest)
			}
			h := NewHTTP(e.dest, nil)
			h.now = func() time.Time { return now }
			call := opCall
			if tt.params != "" {
				call.Params = json.RawMessage(tt.params)
			}
			got := h.Perform(context.Background(), call)
			if strings.Contains(got.Detail, crmToken) {
				t.Errorf("Detail %q contains the token", got.Detail)
			}
			if tt.detailContains != "" {
				if !strings.Contains(got.Detail, tt.detailContains) {
					t.Errorf("Detail = %q, want it to contain %q", got.Detail, tt.detailContains)
				}
				got.Detail = ""
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("Perform() mismatch (-want +got):\n%s", diff)
			}
			if n := e.crm.CountByRef("opk_1"); n != tt.wantRecords {
				t.Errorf("CRM holds %d records for the operation, want %d", n, tt.wantRecords)
			}
		})
	}
}

func TestHTTPDestinationReplayKeepsOneRecord(t *testing.T) {
	t.Parallel()
	e := newCRMEnv(t)
	h := NewHTTP(e.dest, nil)
	first := h.Perform(context.Background(), opCall)
	again := h.Perform(context.Background(), opCall)
	if diff := cmp.Diff(first, again); diff != "" {
		t.Errorf("replay differs from the first reply (-first +again):\n%s", diff)
	}
	if first.ExternalRef != "opp_1" {
		t.Errorf("ExternalRef = %q, want opp_1", first.ExternalRef)
	}
	want := []sandbox.RequestLog{
		{Method: "POST", Path: "/opportunities", IdempotencyKey: "opk_1", Status: 201},
		{Method: "POST", Path: "/opportunities", IdempotencyKey: "opk_1", Status: 201},
	}
	if diff := cmp.Diff(want, e.crm.Requests()); diff != "" {
		t.Errorf("requests mismatch (-want +got):\n%s", diff)
	}
	if n := len(e.crm.Records()); n != 1 {
		t.Errorf("CRM holds %d records, want 1", n)
	}
}

func TestHTTPDestinationSameKeyInFlight(t *testing.T) {
	t.Parallel()
	e := newCRMEnv(t)
	h := NewHTTP(e.dest, nil)
	reached, release := make(chan struct{}), make(chan struct{})
	e.crm.Fail(sandbox.Fault{Hang: release, Reached: reached})
	firstDone := make(chan ledger.Outcome, 1)
	go func() { firstDone <- h.Perform(context.Background(), opCall) }()
	<-reached // the first request holds the key

	second := h.Perform(context.Background(), opCall)
	want := ledger.Outcome{Observed: ledger.ObsInFlight, HTTPStatus: 409,
		Detail: `HTTP 409: {"error":"a request with this idempotency key is in progress"}`}
	if diff := cmp.Diff(want, second); diff != "" {
		t.Errorf("second Perform() mismatch (-want +got):\n%s", diff)
	}
	close(release)
	first := <-firstDone
	if diff := cmp.Diff(ledger.Outcome{Observed: ledger.ObsSuccess, HTTPStatus: 201, ExternalRef: "opp_1", Result: opRecord}, first); diff != "" {
		t.Errorf("first Perform() mismatch (-want +got):\n%s", diff)
	}
	if n := e.crm.CountByRef("opk_1"); n != 1 {
		t.Errorf("CRM holds %d records for the operation, want 1", n)
	}
}

// A server that reads the whole request and hangs up is the connection drop after
// sending: the destination may have acted.
func TestHTTPDestinationDropAfterSendingIsUnsure(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		conn, err := ln.Accept()
		if err != nil {
			return
		}
		defer conn.Close()
		if req, err := http.ReadRequest(bufio.NewReader(conn)); err == nil {
			_, _ = io.Copy(io.Discard, req.Body)
		}
	}()
	d := newCRMEnv(t).dest
	d.Create.URL = "http://" + ln.Addr().String() + "/opportunities"
	got := NewHTTP(d, nil).Perform(context.Background(), opCall)
	if got.Observed != ledger.ObsUnsure || !strings.Contains(got.Detail, "no reply after the request was sent") {
		t.Errorf("Perform() = %+v, want unsure after sending", got)
	}
}

// Replies the CRM does not produce: what counts as evidence of a 2xx, redirects,
// and a destination that echoes the token.
func TestHTTPDestinationReplies(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		status   int
		body     string
		resultID string
		want     ledger.Outcome
	}{
		{name: "BigNumericIDStaysExact", status: 200, body: `{"data":{"id":12345678901234567890}}`, resultID: "/data/id",
			want: ledger.Outcome{Observed: ledger.ObsSuccess, HTTPStatus: 200, ExternalRef: "12345678901234567890",
				Result: json.RawMessage(`{"data":{"id":12345678901234567890}}`)}},
		{name: "ReplyWithoutIDIsStillSuccess", status: 201, body: `{"ok": true}`,
			want: ledger.Outcome{Observed: ledger.ObsSuccess, HTTPStatus: 201, Result: json.RawMessage(`{"ok":true}`),
				Detail: "HTTP 201, but the reply has no record id at /id"}},
		{name: "NonJSONReplyIsStillSuccess", status: 200, body: "created",
			want: ledger.Outcome{Observed: ledger.ObsSuccess, HTTPStatus: 200, Detail: "HTTP 200, but the reply is not JSON, so no record id is known"}},
		{name: "RedirectIsNotFollowed", status: 302, body: "",
			want: ledger.Outcome{Observed: ledger.ObsUnsure, HTTPStatus: 302, Detail: "HTTP 302"}},
		{name: "EchoedTokenIsRedacted", status: 422, body: "bad request from Bearer " + crmToken,
			want: ledger.Outcome{Observed: ledger.ObsRejected, HTTPStatus: 422, Detail: "HTTP 422: bad request from Bearer [redacted]"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if tt.status == 302 {
					w.Header().Set("Location", "/elsewhere")
				}
				w.WriteHeader(tt.status)
				io.WriteString(w, tt.body)
			}))
			t.Cleanup(srv.Close)
			d := settings.Destination{Create: endpoint(srv.URL), Auth: settings.Auth{Token: crmToken}, Timeout: 5 * time.Second}
			if tt.resultID != "" {
				d.Create.ResultID.Pointer = tt.resultID
			}
			got := NewHTTP(d, nil).Perform(context.Background(), opCall)
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("Perform() mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestHTTPDestinationLookup(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name           string
		setup          func(t *testing.T, e *crmEnv)
		want           ledger.LookupResult
		detailContains string
	}{
		{name: "CreatedRecordIsFound",
			setup: func(t *testing.T, e *crmEnv) { NewHTTP(e.dest, nil).Perform(context.Background(), opCall) },
			want:  ledger.LookupResult{Found: true, ExternalRef: "opp_1", Result: opRecord, HTTPStatus: 200}},
		{name: "EmptyListIsAbsent",
			want: ledger.LookupResult{HTTPStatus: 200, Detail: "HTTP 200: no record with this reference"}},
		{name: "NotFoundStatusIsAbsent",
			setup: func(t *testing.T, e *crmEnv) { e.dest.Lookup.URL = e.srv.URL + "/opportunities/{ref}" },
			want:  ledger.LookupResult{HTTPStatus: 404, Detail: "HTTP 404: no record with this reference"}},
		{name: "ServerErrorIsUnsure",
			setup: func(t *testing.T, e *crmEnv) { e.crm.Fail(sandbox.Fault{Method: "GET", Status: 500}) },
			want:  ledger.LookupResult{Unsure: true, HTTPStatus: 500, Detail: `lookup answered HTTP 500: {"error":"Internal Server Error"}`}},
		{name: "RefusedTokenIsUnsure",
			setup: func(t *testing.T, e *crmEnv) { e.crm.SetToken("rotated") },
			want:  ledger.LookupResult{Unsure: true, HTTPStatus: 401, Detail: `lookup answered HTTP 401: {"error":"missing or invalid bearer token"}`}},
		{name: "TimeoutIsUnsure",
			setup: func(t *testing.T, e *crmEnv) {
				e.crm.Fail(sandbox.Fault{Method: "GET", Delay: time.Minute})
				e.dest.Timeout = 200 * time.Millisecond
			},
			want: ledger.LookupResult{Unsure: true}, detailContains: "lookup failed: "},
		{name: "UnreachableIsUnsure",
			setup: func(t *testing.T, e *crmEnv) { e.dest.Lookup.URL = "http://" + refusedAddr(t) + "/?ref={ref}" },
			want:  ledger.LookupResult{Unsure: true}, detailContains: "lookup failed: "},
		{name: "UnfilteredListIsUnsure",
			setup: func(t *testing.T, e *crmEnv) {
				other := opCall
				other.OperationKey = "opk_other"
				NewHTTP(e.dest, nil).Perform(context.Background(), other)
				e.dest.Lookup.URL = e.srv.URL + "/opportunities?ignored={ref}"
			},
			want: ledger.LookupResult{Unsure: true, HTTPStatus: 200,
				Detail: "lookup listed 1 records of other operations: check that it filters by {ref}"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			e := newCRMEnv(t)
			if tt.setup != nil {
				tt.setup(t, e)
			}
			got := NewHTTP(e.dest, nil).Lookup(context.Background(), "opk_1")
			if tt.detailContains != "" {
				if !strings.Contains(got.Detail, tt.detailContains) {
					t.Errorf("Detail = %q, want it to contain %q", got.Detail, tt.detailContains)
				}
				got.Detail = ""
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("Lookup() mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestHTTPDestinationCheck(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		setup   func(t *testing.T, e *crmEnv)
		wantErr string // "" for nil; else a prefix
	}{
		{name: "LookupAcceptsToken"},
		{name: "RotatedTokenIsRefused", setup: func(t *testing.T, e *crmEnv) { e.crm.SetToken("rotated") },
			wantErr: "the destination refused the credentials (HTTP 401)"},
		{name: "OptionsAcceptsToken", setup: func(t *testing.T, e *crmEnv) { e.dest.Lookup = settings.Lookup{} }},
		{name: "OptionsRotatedTokenIsRefused", setup: func(t *testing.T, e *crmEnv) {
			e.dest.Lookup = settings.Lookup{}
			e.crm.SetToken("rotated")
		}, wantErr: "the destination refused the credentials (HTTP 401)"},
		{name: "UnreachableIsAnError", setup: func(t *testing.T, e *crmEnv) {
			e.dest.Lookup.URL = "http://" + refusedAddr(t) + "/?ref={ref}"
		}, wantErr: "the destination could not be reached: "},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			e := newCRMEnv(t)
			if tt.setup != nil {
				tt.setup(t, e)
			}
			err := NewHTTP(e.dest, nil).Check(context.Background())
			got := ""
			if err != nil {
				got = err.Error()[:min(len(err.Error()), len(tt.wantErr))]
				if tt.wantErr == "" {
					got = err.Error()
				}
			}
			if diff := cmp.Diff(tt.wantErr, got); diff != "" {
				t.Errorf("Check() error mismatch (-want +got):\n%s", diff)
			}
			if n := len(e.crm.Records()); n != 0 {
				t.Errorf("Check created %d records", n)
			}
		})
	}
}

func TestHTTPDestinationCapabilities(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		lookup settings.Lookup
		want   ledger.Capabilities
	}{
		{name: "StrongLookup", lookup: settings.Lookup{URL: "http://crm/?r={ref}", Consistency: settings.ConsistencyStrong},
			want: ledger.Capabilities{Lookup: true, StrongLookup: true, KeyMemory: 24 * time.Hour}},
		{name: "EventualLookup", lookup: settings.Lookup{URL: "http://crm/?r={ref}", Consistency: settings.ConsistencyEventual},
			want: ledger.Capabilities{Lookup: true, KeyMemory: 24 * time.Hour}},
		{name: "KeyMemoryOnly", want: ledger.Capabilities{KeyMemory: 24 * time.Hour}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := settings.Destination{Lookup: tt.lookup, Idempotency: settings.Idempotency{TTL: 24 * time.Hour}}
			if diff := cmp.Diff(tt.want, NewHTTP(d, nil).Capabilities()); diff != "" {
				t.Errorf("Capabilities() mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

// Calls to a destination reuse their connections: with many calls in flight to one
// host, net/http's default of 2 idle connections per host would close most
// connections after one call and dial again for the next.
func TestDestinationClientsKeepConnectionsOpen(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	dialled := 0
	e := newCRMEnvWith(t, func(s *http.Server) {
		s.ConnState = func(_ net.Conn, s http.ConnState) {
			if s == http.StateNew {
				mu.Lock()
				dialled++
				mu.Unlock()
			}
		}
	})
	h := NewClients(&settings.Config{Destinations: []settings.Destination{e.dest}})["crm"]
	const inFlight, rounds = 16, 5
	for round := range rounds {
		var wg sync.WaitGroup
		for i := range inFlight {
			wg.Go(func() {
				call := ledger.Call{OperationKey: fmt.Sprintf("opk_%d_%d", round, i), Params: opCall.Params}
				if out := h.Perform(context.Background(), call); out.Observed != ledger.ObsSuccess {
					t.Errorf("Perform(%s) = %+v, want success", call.OperationKey, out)
				}
			})
		}
		wg.Wait()
	}
	if n := e.crm.Len(); n != inFlight*rounds {
		t.Errorf("CRM holds %d records, want %d", n, inFlight*rounds)
	}
	mu.Lock()
	defer mu.Unlock()
	// The first round opens up to one connection per call; later rounds find them
	// idle. Without keeping them, each later round dials about 14 more (over 60).
	if dialled > 2*inFlight {
		t.Errorf("%d connections dialled for %d rounds of %d calls, want at most %d", dialled, rounds, inFlight, 2*inFlight)
	}
	t.Logf("%d connections for %d calls", dialled, inFlight*rounds)
}

// net/http resends a request with an Idempotency-Key header and a replayable body
// when a kept-alive connection closes before the answer. A CRM that ignores keys
// then stores the record twice, and the ledger knows of one attempt. Perform makes
// the create non-replayable: the drop is an unsure outcome, one request, one record.
func TestHTTPDestinationTransportNeverRepeatsTheCreate(t *testing.T) {
	t.Parallel()
	crm := sandbox.NewCRM(sandbox.CRMParams{Token: crmToken, IgnoreKeys: true})
	srv := httptest.NewServer(crm.Handler())
	t.Cleanup(srv.Close)
	d := newCRMEnv(t).dest
	d.Create.URL, d.Lookup = srv.URL+"/opportunities", settings.Lookup{}
	h := NewHTTP(d, &http.Client{Transport: http.DefaultTransport.(*http.Transport).Clone()})
	if out := h.Perform(context.Background(), opCall); out.Observed != ledger.ObsSuccess {
		t.Fatalf("first Perform() = %+v, want success (it opens the kept-alive connection)", out)
	}
	crm.Fail(sandbox.Fault{AfterCommit: true, Drop: true})
	second := ledger.Call{OperationKey: "opk_2", Params: opCall.Params}
	got := h.Perform(context.Background(), second)
	if got.Observed != ledger.ObsUnsure {
		t.Errorf("Perform() after the drop = %+v, want unsure", got)
	}
	if n := crm.CountByRef("opk_2"); n != 1 {
		t.Errorf("CRM holds %d records for opk_2, want 1: the transport repeated the create", n)
	}
	posts := 0
	for _, r := range crm.Requests() {
		if r.Method == http.MethodPost && r.IdempotencyKey == "opk_2" {
			posts++
		}
	}
	if posts != 1 {
		t.Errorf("CRM received %d creates for opk_2, want 1", posts)
	}
}

// TestHTTPDestinationCheckHealth: a breaker's check probe finds the destination
// well only when it answered as one that is up: a 503 or a 429 passes Check (the
// credentials are not refused) but is unwell, and so is no answer; a refusal of
// the credentials is an answer of a destination that is up.
func TestHTTPDestinationCheckHealth(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		setup func(t *testing.T, e *crmEnv)
		want  ledger.Health
		words string
	}{
		{name: "Up", want: ledger.Well, words: "answered HTTP 200"},
		{name: "ServiceUnavailable", setup: func(t *testing.T, e *crmEnv) {
			e.crm.Fail(sandbox.Fault{Method: http.MethodGet, Status: http.StatusServiceUnavailable})
		}, want: ledger.Unwell, words: "answered HTTP 503"},
		{name: "TooManyRequests", setup: func(t *testing.T, e *crmEnv) {
			e.crm.Fail(sandbox.Fault{Method: http.MethodGet, Status: http.StatusTooManyRequests})
		}, want: ledger.Unwell, words: "answered HTTP 429"},
		{name: "CredentialsRefused", setup: func(t *testing.T, e *crmEnv) { e.crm.SetToken("rotated") },
			want: ledger.Well, words: "answered HTTP 401"},
		{name: "Unreachable", setup: func(t *testing.T, e *crmEnv) {
			e.dest.Lookup.URL = "http://" + refusedAddr(t) + "/?ref={ref}"
		}, want: ledger.Unwell, words: "no answer: "},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			e := newCRMEnv(t)
			if tt.setup != nil {
				tt.setup(t, e)
			}
			h, words := NewHTTP(e.dest, nil).CheckHealth(context.Background())
			if h != tt.want || !strings.HasPrefix(words, tt.words) {
				t.Errorf("CheckHealth() = %v %q, want %v %q", h, words, tt.want, tt.words)
			}
		})
	}
}
