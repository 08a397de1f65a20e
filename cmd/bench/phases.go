package main

import (
	"context"
	"errors"
	"fmt"
	"log"
	"os"
	"sync/atomic"
	"time"
)

// bench is one run: its Postgres, the server under test and what it measured.
type bench struct {
	o       options
	dir     string
	pg      *postgres
	machine machine
	bin     string
	peerBin string // the River peer (cmd/riverpeer), when o.peer is not "off"
	dest    *destination
	config  string
	addr    string
	srv     *child
	t       *table

	baseline   float64 // inserts per second, the mean of the runs at start and end
	ingestRate float64 // new deliveries acknowledged per second
	dupRate    float64 // repeats acknowledged per second
	e2eRate    float64 // actions confirmed per second, zero-latency destination
	// The single Postgres's ingest and end to end, for the cluster's rows beside them.
	singleIngest ingestRun
	singleE2E    e2eResult
	// clients are the clients of the running server's config, nil for benchConfig's
	// one (acme); the senders post to their sources in turn.
	clients []string

	profileStarts atomic.Int64 // processes started with a CPU profile (-profiles)
	earlierRSS    float64      // the peak RSS (MiB) of the server's processes stopped so far (whileStopped)
	// curve: the growth phase measures the ingest at its start, half way and at
	// its largest size (the cost curve); curveStart is the rate at the start.
	curve      bool
	curveStart float64
}

// fillRatios writes the ratios once the baseline is final.
func (b *bench) fillRatios() {
	for i, r := range b.t.rows {
		switch r.key {
		case "ingest":
			x := b.ingestRate / b.baseline
			b.t.rows[i].ratio, b.t.rows[i].met = fmt.Sprintf("%.2fx baseline", x), check(x >= 1.0)
		case "duplicates":
			x := b.dupRate / b.ingestRate
			b.t.rows[i].ratio, b.t.rows[i].met = fmt.Sprintf("%.2fx new", x), check(x >= 0.9)
		case "e2e":
			x := b.e2eRate / b.baseline
			b.t.rows[i].ratio, b.t.rows[i].met = fmt.Sprintf("%.2fx baseline", x), check(x >= 0.25)
		}
	}
}

// parties splits CPU time between the server, Postgres and the bench itself.
func (b *bench) parties() cpuParties {
	return cpuParties{server: func() int { return b.srv.pid() }, postgres: b.pg.postmasterPID, benchSelf: os.Getpid(),
		workers: b.pg.workerPIDs()}
}

// measure runs every phase in order and returns the table, partial on error.
func (b *bench) measure(ctx context.Context) (*table, error) {
	b.t = &table{machine: b.machine, started: time.Now(), loadBefore: loadAverage()}
	defer func() { b.t.loadAfter = loadAverage() }()
	err := b.phases(ctx)
	if b.srv != nil {
		if serr := b.srv.stop(); serr != nil {
			log.Printf("server stop: %v", serr)
		}
	}
	if b.dest != nil {
		b.dest.close()
	}
	return b.t, err
}

// phases builds the binaries and runs the phases in order: the baseline, the
// server's, the in-process one, the comparison with the peer, the retention
// pass, the baseline again, the cluster's. With -peer only, -cluster only,
// -outage-only or -retention-only it runs that alone.
func (b *bench) phases(ctx context.Context) error {
	if err := b.buildBinaries(ctx); err != nil {
		return err
	}
	if run := b.onePhase(); run != nil {
		return run(ctx)
	}
	first, err := b.measureBaseline(ctx, "start")
	if err != nil {
		return err
	}
	b.baseline = first
	if err := b.serverPhases(ctx); err != nil {
		return err
	}
	if err := b.endToEndSlow(ctx); err != nil {
		return err
	}
	if err := b.outage(ctx); err != nil {
		return err
	}
	if b.o.peer == "on" {
		if err := b.versusPeer(ctx); err != nil {
			return err
		}
	}
	if err := b.retentionPass(ctx); err != nil {
		return err
	}
	last, err := b.measureBaseline(ctx, "end")
	if err != nil {
		return err
	}
	b.baseline = (first + last) / 2
	b.t.rows[0].value = perSec(b.baseline)
	b.t.note("baseline: %s at the start, %s at the end; ratios use their mean", perSec(first), perSec(last))
	b.fillRatios()
	if b.o.cluster == "on" {
		return b.cluster(ctx)
	}
	return nil
}

