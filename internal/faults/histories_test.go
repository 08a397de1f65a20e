package faults

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/oncehook/oncehook/db"
	"github.com/oncehook/oncehook/db/dbtest"
	"github.com/oncehook/oncehook/internal/sandbox"
	"github.com/oncehook/oncehook/internal/settings"
)

// TestHistories runs seeded randomized histories against real processes: two
// `oncehook serve` and one `oncehook worker` on one database, a sandbox CRM, and a
// planned sequence of deliveries (new, repeated, concurrent copies, changed
// payloads), kill -9 at any moment (calls and lookups in flight included), Postgres
// restarts (fast and immediate) and destination faults. Once the history has
// settled, the invariants are checked from the CRM's own records and the API (see
// checkHistory). A failing history prints its seed and its operations:
//
//	go test -count=1 ./faults -run 'TestHistories$' -histories.n=1 -histories.seed=SEED
//
// replays the same operations (their timing against the processes varies).
// `make histories N=200` runs a long series; `make test` runs a few.
func TestHistories(t *testing.T) {
	t.Parallel()
	n, first := *historiesN, *historiesSeed
	if first == 0 {
		first = rand.Uint64N(1 << 40)
	}
	t.Logf("%d histories from seed %d; faults not injected: %q", n, first, *historiesWithout)
	// One cluster of our own, since histories restart it; its migrated "oncehook"
	// database is every history's template.
	cluster, _ := dbtest.Cluster(t)
	seeds := keptSeeds(t)
	if *historiesSeed != 0 {
		seeds = nil // a replay of one seed runs that seed alone
	}
	for i := range n {
		seeds = append(seeds, first+uint64(i))
	}
	var total tally
	for _, seed := range seeds {
		var got tally
		t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) {
			got = runHistory(t, cluster, seed)
			if t.Failed() {
				keepSeed(t, seed)
			}
		})
		total.add(got)
		if t.Failed() && !*historiesKeepGoing {
			break
		}
	}
	t.Logf("histories: %d run, %d operations, %d faults injected (%s), %d deliveries acknowledged, %d violations; "+
		"retention dropped %d days of bodies (%d carried forward) and %d of attempts and audit (%d actions carried forward), kept %d",
		total.histories, total.ops, total.faults, total.faultKinds(), total.acks, total.violations,
		total.bodyDays, total.bodiesCarried, total.rowDays, total.actionsCarried, total.daysKept)
	if *historiesSummary != "" {
		line := fmt.Sprintf("histories=%d operations=%d faults=%d deliveries=%d violations=%d first_seed=%d without=%q kinds=%s "+
			"body_days_dropped=%d bodies_carried=%d row_days_dropped=%d actions_carried=%d days_kept=%d\n",
			total.histories, total.ops, total.faults, total.acks, total.violations, first, *historiesWithout, total.faultKinds(),
			total.bodyDays, total.bodiesCarried, total.rowDays, total.actionsCarried, total.daysKept)
		if err := os.WriteFile(*historiesSummary, []byte(line), 0o644); err != nil {
			t.Error(err)
		}
	}
}

var (
	historiesN         = flag.Int("histories.n", envInt("ONCEHOOK_HISTORIES", 3), "how many histories TestHistories runs")
	historiesSeed      = flag.Uint64("histories.seed", uint64(envInt("ONCEHOOK_HISTORIES_SEED", 0)), "the first history's seed (0: a random one); history i has seed+i")
	historiesKeepGoing = flag.Bool("histories.keep-going", false, "run the remaining histories after one fails")
	historiesSummary   = flag.String("histories.summary", "", "write the series' figures to this file")
	historiesWithout   = flag.String("histories.without", envString("ONCEHOOK_HISTORIES_WITHOUT", knownBroken),
		"destination faults (comma-separated) planned but not injected; empty injects them all")
)

// knownBroken are the faults left out by default, for a known defect being fixed
// elsewhere; none now.
const knownBroken = ""

func envString(name, def string) string {
	if v, ok := os.LookupEnv(name); ok {
		return v
	}
	return def
}

// excluded reports whether the fault is planned but not injected (-histories.without).
func excluded(fault string) bool {
	return slices.Contains(strings.Split(*historiesWithout, ","), fault)
}

func envInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil {
		return v
	}
	return def
}

// tally counts what a series of histories did.
type tally struct {
	histories, ops, faults, acks, violations int
	kinds                                    map[string]int
	// what the retention passes did: days dropped, rows carried, days kept
	bodyDays, bodiesCarried, rowDays, actionsCarried, daysKept int
}

func (t *tally) add(o tally) {
	t.histories += o.histories
	t.ops += o.ops
	t.faults += o.faults
	t.acks += o.acks
	t.violations += o.violations
	t.bodyDays += o.bodyDays
	t.bodiesCarried += o.bodiesCarried
	t.rowDays += o.rowDays
	t.actionsCarried += o.actionsCarried
	t.daysKept += o.daysKept
	for k, n := range o.kinds {
		if t.kinds == nil {
			t.kinds = map[string]int{}
		}
		t.kinds[k] += n
	}
}

func (t *tally) fault(kind string) {
	if t.kinds == nil {
		t.kinds = map[string]int{}
	}
	t.kinds[kind]++
	t.faults++
}

func (t tally) faultKinds() string {
	var parts []string
	kinds := append([]string{"kill", "kill-in-call", "kill-in-lookup", "postgres-fast", "postgres-immediate", "revoke",
		"days", "retention"}, faultKinds...)
	for _, m := range outageModes {
		kinds = append(kinds, "outage-"+m)
	}
	for _, k := range kinds {
		if t.kinds[k] > 0 {
			parts = append(parts, fmt.Sprintf("%s:%d", k, t.kinds[k]))
		}
	}
	return strings.Join(parts, " ")
}

// member is one running process of a history.
type member struct {
	p      *process
	url    string // serve only
	worker string // its name in leases and attempts
}

// history is one history being run.
type history struct {
	t       *testing.T
	seed    uint64
	ops     []op
	w       *world
	cluster *db.Embedded
	admin   string // an admin API token
	hang    chan struct{}
	start   time.Time
	tally   tally

	mu      sync.Mutex
	members map[string]*member
	revoked bool
	acks    map[string][]string // event id -> the bodies acknowledged, one per acknowledgement
	refused []string            // deliveries answered with a verdict other than 200 or 503
	log     []string            // what happened, in order
	senders sync.WaitGroup
}

