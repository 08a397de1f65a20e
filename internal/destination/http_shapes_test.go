package destination

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/oncehook/oncehook/internal/ledger"
	"github.com/oncehook/oncehook/internal/settings"
)

// echoServer answers every request with status, headers and body, and keeps the
// last request it saw.
type echoServer struct {
	mu      sync.Mutex
	last    *http.Request
	lastRaw string
	srv     *httptest.Server
}

func newEcho(t *testing.T, status int, hdr map[string]string, body string) *echoServer {
	e := &echoServer{}
	e.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		e.mu.Lock()
		e.last, e.lastRaw = r, string(b)
		e.mu.Unlock()
		for k, v := range hdr {
			w.Header().Set(k, v)
		}
		w.WriteHeader(status)
		io.WriteString(w, body)
	}))
	t.Cleanup(e.srv.Close)
	return e
}

func shapeDest(url string) settings.Destination {
	return settings.Destination{Name: "api", Type: settings.DestinationHTTP, Create: endpoint(url), Timeout: 5 * time.Second}
}

// Bodies, URLs and credentials as the APIs want them.
func TestHTTPDestinationRequestShapes(t *testing.T) {
	t.Parallel()
	call := ledger.Call{OperationKey: "oh_abc", Params: json.RawMessage(`{"properties":{"dealname":"Ada"},"to":["a@x","b@x"],"n":12345678901234567890}`)}
	t.Run("NestedReferenceAndBearer", func(t *testing.T) {
		e := newEcho(t, 201, nil, `{"id":"1"}`)
		d := shapeDest(e.srv.URL + "/deals")
		d.ReferenceField, d.Auth = "/properties/oncehook_ref", settings.Auth{Token: "tok-1"}
		if out := NewHTTP(d, nil).Perform(context.Background(), call); out.Observed != ledger.ObsSuccess {
			t.Fatalf("Perform() = %+v", out)
		}
		want := `{"n":12345678901234567890,"properties":{"dealname":"Ada","oncehook_ref":"oh_abc"},"to":["a@x","b@x"]}`
		if diff := cmp.Diff(want, e.lastRaw); diff != "" {
			t.Errorf("body (-want +got):\n%s", diff)
		}
		if got := e.last.Header.Get("Authorization"); got != "Bearer tok-1" {
			t.Errorf("Authorization = %q", got)
		}
		if got := e.last.Header.Get("Idempotency-Key"); got != "" {
			t.Errorf("an idempotency header %q was sent without a declared key memory", got)
		}
	})
	t.Run("FormRefInURLHeaderAuthAndBasic", func(t *testing.T) {
		e := newEcho(t, 200, nil, `{"id":"<1@mg>"}`)
		d := shapeDest(e.srv.URL + "/v3/{ref}/messages")
		d.Create.Encoding, d.ReferenceField = settings.EncodingForm, "/v:oncehook_ref"
		d.Auth = settings.Auth{Basic: settings.BasicAuth{Username: "api", PasswordEnv: "K", Password: "key-2"}}
		flat := ledger.Call{OperationKey: "oh_abc", Params: json.RawMessage(`{"to":["a@x","b@x"],"subject":"Hi & bye"}`)}
		if out := NewHTTP(d, nil).Perform(context.Background(), flat); out.ExternalRef != "<1@mg>" {
			t.Fatalf("Perform() = %+v", out)
		}
		if want := "subject=Hi+%26+bye&to=a%40x&to=b%40x&v%3Aoncehook_ref=oh_abc"; e.lastRaw != want {
			t.Errorf("form = %q, want %q", e.lastRaw, want)
		}
		if e.last.URL.Path != "/v3/oh_abc/messages" {
			t.Errorf("path = %q", e.last.URL.Path)
		}
		if u, p, _ := e.last.BasicAuth(); u != "api" || p != "key-2" {
			t.Errorf("basic auth = %q %q", u, p)
		}
		d.Auth = settings.Auth{Header: settings.HeaderAuth{Name: "X-Postmark-Server-Token", ValueEnv: "T", Value: "tok-3"}}
		NewHTTP(d, nil).Perform(context.Background(), flat)
		if got := e.last.Header.Get("X-Postmark-Server-Token"); got != "tok-3" || e.last.Header.Get("Authorization") != "" {
			t.Errorf("header auth = %q, Authorization %q", got, e.last.Header.Get("Authorization"))
		}
	})
	t.Run("NestedParamsRefusedInAForm", func(t *testing.T) {
		d := shapeDest("http://127.0.0.1:1/x")
		d.Create.Encoding = settings.EncodingForm
		if out := NewHTTP(d, nil).Perform(context.Background(), call); out.Observed != ledger.ObsRejected {
			t.Errorf("Perform() = %+v, want rejected before sending", out)
		}
	})
	t.Run("ReferenceInAListElement", func(t *testing.T) {
		e := newEcho(t, 200, nil, `{"status":"COMPLETE","results":[{"id":"9001","new":true}]}`)
		d := shapeDest(e.srv.URL + "/crm/v3/objects/deals/batch/upsert")
		d.ReferenceField, d.Create.ResultID = "/inputs/0/id", settings.ResultID{Pointer: "/results/0/id"}
		batch := ledger.Call{OperationKey: "oh_abc", Params: json.RawMessage(`{"inputs":[{"idProperty":"oncehook_ref","properties":{"dealname":"Ada"}}]}`)}
		if out := NewHTTP(d, nil).Perform(context.Background(), batch); out.ExternalRef != "9001" {
			t.Fatalf("Perform() = %+v", out)
		}
		want := `{"inputs":[{"id":"oh_abc","idProperty":"oncehook_ref","properties":{"dealname":"Ada"}}]}`
		if diff := cmp.Diff(want, e.lastRaw); diff != "" {
			t.Errorf("body (-want +got):\n%s", diff)
		}
	})
	t.Run("IDFromHeader", func(t *testing.T) {
		e := newEcho(t, 202, map[string]string{"X-Message-Id": "msg-9"}, "")
		d := shapeDest(e.srv.URL)
		d.Create.ResultID = settings.ResultID{Header: "X-Message-Id"}
		want := ledger.Outcome{Observed: ledger.ObsSuccess, HTTPStatus: 202, ExternalRef: "msg-9"}
		if diff := cmp.Diff(want, NewHTTP(d, nil).Perform(context.Background(), call)); diff != "" {
			t.Errorf("Perform() (-want +got):\n%s", diff)
		}
	})
}

