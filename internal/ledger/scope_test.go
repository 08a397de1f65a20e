package ledger_test

import (
	"context"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/oncehook/oncehook/db/dbtest"
	"github.com/oncehook/oncehook/internal/accounts"
	"github.com/oncehook/oncehook/internal/ledger"
	"github.com/oncehook/oncehook/internal/review"
	"github.com/oncehook/oncehook/internal/settings"
)

// TestScopeOfReaders reads and acts over two clients' actions (c0 and c1) as
// people of one: lists, counts and pages hold only their client's; another
// client's action does not exist for them and stays as it was; a viewer acts on
// nothing; work is assigned only to someone who sees its client; and scopes
// outside the config's clients are refused.
func TestScopeOfReaders(t *testing.T) {
	t.Parallel()
	pool := dbtest.New(t)
	ctx := context.Background()
	fillActions(t, pool, 1, 40, `(ARRAY['failed', 'confirmed', 'pending', 'uncertain'])[1 + (i / 2) % 4]`)
	cfg := &settings.Config{Sources: []settings.Source{{Name: "s0", Client: "c0"}, {Name: "s1", Client: "c1"}}}
	r := review.New(pool, cfg, nil)
	op := ledger.Actor{Name: "op0@example.com", Role: settings.RoleOperator, Clients: []string{"c0"}}
	viewer := ledger.Actor{Name: "v0@example.com", Role: settings.RoleViewer, Clients: []string{"c0"}}
	admin := ledger.Actor{Name: "boss@example.com", Role: settings.RoleAdmin}
	idOf := func(client, state string) int64 {
		t.Helper()
		var id int64
		if err := pool.QueryRow(ctx, `SELECT min(id) FROM actions WHERE client = $1 AND state = $2`, client, state).Scan(&id); err != nil {
			t.Fatal(err)
		}
		return id
	}
	rowOf := func(id int64) string {
		t.Helper()
		var s string
		if err := pool.QueryRow(ctx, `SELECT state || owner || reason || updated_at::text FROM actions WHERE id = $1`, id).Scan(&s); err != nil {
			t.Fatal(err)
		}
		return s
	}

	t.Run("ListsAndCountsHoldTheirClientOnly", func(t *testing.T) {
		page, err := r.For(op).ListActions(ctx, review.ActionFilter{Limit: 100})
		if err != nil {
			t.Fatal(err)
		}
		var n int
		if err := pool.QueryRow(ctx, `SELECT count(*) FROM actions WHERE client = 'c0'`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if len(page.Actions) != n {
			t.Errorf("listed %d actions, want c0's %d", len(page.Actions), n)
		}
		for _, a := range page.Actions {
			if a.Client != "c0" {
				t.Errorf("listed %d of %s", a.ID, a.Client)
			}
		}
		got, err := r.For(op).Summary(ctx)
		if err != nil {
			t.Fatal(err)
		}
		want := map[string]int64{}
		rows, err := pool.Query(ctx, `SELECT state, count(*) FROM actions WHERE client = 'c0' GROUP BY state`)
		if err != nil {
			t.Fatal(err)
		}
		for rows.Next() {
			var st string
			var k int64
			if err := rows.Scan(&st, &k); err != nil {
				t.Fatal(err)
			}
			want[st] = k
		}
		counted := map[string]int64{}
		for _, c := range got {
			counted[c.State] = c.Count
		}
		if diff := cmp.Diff(want, counted); diff != "" {
			t.Errorf("summary (-c0's +counted):\n%s", diff)
		}
		if page, err := r.For(ledger.Actor{Name: "nobody"}).ListActions(ctx, review.ActionFilter{}); err != nil || len(page.Actions) != 0 {
			t.Errorf("an actor without a role listed %d actions (%v), want none", len(page.Actions), err)
		}
	})
	t.Run("AnotherClientsActionDoesNotExist", func(t *testing.T) {
		theirs := idOf("c1", ledger.StatePending)
		before := rowOf(theirs)
		if _, err := r.For(op).GetAction(ctx, theirs); ledger.ErrorCode(err) != ledger.ENOTFOUND {
			t.Errorf("reading c1's action as c0's operator: %v, want not found", err)
		}
		if _, err := r.Do(ctx, op, review.ActCancel, theirs, review.ActParams{}); ledger.ErrorCode(err) != ledger.ENOTFOUND {
			t.Errorf("cancelling c1's action as c0's operator: %v, want not found", err)
		}
		if got, err := r.For(op).ActionsByID(ctx, []int64{theirs}); err != nil || len(got) != 0 {
			t.Errorf("c1's action by id as c0's operator: %v %v, want none", got, err)
		}
		if after := rowOf(theirs); after != before {
			t.Errorf("c1's action changed: %s, was %s", after, before)
		}
	})
	t.Run("ViewerActsOnNothing", func(t *testing.T) {
		own := idOf("c0", ledger.StatePending)
		before := rowOf(own)
		if _, err := r.Do(ctx, viewer, review.ActCancel, own, review.ActParams{}); ledger.ErrorCode(err) != ledger.EFORBIDDEN {
			t.Errorf("a viewer's cancel: %v, want forbidden", err)
		}
		if res, err := r.Bulk(ctx, viewer, review.ActRetry, []int64{idOf("c0", ledger.StateFailed)}, review.ActParams{}); err != nil || len(res) != 1 || res[0].Done {
			t.Errorf("a viewer's bulk retry: %+v %v, want refused", res, err)
		}
		if allowed := review.Allowed(viewer, ledger.Action{State: ledger.StateFailed}); allowed[review.ActRetry] || allowed[review.ActCancel] {
			t.Errorf("a viewer is offered %v", allowed)
		}
		if after := rowOf(own); after != before {
			t.Errorf("the viewer changed c0's action: %s, was %s", after, before)
		}
	})
	t.Run("AssignedOnlyToWhoSeesTheClient", func(t *testing.T) {
		for _, u := range []struct{ email, role, client string }{{"op0@example.com", settings.RoleOperator, "c0"},
			{"op1@example.com", settings.RoleOperator, "c1"}} {
			if _, err := accounts.CreateUser(ctx, pool, u.email, u.role, "a long enough password", u.client); err != nil {
				t.Fatal(err)
			}
		}
		theirs := idOf("c1", ledger.StateFailed)
		if _, err := r.Do(ctx, admin, review.ActAssign, theirs, review.ActParams{Owner: "op0@example.com"}); ledger.ErrorCode(err) != ledger.EINVALID {
			t.Errorf("assigning c1's action to c0's operator: %v, want refused", err)
		}
		if a, err := r.Do(ctx, admin, review.ActAssign, theirs, review.ActParams{Owner: "op1@example.com"}); err != nil || a.Owner != "op1@example.com" {
			t.Errorf("assigning c1's action to c1's operator: %v %v", a.Owner, err)
		}
		us, err := r.Assignees(ctx, "c1")
		if err != nil {
			t.Fatal(err)
		}
		if len(us) != 1 || us[0].Email != "op1@example.com" {
			t.Errorf("assignees of c1: %+v, want op1 only", us)
		}
	})
	t.Run("ScopesOfTheConfigOnly", func(t *testing.T) {
		for _, c := range []struct {
			role    string
			clients []string
			says    string
		}{
			{settings.RoleViewer, []string{"c0", "c9"}, `"c9"`},
			{settings.RoleOperator, nil, "at least one client"},
			{settings.RoleAdmin, []string{"c0"}, "every client"},
			{"owner", []string{"c0"}, "admin, operator or viewer"},
		} {
			if _, err := ledger.CheckScope(c.role, c.clients, cfg.Clients()); ledger.ErrorCode(err) != ledger.EINVALID ||
				!strings.Contains(ledger.ErrorMessage(err), c.says) {
				t.Errorf("%s of %v: %v, want refused saying %s", c.role, c.clients, err, c.says)
			}
		}
		if got, err := ledger.CheckScope(settings.RoleViewer, []string{" c1", "c0", "c1"}, cfg.Clients()); err != nil ||
			!cmp.Equal(got, []string{"c0", "c1"}) {
			t.Errorf("a viewer of c1, c0: %v %v", got, err)
		}
	})
}