func runHistory(t *testing.T, cluster *db.Embedded, seed uint64) tally {
	ctx := context.Background()
	// A fresh database cloned from the migrated one (on Citus, on every node).
	dsn := dbtest.Clone(t, cluster, fmt.Sprintf("h_%d", seed))
	pool, err := db.Open(ctx, dsn, 4)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	h := &history{t: t, seed: seed, ops: planHistory(seed), cluster: cluster, hang: make(chan struct{}),
		members: map[string]*member{}, acks: map[string][]string{}, start: time.Now()}
	h.tally.histories, h.tally.ops = 1, len(h.ops)
	t.Cleanup(func() { close(h.hang) }) // before the processes are killed: cleanups run last first
	h.w = newWorld(t, pool, dsn, newSecrets(fmt.Sprintf("h%d", seed)))
	// The breaker takes part at the histories' speed: its faults (bursts of 503s,
	// drops, hangs) may open it, and its probes come within a fraction of a second.
	h.w.conf = strings.Replace(faultConfig, "timeout: 20s", "timeout: 2s\n    breaker: {window: 10s, min_calls: 5, failure_rate: 0.5, open_for: 200ms, max_open_for: 2s}", 1) +
		historyRetention
	h.admin = apiToken(t, pool, "histories", settings.RoleAdmin)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("%s\nwhat happened:\n%s", planText(seed, h.ops), strings.Join(h.log, "\n"))
			t.Logf("replay: go test -count=1 ./faults -run 'TestHistories$' -histories.n=1 -histories.seed=%d -histories.without=%q",
				seed, *historiesWithout)
		}
	})
	for _, m := range members {
		h.startMember(m)
	}
	for i, o := range h.ops {
		time.Sleep(o.Pause) // the planned gap between operations, part of the history
		h.note("%2d %s", i, o)
		h.run(o)
	}
	h.settle()
	if planned := plannedFaults(h.ops); h.tally.faults != planned {
		t.Errorf("%d faults planned, %d done: every planned fault must be done", planned, h.tally.faults)
	}
	violations := append(append(h.check(), h.checkDays()...), h.checkPasses()...)
	for _, v := range violations {
		t.Errorf("violation: %s", v)
	}
	h.tally.violations = len(violations)
	h.mu.Lock()
	for _, bodies := range h.acks {
		h.tally.acks += len(bodies)
	}
	h.mu.Unlock()
	t.Logf("seed %d: %d operations, %d faults (%s), %d acknowledgements, %d actions, %d CRM records, "+
		"%d+%d days dropped, %d bodies and %d actions carried, %s",
		seed, len(h.ops), h.tally.faults, h.tally.faultKinds(), h.tally.acks,
		h.w.count(`SELECT count(*) FROM actions`), h.w.crm.Len(), h.tally.bodyDays, h.tally.rowDays,
		h.tally.bodiesCarried, h.tally.actionsCarried, time.Since(h.start).Round(time.Millisecond))
	return h.tally
}

func (h *history) note(format string, args ...any) {
	line := fmt.Sprintf("%6.2fs ", time.Since(h.start).Seconds()) + fmt.Sprintf(format, args...)
	h.mu.Lock()
	h.log = append(h.log, line)
	h.mu.Unlock()
}

// startMember starts the named process and waits until it works.
func (h *history) startMember(name string) {
	m := &member{}
	if strings.HasPrefix(name, "serve") {
		s := h.w.serve(name)
		m.p, m.url = s.process, s.url
	} else {
		m.p, _ = h.w.worker(name)
	}
	m.worker = m.p.waitOutput(`workers started"? worker=(\S+)`)
	h.mu.Lock()
	h.members[name] = m
	h.mu.Unlock()
	h.note("   %s started as %s", name, m.worker)
}

// kill kills the named process with SIGKILL and starts it again. Its leases would
// run out after the destination timeout plus 30 s; nobody may touch them before,
// and rather than wait that long they are moved to now, as the clock would. It is
// dead: nothing it held is still in flight.
func (h *history) kill(name, why string) {
	h.mu.Lock()
	m := h.members[name]
	h.mu.Unlock()
	m.p.signal(syscall.SIGKILL)
	m.p.wait(30 * time.Second)
	var n int64
	h.retryDB("expire the dead worker's leases", func(ctx context.Context) error {
		tag, err := h.w.pool.Exec(ctx, `UPDATE actions SET lease_expires_at = now()
			WHERE state = 'processing' AND lease_owner = $1`, m.worker)
		n = tag.RowsAffected()
		return err
	})
	h.note("   killed %s (%s) %s; %d leases expired", name, m.worker, why, n)
	h.startMember(name)
}

// retryDB runs fn until it succeeds, for a minute: Postgres may be starting.
func (h *history) retryDB(what string, fn func(ctx context.Context) error) {
	h.t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		err := fn(ctx)
		cancel()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			h.t.Fatalf("%s: %v", what, err)
		}
		time.Sleep(100 * time.Millisecond) // poll interval while Postgres comes back
	}
}

