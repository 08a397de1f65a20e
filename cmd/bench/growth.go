package main

import (
	"bufio"
	"context"
	"fmt"
	"html"
	"io"
	"log"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/oncehook/oncehook/internal/retention"
	"github.com/oncehook/oncehook/internal/settings"
)

// growthTarget is a page or an API call the growth rows measure.
type growthTarget struct {
	name, path string
	client     *http.Client
	header     http.Header
	last       bool // ask for the last page, by cursor: the 25 oldest failed actions
	action     bool // the page of the 500th action
	lines      int  // read this many lines of the answer (or all it has) and hang up (the CSV's first batch); 0: all of it
}

// growthTargets are the API calls (with token) and, when page is a signed-in
// client, the dashboard's pages.
func growthTargets(token string, page *http.Client) []growthTarget {
	api := http.Header{"Authorization": {"Bearer " + token}}
	targets := []growthTarget{
		{name: "API list GET /api/v1/actions?state=failed", path: "/api/v1/actions?state=failed",
			client: http.DefaultClient, header: api},
		{name: "API list, last page (&cursor=...: the 25 oldest failed)", path: "/api/v1/actions?state=failed",
			client: http.DefaultClient, header: api, last: true},
		{name: "API summary GET /api/v1/summary (counts by state)", path: "/api/v1/summary",
			client: http.DefaultClient, header: api},
	}
	if page == nil {
		return targets
	}
	for _, p := range [][2]string{
		{"queue page GET /queue/failed", "/queue/failed"},
		{"all actions GET /actions (every state)", "/actions"},
		{"queue page sorted by waiting GET /queue/failed?sort=state_since", "/queue/failed?sort=state_since"},
		{"search GET /actions?q=enq_g_500 (a business key and every key it begins: 11,111 at 10,000,000)", "/actions?q=enq_g_500"},
		{"search by external ref GET /actions?q=opp_977 (one action)", "/actions?q=opp_977"},
		{"search by owner GET /actions?q=crm-admin@example.com (a third of all)", "/actions?q=crm-admin%40example.com"},
		{"search by event id GET /actions?q=evt_g_500", "/actions?q=evt_g_500"},
		{"search by email GET /actions?q=buyer500@example.com (one buyer's, every 100,000th action)", "/actions?q=buyer500%40example.com"},
		{"search by amount GET /actions?q=40500 (every 5,000th action)", "/actions?q=40500"},
		{"mine GET /mine (signed in as sales-ops@example.com, a third of the open)", "/mine"},
		{"reason filter in a queue GET /queue/failed?reason=amount", "/queue/failed?reason=amount"},
		{"reason filter over every state GET /actions?reason=amount", "/actions?reason=amount"},
		{"reason filter over every state, a part no reason has GET /actions?reason=nowhere", "/actions?reason=nowhere"},
		{"trends GET /trends?window=day", "/trends?window=day"},
		{"overview GET / (queues, sources, destinations)", "/"},
		{"sources GET /sources", "/sources"},
		{"events GET /events", "/events"},
	} {
		targets = append(targets, growthTarget{name: p[0], path: p[1], client: page})
	}
	return append(targets,
		growthTarget{name: "an action GET /actions/{id} (events, 60 attempts, 40 acts)", path: "/actions/", client: page, action: true},
		growthTarget{name: "CSV, its first 500 rows GET /actions?format=csv (every state)", path: "/actions?format=csv",
			client: page, lines: 501},
		growthTarget{name: "CSV, its first 500 rows GET /queue/failed?format=csv", path: "/queue/failed?format=csv",
			client: page, lines: 501})
}

// growth measures the pages and API calls at 1,000 actions and at o.rows actions.
func (b *bench) growth(ctx context.Context) error {
	return b.growthRows(ctx, "growth", []int{1000, b.o.rows}, 0)
}

// growthClients are the clients of the growth phase's server when it runs alone.
var growthClients = []string{"acme", "globex", "initech", "umbrella"}

// growthAlone is the growth phase by itself (-growth-only): a server whose
// config has growthClients, the history spread over them, measured at
// growthSizes(-rows).
func (b *bench) growthAlone(ctx context.Context) error {
	b.clients = growthClients
	config, addr, err := b.writeConfig(b.dest, "growth.yaml", b.clients...)
	if err != nil {
		return err
	}
	log.Printf("growth: starting the server, clients %v", b.clients)
	if b.srv, err = b.startChild(ctx, config, addr, "growth-server.log"); err != nil {
		return err
	}
	// Every size sampled for 5 s: a slow page at a million would take minutes
	// 200 times.
	b.curve = true
	if err := b.growthRows(ctx, "growth", growthSizes(b.o.rows), largeGrowthBudget); err != nil {
		return err
	}
	if err := b.growthRetention(ctx, b.o.rows); err != nil {
		return err
	}
	return b.memory(ctx)
}

// ingestAt measures the ingest (as the ingest row, new deliveries from the
// bench's senders) with size actions stored, for the cost curve.
func (b *bench) ingestAt(ctx context.Context, size int) error {
	log.Printf("growth: ingest at %s actions, %d senders, %s", thousands(int64(size)), b.o.senders, b.o.seconds)
	run, err := b.runIngest(ctx, fmt.Sprintf("gi%d", size))
	if err != nil {
		return err
	}
	r := run.r
	if b.curveStart == 0 {
		b.curveStart = r.rate()
	}
	b.t.add(row{figure: fmt.Sprintf("growth: ingest with %s actions stored: signed webhooks acknowledged; p50 / p99",
		thousands(int64(size))), value: fmt.Sprintf("%s; %s / %s", perSec(r.rate()), ms(r.p50), ms(r.p99)),
		ratio: fmt.Sprintf("%.2fx start", r.rate()/b.curveStart), target: "no slower than at the start; p99 <= 50 ms",
		met: check(r.rate() >= 0.9*b.curveStart && r.p99 <= 50*time.Millisecond), cpu: run.use.String()})
	return nil
}

// growthRetention measures one retention pass over the oldest day of the
// history at rows actions: its final actions pruned, its days of bodies,
// attempts and audit dropped (what an open action still needs carried forward).
func (b *bench) growthRetention(ctx context.Context, rows int) error {
	log.Printf("growth: one retention pass over the oldest day at %s actions", thousands(int64(rows)))
	window := fillSpan - 24*time.Hour
	cfg := &settings.Config{Retention: settings.Retention{Actions: window, DropBodiesAfter: window}}
	t0 := time.Now()
	r, err := retention.Prune(ctx, b.pg.pool, cfg, time.Now())
	took := time.Since(t0)
	if err != nil {
		return fmt.Errorf("growth: the retention pass: %w", err)
	}
	if r.BodyDays < 1 || r.RowDays < 1 {
		return fmt.Errorf("growth: the retention pass dropped no day (%+v)", r)
	}
	b.t.add(row{figure: fmt.Sprintf("growth: one retention pass at %s actions, over the history's oldest day", thousands(int64(rows))),
		value: took.Round(time.Millisecond).String(), ratio: "-", target: "-", met: "-"})
	b.t.note("growth: the retention pass pruned %d final actions, dropped %d days of bodies and %d of attempts and audit, "+
		"carried %d bodies and %d actions' rows forward", r.Actions, r.BodyDays, r.RowDays, r.BodiesCarried, r.ActionsCarried)
	return nil
}

// sizesWords lists sizes for a row's label.
func sizesWords(sizes []int) string {
	var w []string
	for _, n := range sizes {
		w = append(w, thousands(int64(n)))
	}
	return strings.Join(w, ", ")
}

// curveMid is the size half way to rows at which the growth phase alone
// measures the ingest too, beside the start and rows (the cost curve).
func curveMid(rows int) int { return rows / 2 }

// growthSizes are the sizes the growth phase measures at: 1,000, a million and
// rows, with a budget for each measurement past a million (at least 5 requests,
// as many as fit in 5 s: a page of 10 million actions is sampled, not timed 200
// times).
func growthSizes(rows int) []int {
	sizes := []int{1000}
	if rows > 1_000_000 {
		sizes = append(sizes, 1_000_000)
	}
	return append(sizes, rows)
}

// largeGrowthBudget bounds each measurement past a million actions.
const largeGrowthBudget = 5 * time.Second

// growthRows measures the pages and API calls at each of sizes (ascending, the
// first the small one the others are compared with), the actions spread over the
// bench's clients, and adds a row labelled label for each. The single Postgres's
// rows hold to 50 ms and 2x; the cluster's to 50 ms. A budget bounds each
// measurement's time (see latency); past a million actions it is at most
// largeGrowthBudget.
func (b *bench) growthRows(ctx context.Context, label string, sizes []int, budget time.Duration) error {
	b.settle(ctx)
	token, err := b.cli(ctx, "", "token", "create", "--name", "bench", "--role", "admin")
	if err != nil {
		return err
	}
	page, err := b.pageClient(ctx)
	if err != nil {
		return err
	}
	// The earlier phases' actions go, with their calls and acts.
	if err := b.pg.exec(ctx, `TRUNCATE actions, attempts, audit CASCADE`); err != nil {
		return err
	}
	targets := growthTargets(lastLines(token, 1), page)
	if page == nil {
		b.t.note("growth: no /queue/failed page in this build; only the API was measured")
	}
	rows, pages := sizes[len(sizes)-1], sizes
	if b.curve { // the ingest is measured half way too
		sizes = append(slices.Clone(sizes), curveMid(rows))
		slices.Sort(sizes)
		sizes = slices.Compact(sizes)
	}
	lat := make([][]time.Duration, len(targets)) // [target][size] p50
	have, fill, filling := 0, b.historyFill(rows), time.Duration(0)
	for _, size := range sizes {
		log.Printf("%s: %s actions", label, thousands(int64(size)))
		// The server rests while its tables fill: with their indexes dropped, its
		// own polling would scan them.
		t0 := time.Now()
		if err := b.whileStopped(ctx, func() error { return fill.fill(ctx, have+1, size) }); err != nil {
			return err
		}
		filling += time.Since(t0)
		have = size
		// The pages first, on the tables as the fill left them (vacuumed), then the
		// ingest, whose new deliveries the next fill vacuums.
		if slices.Contains(pages, size) {
			if err := b.measurePages(ctx, label, targets, lat, size, budget); err != nil {
				return err
			}
		}
		if b.curve && (size == sizes[0] || size == curveMid(rows) || size == rows) {
			if err := b.ingestAt(ctx, size); err != nil {
				return err
			}
		}
	}
	b.t.add(row{figure: fmt.Sprintf("%s: the fill of %s actions with their events, bodies, attempts and audit, "+
		"stopping at %s", label, thousands(int64(rows)), sizesWords(sizes[:len(sizes)-1])),
		value: filling.Round(time.Second).String(), ratio: "-", target: "< 15m", met: check(filling < 15*time.Minute)})
	b.addPageRows(label, targets, pages, lat, budget)
	return nil
}

// measurePages adds to lat each target's p50 at size, sampled within budget
// (at most largeGrowthBudget past a million actions).
func (b *bench) measurePages(ctx context.Context, label string, targets []growthTarget, lat [][]time.Duration,
	size int, budget time.Duration) error {
	if size > 1_000_000 && (budget == 0 || budget > largeGrowthBudget) {
		budget = largeGrowthBudget
	}
	for i, t := range targets {
		path, err := b.growthPath(ctx, t)
		if err != nil {
			return err
		}
		d, err := b.latency(ctx, t.client, path, t.header, t.lines, budget)
		if err != nil {
			return fmt.Errorf("%s: %s: %w", label, t.name, err)
		}
		lat[i] = append(lat[i], d)
	}
	return nil
}

