package ledger_test

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/oncehook/oncehook/db/dbtest"
	"github.com/oncehook/oncehook/internal/config"
	"github.com/oncehook/oncehook/internal/engine"
	"github.com/oncehook/oncehook/internal/inbox"
	"github.com/oncehook/oncehook/internal/jsonpointer"
	"github.com/oncehook/oncehook/internal/ledger"
	"github.com/oncehook/oncehook/internal/metrics"
	"github.com/oncehook/oncehook/internal/review"
	"github.com/oncehook/oncehook/internal/sandbox"
	"github.com/oncehook/oncehook/internal/settings"
	"github.com/oncehook/oncehook/web"
)

// apiSandbox is what the recipe tests need of an API sandbox.
type apiSandbox interface {
	Handler() http.Handler
	Fail(sandbox.APIFault)
	Len() int
	CountRef(ref string) int
	SetToken(string)
	SetLag(time.Duration)
	SetReset(time.Duration)
	Creates() []time.Time
	Records() []sandbox.APIRecord
}

// What protects a recipe's destination against a double effect after an unsure call.
const (
	byLookup    = "lookup"     // the record is found (strong, or eventual once settled)
	byKeyMemory = "key memory" // the destination replays the first reply
	byPerson    = "person"     // nothing can tell: outcome unknown
)

type recipe struct {
	file       string
	origin     string // the real API the sandbox stands in for
	tokenEnv   string
	newSandbox func(token string) apiSandbox
	protection string
	eventual   bool // the lookup is a lagging search
	reset      bool // the rate-limit reply says when to come back
	// amount points into a stored record at the deal's amount, a JSON number where
	// asNumber, else a string; "" for mail.
	amount   string
	asNumber bool
}

var recipes = []recipe{
	{file: "hubspot.yaml", origin: "https://api.hubapi.com", tokenEnv: "HUBSPOT_TOKEN", protection: byLookup, reset: true,
		amount:     "/amount", // the sandbox keeps a deal's properties
		newSandbox: func(tok string) apiSandbox { return sandbox.NewHubSpot(tok, "oncehook_ref", true) }},
	{file: "hubspot-search.yaml", origin: "https://api.hubapi.com", tokenEnv: "HUBSPOT_TOKEN", protection: byLookup, eventual: true, reset: true,
		amount:     "/amount", // the sandbox keeps a deal's properties
		newSandbox: func(tok string) apiSandbox { return sandbox.NewHubSpot(tok, "oncehook_ref", false) }},
	{file: "salesforce.yaml", origin: "https://acme.my.salesforce.com", tokenEnv: "SALESFORCE_TOKEN", protection: byLookup,
		amount: "/Amount", asNumber: true,
		newSandbox: func(tok string) apiSandbox { return sandbox.NewSalesforce(tok) }},
	{file: "pipedrive.yaml", origin: "https://acme.pipedrive.com", tokenEnv: "PIPEDRIVE_API_TOKEN", protection: byLookup, eventual: true, reset: true,
		amount: "/value", asNumber: true,
		newSandbox: func(tok string) apiSandbox {
			return sandbox.NewPipedrive(tok, "0123456789abcdef0123456789abcdef01234567")
		}},
	{file: "postmark.yaml", origin: "https://api.postmarkapp.com", tokenEnv: "POSTMARK_SERVER_TOKEN", protection: byLookup, eventual: true,
		newSandbox: func(tok string) apiSandbox { return sandbox.NewPostmark(tok, "example.com") }},
	{file: "resend.yaml", origin: "https://api.resend.com", tokenEnv: "RESEND_API_KEY", protection: byKeyMemory, reset: true,
		newSandbox: func(tok string) apiSandbox { return sandbox.NewResend(tok) }},
	{file: "sendgrid.yaml", origin: "https://api.sendgrid.com", tokenEnv: "SENDGRID_API_KEY", protection: byPerson, reset: true,
		newSandbox: func(tok string) apiSandbox { return sandbox.NewSendGrid(tok, "example.com") }},
	{file: "mailgun.yaml", origin: "https://api.mailgun.net", tokenEnv: "MAILGUN_API_KEY", protection: byPerson,
		newSandbox: func(tok string) apiSandbox { return sandbox.NewMailgun(tok, "mg.example.com") }},
}

// TestRecipes runs every recipe in examples/destinations against a sandbox of its
// API, through the engine: a create, a repeat, a timeout and a dropped connection
// after the record was stored, a rate limit, and a refused credential. Each step
// counts the sandbox's own records.
func TestRecipes(t *testing.T) {
	t.Parallel()
	for _, rc := range recipes {
		t.Run(strings.TrimSuffix(rc.file, ".yaml"), func(t *testing.T) {
			t.Parallel()
			testRecipe(t, rc)
		})
	}
}

func testRecipe(t *testing.T, rc recipe) {
	const token = "recipe-token-7c2e"
	api := rc.newSandbox(token)
	srv := httptest.NewServer(api.Handler())
	t.Cleanup(srv.Close)
	w := newRecipeWorld(t, rc, srv.URL, token)
	name := w.cfg.Actions[0].Name
	dest := w.cfg.Destinations[0].Name
	refs := map[string]string{} // business key -> operation key

	// A create: one record, its id kept as the evidence.
	w.deliver(checkout{eventID: "evt_1", enquiry: "enq_1", amount: 4200})
	a := w.waitFor(name, "enq_1", ledger.StateConfirmed)
	refs["enq_1"] = a.OperationKey
	if a.ExternalRef == "" {
		t.Errorf("confirmed without the destination's id: %+v", a)
	}
	if n := api.CountRef(a.OperationKey); n != 1 {
		t.Fatalf("after a create the sandbox holds %d records for it, want 1\nlogs:\n%s", n, tail(w.logs.String(), 3000))
	}

	// A repeat of the business operation (another event for the same enquiry) does
	// not reach the destination again.
	creates := len(api.Creates())
	out := w.deliver(checkout{eventID: "evt_1b", enquiry: "enq_1", amount: 4200})
	w.waitEvent(out["event_id"].(string))
	if n := len(api.Creates()); n != creates || api.CountRef(a.OperationKey) != 1 {
		t.Errorf("a repeat made %d more creates (%d records for the operation), want none", n-creates, api.CountRef(a.OperationKey))
	}

	// A timeout, and a dropped connection, after the record was stored.
	if rc.eventual {
		api.SetLag(1500 * time.Millisecond) // longer than the timeout: the first lookup misses it
	}
	for i, fault := range []sandbox.APIFault{sandbox.StoreThenHang, sandbox.StoreThenDrop} {
		enq := []string{"enq_2", "enq_3"}[i]
		api.Fail(fault)
		w.deliver(checkout{eventID: "evt_" + enq, enquiry: enq, amount: 100})
		var got action
		switch rc.protection {
		case byPerson:
			got = w.waitFor(name, enq, ledger.StateFailed)
			if !strings.Contains(got.Reason, "outcome unknown") {
				t.Errorf("%s: failed with %q, want outcome unknown", enq, got.Reason)
			}
		default:
			got = w.waitFor(name, enq, ledger.StateConfirmed)
		}
		refs[enq] = got.OperationKey
		if n := api.CountRef(got.OperationKey); n != 1 {
			t.Errorf("%s (fault %d): the sandbox holds %d records for it, want 1", enq, fault, n)
		}
	}
	api.SetLag(0)

	// A rate limit: retried after the wait the destination asks for.
	api.SetReset(time.Second)
	api.Fail(sandbox.RateLimited)
	before := len(api.Creates())
	w.deliver(checkout{eventID: "evt_4", enquiry: "enq_4", amount: 100})
	got := w.waitFor(name, "enq_4", ledger.StateConfirmed)
	refs["enq_4"] = got.OperationKey
	if n := api.CountRef(got.OperationKey); n != 1 {
		t.Errorf("after a rate limit the sandbox holds %d records for it, want 1", n)
	}
	if at := api.Creates()[before:]; len(at) != 2 {
		t.Errorf("rate limit: %d creates, want the limited one and its retry", len(at))
	} else if wait := at[1].Sub(at[0]); rc.reset && wait < 900*time.Millisecond {
		t.Errorf("retried %s after the rate limit, want at least the 1s the reset header asked for", wait)
	}

	// A refused credential holds the action and disconnects the destination; after
	// the credential is fixed, Reconnect (the recipe's check) releases it.
	api.SetToken("rotated")
	w.deliver(checkout{eventID: "evt_5", enquiry: "enq_5", amount: 100})
	held := w.waitFor(name, "enq_5", ledger.StateHeld)
	if n := api.CountRef(held.OperationKey); n != 0 {
		t.Errorf("a refused credential stored %d records", n)
	}
	if status, _ := w.api(w.admin, "POST", "/destinations/"+dest+"/reconnect", nil); status == http.StatusOK {
		t.Errorf("reconnect with the wrong credential answered %d, want a refusal", status)
	}
	api.SetToken(token)
	if status, body := w.api(w.admin, "POST", "/destinations/"+dest+"/reconnect", nil); status != http.StatusOK {
		t.Fatalf("reconnect: %d %v", status, body)
	}
	got = w.waitFor(name, "enq_5", ledger.StateConfirmed)
	refs["enq_5"] = got.OperationKey

	// Every operation has exactly one record, and nothing else was created.
	for enq, ref := range refs {
		if n := api.CountRef(ref); n != 1 {
			t.Errorf("%s: %d records, want 1", enq, n)
		}
	}
	if n := api.Len(); n != len(refs) {
		t.Errorf("the sandbox holds %d records for %d operations", n, len(refs))
	}
}

// newRecipeWorld runs the recipe's config, its origin replaced by the sandbox's
// and its timeouts shortened for the test.
func newRecipeWorld(t *testing.T, rc recipe, apiURL, token string) *world {
	t.Helper()
	yaml := recipeYAML(t, rc, apiURL)
	yaml = strings.ReplaceAll(yaml, "settle: 10m", "settle: 3s")
	yaml = strings.ReplaceAll(yaml, "settle: 15m", "settle: 3s")
	return newConfigWorld(t, rc.file, yaml, map[string]string{rc.tokenEnv: token}, true, nil)
}

// recipeYAML is the recipe's config pointed at the sandbox, timeouts shortened.
func recipeYAML(t *testing.T, rc recipe, apiURL string) string {
	t.Helper()
	raw, err := os.ReadFile("../../examples/destinations/" + rc.file)
	if err != nil {
		t.Fatal(err)
	}
	return strings.ReplaceAll(strings.ReplaceAll(string(raw), rc.origin, apiURL), "timeout: 10s", "timeout: 1s")
}

// newConfigWorld is a world running the config yaml, with env (and the Stripe
// secret) as its environment, and an engine when engine is set; set changes the
// engine's parameters.
func newConfigWorld(t *testing.T, file, yaml string, env map[string]string, withEngine bool, set func(*engine.Params)) *world {
	t.Helper()
	w := &world{t: t, logs: &syncBuffer{}, yaml: yaml}
	w.pool, w.dsn = dbtest.NewDSN(t)
	var err error
	w.cfg, err = config.Parse(file, []byte(yaml), func(k string) string {
		if k == "STRIPE_WEBHOOK_SECRET" {
			return stripeSecret
		}
		return env[k]
	})
	if err != nil {
		t.Fatalf("config %s: %v", file, err)
	}
	logger := slog.New(slog.NewTextHandler(w.logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	w.metrics = metrics.New(w.pool)
	clients := w.clients()
	e := web.New(web.Params{Config: w.cfg, Pool: w.pool, Inbox: inbox.New(w.pool, logger, w.metrics),
		Review: review.New(w.pool, w.cfg, clients), Metrics: w.metrics,
		Logger: slog.New(slog.NewTextHandler(w.logs, &slog.HandlerOptions{Level: slog.LevelWarn}))})
	srv := httptest.NewServer(e)
	t.Cleanup(srv.Close)
	w.url = srv.URL
	w.token = w.newToken("ops", settings.RoleOperator)
	w.admin = w.newToken("boss", settings.RoleAdmin)
	if set == nil {
		set = func(*engine.Params) {}
	}
	if withEngine {
		w.stop = w.startEngineWith(set)
	}
	return w
}

// Resend remembers a key for 24 hours. An unsure send whose first attempt is older
// than that is not repeated on the key's word: it goes to a person, and the
// sandbox, which has forgotten the key too, holds one message.
func TestRecipeResendAfterTheKeyMemory(t *testing.T) {
	t.Parallel()
	const token = "recipe-token-7c2e"
	api := sandbox.NewResend(token)
	srv := httptest.NewServer(api.Handler())
	t.Cleanup(srv.Close)
	rc := recipes[slices.IndexFunc(recipes, func(r recipe) bool { return r.file == "resend.yaml" })]
	w := newConfigWorld(t, rc.file, recipeYAML(t, rc, srv.URL), map[string]string{rc.tokenEnv: token}, false, nil)
	w.deliver(checkout{eventID: "evt_old", enquiry: "enq_old", amount: 100})
	w.route()
	// The operation was first attempted 25 hours ago (an outage since, say).
	w.exec(`UPDATE actions SET first_attempt_at = now() - interval '25 hours'`)
	api.SetNow(func() time.Time { return time.Now().Add(25 * time.Hour) })
	api.Fail(sandbox.StoreThenHang)
	w.stop = w.startEngine(0)
	got := w.waitFor("send_welcome_email", "enq_old", ledger.StateFailed)
	if !strings.Contains(got.Reason, "outcome unknown") || !strings.Contains(got.Reason, "key memory (24h0m0s) has passed") {
		t.Errorf("failed with %q, want outcome unknown after the key memory", got.Reason)
	}
	if n := api.CountRef(got.OperationKey); n != 1 {
		t.Errorf("the sandbox holds %d messages for the operation, want 1", n)
	}
	if n := len(api.Creates()); n != 1 {
		t.Errorf("the sandbox received %d sends, want 1", n)
	}
}

// A deal already holds the reference (made by hand, or by a call whose reply was
// lost long ago). The recipe's batch upsert by idProperty updates that deal and
// confirms it with its id; a create that is not an upsert (POST .../deals) is
// refused by HubSpot with a 400 "already has that value", which the recipe's
// errors rules read as "exists": the lookup finds the deal. No second deal either way.
func TestRecipeHubSpotExistingDealIsFound(t *testing.T) {
	t.Parallel()
	rc := recipes[slices.IndexFunc(recipes, func(r recipe) bool { return r.file == "hubspot.yaml" })]
	for _, tt := range []struct {
		name     string
		plain    bool // the create is POST /crm/v3/objects/deals, not the upsert
		attempts int
	}{
		{"UpsertUpdatesIt", false, 1},
		{"PlainCreateIsRefusedThenFound", true, 2},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			const token = "recipe-token-7c2e"
			api := sandbox.NewHubSpot(token, "oncehook_ref", true)
			srv := httptest.NewServer(api.Handler())
			t.Cleanup(srv.Close)
			ref := ledger.OperationIdentity{Client: "acme", Environment: "live", Name: "open_deal", KeyParts: []string{"enq_x"}}.OperationKey()
			seeded := api.Seed(ref, map[string]any{"dealname": "made by hand", "dealstage": "appointmentscheduled", "oncehook_ref": ref})
			yaml := recipeYAML(t, rc, srv.URL)
			if tt.plain {
				yaml = plainHubSpotCreate(t, yaml)
			}
			w := newConfigWorld(t, rc.file, yaml, map[string]string{rc.tokenEnv: token}, true, nil)
			w.deliver(checkout{eventID: "evt_x", enquiry: "enq_x", amount: 100})
			got := w.waitFor("open_deal", "enq_x", ledger.StateConfirmed)
			if got.OperationKey != ref || got.ExternalRef != seeded.ID {
				t.Errorf("confirmed %s with %q, want %s with the existing deal's id %q", got.OperationKey, got.ExternalRef, ref, seeded.ID)
			}
			if n := api.CountRef(ref); n != 1 || api.Len() != 1 {
				t.Errorf("HubSpot holds %d deals for the operation (%d in all), want 1", n, api.Len())
			}
			if n := len(api.Creates()); n != 1 {
				t.Errorf("HubSpot received %d creates, want 1", n)
			}
			if d := w.detail(got.ID); len(d["attempts"].([]any)) != tt.attempts {
				t.Errorf("attempts %v, want %d", d["attempts"], tt.attempts)
			}
			stage := api.Records()[0].Body["dealstage"]
			if updated := stage == "closedwon"; updated == tt.plain {
				t.Errorf("the deal's stage is %v: the upsert updates it, a refused create leaves it", stage)
			}
		})
	}
}

// plainHubSpotCreate turns the hubspot.yaml recipe's batch upsert into a create by
// POST /crm/v3/objects/deals, the reference among the deal's properties.
func plainHubSpotCreate(t *testing.T, yaml string) string {
	t.Helper()
	for from, to := range map[string]string{
		"/crm/v3/objects/deals/batch/upsert\"":          "/crm/v3/objects/deals\"",
		"result_id: /results/0/id":                      "result_id: /id",
		"reference_field: /inputs/0/id":                 "reference_field: /properties/oncehook_ref",
		"      inputs:":                                 "",
		"        - idProperty: {const: oncehook_ref}\n": "",
		"          properties:":                         "      properties:",
	} {
		if !strings.Contains(yaml, from) {
			t.Fatalf("the recipe no longer holds %q", from)
		}
		yaml = strings.Replace(yaml, from, to, 1)
	}
	return strings.ReplaceAll(yaml, "\n            ", "\n        ")
}

// A search index can lag longer than any settle. An eventual recipe's unsure create
// that its lookup still cannot see past settle is not repeated: it goes failed to
// its owner, saying the index may lag, with the lookup's answer, and a Retry needs
// the person to confirm they checked. Only settle: {after, then: retry} repeats it,
// and then the sandbox holds the double that opt-in accepts.
func TestRecipeEventualAbsencePastSettle(t *testing.T) {
	t.Parallel()
	for _, rc := range recipes {
		if !rc.eventual {
			continue
		}
		t.Run(strings.TrimSuffix(rc.file, ".yaml"), func(t *testing.T) {
			t.Parallel()
			api, w := laggingRecipe(t, rc, "settle: 3s")
			w.deliver(checkout{eventID: "evt_lag", enquiry: "enq_lag", amount: 100})
			got := w.waitFor(w.cfg.Actions[0].Name, "enq_lag", ledger.StateFailed)
			for _, want := range []string{"the index may lag", "after the call", "(lookup: HTTP 200"} {
				if !strings.Contains(got.Reason, want) {
					t.Errorf("failed with %q, want it to say %q", got.Reason, want)
				}
			}
			if got.Owner == "" {
				t.Errorf("failed without naming an owner: %+v", got)
			}
			if n, c := api.CountRef(got.OperationKey), len(api.Creates()); n != 1 || c != 1 {
				t.Errorf("the sandbox holds %d records after %d creates, want the one unsure create", n, c)
			}
			if status, out := w.api(w.token, "POST", "/actions/"+got.ID+"/retry", nil); status != http.StatusConflict {
				t.Errorf("a retry without checking the destination answered %d %v, want 409", status, out)
			}
			status, out := w.api(w.token, "POST", "/actions/"+got.ID+"/retry",
				map[string]any{"note": "not in the CRM", "checked_destination": true})
			if status != http.StatusOK || out["state"] != ledger.StatePending {
				t.Errorf("a confirmed retry answered %d %v, want pending", status, out)
			}
		})
	}
	t.Run("OptInRepeats", func(t *testing.T) {
		t.Parallel()
		rc := recipes[slices.IndexFunc(recipes, func(r recipe) bool { return r.file == "hubspot-search.yaml" })]
		api, w := laggingRecipe(t, rc, "settle: {after: 3s, then: retry}")
		w.deliver(checkout{eventID: "evt_lag", enquiry: "enq_lag", amount: 100})
		got := w.waitFor(w.cfg.Actions[0].Name, "enq_lag", ledger.StateConfirmed)
		if n := api.CountRef(got.OperationKey); n != 2 {
			t.Errorf("with then: retry the sandbox holds %d records, want the double the opt-in accepts", n)
		}
	})
}

// laggingRecipe runs rc against its sandbox with settle replaced and a search index
// that lags an hour, the next create storing its record and never answering.
func laggingRecipe(t *testing.T, rc recipe, settle string) (apiSandbox, *world) {
	t.Helper()
	const token = "recipe-token-7c2e"
	api := rc.newSandbox(token)
	srv := httptest.NewServer(api.Handler())
	t.Cleanup(srv.Close)
	yaml := recipeYAML(t, rc, srv.URL)
	for _, s := range []string{"settle: 10m", "settle: 15m"} {
		yaml = strings.ReplaceAll(yaml, s, settle)
	}
	api.SetLag(time.Hour)
	api.Fail(sandbox.StoreThenHang)
	return api, newConfigWorld(t, rc.file, yaml, map[string]string{rc.tokenEnv: token}, true, nil)
}

// The CRM recipes write Stripe's minor-unit amount in the currency's major unit:
// 4200 cents are 42.00 dollars, 4200 yen stay 4200, 4200 fils are 4.200 dinars.
func TestRecipeAmountsInMajorUnits(t *testing.T) {
	t.Parallel()
	for _, rc := range recipes {
		if rc.amount == "" {
			continue
		}
		t.Run(strings.TrimSuffix(rc.file, ".yaml"), func(t *testing.T) {
			t.Parallel()
			const token = "recipe-token-7c2e"
			api := rc.newSandbox(token)
			srv := httptest.NewServer(api.Handler())
			t.Cleanup(srv.Close)
			w := newRecipeWorld(t, rc, srv.URL, token)
			want := map[string]string{"usd": "42.00", "jpy": "4200", "kwd": "4.200"}
			for cur, major := range want {
				enq := "enq_" + cur
				w.deliver(checkout{eventID: "evt_" + cur, enquiry: enq, amount: 4200, currency: cur})
				a := w.waitFor(w.cfg.Actions[0].Name, enq, ledger.StateConfirmed)
				i := slices.IndexFunc(api.Records(), func(r sandbox.APIRecord) bool { return r.Ref == a.OperationKey })
				if i < 0 {
					t.Fatalf("%s: no record for %s", cur, a.OperationKey)
				}
				got, _ := jsonpointer.Get(api.Records()[i].Body, rc.amount)
				_, isNumber := got.(json.Number)
				if fmt.Sprint(got) != major || isNumber != rc.asNumber {
					t.Errorf("%s 4200: %s is %#v, want %s (a number: %v)", cur, rc.amount, got, major, rc.asNumber)
				}
			}
		})
	}
}