// Every credential stays out of reasons, whatever echoes it.
func TestHTTPDestinationScrubsEveryCredential(t *testing.T) {
	t.Parallel()
	basic := base64.StdEncoding.EncodeToString([]byte("api:key-2"))
	e := newEcho(t, 400, nil, "you sent key-2, tok-3 and Basic "+basic)
	for _, a := range []settings.Auth{
		{Basic: settings.BasicAuth{Username: "api", PasswordEnv: "K", Password: "key-2"}},
		{Header: settings.HeaderAuth{Name: "X-Token", ValueEnv: "T", Value: "tok-3"}},
	} {
		d := shapeDest(e.srv.URL)
		d.Auth = a
		out := NewHTTP(d, nil).Perform(context.Background(), opCall)
		own := a.Secrets()
		if a.Basic.Password != "" {
			own = append(own, basic)
		}
		for _, secret := range own {
			if strings.Contains(out.Detail, secret) {
				t.Errorf("Detail %q holds the credential %q", out.Detail, secret)
			}
		}
		for _, v := range []string{a.Header.Value, a.Basic.Password} {
			if v != "" && strings.Contains(fmtDest(d), v) {
				t.Errorf("%%+v of the destination shows %q", v)
			}
		}
	}
}

func fmtDest(d settings.Destination) string { return d.String() + " " + d.Auth.String() }