// addPageRows adds a row for each target with its p50 at each of pages, held to
// 50 ms at the largest (and 2x the smallest on the single Postgres's default
// run).
func (b *bench) addPageRows(label string, targets []growthTarget, pages []int, lat [][]time.Duration, budget time.Duration) {
	for i, t := range targets {
		small, large := lat[i][0], lat[i][len(pages)-1]
		x := float64(large) / float64(small)
		var at []string
		for k, size := range pages {
			at = append(at, fmt.Sprintf("%s at %s", ms(lat[i][k]), thousands(int64(size))))
		}
		r := row{figure: label + ": " + t.name, value: strings.Join(at, "; "),
			ratio: fmt.Sprintf("%.2fx", x), target: "<= 50 ms; <= 2x", met: growthMet(large, x)}
		if b.clients != nil {
			r.target, r.met = "<= 50 ms", check(large <= 50*time.Millisecond)
		}
		if strings.Contains(t.name, "summary") {
			r.target, r.met = "(not a target)", "-"
		}
		b.t.add(r)
	}
	b.t.note("%s: p50 of %s; past a million actions, of %s", label, samples(budget), samples(largeGrowthBudget))
	b.t.note("%s: the history generated with INSERT ... SELECT generate_series, a client and 200,000 actions a statement, "+
		"two at a time (fills of 100,000 or more on one Postgres with the secondary indexes, unique constraints and foreign "+
		"keys dropped and built again after), then VACUUM ANALYZE", label)
}

// growthPath is t's path at the table's present size: with the cursor of the last
// page, or the id of the 500th action, where t asks for them.
func (b *bench) growthPath(ctx context.Context, t growthTarget) (string, error) {
	switch {
	case t.last:
		var cursor int64
		if err := b.pg.pool.QueryRow(ctx, `SELECT id FROM actions WHERE state = 'failed'
			ORDER BY id LIMIT 1 OFFSET 25`).Scan(&cursor); err != nil {
			return "", fmt.Errorf("growth: the last page's cursor: %w", err)
		}
		return fmt.Sprintf("%s&cursor=%d", t.path, cursor), nil
	case t.action:
		var id int64
		if err := b.pg.pool.QueryRow(ctx, `SELECT id FROM actions WHERE business_key = 'enq_g_500'`).Scan(&id); err != nil {
			return "", fmt.Errorf("growth: the 500th action: %w", err)
		}
		return fmt.Sprintf("%s%d", t.path, id), nil
	}
	return t.path, nil
}

// samples says how many requests latency makes with budget.
func samples(budget time.Duration) string {
	if budget == 0 {
		return "200 requests made one after another, after 20 to warm up"
	}
	return fmt.Sprintf("up to 200 requests made one after another in %s (at least 5), after 3 to warm up", budget)
}

// growthMet says whether a page stays under 50 ms of server time at the large
// size (the dashboard's promise) and grows by at most 2x from 1,000 actions.
func growthMet(large time.Duration, x float64) string {
	switch fast, flat := large <= 50*time.Millisecond, x <= 2; {
	case fast && flat:
		return "yes"
	case fast:
		return "50 ms only"
	case flat:
		return "2x only"
	}
	return "NO"
}

// historyFill is the fill of a history of total actions ending now, spread over
// the bench's clients; fills of 100,000 or more build the indexes after the rows
// on one Postgres.
func (b *bench) historyFill(total int) *historyFill {
	several := b.clients != nil
	bulk := 100_000
	if len(b.pg.workers) > 0 {
		bulk = 0 // Citus: the indexes of every shard stay
	}
	return &historyFill{pool: b.pg.pool, clients: clientsOrAcme(b.clients), total: total,
		now: time.Now(), dataDir: b.pg.dir, bulk: bulk, parallel: 2, progress: fillProgress(),
		names: func(c string) (string, string) {
			src, _, action := clientNames(c, several)
			return src, action
		}}
}