// run carries out one operation.
func (h *history) run(o op) {
	crm := h.w.crm
	switch o.Kind {
	case opPost, opRepeat, opChangedBody, opChangedParams:
		h.send(o.Event, o.Server)
	case opCopies:
		for c := range o.Copies {
			h.send(o.Event, (o.Server+c)%2)
		}
	case opKill:
		h.tally.fault("kill")
		h.kill(o.Target, "")
	case opKillInCall:
		reached := make(chan struct{})
		crm.Fail(sandbox.Fault{Hang: h.hang, AfterCommit: o.Stored, Reached: reached,
			Field: "enquiry_id", Value: o.Event.Enquiry})
		h.send(o.Event, o.Server)
		h.killHolder(reached, "call", o)
	case opKillInLookup:
		reached := make(chan struct{})
		crm.Fail(sandbox.Fault{AfterCommit: true, Status: http.StatusInternalServerError,
			Field: "enquiry_id", Value: o.Event.Enquiry})
		crm.Fail(sandbox.Fault{Method: http.MethodGet, Hang: h.hang, Reached: reached})
		h.send(o.Event, o.Server)
		h.killHolder(reached, "lookup", o)
	case opPostgres:
		h.tally.fault("postgres-" + o.Mode)
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer cancel()
		stop := h.cluster.Stop
		if o.Mode == "immediate" {
			stop = h.cluster.StopImmediate
		}
		if err := stop(ctx); err != nil {
			h.t.Fatalf("stop postgres: %v", err)
		}
		time.Sleep(time.Duration(o.N) * 100 * time.Millisecond) // the planned outage
		if err := h.cluster.Start(ctx); err != nil {
			h.t.Fatalf("start postgres: %v", err)
		}
		h.note("   postgres back")
	case opFault:
		if excluded(o.Mode) {
			h.note("   not injected (-histories.without)")
			return
		}
		h.tally.fault(o.Mode)
		switch o.Mode {
		case faultStoreHang:
			crm.Fail(sandbox.Fault{AfterCommit: true, Hang: h.hang})
		case fault500Before:
			crm.Fail(sandbox.Fault{Status: http.StatusInternalServerError})
		case fault500After:
			crm.Fail(sandbox.Fault{AfterCommit: true, Status: http.StatusInternalServerError})
		case faultDropBefore:
			crm.Fail(sandbox.Fault{Drop: true})
		case faultDropAfter:
			crm.Fail(sandbox.Fault{Drop: true, AfterCommit: true})
		case fault429:
			crm.Fail(sandbox.Fault{Status: http.StatusTooManyRequests, RetryAfter: "1"})
		case fault503Burst:
			for range o.N {
				crm.Fail(sandbox.Fault{Status: http.StatusServiceUnavailable})
			}
		case faultLookup503:
			crm.Fail(sandbox.Fault{Method: http.MethodGet, Status: http.StatusServiceUnavailable})
		}
	case opOutage:
		h.tally.fault("outage-" + o.Mode)
		h.w.downMode.Store(int32(slices.Index(outageModes, o.Mode)))
		h.w.down.Store(true)
		time.Sleep(time.Duration(o.N) * 100 * time.Millisecond) // the planned outage
		h.w.down.Store(false)
		h.note("   the CRM is back")
	case opRevoke:
		h.tally.fault("revoke")
		h.mu.Lock()
		h.revoked = true
		h.mu.Unlock()
		crm.SetToken("revoked-" + h.w.secrets.crmToken)
	case opReconnect:
		h.reconnect()
	case opDays:
		h.tally.fault("days")
		h.moveDays(o.N)
	case opRetention:
		h.tally.fault("retention")
		h.prunePass()
	}
}

