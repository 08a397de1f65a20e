package sandbox

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

const token = "sandbox-token"

// clock is a settable time source for the key memory.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *clock) Add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

type reply struct {
	Status     int
	Body       string
	RetryAfter string
	Replayed   string
}

// env is a CRM served over real HTTP.
type env struct {
	crm   *CRM
	srv   *httptest.Server
	clock *clock
}

func newEnv(t *testing.T) *env {
	t.Helper()
	clk := &clock{now: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)}
	crm := NewCRM(CRMParams{Token: token, KeyTTL: time.Hour, Now: clk.Now})
	srv := httptest.NewServer(crm.Handler())
	t.Cleanup(srv.Close)
	return &env{crm: crm, srv: srv, clock: clk}
}

// do sends one request; bearer "" sends none. It is safe to call from any goroutine.
func (e *env) do(ctx context.Context, method, path, bearer, key, body string) (reply, error) {
	req, err := http.NewRequestWithContext(ctx, method, e.srv.URL+path, strings.NewReader(body))
	if err != nil {
		return reply{}, err
	}
	if bearer != "" {
		req.Header.Set("Authorization", "Bearer "+bearer)
	}
	if key != "" {
		req.Header.Set(IdempotencyHeader, key)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return reply{}, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return reply{}, err
	}
	return reply{Status: resp.StatusCode, Body: strings.TrimSpace(string(b)),
		RetryAfter: resp.Header.Get("Retry-After"), Replayed: resp.Header.Get("Idempotent-Replayed")}, nil
}

func (e *env) must(t *testing.T, method, path, bearer, key, body string) reply {
	t.Helper()
	r, err := e.do(context.Background(), method, path, bearer, key, body)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

const opp = `{"source_ref":"ref_1","amount":4200}`

func TestCRMIdempotency(t *testing.T) {
	t.Parallel()
	created := reply{Status: 201, Body: `{"amount":4200,"id":"opp_1","source_ref":"ref_1"}`}
	replayed := created
	replayed.Replayed = "true"
	tests := []struct {
		name        string
		between     func(e *env) // runs between the two identical POSTs
		secondKey   string
		want        reply
		wantRecords int
	}{
		{name: "SameKeyReplaysTheReply", secondKey: "k1", want: replayed, wantRecords: 1},
		{name: "KeyWithinTTLReplays", between: func(e *env) { e.clock.Add(59 * time.Minute) }, secondKey: "k1",
			want: replayed, wantRecords: 1},
		{name: "KeyPastTTLCreatesAgain", between: func(e *env) { e.clock.Add(time.Hour) }, secondKey: "k1",
			want: reply{Status: 201, Body: `{"amount":4200,"id":"opp_2","source_ref":"ref_1"}`}, wantRecords: 2},
		{name: "ForgottenKeyCreatesAgain", between: func(e *env) { e.crm.ForgetKeys() }, secondKey: "k1",
			want: reply{Status: 201, Body: `{"amount":4200,"id":"opp_2","source_ref":"ref_1"}`}, wantRecords: 2},
		{name: "OtherKeyCreatesAgain", secondKey: "k2",
			want: reply{Status: 201, Body: `{"amount":4200,"id":"opp_2","source_ref":"ref_1"}`}, wantRecords: 2},
		{name: "NoKeyCreatesAgain", secondKey: "",
			want: reply{Status: 201, Body: `{"amount":4200,"id":"opp_2","source_ref":"ref_1"}`}, wantRecords: 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t)
			if diff := cmp.Diff(created, e.must(t, "POST", "/opportunities", token, "k1", opp)); diff != "" {
				t.Errorf("first POST mismatch (-want +got):\n%s", diff)
			}
			if tt.between != nil {
				tt.between(e)
			}
			if diff := cmp.Diff(tt.want, e.must(t, "POST", "/opportunities", token, tt.secondKey, opp)); diff != "" {
				t.Errorf("second POST mismatch (-want +got):\n%s", diff)
			}
			if n := e.crm.CountByRef("ref_1"); n != tt.wantRecords {
				t.Errorf("CountByRef = %d, want %d", n, tt.wantRecords)
			}
		})
	}
}