// latency is the median of 200 sequential GETs of path, after 20 to warm up; with a
// budget, of as many as fit in it (at least 5, after 3 to warm up). With lines,
// each GET lasts until that many lines of the answer have come.
func (b *bench) latency(ctx context.Context, client *http.Client, path string, hdr http.Header, lines int, budget time.Duration) (time.Duration, error) {
	var ds []time.Duration
	warm, start := 20, time.Now()
	if budget > 0 {
		warm = 3
	}
	for i := range 200 + warm {
		if budget > 0 && len(ds) >= 5 && time.Since(start) > budget {
			break
		}
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, b.srv.url+path, nil)
		if err != nil {
			return 0, err
		}
		for k, v := range hdr {
			req.Header[k] = v
		}
		t0 := time.Now()
		res, err := client.Do(req)
		if err != nil {
			return 0, err
		}
		if lines > 0 {
			err = readLines(res.Body, lines)
		} else {
			_, err = io.Copy(io.Discard, res.Body)
		}
		res.Body.Close()
		if res.StatusCode != http.StatusOK {
			return 0, fmt.Errorf("status %d", res.StatusCode)
		}
		if err != nil {
			return 0, err
		}
		if i >= warm {
			ds = append(ds, time.Since(t0))
		}
	}
	slices.Sort(ds)
	return percentile(ds, 0.5), nil
}

// readLines reads n lines of r, or all of it when it has fewer.
func readLines(r io.Reader, n int) error {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for got := 0; got < n && sc.Scan(); got++ {
	}
	return sc.Err()
}

var hiddenInput = regexp.MustCompile(`<input[^>]*type="hidden"[^>]*>`)
var inputAttr = regexp.MustCompile(`(name|value)="([^"]*)"`)

// pageClient signs in to the dashboard as a new admin and returns a client carrying
// the session, or nil when this build has no queue pages yet.
func (b *bench) pageClient(ctx context.Context) (*http.Client, error) {
	jar, _ := cookiejar.New(nil)
	c := &http.Client{Jar: jar}
	res, err := c.Get(b.srv.url + "/queue/failed")
	if err != nil {
		return nil, err
	}
	res.Body.Close()
	if res.StatusCode == http.StatusNotFound || res.StatusCode == http.StatusMethodNotAllowed {
		return nil, nil
	}
	// The owner of a third of the generated actions, so that /mine lists them.
	const email, password = "sales-ops@example.com", "bench-password-not-secret"
	if _, err := b.cli(ctx, password+"\n", "user", "add", "--email", email, "--role", "admin"); err != nil {
		return nil, err
	}
	res, err = c.Get(b.srv.url + "/login")
	if err != nil {
		return nil, err
	}
	form, _ := io.ReadAll(res.Body)
	res.Body.Close()
	v := url.Values{"email": {email}, "password": {password}}
	for _, in := range hiddenInput.FindAllString(string(form), -1) {
		attrs := map[string]string{}
		for _, m := range inputAttr.FindAllStringSubmatch(in, -1) {
			attrs[m[1]] = html.UnescapeString(m[2])
		}
		if attrs["name"] != "" {
			v.Set(attrs["name"], attrs["value"])
		}
	}
	res, err = c.PostForm(b.srv.url+"/login", v)
	if err != nil {
		return nil, err
	}
	res.Body.Close()
	res, err = c.Get(b.srv.url + "/queue/failed")
	if err != nil {
		return nil, err
	}
	res.Body.Close()
	if res.StatusCode != http.StatusOK || res.Request.URL.Path != "/queue/failed" {
		return nil, fmt.Errorf("growth: could not sign in to the dashboard: /queue/failed answered %d at %s",
			res.StatusCode, res.Request.URL.Path)
	}
	return c, nil
}

// memory reads the server's peak resident set size after every phase it served.
func (b *bench) memory(ctx context.Context) error {
	mib, err := peakRSS(b.srv.pid())
	if err != nil {
		return err
	}
	mib = max(mib, b.earlierRSS) // the processes stopped for the growth's fills
	b.t.add(row{figure: "memory: the server's peak RSS (VmHWM) over ingest, duplicates, end to end and growth",
		value: fmt.Sprintf("%.0f MiB", mib), ratio: "-", target: "<= 150 MB", met: check(mib*1.048576 <= 150)})
	return nil
}
