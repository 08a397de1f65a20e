package main

import (
	"context"
	"fmt"
	"log"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/oncehook/oncehook/internal/sandbox"
)

// The comparison with the River peer. oncehook and the peer each run as their own
// process on a fresh database of the bench's cluster, driven by the same load
// generator against the same sandbox CRM. Every delivery is a checkout that asks
// for one CRM opportunity, so each system does all of its work (store, route, call
// the destination, record the outcome) while it is measured.
//
// First each has a burst on a freshly started cluster, alone. Then both run side by
// side, the idle one waiting, and the warm bursts and the end to end runs go in the
// order oncehook, peer, peer, oncehook: the machine is shared, and a pair in that
// order cancels a load that rises or falls steadily during the comparison.
const (
	vsBurst      = 10 * time.Second // a burst at full ingest: the senders in a closed loop
	vsDuplicates = 5 * time.Second
	vsEvents     = 10_000 // each end to end run
	vsWait       = 3 * time.Minute
	vsPoll       = 20 * time.Millisecond
)

// vsOrder is the order of the measured pairs: 0 is oncehook, 1 the peer.
var vsOrder = []int{0, 1, 1, 0}

// burstResult is one burst and its drain.
type burstResult struct {
	load      loadResult
	stored    int64         // deliveries stored by the burst (acknowledged, or cut off at its end)
	routed    time.Duration // after the burst, until no stored delivery waits to be routed
	performed time.Duration // after the burst, until no routed work is open
	timedOut  bool
	use       cpuUse
	span      time.Duration // from the burst's start to the end of its drain
	serverCPU float64       // seconds, over span
	pgCPU     float64
}

type vsE2E struct {
	n                int // work finished
	elapsed, posting time.Duration
	notDone          map[string]int64
	timedOut         bool
	use              cpuUse
	span             time.Duration
	serverCPU, pgCPU float64
}

// vsResult is everything measured of one system.
type vsResult struct {
	name             string
	fresh            burstResult
	warm             []burstResult
	dup              loadResult
	dupStored        int64 // repeats stored as new deliveries: must be 0
	e2e              []vsE2E
	records, doubled int // CRM records made for this system, and business keys with more than one
	rss              float64
}

// sustained is acknowledged deliveries over the burst plus the time until all
// that it queued was routed.
func (r burstResult) sustained() float64 {
	return float64(r.load.acked) / (r.load.window + r.routed).Seconds()
}

func (e vsE2E) rate() float64 { return float64(e.n) / e.elapsed.Seconds() }

// The table takes each system's better warm burst and better end to end run: the
// machine is shared, and other work only ever slows a run down. The notes list
// every run.
func (r vsResult) bestWarm() burstResult {
	var best burstResult
	for _, b := range r.warm {
		if best.load.acked == 0 || b.sustained() > best.sustained() {
			best = b
		}
	}
	return best
}

func (r vsResult) bestE2E() vsE2E {
	var best vsE2E
	for _, e := range r.e2e {
		if best.n == 0 || e.rate() > best.rate() {
			best = e
		}
	}
	return best
}

// burstCPU is the server's and Postgres' CPU per stored delivery over all the warm
// bursts, in µs, and the share of the cores other work took meanwhile.
func (r vsResult) burstCPU() (server, pg, others float64) {
	var stored int64
	var secs, busy float64
	for _, b := range r.warm {
		stored += b.stored
		server += b.serverCPU
		pg += b.pgCPU
		secs += b.span.Seconds()
		busy += b.use.others * b.span.Seconds()
	}
	return usPer(server, stored), usPer(pg, stored), busy / max(secs, 1e-9)
}

func (r vsResult) e2eCPU() (server, pg, others float64) {
	var n int64
	var secs, busy float64
	for _, e := range r.e2e {
		n += int64(e.n)
		server += e.serverCPU
		pg += e.pgCPU
		secs += e.span.Seconds()
		busy += e.use.others * e.span.Seconds()
	}
	return usPer(server, n), usPer(pg, n), busy / max(secs, 1e-9)
}

// vsRun is one system during the comparison.
type vsRun struct {
	c   contender
	dsn string
	w   *watch
	p   *poster
	r   vsResult
}

// watch reads one system's progress from its database.
type watch struct {
	b    *bench
	c    contender
	pool *pgxpool.Pool
	srv  *child
}

// versusPeer measures oncehook and the peer and adds the comparison's rows.
func (b *bench) versusPeer(ctx context.Context) error {
	runs := []*vsRun{{c: b.oncehookContender()}, {c: b.peerContender()}}
	defer func() {
		for _, run := range runs {
			b.stopRun(run)
			if run.dsn != "" {
				b.dropDatabase(ctx, run.c.db)
			}
		}
	}()
	for _, run := range runs {
		if err := b.freshBurst(ctx, run); err != nil {
			return err
		}
	}
	for _, run := range runs {
		if err := b.startRun(ctx, run); err != nil {
			return err
		}
	}
	if err := warmRounds(ctx, runs); err != nil {
		return err
	}
	records := b.dest.crm.Records()
	for _, run := range runs {
		var err error
		if run.r.rss, err = peakRSS(run.w.srv.pid()); err != nil {
			return err
		}
		run.r.records, run.r.doubled = doubledKeys(records, "enq_"+run.c.tag)
	}
	b.versusRows(runs[0].r, runs[1].r)
	return nil
}

// freshBurst gives run's system its burst alone, on a freshly started cluster and
// a fresh database, and stops it.
func (b *bench) freshBurst(ctx context.Context, run *vsRun) error {
	log.Printf("vs River: %s: %s burst on a freshly started cluster and a fresh database", run.c.name, vsBurst)
	if err := b.restartPostgres(ctx); err != nil {
		return err
	}
	var err error
	if run.dsn, err = b.freshDatabase(ctx, run.c.db); err != nil {
		return err
	}
	if err := b.startRun(ctx, run); err != nil {
		return err
	}
	if run.r.fresh, err = run.w.burst(ctx, run.p, run.c.tag+"f"); err != nil {
		return fmt.Errorf("vs River: %s: %w", run.c.name, err)
	}
	// Stopped, so that the next system's fresh cluster starts under no one.
	b.stopRun(run)
	return nil
}

// warmRounds measures the systems running side by side: the warm bursts and the
// end to end runs in vsOrder, and the duplicates of each system's first warm burst.
func warmRounds(ctx context.Context, runs []*vsRun) error {
	for k, i := range vsOrder {
		run := runs[i]
		log.Printf("vs River: %s: %s burst (warm), then its drain", run.c.name, vsBurst)
		br, err := run.w.burst(ctx, run.p, fmt.Sprintf("%sw%d", run.c.tag, k))
		if err != nil {
			return fmt.Errorf("vs River: %s: %w", run.c.name, err)
		}
		run.r.warm = append(run.r.warm, br)
	}
	for i, run := range runs {
		log.Printf("vs River: %s: duplicates, %s", run.c.name, vsDuplicates)
		if err := run.w.duplicates(ctx, run.p, fmt.Sprintf("%sw%d", run.c.tag, firstIndex(vsOrder, i)), &run.r); err != nil {
			return fmt.Errorf("vs River: %s: %w", run.c.name, err)
		}
	}
	for k, i := range vsOrder {
		run := runs[i]
		log.Printf("vs River: %s: end to end, %d checkouts", run.c.name, vsEvents)
		e, err := run.w.endToEnd(ctx, run.p, fmt.Sprintf("%se%d", run.c.tag, k))
		if err != nil {
			return fmt.Errorf("vs River: %s: %w", run.c.name, err)
		}
		run.r.e2e = append(run.r.e2e, e)
	}
	return nil
}

func firstIndex(xs []int, x int) int {
	for i, v := range xs {
		if v == x {
			return i
		}
	}
	return -1
}

// startRun starts run's system on its database, and the bench's pool there.
func (b *bench) startRun(ctx context.Context, run *vsRun) error {
	addr, err := freeAddr()
	if err != nil {
		return err
	}
	srv, err := run.c.start(ctx, run.dsn, addr)
	if err != nil {
		return err
	}
	pool, err := openPool(ctx, run.dsn)
	if err != nil {
		_ = srv.stop()
		return err
	}
	run.w = &watch{b: b, c: run.c, pool: pool, srv: srv}
	run.p = &poster{addr: addr, paths: []string{run.c.hook}}
	run.r.name = run.c.name
	return nil
}