// killHolder waits until the CRM holds the request the fault was set for, then
// kills the process whose call or lookup it is (the newest one started). A kill it
// cannot do fails the history: a history that passed with fewer faults than it
// planned would prove less than it says.
func (h *history) killHolder(reached chan struct{}, kind string, o op) {
	if !h.awaitReached(reached) {
		h.t.Errorf("%s not done: the CRM was not asked within %s", o.Kind, reachWait)
		h.note("   the CRM was not asked within %s; nothing killed", reachWait)
		return
	}
	// The pool's connections may be dead from a Postgres restart planned just
	// before (seed 8000495): the read is made again on a fresh one until it
	// answers; only an answer that nothing is in flight fails the history.
	var owner string
	var err error
	for deadline := time.Now().Add(time.Minute); ; {
		// A held lookup is an action's, or the probe's of a breaker opened by the
		// faults before (half open, the probe's worker named): the GET fault takes
		// whichever asks first, and the probe's looker is killed then.
		err = h.w.pool.QueryRow(context.Background(), `SELECT owner FROM (
			(SELECT a.lease_owner AS owner, 1 AS rank, t.started_at AS at FROM attempts t
			 JOIN actions a ON a.client = t.client AND a.id = t.action_id
			 WHERE t.kind = $1 AND t.status = 'started' AND a.state = 'processing' AND a.lease_owner IS NOT NULL)
			UNION ALL
			(SELECT d.breaker_probe_owner, 2, d.breaker_since FROM destinations d
			 WHERE $1 = 'lookup' AND d.breaker_state = 'half_open' AND d.breaker_probe_owner <> '')) held
			ORDER BY rank, at DESC LIMIT 1`, kind).Scan(&owner)
		if err == nil || errors.Is(err, pgx.ErrNoRows) || time.Now().After(deadline) {
			break
		}
		time.Sleep(100 * time.Millisecond) // poll interval while Postgres comes back
	}
	if err != nil {
		h.t.Errorf("%s not done: no %s in flight found: %v", o.Kind, kind, err)
		return
	}
	for name, m := range h.snapshotMembers() {
		if m.worker == owner {
			h.tally.fault(string(o.Kind))
			h.kill(name, "holding a "+kind)
			return
		}
	}
	h.t.Errorf("%s not done: the %s in flight belongs to %s, no longer running", o.Kind, kind, owner)
}

// reachWait bounds the wait for a held request: generous, since faults queued
// before it are drawn first, each by a call the backoff delays.
const reachWait = time.Minute

// awaitReached waits until reached is closed or reachWait has passed. Meanwhile a
// retry the table scheduled is made due at once, as while settling, so the queued
// faults before this one are drawn without waiting out the backoff.
func (h *history) awaitReached(reached chan struct{}) bool {
	deadline := time.NewTimer(reachWait)
	defer deadline.Stop()
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-reached:
			return true
		case <-deadline.C:
			return false
		case <-tick.C:
			h.retryDB("make scheduled retries due", h.dueNow)
		}
	}
}

// dueNow makes every scheduled retry due now.
func (h *history) dueNow(ctx context.Context) error {
	_, err := h.w.pool.Exec(ctx, `UPDATE actions SET next_attempt_at = now()
		WHERE state = 'retrying' AND next_attempt_at > now() + interval '1 second'`)
	return err
}

func (h *history) snapshotMembers() map[string]*member {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := make(map[string]*member, len(h.members))
	for k, v := range h.members {
		out[k] = v
	}
	return out
}

// serverURL is the current address of serve-a (0) or serve-b (1).
func (h *history) serverURL(i int) string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.members[members[i]].url
}

// send delivers e as Stripe would, in the background: what is not acknowledged (a
// 503, a connection refused or cut) is signed and sent again, to the other server
// after a connection error, until it is.
func (h *history) send(e histEvent, server int) {
	body := e.body()
	h.senders.Add(1)
	go func() {
		defer h.senders.Done()
		deadline := time.Now().Add(3 * time.Minute)
		for {
			r := post(h.serverURL(server)+"/hooks/stripe-live", h.w.signed("stripe", senderDelivery(body)), body)
			switch {
			case r.err == nil && r.status == http.StatusOK:
				h.mu.Lock()
				h.acks[e.ID] = append(h.acks[e.ID], string(body))
				h.mu.Unlock()
				return
			case r.err == nil && r.status != http.StatusServiceUnavailable:
				h.mu.Lock()
				h.refused = append(h.refused, fmt.Sprintf("%s answered %d: %s", e.ID, r.status, r.body))
				h.mu.Unlock()
				return
			case time.Now().After(deadline):
				h.mu.Lock()
				h.refused = append(h.refused, fmt.Sprintf("%s never acknowledged in 3 minutes: %d %v", e.ID, r.status, r.err))
				h.mu.Unlock()
				return
			case r.err != nil:
				server = 1 - server
			}
			time.Sleep(50 * time.Millisecond) // a provider's retry backoff, kept short
		}
	}()
}