// onePhase is the phase an -only flag asks for alone, nil when none does.
func (b *bench) onePhase() func(context.Context) error {
	var phase func(context.Context) error
	switch {
	case b.o.retentionOnly:
		return b.retentionPass
	case b.o.growthOnly:
		phase = b.growthAlone
	case b.o.outageOnly:
		phase = b.outage
	case b.o.cluster == "only":
		phase = b.cluster
	case b.o.peer == "only":
		phase = b.versusPeer
	default:
		return nil
	}
	return func(ctx context.Context) error { // each of these calls a destination
		dest, err := startDestination()
		if err != nil {
			return err
		}
		b.dest = dest
		return phase(ctx)
	}
}

// buildBinaries builds oncehook and, unless -peer is off, the River peer.
func (b *bench) buildBinaries(ctx context.Context) error {
	log.Printf("building ./cmd/oncehook")
	if err := b.buildServer(ctx); err != nil {
		return err
	}
	if b.o.peer != "off" {
		log.Printf("building cmd/riverpeer")
		if err := b.buildPeer(ctx); err != nil {
			return err
		}
	}
	return nil
}

// serverPhases starts the destination and the server as its own process, runs
// the phases measured against them, and stops the server.
func (b *bench) serverPhases(ctx context.Context) error {
	dest, err := startDestination()
	if err != nil {
		return err
	}
	b.dest = dest
	if b.config, b.addr, err = b.writeConfig(dest, "bench.yaml"); err != nil {
		return err
	}
	log.Printf("starting the server (%s serve)", b.bin)
	if b.srv, err = b.startChild(ctx, b.config, b.addr, "server.log"); err != nil {
		return err
	}
	steps := []func(context.Context) error{b.ingest, b.duplicates, b.endToEnd, b.growth, b.memory}
	for _, step := range steps {
		if err := step(ctx); err != nil {
			return err
		}
	}
	log.Printf("stopping the server")
	if err := b.srv.stop(); err != nil {
		b.t.note("the server's shutdown: %v", err)
	}
	b.srv = nil
	return nil
}

// settle lets the router finish the events already stored and starts the next
// phase from a fresh checkpoint, so no phase pays for the one before.
func (b *bench) settle(ctx context.Context) {
	deadline := time.Now().Add(120 * time.Second)
	for time.Now().Before(deadline) && ctx.Err() == nil {
		n, err := b.pg.count(ctx, `SELECT count(*) FROM events WHERE status = 'received'`)
		if err != nil || n == 0 {
			break
		}
		time.Sleep(200 * time.Millisecond) // poll interval
	}
	if err := b.pg.checkpoint(ctx); err != nil {
		log.Printf("checkpoint: %v", err)
	}
}

func (b *bench) measureBaseline(ctx context.Context, when string) (float64, error) {
	log.Printf("baseline (%s): single-row INSERTs, %d clients, %s", when, b.o.senders, b.o.seconds)
	b.settle(ctx)
	before := b.parties().sample()
	tps, how, err := b.pg.baseline(ctx, b.o.senders, b.o.seconds)
	if err != nil {
		return 0, fmt.Errorf("baseline: %w", err)
	}
	// pgbench's backends are counted once the postmaster has reaped them.
	time.Sleep(time.Second)
	use := before.to(b.parties().sample())
	if when == "start" {
		b.t.add(row{figure: fmt.Sprintf("baseline: durable single-row INSERTs of 2 KB, %d clients (%s)", b.o.senders, how),
			value: perSec(tps), ratio: "1.00", target: "-", met: "-", cpu: use.String()})
	} else {
		b.t.note("baseline at the end: %s", use)
	}
	return tps, nil
}

// ingestRun is one sustained-ingest measurement.
type ingestRun struct {
	r       loadResult
	use     cpuUse
	posted  int64 // deliveries posted while use was measured, the warm-up's included
	commits int64 // transactions the database (a cluster's coordinator) committed meanwhile
}

// runIngest posts new deliveries (ids evt_PREFIX_N) to the server with the
// bench's senders for the warm-up and the measured window.
func (b *bench) runIngest(ctx context.Context, prefix string) (ingestRun, error) {
	b.settle(ctx)
	p := newPoster(b.srv.url, b.o.senders).spread(b.clients)
	var n atomic.Int64
	next := func() []byte {
		i := n.Add(1) - 1
		return eventBody(fmt.Sprintf("evt_%s_%d", prefix, i), fmt.Sprintf("enq_%s_%d", prefix, i), typeIgnored)
	}
	commits := b.pg.commits(ctx)
	before := b.parties().sample()
	r := p.runLoad(ctx, b.o.senders, 2*time.Second, b.o.seconds, next)
	use := before.to(b.parties().sample())
	commits = b.pg.commits(ctx) - commits
	return ingestRun{r: r, use: use, posted: n.Load(), commits: commits}, loadFailed("ingest", r)
}

