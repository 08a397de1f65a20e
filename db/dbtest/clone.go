package dbtest

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/oncehook/oncehook/db"
)

// ownClusters are the Citus clusters Cluster started, by their coordinator.
var ownClusters struct {
	mu sync.Mutex
	m  map[*db.Embedded]*db.Cluster
}

// nodesOf is cluster with its workers, the coordinator first: the shared
// cluster's, or one Cluster started; one server alone otherwise.
func nodesOf(cluster *db.Embedded) []*db.Embedded {
	ownClusters.mu.Lock()
	c := ownClusters.m[cluster]
	ownClusters.mu.Unlock()
	server.mu.Lock()
	if server.citus != nil && cluster == server.citus.Coordinator {
		c = server.citus
	}
	server.mu.Unlock()
	if c == nil {
		return []*db.Embedded{cluster}
	}
	return c.Nodes()
}

// Clone creates name on cluster (a server from Cluster) as a copy of its
// migrated "oncehook" database, which becomes a template no one connects to, and
// returns its DSN; the database is dropped at t.Cleanup. On Citus the copy is
// made on every node, the workers' first, as the shared template's are.
func Clone(t testing.TB, cluster *db.Embedded, name string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	nodes := nodesOf(cluster)
	admins := make([]*pgxpool.Pool, 0, len(nodes))
	for _, n := range nodes {
		a, err := db.Open(ctx, n.DSN("postgres"), 2)
		if err != nil {
			t.Fatalf("dbtest: %v", err)
		}
		defer a.Close()
		admins = append(admins, a)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		for _, n := range nodes { // the coordinator first
			a, err := db.Open(ctx, n.DSN("postgres"), 1)
			if err == nil {
				err = dropDatabase(ctx, a, name)
				a.Close()
			}
			if err != nil {
				t.Errorf("dbtest: %v", err)
			}
		}
	})
	for i := len(admins) - 1; i >= 0; i-- { // the workers' parts first
		if err := sealTemplate(ctx, admins[i], "oncehook"); err != nil {
			t.Fatalf("dbtest: %v", err)
		}
		if err := cloneDatabase(ctx, admins[i], name, "oncehook"); err != nil {
			t.Fatalf("dbtest: %v", err)
		}
	}
	return cluster.DSN(name)
}

// rememberCluster records a Citus cluster Cluster started.
func rememberCluster(c *db.Cluster) {
	ownClusters.mu.Lock()
	defer ownClusters.mu.Unlock()
	if ownClusters.m == nil {
		ownClusters.m = map[*db.Embedded]*db.Cluster{}
	}
	ownClusters.m[c.Coordinator] = c
}

// NodeDSNs is dsn, a test database on the shared server or on a cluster from
// Cluster, with the same database on each worker of a Citus cluster: for a test
// that must reach what runs on the shards (a lock a trigger waits on, say). On
// one server it is dsn alone.
func NodeDSNs(t testing.TB, dsn string) []string {
	t.Helper()
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		t.Fatalf("dbtest: %v", err)
	}
	host, port := cfg.ConnConfig.Host, int(cfg.ConnConfig.Port)
	out := []string{dsn}
	var candidates []*db.Embedded
	server.mu.Lock()
	if server.citus != nil {
		candidates = append(candidates, server.citus.Coordinator)
	}
	server.mu.Unlock()
	ownClusters.mu.Lock()
	for c := range ownClusters.m {
		candidates = append(candidates, c)
	}
	ownClusters.mu.Unlock()
	for _, c := range candidates {
		if dir, p := c.Socket(); dir == host && p == port {
			for _, w := range nodesOf(c)[1:] {
				out = append(out, w.DSN(cfg.ConnConfig.Database))
			}
			return out
		}
	}
	if OnCitus() {
		t.Fatalf("dbtest: %s is on none of the Citus clusters started here", fmt.Sprintf("%s:%d", host, port))
	}
	return out
}