func TestCRMRoutes(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.must(t, "POST", "/opportunities", token, "k1", opp)
	e.must(t, "POST", "/opportunities", token, "k2", `{"source_ref":"ref_2"}`)
	tests := []struct {
		name, method, path, bearer, body string
		want                             reply
	}{
		{name: "LookupByRefFindsOne", method: "GET", path: "/opportunities?source_ref=ref_1", bearer: token,
			want: reply{Status: 200, Body: `[{"amount":4200,"id":"opp_1","source_ref":"ref_1"}]`}},
		{name: "LookupOfUnknownRefIsEmpty", method: "GET", path: "/opportunities?source_ref=nope", bearer: token,
			want: reply{Status: 200, Body: `[]`}},
		{name: "ListWithoutRefShowsAll", method: "GET", path: "/opportunities", bearer: token,
			want: reply{Status: 200, Body: `[{"amount":4200,"id":"opp_1","source_ref":"ref_1"},{"id":"opp_2","source_ref":"ref_2"}]`}},
		{name: "GetByID", method: "GET", path: "/opportunities/opp_2", bearer: token,
			want: reply{Status: 200, Body: `{"id":"opp_2","source_ref":"ref_2"}`}},
		{name: "UnknownIDIsNotFound", method: "GET", path: "/opportunities/opp_9", bearer: token,
			want: reply{Status: 404, Body: `{"error":"no such opportunity"}`}},
		{name: "MissingTokenIsUnauthorized", method: "GET", path: "/opportunities",
			want: reply{Status: 401, Body: `{"error":"missing or invalid bearer token"}`}},
		{name: "WrongTokenIsUnauthorized", method: "POST", path: "/opportunities", bearer: "nope", body: opp,
			want: reply{Status: 401, Body: `{"error":"missing or invalid bearer token"}`}},
		{name: "OptionsWithWrongTokenIsUnauthorized", method: "OPTIONS", path: "/opportunities", bearer: "nope",
			want: reply{Status: 401, Body: `{"error":"missing or invalid bearer token"}`}},
		{name: "NonObjectBodyIsBadRequest", method: "POST", path: "/opportunities", bearer: token, body: `[1]`,
			want: reply{Status: 400, Body: `{"error":"the body must be a JSON object"}`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := e.must(t, tt.method, tt.path, tt.bearer, "", tt.body)
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("%s %s mismatch (-want +got):\n%s", tt.method, tt.path, diff)
			}
		})
	}
	if n := len(e.crm.Records()); n != 2 {
		t.Errorf("CRM holds %d records, want 2", n)
	}
}

func TestCRMSetToken(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.crm.SetToken("rotated")
	if got := e.must(t, "POST", "/opportunities", token, "k1", opp).Status; got != 401 {
		t.Errorf("old token: status %d, want 401", got)
	}
	if got := e.must(t, "POST", "/opportunities", "rotated", "k1", opp).Status; got != 201 {
		t.Errorf("new token: status %d, want 201", got)
	}
	want := []RequestLog{
		{Method: "POST", Path: "/opportunities", IdempotencyKey: "k1", Status: 401},
		{Method: "POST", Path: "/opportunities", IdempotencyKey: "k1", Status: 201},
	}
	if diff := cmp.Diff(want, e.crm.Requests()); diff != "" {
		t.Errorf("Requests() mismatch (-want +got):\n%s", diff)
	}
}

func TestCRMFaults(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name        string
		fault       Fault
		want        reply
		wantRecords int
		// retry: after the fault, the same request again
		wantRetry reply
	}{
		{name: "StatusStoresNothing", fault: Fault{Status: 503, RetryAfter: "7"},
			want:      reply{Status: 503, Body: `{"error":"Service Unavailable"}`, RetryAfter: "7"},
			wantRetry: reply{Status: 201, Body: `{"amount":4200,"id":"opp_1","source_ref":"ref_1"}`}, wantRecords: 1},
		{name: "MessageIsTheReason", fault: Fault{Status: 422, Message: "amount must be positive"},
			want:      reply{Status: 422, Body: `{"error":"amount must be positive"}`},
			wantRetry: reply{Status: 201, Body: `{"amount":4200,"id":"opp_1","source_ref":"ref_1"}`}, wantRecords: 1},
		{name: "AfterCommitStoresTheRecord", fault: Fault{Status: 500, AfterCommit: true},
			want:      reply{Status: 500, Body: `{"error":"Internal Server Error"}`},
			wantRetry: reply{Status: 201, Body: `{"amount":4200,"id":"opp_1","source_ref":"ref_1"}`, Replayed: "true"}, wantRecords: 1},
		{name: "GetFaultLeavesPostAlone", fault: Fault{Method: "GET", Status: 500},
			want:      reply{Status: 201, Body: `{"amount":4200,"id":"opp_1","source_ref":"ref_1"}`},
			wantRetry: reply{Status: 201, Body: `{"amount":4200,"id":"opp_1","source_ref":"ref_1"}`, Replayed: "true"}, wantRecords: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t)
			e.crm.Fail(tt.fault)
			if diff := cmp.Diff(tt.want, e.must(t, "POST", "/opportunities", token, "k1", opp)); diff != "" {
				t.Errorf("faulty POST mismatch (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.wantRetry, e.must(t, "POST", "/opportunities", token, "k1", opp)); diff != "" {
				t.Errorf("retried POST mismatch (-want +got):\n%s", diff)
			}
			if n := e.crm.CountByRef("ref_1"); n != tt.wantRecords {
				t.Errorf("CountByRef = %d, want %d", n, tt.wantRecords)
			}
		})
	}
}