func (b *bench) stopRun(run *vsRun) {
	if run.w == nil {
		return
	}
	if err := run.w.srv.stop(); err != nil {
		b.t.note("vs River: %s's shutdown: %v", run.c.name, err)
	}
	run.w.pool.Close()
	run.w = nil
}

func (w *watch) parties() cpuParties {
	return cpuParties{server: w.srv.pid, postgres: w.b.pg.postmasterPID, benchSelf: os.Getpid()}
}

func (w *watch) now(ctx context.Context) (time.Time, error) {
	var t time.Time
	err := w.pool.QueryRow(ctx, `SELECT clock_timestamp()`).Scan(&t)
	return t, err
}

func (w *watch) count(ctx context.Context, sql string, args ...any) (int64, error) {
	var n int64
	err := w.pool.QueryRow(ctx, sql, args...).Scan(&n)
	return n, err
}

// waitFalse polls sql (a boolean) until it is false, or limit passes first.
func (w *watch) waitFalse(ctx context.Context, sql string, limit time.Duration) (ok bool, err error) {
	start := time.Now()
	for {
		var busy bool
		if err := w.pool.QueryRow(ctx, sql).Scan(&busy); err != nil {
			return false, err
		}
		if !busy {
			return true, nil
		}
		if time.Since(start) > limit {
			return false, nil
		}
		select {
		case <-ctx.Done():
			return false, ctx.Err()
		case <-time.After(vsPoll):
		}
	}
}

// burst posts new checkouts at full ingest for vsBurst, then waits until all are
// routed and until all their work is finished.
func (w *watch) burst(ctx context.Context, p *poster, tag string) (burstResult, error) {
	var r burstResult
	if err := w.b.pg.exec(ctx, `CHECKPOINT`); err != nil {
		return r, err
	}
	since, err := w.now(ctx)
	if err != nil {
		return r, err
	}
	var n atomic.Int64
	next := func() []byte {
		i := n.Add(1) - 1
		return eventBody(fmt.Sprintf("evt_%s_%d", tag, i), fmt.Sprintf("enq_%s_%d", tag, i), typeRouted)
	}
	parties := w.parties()
	before := parties.sample()
	r.load = p.runLoad(ctx, w.b.o.senders, 0, vsBurst, next)
	end := time.Now()
	if err := loadFailed(w.c.name+" burst", r.load); err != nil {
		return r, err
	}
	if w.c.toRoute != "" {
		ok, err := w.waitFalse(ctx, w.c.toRoute, vsWait)
		if err != nil {
			return r, err
		}
		r.routed, r.timedOut = time.Since(end), !ok
	}
	ok, err := w.waitFalse(ctx, w.c.open, vsWait)
	if err != nil {
		return r, err
	}
	r.performed, r.timedOut = time.Since(end), r.timedOut || !ok
	after := parties.sample()
	r.use, r.span = before.to(after), after.at.Sub(before.at)
	r.serverCPU, r.pgCPU = after.server-before.server, after.postgres-before.postgres
	r.stored, err = w.count(ctx, w.c.stored, since)
	return r, err
}

// duplicates posts again, for vsDuplicates, the deliveries the burst tag stored.
func (w *watch) duplicates(ctx context.Context, p *poster, tag string, r *vsResult) error {
	prefix := "evt_" + tag + "_"
	rows, err := w.pool.Query(ctx, w.c.storedIDs, prefix+"%")
	if err != nil {
		return err
	}
	var stored []int64
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			rows.Close()
			return err
		}
		if i, ok := eventSeq(id, prefix); ok {
			stored = append(stored, i)
		}
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return err
	}
	if len(stored) == 0 {
		return fmt.Errorf("duplicates: the burst stored nothing to repeat")
	}
	if err := w.b.pg.exec(ctx, `CHECKPOINT`); err != nil {
		return err
	}
	since, err := w.now(ctx)
	if err != nil {
		return err
	}
	var n atomic.Int64
	next := func() []byte {
		i := stored[(n.Add(1)-1)%int64(len(stored))]
		return eventBody(fmt.Sprintf("evt_%s_%d", tag, i), fmt.Sprintf("enq_%s_%d", tag, i), typeRouted)
	}
	r.dup = p.runLoad(ctx, w.b.o.senders, time.Second, vsDuplicates, next)
	if err := loadFailed(w.c.name+" duplicates", r.dup); err != nil {
		return err
	}
	r.dupStored, err = w.count(ctx, w.c.stored, since)
	return err
}

// endToEnd posts vsEvents new checkouts once each and waits until all their work
// is finished; the time is the database's, from before the first POST to the last
// finish recorded.
func (w *watch) endToEnd(ctx context.Context, p *poster, tag string) (vsE2E, error) {
	r := vsE2E{notDone: map[string]int64{}}
	if err := w.b.pg.exec(ctx, `CHECKPOINT`); err != nil {
		return r, err
	}
	t0, err := w.now(ctx)
	if err != nil {
		return r, err
	}
	records0 := w.b.dest.crm.Len()
	parties := w.parties()
	before := parties.sample()
	start := time.Now()
	if _, err := p.postAll(ctx, w.b.o.senders, vsEvents, func(i int) []byte {
		return eventBody(fmt.Sprintf("evt_%s_%d", tag, i), fmt.Sprintf("enq_%s_%d", tag, i), typeRouted)
	}); err != nil {
		return r, fmt.Errorf("end to end: post: %w", err)
	}
	r.posting = time.Since(start)
	// The CRM's count is in memory: waiting on it costs the database nothing.
	for w.b.dest.crm.Len()-records0 < vsEvents && time.Since(start) < vsWait && ctx.Err() == nil {
		time.Sleep(vsPoll)
	}
	for _, sql := range []string{w.c.toRoute, w.c.open} {
		if sql == "" {
			continue
		}
		ok, err := w.waitFalse(ctx, sql, max(vsWait-time.Since(start), time.Second))
		if err != nil {
			return r, err
		}
		r.timedOut = r.timedOut || !ok
	}
	after := parties.sample()
	r.use, r.span = before.to(after), after.at.Sub(before.at)
	r.serverCPU, r.pgCPU = after.server-before.server, after.postgres-before.postgres
	var last time.Time
	var n int64
	if err := w.pool.QueryRow(ctx, w.c.done, t0).Scan(&n, &last); err != nil {
		return r, err
	}
	r.n, r.elapsed = int(n), last.Sub(t0)
	rows, err := w.pool.Query(ctx, w.c.notDone, t0)
	if err != nil {
		return r, err
	}
	defer rows.Close()
	for rows.Next() {
		var st string
		var c int64
		if err := rows.Scan(&st, &c); err != nil {
			return r, err
		}
		r.notDone[st] = c
	}
	return r, rows.Err()
}

// eventSeq is i of a bench event id prefix+i.
func eventSeq(id, prefix string) (int64, bool) {
	rest, ok := strings.CutPrefix(id, prefix)
	if !ok {
		return 0, false
	}
	i, err := strconv.ParseInt(rest, 10, 64)
	if err != nil || i < 0 {
		return 0, false
	}
	return i, true
}

// doubledKeys counts the records whose business key (enquiry_id) starts with
// prefix, and how many of those keys more than one record holds: each is an
// effect made twice.
func doubledKeys(records []sandbox.Record, prefix string) (n, doubled int) {
	seen := map[string]int{}
	for _, rec := range records {
		key, _ := rec.Fields["enquiry_id"].(string)
		if !strings.HasPrefix(key, prefix) {
			continue
		}
		n++
		seen[key]++
		if seen[key] == 2 {
			doubled++
		}
	}
	return n, doubled
}

// times is the ratio a/b as the table prints it, oncehook over the peer.
func times(a, b float64) string {
	if b <= 0 || a < 0 {
		return "-"
	}
	return fmt.Sprintf("%.2fx", a/b)
}

func usPer(secs float64, n int64) float64 {
	if n <= 0 {
		return 0
	}
	return secs / float64(n) * 1e6
}

func seconds(d time.Duration) string { return fmt.Sprintf("%.1f s", d.Seconds()) }

// useOf is a CPU split with the server named.
func useOf(name string, u cpuUse) string {
	return strings.Replace(u.String(), "oncehook", name, 1)
}