// The destination's own words come before the status.
func TestHTTPDestinationErrorRules(t *testing.T) {
	t.Parallel()
	rules := []settings.ErrorRule{
		{Status: 403, Pointer: "/0/errorCode", Equals: "REQUEST_LIMIT_EXCEEDED", HasEquals: true, Means: settings.MeansRateLimited},
		{Status: 422, Pointer: "/ErrorCode", Equals: "406", HasEquals: true, Means: settings.MeansRejected},
		{Status: 409, Pointer: "/category", Equals: "CONFLICT", HasEquals: true, Means: settings.MeansExists},
		{Status: 400, Pointer: "/message", Contains: "already has that value", Means: settings.MeansExists},
		{Status: 300, Means: settings.MeansRejected},
		{Status: 401, Pointer: "/name", Means: settings.MeansUncertain},
		{Pointer: "/busy", Means: settings.MeansRateLimited}, // no status
	}
	tests := []struct {
		name      string
		status    int
		hdr       map[string]string
		body      string
		lookup    bool
		want      ledger.Observation
		wantAfter time.Duration
	}{
		{"SalesforceLimitIsRateLimited", 403, map[string]string{"X-Reset": "4"}, `[{"errorCode":"REQUEST_LIMIT_EXCEEDED"}]`, false, ledger.ObsThrottled, 4 * time.Second},
		{"OtherForbiddenIsUnauthorized", 403, nil, `[{"errorCode":"INSUFFICIENT_ACCESS"}]`, false, ledger.ObsUnauthorized, 0},
		{"NumberEqualsItsText", 422, nil, `{"ErrorCode":406}`, false, ledger.ObsRejected, 0},
		{"ExistsWithLookupIsReconciled", 409, nil, `{"category":"CONFLICT"}`, true, ledger.ObsExists, 0},
		{"ExistsWithoutLookupGoesToAPerson", 409, nil, `{"category":"CONFLICT"}`, false, ledger.ObsExistsNoLookup, 0},
		{"HubSpotDuplicateValueIsExists", 400, nil, `{"category":"VALIDATION_ERROR","message":"Property values were not valid: [{\"message\":\"oncehook_ref already has that value\"}]"}`, true, ledger.ObsExists, 0},
		{"OtherValidationErrorIsRejected", 400, nil, `{"category":"VALIDATION_ERROR","message":"dealstage is required"}`, true, ledger.ObsRejected, 0},
		{"StatusOnlyRule", 300, nil, `["/a","/b"]`, false, ledger.ObsRejected, 0},
		{"PlainTextBodyMatchesNoPointer", 401, nil, `Forbidden`, false, ledger.ObsUnauthorized, 0},
		{"StatuslessRuleNeverHidesASuccess", 201, nil, `{"busy":true,"id":"rec_1"}`, false, ledger.ObsSuccess, 0},
		{"StatuslessRuleNeverRepeatsAfterA500", 500, nil, `{"busy":true}`, false, ledger.ObsUnsure, 0},
		{"StatuslessRuleAppliesTo4xx", 400, nil, `{"busy":true}`, false, ledger.ObsThrottled, 0},
		{"EpochResetHeader", 429, map[string]string{"X-Reset": "1700000100"}, ``, false, ledger.ObsThrottled, 100 * time.Second},
	}
	now := time.Unix(1700000000, 0)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			e := newEcho(t, tt.status, tt.hdr, tt.body)
			d := shapeDest(e.srv.URL)
			d.Errors = rules
			d.RateLimitReset = settings.ResetHeader{Header: "X-Reset", Unit: settings.ResetSeconds}
			if tt.name == "EpochResetHeader" {
				d.RateLimitReset.Unit = settings.ResetEpoch
			}
			if tt.lookup {
				d.Lookup = settings.Lookup{Method: "GET", URL: e.srv.URL + "?r={ref}", ResultID: "/id"}
			}
			h := NewHTTP(d, nil)
			h.now = func() time.Time { return now }
			out := h.Perform(context.Background(), opCall)
			if out.Observed != tt.want || out.RetryAfter != tt.wantAfter {
				t.Errorf("Perform() = %s after %s, want %s after %s", out.Observed, out.RetryAfter, tt.want, tt.wantAfter)
			}
		})
	}
}

// A POST lookup sends its body template with the key, reads the records' list, and
// counts only a record whose reference is ours.
func TestHTTPDestinationSearchLookup(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		body string
		want ledger.LookupResult
	}{
		{"OursIsFound", `{"results":[{"id":"7","properties":{"ref":"oh_abc"}}]}`,
			ledger.LookupResult{Found: true, ExternalRef: "7", HTTPStatus: 200, Result: json.RawMessage(`{"id":"7","properties":{"ref":"oh_abc"}}`)}},
		{"AnotherRecordIsNotOurs", `{"results":[{"id":"8","properties":{"ref":"oh_other"}}]}`,
			ledger.LookupResult{Unsure: true, HTTPStatus: 200, Detail: "lookup listed 1 records of other operations: check that it filters by {ref}"}},
		{"RecordWithoutReferenceIsNotOurs", `{"results":[{"id":"9"}]}`,
			ledger.LookupResult{Unsure: true, HTTPStatus: 200, Detail: "lookup listed 1 records of other operations: check that it filters by {ref}"}},
		{"EmptyListIsAbsent", `{"results":[]}`, ledger.LookupResult{HTTPStatus: 200, Detail: "HTTP 200: no record with this reference"}},
		{"NoListIsUnsure", `{"total":0}`, ledger.LookupResult{Unsure: true, HTTPStatus: 200, Detail: "lookup answered HTTP 200 without a list at /results"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			e := newEcho(t, 200, nil, tt.body)
			d := shapeDest(e.srv.URL)
			d.Lookup = settings.Lookup{Method: "POST", URL: e.srv.URL + "/search", Records: "/results", Reference: "/properties/ref",
				ResultID: "/id", Consistency: settings.ConsistencyEventual,
				Body: map[string]any{"filterGroups": []any{map[string]any{"filters": []any{map[string]any{"value": "{ref}"}}}}}}
			got := NewHTTP(d, nil).Lookup(context.Background(), "oh_abc")
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("Lookup() (-want +got):\n%s", diff)
			}
			if want := `{"filterGroups":[{"filters":[{"value":"oh_abc"}]}]}`; e.lastRaw != want || e.last.Method != "POST" {
				t.Errorf("lookup sent %s %s, want POST %s", e.last.Method, e.lastRaw, want)
			}
		})
	}
}