func TestCRMHangHoldsTheKey(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	reached, release := make(chan struct{}), make(chan struct{})
	e.crm.Fail(Fault{Hang: release, Reached: reached})
	first := make(chan reply, 1)
	go func() {
		r, err := e.do(context.Background(), "POST", "/opportunities", token, "k1", opp)
		if err != nil {
			t.Error(err)
		}
		first <- r
	}()
	<-reached
	want := reply{Status: 409, Body: `{"error":"a request with this idempotency key is in progress"}`}
	if diff := cmp.Diff(want, e.must(t, "POST", "/opportunities", token, "k1", opp)); diff != "" {
		t.Errorf("concurrent POST mismatch (-want +got):\n%s", diff)
	}
	close(release)
	if diff := cmp.Diff(reply{Status: 201, Body: `{"amount":4200,"id":"opp_1","source_ref":"ref_1"}`}, <-first); diff != "" {
		t.Errorf("held POST mismatch (-want +got):\n%s", diff)
	}
}

func TestCRMDelayOutlastsTheClient(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name        string
		afterCommit bool
		wantRecords int
	}{
		{name: "BeforeCommitStoresNothing", wantRecords: 0},
		{name: "AfterCommitKeepsTheRecord", afterCommit: true, wantRecords: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t)
			e.crm.Fail(Fault{Delay: time.Minute, AfterCommit: tt.afterCommit})
			ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
			defer cancel()
			if _, err := e.do(ctx, "POST", "/opportunities", token, "k1", opp); err == nil {
				t.Fatal("the delayed POST answered before the client gave up")
			}
			if n := e.crm.CountByRef("ref_1"); n != tt.wantRecords {
				t.Errorf("CountByRef = %d, want %d", n, tt.wantRecords)
			}
			// The abandoned request releases its key (or stores its reply), so the
			// retry is answered once the server has noticed the client left.
			deadline := time.Now().Add(5 * time.Second)
			for {
				r := e.must(t, "POST", "/opportunities", token, "k1", opp)
				if r.Status == 201 {
					break
				}
				if r.Status != 409 || time.Now().After(deadline) {
					t.Fatalf("retry answered %+v, want 201", r)
				}
				time.Sleep(10 * time.Millisecond)
			}
			if n := e.crm.CountByRef("ref_1"); n != 1 {
				t.Errorf("after the retry CountByRef = %d, want 1", n)
			}
		})
	}
}

func TestCRMRecordsAreCopies(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.must(t, "POST", "/opportunities", token, "k1", opp)
	recs := e.crm.Records()
	recs[0].Fields["amount"] = json.Number("1")
	want := []Record{{ID: "opp_1", Fields: map[string]any{"amount": json.Number("4200"), "source_ref": "ref_1"},
		IdempotencyKey: "k1", CreatedAt: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)}}
	if diff := cmp.Diff(want, e.crm.Records()); diff != "" {
		t.Errorf("Records() mismatch (-want +got):\n%s", diff)
	}
}

// A dropped connection gives the client no reply at all; before storing nothing is
// kept and the key is free again, after storing the record stands and a retry with
// the key replays it. The creates log keeps each create's key, source_ref and record.
func TestCRMDropConnection(t *testing.T) {
	t.Parallel()
	for _, afterCommit := range []bool{false, true} {
		e := newEnv(t)
		e.crm.Fail(Fault{Drop: true, AfterCommit: afterCommit})
		if r, err := e.do(context.Background(), "POST", "/opportunities", token, "k1", opp); err == nil {
			t.Errorf("after commit %v: a reply came through a dropped connection: %+v", afterCommit, r)
		}
		wantRecords := map[bool]int{false: 0, true: 1}[afterCommit]
		if n := e.crm.CountByRef("ref_1"); n != wantRecords {
			t.Errorf("after commit %v: %d records after the drop, want %d", afterCommit, n, wantRecords)
		}
		want := reply{Status: 201, Body: `{"amount":4200,"id":"opp_1","source_ref":"ref_1"}`}
		if afterCommit {
			want.Replayed = "true"
		}
		if diff := cmp.Diff(want, e.must(t, "POST", "/opportunities", token, "k1", opp)); diff != "" {
			t.Errorf("after commit %v: retried POST mismatch (-want +got):\n%s", afterCommit, diff)
		}
		wantLog := []RequestLog{
			{Method: "POST", Path: "/opportunities", IdempotencyKey: "k1", Status: 0},
			{Method: "POST", Path: "/opportunities", IdempotencyKey: "k1", Status: 201},
		}
		if diff := cmp.Diff(wantLog, e.crm.Requests()); diff != "" {
			t.Errorf("after commit %v: request log mismatch (-want +got):\n%s", afterCommit, diff)
		}
		wantCreates := []CreateRequest{{IdempotencyKey: "k1", Ref: "ref_1"}, {IdempotencyKey: "k1", Ref: "ref_1", Stored: "opp_1"}}
		if afterCommit {
			wantCreates = []CreateRequest{{IdempotencyKey: "k1", Ref: "ref_1", Stored: "opp_1"}, {IdempotencyKey: "k1", Ref: "ref_1"}}
		}
		if diff := cmp.Diff(wantCreates, e.crm.Creates()); diff != "" {
			t.Errorf("after commit %v: creates mismatch (-want +got):\n%s", afterCommit, diff)
		}
	}
}