// reconnect is what an admin does once the CRM accepts the token again: reconnect
// the destination through the API. It may still be refused by the fault queued
// for the CRM's next lookup, so it is tried until it is accepted.
func (h *history) reconnect() {
	h.mu.Lock()
	h.revoked = false
	h.mu.Unlock()
	h.w.crm.SetToken(h.w.secrets.crmToken)
	deadline := time.Now().Add(time.Minute)
	for {
		r := h.api(http.MethodPost, "/api/v1/destinations/crm/reconnect", `{}`)
		if r.err == nil && r.status == http.StatusOK {
			h.note("   reconnected: %s", r.body)
			return
		}
		if time.Now().After(deadline) {
			h.t.Fatalf("reconnect refused for a minute: %d %v %s", r.status, r.err, r.body)
		}
		time.Sleep(100 * time.Millisecond) // poll interval
	}
}

// api calls the JSON API of serve-a, or serve-b while serve-a is unreachable.
// A 503 (storage unavailable: a pooled connection that Postgres's restart broke,
// or Postgres not up yet) is retried, as the API asks, for up to 30 s.
func (h *history) api(method, path, body string) reply {
	var r reply
	for deadline := time.Now().Add(30 * time.Second); ; {
		for i := range 2 {
			req, err := http.NewRequest(method, h.serverURL(i)+path, strings.NewReader(body))
			if err != nil {
				return reply{err: err}
			}
			req.Header.Set("Authorization", "Bearer "+h.admin)
			req.Header.Set("Content-Type", "application/json")
			res, err := client.Do(req)
			if err != nil {
				r = reply{err: err}
				continue
			}
			r = readReply(res)
			if r.status != http.StatusServiceUnavailable {
				return r
			}
		}
		if r.err != nil || time.Now().After(deadline) {
			return r
		}
		time.Sleep(100 * time.Millisecond) // poll interval
	}
}

// settle waits until every delivery is acknowledged and every action has come to
// rest: confirmed, or failed and waiting for its owner. A destination left
// disconnected is reconnected, as its owner would.
func (h *history) settle() {
	done := make(chan struct{})
	go func() { h.senders.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(4 * time.Minute):
		h.t.Fatal("deliveries still being sent after 4 minutes")
	}
	h.note("   all deliveries answered; settling")
	deadline := time.Now().Add(3 * time.Minute)
	for {
		var unsettled, received, disconnected int
		h.retryDB("read what is left", func(ctx context.Context) error {
			return h.w.pool.QueryRow(ctx, `SELECT
				(SELECT count(*) FROM actions WHERE state NOT IN ('confirmed', 'failed', 'resolved', 'cancelled')),
				(SELECT count(*) FROM events WHERE status = 'received'),
				(SELECT count(*) FROM destinations WHERE status = 'disconnected')`).Scan(&unsettled, &received, &disconnected)
		})
		if unsettled == 0 && received == 0 && disconnected == 0 {
			h.note("   settled")
			return
		}
		if disconnected > 0 {
			h.note("   the CRM is disconnected; its owner reconnects it")
			h.reconnect()
			continue
		}
		if time.Now().After(deadline) {
			h.note("   not settled after 3 minutes: %d actions in motion, %d events unrouted", unsettled, received)
			return // the checks say what is left
		}
		// Time passes faster here than the servers' backoff (2 s doubling up to an
		// hour): a retry the table scheduled is made due now, as the lease shortcut
		// does for kills. An action that keeps failing still ends failed with its
		// owner named, within its attempts budget; none is hidden.
		h.retryDB("make scheduled retries due", h.dueNow)
		time.Sleep(100 * time.Millisecond) // poll interval
	}
}