// In a list of records a record must carry our key at the reference field to be
// found: a search that ignores its filter, or answers with only some properties,
// never "finds" someone else's record. A record fetched by its reference alone is
// ours unless it names another key.
func TestHTTPDestinationListedRecordNeedsOurReference(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, reply string
		found       bool
		unsure      bool
	}{
		{"ListedWithoutReferenceIsNotOurs", `[{"id":"rec_other"}]`, false, true},
		{"ListedWithOurReferenceIsFound", `[{"id":"rec_other"},{"id":"rec_1","source_ref":"oh_abc"}]`, true, false},
		{"FetchedByReferenceIsFound", `{"id":"rec_1"}`, true, false},
		{"FetchedNamingAnotherKeyIsNotOurs", `{"id":"rec_1","source_ref":"oh_zzz"}`, false, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			e := newEcho(t, 200, nil, tt.reply)
			d := shapeDest(e.srv.URL + "/deals")
			d.ReferenceField = "/source_ref"
			d.Lookup = settings.Lookup{Method: "GET", URL: e.srv.URL + "/deals?source_ref={ref}", ResultID: "/id"}
			r := NewHTTP(d, nil).Lookup(context.Background(), "oh_abc")
			if r.Found != tt.found || (tt.found && r.ExternalRef != "rec_1") || (tt.unsure && !r.Unsure) {
				t.Errorf("Lookup() = found %v ref %q unsure %v (%s), want found %v unsure %v",
					r.Found, r.ExternalRef, r.Unsure, r.Detail, tt.found, tt.unsure)
			}
		})
	}
}

// With lookup.fetch, each listed candidate is read again by its id and the
// reference is read from the record itself, by its key, never from the listing.
func TestHTTPDestinationLookupFetchesCandidates(t *testing.T) {
	t.Parallel()
	const field = "0123456789abcdef0123456789abcdef01234567"
	deal := func(id, ref string) string {
		return `{"success":true,"data":{"id":` + id + `,"custom_fields":{"` + field + `":"` + ref + `","other":"Inbound"}}}`
	}
	tests := []struct {
		name   string
		deals  map[string]string // GET /deals/{id}: reply, or "" for 404, "500" for a failure
		listed string
		want   ledger.LookupResult
	}{
		{"OursIsFoundWhereverTheListingPutsIt", map[string]string{"4": deal("4", "oh_other"), "5": deal("5", "oh_abc")},
			`[{"item":{"id":4,"custom_fields":["oh_abc","Inbound"]}},{"item":{"id":5,"custom_fields":["Inbound","oh_abc"]}}]`,
			ledger.LookupResult{Found: true, ExternalRef: "5", HTTPStatus: 200,
				Result: json.RawMessage(`{"custom_fields":{"` + field + `":"oh_abc","other":"Inbound"},"id":5}`)}},
		{"ACandidateGoneSinceIsLeftOut", map[string]string{"4": ""}, `[{"item":{"id":4}}]`,
			ledger.LookupResult{HTTPStatus: 200, Detail: "HTTP 200: no record with this reference"}},
		{"AFailedReadProvesNothing", map[string]string{"4": "500"}, `[{"item":{"id":4}}]`,
			ledger.LookupResult{Unsure: true, HTTPStatus: 200, Detail: `read record 4: HTTP 500: boom`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if r.URL.Path == "/deals/search" {
					io.WriteString(w, `{"success":true,"data":{"items":`+tt.listed+`}}`)
					return
				}
				switch reply := tt.deals[strings.TrimPrefix(r.URL.Path, "/deals/")]; reply {
				case "":
					w.WriteHeader(404)
				case "500":
					w.WriteHeader(500)
					io.WriteString(w, "boom")
				default:
					io.WriteString(w, reply)
				}
			}))
			t.Cleanup(srv.Close)
			d := shapeDest(srv.URL + "/deals")
			d.Lookup = settings.Lookup{Method: "GET", URL: srv.URL + "/deals/search?term={ref}", Records: "/data/items",
				Fetch:     settings.LookupFetch{URL: srv.URL + "/deals/{id}", ID: "/item/id", Record: "/data"},
				Reference: "/custom_fields/" + field, ResultID: "/id", Consistency: settings.ConsistencyEventual}
			got := NewHTTP(d, nil).Lookup(context.Background(), "oh_abc")
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("Lookup() (-want +got):\n%s", diff)
			}
		})
	}
}