// versusRows adds the comparison to the table: o is oncehook, p the peer, and
// each ratio is oncehook's figure over the peer's.
func (b *bench) versusRows(o, p vsResult) {
	const vs = "vs River peer: "
	add := func(figure, value, ratio, target, met, cpu string) {
		b.t.add(row{figure: vs + figure, value: value, ratio: ratio, target: target, met: met, cpu: cpu})
	}
	obs, opg, oo := o.burstCPU()
	ps, ppg, po := p.burstCPU()
	es, epg, eo := o.e2eCPU()
	qs, qpg, qo := p.e2eCPU()
	ow, pw := o.bestWarm(), p.bestWarm()
	oe, pe := o.bestE2E(), p.bestE2E()

	x := ow.sustained() / pw.sustained()
	add(fmt.Sprintf("sustained ingest, checkouts, %d senders: acked / (%s burst + until routed), better of %d",
		b.o.senders, vsBurst, len(o.warm)),
		both(perSec(ow.sustained()), perSec(pw.sustained())), times(ow.sustained(), pw.sustained()),
		">= 1.5x", check(x >= 1.5), others(ow.use.others, pw.use.others))
	add("ingest: acknowledgement p50 / p99, the same bursts",
		both(ms(ow.load.p50)+" / "+ms(ow.load.p99), ms(pw.load.p50)+" / "+ms(pw.load.p99)),
		"p99 "+times(float64(ow.load.p99), float64(pw.load.p99)), "oncehook p99 <= 25 ms",
		check(ow.load.p99 <= 25*time.Millisecond), others(ow.use.others, pw.use.others))
	add("duplicates: repeats of stored deliveries acknowledged",
		both(perSec(o.dup.rate()), perSec(p.dup.rate())), times(o.dup.rate(), p.dup.rate()), "-", "-", "")
	x = oe.rate() / pe.rate()
	add(fmt.Sprintf("end to end, %s checkouts, first POST to last finished, better of %d", thousands(vsEvents), len(o.e2e)),
		both(perSec(oe.rate()), perSec(pe.rate())), times(oe.rate(), pe.rate()), ">= 1.5x", check(x >= 1.5),
		others(oe.use.others, pe.use.others))
	add("CPU per delivery, server / Postgres (all warm bursts, through their last call)",
		both(fmt.Sprintf("%.0f / %.0f µs", obs, opg), fmt.Sprintf("%.0f / %.0f µs", ps, ppg)),
		times(obs, ps)+" / "+times(opg, ppg), "-", "-", others(oo, po))
	add("CPU per action end to end, server / Postgres (all runs)",
		both(fmt.Sprintf("%.0f / %.0f µs", es, epg), fmt.Sprintf("%.0f / %.0f µs", qs, qpg)),
		times(es, qs)+" / "+times(epg, qpg), "-", "-", others(eo, qo))
	add("peak RSS (VmHWM), warm bursts, duplicates and end to end",
		both(fmt.Sprintf("%.0f MiB", o.rss), fmt.Sprintf("%.0f MiB", p.rss)), times(o.rss, p.rss),
		"oncehook <= 100 MB", check(o.rss*1.048576 <= 100), "")
	add("doubled effects: business keys with more than one CRM record",
		both(fmt.Sprintf("%d of %s records", o.doubled, thousands(int64(o.records))),
			fmt.Sprintf("%d of %s", p.doubled, thousands(int64(p.records)))),
		"-", "0", check(o.doubled == 0 && p.doubled == 0 && o.dupStored == 0 && p.dupStored == 0), "")
	b.versusDrainRows(o, p)
	b.versusNotes(o, p)
}

// both shows oncehook's figure beside the peer's.
func both(ov, pv string) string { return "oncehook " + ov + "; peer " + pv }

// others is the CPU column: how busy other work kept the cores in oncehook's runs and
// in the peer's.
func others(a, b float64) string { return fmt.Sprintf("other work: %.0f%% | %.0f%%", a, b) }

