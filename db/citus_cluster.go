package db

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
)

// CitusInstall is what a local cluster says when the machine's PostgreSQL has no
// Citus: one line, how to install it.
const CitusInstall = "Citus is not installed in this machine's PostgreSQL: install it from Citus's own packages " +
	"(https://docs.citusdata.com/en/stable/installation/multi_node.html), or build it with ../shared/citus/build.sh"

// ErrNoCitus is StartCitus's error when the machine's PostgreSQL has no Citus; its
// text is CitusInstall.
var ErrNoCitus = errors.New(CitusInstall)

// citusSettings are the settings every node of a local cluster needs: Citus
// preloaded, and prepared transactions for its two-phase commit across nodes.
var citusSettings = []string{"shared_preload_libraries=citus", "max_prepared_transactions=200"}

// CitusParams configures StartCitus.
type CitusParams struct {
	// Dir holds the nodes' data directories: Dir/coordinator, Dir/worker1, ...
	Dir      string
	Workers  int
	Settings []string // more server settings for every node (citus.shard_count=8, say)
	Logger   *slog.Logger
}

// Cluster is a local Citus cluster: private servers (Embedded) on this machine,
// one coordinator and its workers, reached over their unix sockets.
type Cluster struct {
	Coordinator *Embedded
	Workers     []*Embedded
}

// StartCitus starts a coordinator and p.Workers workers from the machine's
// PostgreSQL with Citus preloaded, each a private server under p.Dir. It returns
// ErrNoCitus when Citus is not installed, or what StartEmbedded returns; the
// nodes started before a failure are stopped.
func StartCitus(ctx context.Context, p CitusParams) (*Cluster, error) {
	settings := append(append([]string{}, citusSettings...), p.Settings...)
	c := &Cluster{}
	for i := range p.Workers + 1 {
		name := "coordinator"
		if i > 0 {
			name = fmt.Sprintf("worker%d", i)
		}
		e, err := StartEmbedded(ctx, EmbeddedParams{Dir: filepath.Join(p.Dir, name), Settings: settings, Logger: p.Logger})
		if err != nil {
			_ = c.Stop(context.WithoutCancel(ctx))
			if strings.Contains(err.Error(), `could not access file "citus"`) {
				return nil, ErrNoCitus
			}
			return nil, err
		}
		if i == 0 {
			c.Coordinator = e
		} else {
			c.Workers = append(c.Workers, e)
		}
	}
	return c, nil
}

// Nodes returns the coordinator, then the workers.
func (c *Cluster) Nodes() []*Embedded {
	if c.Coordinator == nil {
		return nil
	}
	return append([]*Embedded{c.Coordinator}, c.Workers...)
}

// Stop stops every node the cluster started, the coordinator first, and returns
// the first error.
func (c *Cluster) Stop(ctx context.Context) error {
	var first error
	for _, n := range c.Nodes() {
		sctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
		if err := n.Stop(sctx); err != nil && first == nil {
			first = err
		}
		cancel()
	}
	return first
}

// CreateDatabase makes name a Citus database of the cluster: the database and the
// extension on each worker, then on the coordinator, with the coordinator's host
// set and the workers registered. A database that exists already is used.
func (c *Cluster) CreateDatabase(ctx context.Context, name string) error {
	for _, w := range c.Workers {
		if err := w.CreateDatabase(ctx, name); err != nil {
			return err
		}
		if err := execOn(ctx, w.DSN(name), "CREATE EXTENSION IF NOT EXISTS citus"); err != nil {
			return err
		}
	}
	if err := c.Coordinator.CreateDatabase(ctx, name); err != nil {
		return err
	}
	stmts := []string{"CREATE EXTENSION IF NOT EXISTS citus"}
	dir, port := c.Coordinator.Socket()
	stmts = append(stmts, fmt.Sprintf("SELECT citus_set_coordinator_host(%s, %d)", quoteLiteral(dir), port))
	for _, w := range c.Workers {
		dir, port := w.Socket()
		stmts = append(stmts, fmt.Sprintf("SELECT citus_add_node(%s, %d)", quoteLiteral(dir), port))
	}
	return execOn(ctx, c.Coordinator.DSN(name), stmts...)
}

// execOn runs stmts in turn on a connection of its own to dsn.
func execOn(ctx context.Context, dsn string, stmts ...string) error {
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return fmt.Errorf("connect: %w", err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	for _, s := range stmts {
		if _, err := conn.Exec(ctx, s); err != nil {
			return fmt.Errorf("%s: %w", s, err)
		}
	}
	return nil
}

func quoteLiteral(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }
