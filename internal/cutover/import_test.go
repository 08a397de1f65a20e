package cutover_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/oncehook/oncehook/db/dbtest"
	"github.com/oncehook/oncehook/internal/config"
	"github.com/oncehook/oncehook/internal/cutover"
	"github.com/oncehook/oncehook/internal/settings"
)

const testConfig = `
sources:
  - {name: stripe-live, client: acme, provider: stripe, account: acct_1, environment: live, secret_env: STRIPE_SECRET}
  - {name: stripe-globex, client: globex, provider: stripe, account: acct_9, environment: live, secret_env: STRIPE_SECRET}
destinations:
  - {name: crm, type: http, create: {url: "http://127.0.0.1:9/opportunities"}, owner: crm-admin@example.com}
actions:
  - name: open_opportunity
    source: stripe-live
    on: [checkout.session.completed]
    key: [/data/object/metadata/enquiry_id, /data/object/id]
    destination: crm
    params:
      enquiry_id: /data/object/metadata/enquiry_id
  - name: open_globex
    source: stripe-globex
    on: [checkout.session.completed]
    key: [/data/object/metadata/enquiry_id]
    destination: crm
`

func setup(t *testing.T) (*pgxpool.Pool, *settings.Config) {
	t.Helper()
	cfg, err := config.Parse("test.yaml", []byte(testConfig), func(string) string { return "whsec_test" })
	if err != nil {
		t.Fatal(err)
	}
	return dbtest.New(t), cfg
}

func line(enquiry, session, ref string) string {
	return fmt.Sprintf(`{"action":"open_opportunity","key":[%q,%q],"external_ref":%q,"performed_at":"2026-11-30T10:00:00Z","params":{"enquiry_id":%q}}`,
		enquiry, session, ref, enquiry)
}

func count(t *testing.T, pool *pgxpool.Pool) int {
	t.Helper()
	var n int
	if err := pool.QueryRow(context.Background(), `SELECT count(*) FROM actions`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

func run(pool *pgxpool.Pool, cfg *settings.Config, client, text string, dry bool) (cutover.Report, error) {
	return cutover.Import(context.Background(), cutover.Params{Pool: pool, Config: cfg, Client: client,
		File: "ops.jsonl", By: "ada", DryRun: dry}, strings.NewReader(text))
}

// TestImportChecksTheWholeFileFirst: a file with bad lines among good ones
// loads nothing and names every bad line with its number and reason; the dry
// run of a good file says what it would record and records nothing; a good file
// loads once, and again changes nothing.
func TestImportChecksTheWholeFileFirst(t *testing.T) {
	t.Parallel()
	pool, cfg := setup(t)
	good := line("enq_1", "cs_1", "opp_1") + "\n" + line("enq_2", "cs_2", "opp_2") + "\n"

	rep, err := run(pool, cfg, "acme", good, true)
	if err != nil || rep.New != 2 || count(t, pool) != 0 {
		t.Fatalf("dry run: %+v %v, %d actions; want 2 to record and none recorded", rep, err, count(t, pool))
	}
	if rep, err = run(pool, cfg, "acme", good, false); err != nil || rep.New != 2 {
		t.Fatalf("import: %+v %v", rep, err)
	}
	if rep, err = run(pool, cfg, "acme", good, false); err != nil || rep.New != 0 || rep.Already != 2 || count(t, pool) != 2 {
		t.Fatalf("the same file again: %+v %v, %d actions", rep, err, count(t, pool))
	}

	bad := strings.Join([]string{
		line("enq_3", "cs_3", "opp_3"), // good
		`{"action":"open_opportunity","key":["enq_4"],"external_ref":"opp_4","performed_at":"2026-11-30T10:00:00Z"}`,
		`{"action": "open_opportunity", "key": `,
		line("enq_1", "cs_1", "opp_other"), // conflicts with the action imported above
		`{"action":"open_globex","key":["enq_5"],"external_ref":"opp_5","performed_at":"2026-11-30T10:00:00Z"}`,
		`{"action":"close_deal","key":["enq_6"],"external_ref":"opp_6","performed_at":"2026-11-30T10:00:00Z"}`,
		`{"action":"open_opportunity","key":["enq_7",""],"external_ref":"opp_7","performed_at":"2026-11-30T10:00:00Z"}`,
		`{"action":"open_opportunity","key":["enq_8","cs_8"],"performed_at":"2026-11-30T10:00:00Z"}`,
		line("enq_3", "cs_3", "opp_33"), // the same operation as line 1, another record
		`{"action":"open_opportunity","key":["enq_9","cs_9"],"external_ref":"opp_9","performed_at":"2026-11-30T10:00:00Z","colour":"red"}`,
		line("enq_1", "cs_1", "opp_1"), // as imported, but line 4 said otherwise
		"",                             // blank: skipped
		"# a comment",                  // skipped
		`{"action":"open_opportunity","key":["enq_10","cs_10"],"external_ref":"opp_10","performed_at":"2026-11-30T10:00:00Z","params":[1]}`,
	}, "\n")
	_, err = run(pool, cfg, "acme", bad, false)
	var problems *cutover.Problems
	if !errors.As(err, &problems) {
		t.Fatalf("a bad file: %v, want its problems", err)
	}
	want := map[int]string{
		2:  "has 2 key part(s)",
		3:  "not a JSON object",
		4:  `record "opp_1"), the line says record "opp_other"`,
		5:  "is client globex's",
		6:  `no action "close_deal"`,
		7:  "key part 2 (/data/object/id) is empty",
		8:  `no "external_ref"`,
		9:  "the same operation as line 1",
		10: `unknown field "colour"`,
		11: "the same operation as line 4",
		14: `"params" is not a JSON object`,
	}
	got := map[int]string{}
	for _, p := range problems.List {
		got[p.Line] = p.Reason
	}
	for l, w := range want {
		if !strings.Contains(got[l], w) {
			t.Errorf("line %d: %q, want %q", l, got[l], w)
		}
	}
	if len(got) != len(want) {
		t.Errorf("problems %v, want lines %v", got, want)
	}
	if msg := err.Error(); !strings.Contains(msg, "ops.jsonl:4: ") || !strings.Contains(msg, "nothing was loaded") {
		t.Errorf("the error reads %q", msg)
	}
	if n := count(t, pool); n != 2 {
		t.Errorf("%d actions after the bad file, want the 2 before it: nothing half loaded", n)
	}

	if _, err := run(pool, cfg, "nobody", good, false); err == nil || !strings.Contains(err.Error(), `client "nobody"`) {
		t.Errorf("an unknown client: %v", err)
	}
}

// TestImportRefusesAnOpenAction: an operation that an event already started (it
// is pending, not done) cannot be declared done by a file.
func TestImportRefusesAnOpenAction(t *testing.T) {
	t.Parallel()
	pool, cfg := setup(t)
	if _, err := run(pool, cfg, "acme", line("enq_1", "cs_1", "opp_1"), false); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(context.Background(), `UPDATE actions SET state = 'pending'`); err != nil {
		t.Fatal(err)
	}
	_, err := run(pool, cfg, "acme", line("enq_1", "cs_1", "opp_1"), false)
	if err == nil || !strings.Contains(err.Error(), "(pending): only a done operation") {
		t.Errorf("importing over a pending action: %v", err)
	}
}