func (b *bench) ingest(ctx context.Context) error {
	log.Printf("ingest: new deliveries, %d senders, %s", b.o.senders, b.o.seconds)
	run, err := b.runIngest(ctx, "in")
	if err != nil {
		return err
	}
	r := run.r
	b.ingestRate, b.singleIngest = r.rate(), run
	b.t.add(row{figure: fmt.Sprintf("ingest: signed webhooks acknowledged, %d senders", b.o.senders),
		value: perSec(r.rate()), target: ">= 1.0x", cpu: run.use.String(), key: "ingest"})
	b.t.add(row{figure: "ingest: acknowledgement latency p50 / p99",
		value: ms(r.p50) + " / " + ms(r.p99), ratio: "-", target: "p99 <= 50 ms", met: check(r.p99 <= 50*time.Millisecond)})
	b.t.note("ingest: %d commits in the database for %d deliveries (with the router's own), %.1f deliveries per commit",
		run.commits, run.posted, float64(run.posted)/float64(max(run.commits, 1)))
	return nil
}

func (b *bench) duplicates(ctx context.Context) error {
	log.Printf("duplicates: repeats of stored deliveries, %d senders, %s", b.o.senders, b.o.seconds)
	b.settle(ctx)
	// Repeat exactly what was stored: a request cut off at the end of the ingest
	// window may or may not have been.
	var stored []int64
	rows, err := b.pg.pool.Query(ctx, `SELECT substr(source_event_id, 8)::bigint FROM events
		WHERE source_event_id LIKE 'evt_in_%' ORDER BY id`)
	if err != nil {
		return err
	}
	for rows.Next() {
		var i int64
		if err := rows.Scan(&i); err != nil {
			return err
		}
		stored = append(stored, i)
	}
	if err := rows.Err(); err != nil {
		return err
	}
	if len(stored) == 0 {
		return errors.New("duplicates: ingest stored nothing to repeat")
	}
	var since time.Time
	if err := b.pg.pool.QueryRow(ctx, `SELECT now()`).Scan(&since); err != nil {
		return err
	}
	p := newPoster(b.srv.url, b.o.senders)
	var n atomic.Int64
	next := func() []byte {
		i := stored[(n.Add(1)-1)%int64(len(stored))]
		return eventBody(fmt.Sprintf("evt_in_%d", i), fmt.Sprintf("enq_in_%d", i), typeIgnored)
	}
	updates, hot := b.pg.eventUpdates(ctx)
	before := b.parties().sample()
	r := p.runLoad(ctx, b.o.senders, 2*time.Second, b.o.seconds, next)
	use := before.to(b.parties().sample())
	if err := loadFailed("duplicates", r); err != nil {
		return err
	}
	time.Sleep(time.Second) // backends report their table statistics within a second
	updates2, hot2 := b.pg.eventUpdates(ctx)
	if n := updates2 - updates; n > 0 {
		b.t.note("duplicates: %.0f%% of the %d updates of events were HOT (no index entries written)",
			100*float64(hot2-hot)/float64(n), n)
	}
	added, err := b.pg.count(ctx, `SELECT count(*) FROM events WHERE received_at >= $1`, since)
	if err != nil {
		return err
	}
	if added != 0 {
		return fmt.Errorf("duplicates: %d repeats were stored as new events", added)
	}
	b.dupRate = r.rate()
	b.t.add(row{figure: "duplicates: repeats acknowledged (counted, not stored)",
		value: perSec(r.rate()), target: ">= 0.9x", cpu: use.String(), key: "duplicates"})
	b.t.note("duplicates: p50 / p99 %s / %s", ms(r.p50), ms(r.p99))
	return nil
}

func loadFailed(phase string, r loadResult) error {
	if r.acked == 0 {
		return fmt.Errorf("%s: nothing was acknowledged (statuses %v, first error %v)", phase, r.statuses, r.firstErr)
	}
	if r.failed > 0 {
		log.Printf("%s: %d requests not acknowledged (statuses %v, first error %v)", phase, r.failed, r.statuses, r.firstErr)
	}
	return nil
}
