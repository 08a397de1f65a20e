package main

import (
	"context"
	"errors"
	"fmt"
	"log"
	"path/filepath"
	"time"

	"github.com/oncehook/oncehook/db"
)

const (
	// clusterWorkers is how many workers the local Citus cluster has.
	clusterWorkers = 2
	// clusterClients is how many clients the cluster's server has, as many on each
	// worker, so that every worker holds a share of the writes and the claims.
	clusterClients = 4
	// clusterGrowthBudget bounds each growth measurement on the cluster, where a
	// page that reads every shard, or one that misses as on one Postgres, may
	// take a second.
	clusterGrowthBudget = 5 * time.Second
)

// cluster runs the single Postgres's ingest and end to end again on a local Citus
// cluster (a coordinator and its workers, on this machine, under the bench's
// directory), with the same server binary, load generator and destination, and
// adds their rows beside the single Postgres's: each party's CPU per delivery and
// per action, the coordinator's and each worker's apart. Then the growth rows'
// pages and API calls, over actions spread on the clients, so on both workers. Without Citus the row
// says how to install it.
func (b *bench) cluster(ctx context.Context) error {
	log.Printf("cluster: starting a local Citus cluster, a coordinator and %d workers", clusterWorkers)
	pg, err := startCluster(ctx, filepath.Join(b.dir, "citus"))
	if errors.Is(err, db.ErrNoCitus) {
		b.t.add(row{figure: fmt.Sprintf("cluster: Citus, a coordinator and %d workers", clusterWorkers),
			value: "not measured: " + db.CitusInstall, ratio: "-", target: "-", met: "-"})
		return nil
	}
	if err != nil {
		return fmt.Errorf("cluster: %w", err)
	}
	defer pg.stop()
	clients, err := pickClients(ctx, pg, clusterClients)
	if err != nil {
		return fmt.Errorf("cluster: %w", err)
	}
	single := b.pg
	b.pg, b.clients = pg, clients
	defer func() { b.pg, b.clients = single, nil }()
	config, addr, err := b.writeConfig(b.dest, "cluster.yaml", clients...)
	if err != nil {
		return err
	}
	log.Printf("cluster: starting the server on the coordinator, clients %v", clients)
	if b.srv, err = b.startChild(ctx, config, addr, "cluster-server.log"); err != nil {
		return fmt.Errorf("cluster: %w", err)
	}
	defer func() {
		if err := b.srv.stop(); err != nil {
			b.t.note("cluster: the server's shutdown: %v", err)
		}
		b.srv = nil
	}()
	if err := b.clusterIngest(ctx); err != nil {
		return err
	}
	if err := b.clusterEndToEnd(ctx); err != nil {
		return err
	}
	if err := b.growthRows(ctx, "cluster growth", []int{1000, b.o.clusterRows}, clusterGrowthBudget); err != nil {
		return err
	}
	if b.o.clusterRows != b.o.rows {
		b.t.note("cluster growth: the large size is -cluster-rows (%s), not -rows (%s)",
			thousands(int64(b.o.clusterRows)), thousands(int64(b.o.rows)))
	}
	return nil
}

// startCluster starts a local Citus cluster under dir with the oncehook database
// distributed, and returns it as the bench's postgres: the coordinator, with the
// workers beside it. It returns db.ErrNoCitus when Citus is not installed.
func startCluster(ctx context.Context, dir string) (*postgres, error) {
	c, err := db.StartCitus(ctx, db.CitusParams{Dir: dir, Workers: clusterWorkers})
	if err != nil {
		return nil, err
	}
	pg := &postgres{emb: c.Coordinator, dir: c.Coordinator.Dir(), dsn: c.Coordinator.DSN("oncehook"), workers: c.Workers}
	if err := c.CreateDatabase(ctx, "oncehook"); err != nil {
		pg.stop()
		return nil, err
	}
	return migrated(ctx, pg)
}

// pickClients chooses n client names whose shards lie on the workers in equal
// numbers (the hash of a name decides its shard's worker).
func pickClients(ctx context.Context, pg *postgres, n int) ([]string, error) {
	perWorker := map[string]int{}
	var out []string
	for i := 1; len(out) < n && i <= 1000; i++ {
		name := fmt.Sprintf("shop%d", i)
		var node string
		if err := pg.pool.QueryRow(ctx, `SELECT nodename || ':' || nodeport FROM citus_shards
			WHERE shardid = get_shard_id_for_distribution_column('events', $1::text)`, name).Scan(&node); err != nil {
			return nil, fmt.Errorf("find the worker of client %s: %w", name, err)
		}
		if perWorker[node] < n/clusterWorkers {
			perWorker[node]++
			out = append(out, name)
		}
	}
	if len(out) < n {
		return nil, fmt.Errorf("found %d clients spread over the workers, wanted %d", len(out), n)
	}
	return out, nil
}

// clusterRatio is the cluster's figure over the single Postgres's of this run.
func clusterRatio(cluster, single float64) string {
	if single == 0 {
		return "-"
	}
	return fmt.Sprintf("%.2fx single", cluster/single)
}

func (b *bench) clusterIngest(ctx context.Context) error {
	log.Printf("cluster: ingest, new deliveries, %d senders, %s", b.o.senders, b.o.seconds)
	run, err := b.runIngest(ctx, "cl_in")
	if err != nil {
		return fmt.Errorf("cluster: %w", err)
	}
	r := run.r
	b.t.add(row{figure: fmt.Sprintf("cluster ingest: signed webhooks acknowledged, %d senders, %d clients", b.o.senders, len(b.clients)),
		value: perSec(r.rate()), ratio: clusterRatio(r.rate(), b.ingestRate), target: "-", met: "-", cpu: run.use.String()})
	b.t.add(row{figure: "cluster ingest: acknowledgement latency p50 / p99",
		value: ms(r.p50) + " / " + ms(r.p99), ratio: "-", target: "-", met: "-"})
	b.t.note("cluster ingest: CPU per delivery: %s; single Postgres: %s",
		run.use.perItem(float64(run.posted)), b.singleIngest.use.perItem(float64(b.singleIngest.posted)))
	return nil
}

func (b *bench) clusterEndToEnd(ctx context.Context) error {
	n := b.e2eActions()
	log.Printf("cluster: end to end, %d actions, zero-latency destination", n)
	b.dest.delay.Store(0)
	r, err := b.runE2E(ctx, b.srv.url, "cl_e2e", n, 5*time.Minute)
	if err != nil {
		return fmt.Errorf("cluster: %w", err)
	}
	b.t.add(row{figure: "cluster end to end: actions confirmed, POST to destination reply, 0 ms destination",
		value: perSec(r.rate()), ratio: clusterRatio(r.rate(), b.e2eRate), target: "-", met: "-", cpu: r.cpu.String()})
	records, doubled := doubledKeys(b.dest.crm.Records(), "enq_cl_e2e_")
	b.t.add(row{figure: "cluster doubled effects: business keys with more than one CRM record",
		value: fmt.Sprintf("%d of %s records", doubled, thousands(int64(records))), ratio: "-", target: "0",
		met: check(doubled == 0)})
	b.t.note("%s", r.describe("cluster end to end, 0 ms"))
	b.t.note("cluster end to end: CPU per action: %s; single Postgres: %s",
		r.cpu.perItem(float64(r.n)), b.singleE2E.cpu.perItem(float64(b.singleE2E.n)))
	return nil
}