// versusDrainRows adds the burst drains, on a freshly started cluster and warm.
func (b *bench) versusDrainRows(o, p vsResult) {
	routed := func(bs ...burstResult) (string, bool) {
		var parts []string
		ok := true
		for _, br := range bs {
			parts = append(parts, seconds(br.routed))
			ok = ok && !br.timedOut && br.routed <= 2*time.Second
		}
		return strings.Join(parts, ", "), ok
	}
	performed := func(bs ...burstResult) string {
		var parts []string
		for _, br := range bs {
			parts = append(parts, seconds(br.performed))
		}
		return strings.Join(parts, ", ")
	}
	for _, d := range []struct {
		name string
		o, p []burstResult
	}{{"freshly started cluster and database", []burstResult{o.fresh}, []burstResult{p.fresh}}, {"warm", o.warm, p.warm}} {
		var stored, storedP int64
		var oth, othP float64
		for i := range d.o {
			stored, oth = stored+d.o[i].stored, oth+d.o[i].use.others/float64(len(d.o))
		}
		for i := range d.p {
			storedP, othP = storedP+d.p[i].stored, othP+d.p[i].use.others/float64(len(d.p))
		}
		v, ok := routed(d.o...)
		b.t.add(row{figure: fmt.Sprintf("burst drain, %s: %s at full ingest, then until all routed", d.name, vsBurst),
			value: fmt.Sprintf("oncehook %s (%s stored); peer 0 s (routed in the ack)", v, thousands(stored)),
			ratio: "-", target: "<= 2 s", met: check(ok), cpu: others(oth, othP)})
		b.t.add(row{figure: fmt.Sprintf("burst drain, %s: until every call is made and recorded", d.name),
			value: both(performed(d.o...)+" ("+thousands(stored)+")", performed(d.p...)+" ("+thousands(storedP)+")"),
			ratio: "-", target: "-", met: "-", cpu: others(oth, othP)})
	}
}

// versusNotes writes every run of the comparison below the table.
func (b *bench) versusNotes(o, p vsResult) {
	for _, r := range []vsResult{o, p} {
		for i, br := range append([]burstResult{r.fresh}, r.warm...) {
			name := "fresh"
			if i > 0 {
				name = fmt.Sprintf("warm %d", i)
			}
			b.t.note("vs River: %s, %s burst: %s acknowledged at %s (p50 %s, p99 %s), %s stored; all routed %s and all performed %s after the burst%s; CPU: %s",
				r.name, name, thousands(int64(br.load.acked)), perSec(br.load.rate()), ms(br.load.p50), ms(br.load.p99),
				thousands(br.stored), seconds(br.routed), seconds(br.performed), timedOut(br.timedOut), useOf(r.name, br.use))
		}
		for i, e := range r.e2e {
			b.t.note("vs River: %s, end to end %d: %d finished in %.1f s, %s (POSTs took %.1f s)%s%s; CPU: %s",
				r.name, i+1, e.n, e.elapsed.Seconds(), perSec(e.rate()), e.posting.Seconds(),
				states(e.notDone), timedOut(e.timedOut), useOf(r.name, e.use))
		}
		b.t.note("vs River: %s, duplicates: p50 / p99 %s / %s, %d stored as new", r.name, ms(r.dup.p50), ms(r.dup.p99), r.dupStored)
	}
	b.t.note("vs River: the warm bursts and the end to end runs went oncehook, peer, peer, oncehook, both systems running; each fresh burst ran alone on a cluster just started")
	b.t.note("vs River: the peer (cmd/riverpeer) is a lean River receiver: net/http, stripe-go's webhook.ValidatePayloadWithTolerance on the raw bytes (no Event decoded), decoding only the id, the type and the job's fields, one pgx transaction per webhook (INSERT ... ON CONFLICT DO NOTHING RETURNING into its inbox, River InsertTx unique by enquiry id) and a River worker calling the CRM; a pool of 16 as oncehook serve has, River MaxWorkers 100, FetchCooldown 10 ms, FetchPollInterval 20 ms; Go's default GOGC (oncehook serve sets 200)")
}

func timedOut(t bool) string {
	if t {
		return "; TIMED OUT"
	}
	return ""
}

func states(m map[string]int64) string {
	if len(m) == 0 {
		return ""
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var parts []string
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%s %d", k, m[k]))
	}
	return "; not finished: " + strings.Join(parts, ", ")
}
