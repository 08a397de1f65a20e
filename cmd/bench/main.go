// Command bench measures oncehook against the machine's own limit: it starts a
// private Postgres, measures what that Postgres does with plain single-row durable
// INSERTs, then runs oncehook on it and prints every figure as a ratio to that
// baseline, in one table. Run it with `make bench`; it takes a few minutes.
//
// The server under test is the real binary, built from ./cmd/oncehook and run as
// its own process, so its peak RSS is its own. Only the 100 ms destination runs
// in-process: the binary has no setting for 64 calls in flight.
//
// Then oncehook is compared with a peer built on River (cmd/riverpeer, its own
// module), each its own process on a fresh database of the same cluster, with the
// same load generator and sandbox CRM (versus.go); -peer off leaves that out, and
// -peer only runs nothing else.
//
// Last, the ingest and end to end run again on a local Citus cluster, a
// coordinator and two workers on this machine (cluster.go), beside the single
// Postgres's figures; -cluster off leaves that out, and -cluster only runs it alone.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"
)

// options are the bench's flags; the defaults are what `make bench` runs.
type options struct {
	out         string        // where the table is written as well as printed
	seconds     time.Duration // length of each throughput measurement
	senders     int           // concurrent webhook senders (and baseline clients)
	rows        int           // actions generated for the large growth measurement
	clusterRows int           // the same on the local Citus cluster
	profile     string        // write a CPU profile of one phase run in-process here
	phase       string        // the phase to profile: ingest, e2e or slow
	keep        bool          // leave the temporary directory for inspection
	peer        string        // the comparison with the River peer: on, off, or only it
	cluster     string        // the run on a local Citus cluster: on, off, or only it
	profiles    string        // write a CPU profile of each process the comparison starts here
	outage      time.Duration // how long the outage phase's destination is down (0: no outage phase)
	outageOnly  bool          // run the outage phase alone
	// retentionRows is the deliveries of the day the retention phase drops (0:
	// leave the phase out); retentionOnly runs it alone.
	retentionRows int
	retentionOnly bool
	// growthOnly runs the growth phase alone, on a server with growthClients,
	// at 1,000, a million and rows actions.
	growthOnly bool
	verbose    bool
	repoRoot   string
}

func main() {
	var o options
	flag.StringVar(&o.out, "out", "artifacts/bench.txt", "also write the table to this file")
	flag.DurationVar(&o.seconds, "duration", 15*time.Second, "length of each throughput measurement")
	flag.IntVar(&o.senders, "senders", 32, "concurrent senders and baseline clients")
	flag.IntVar(&o.rows, "rows", 1_000_000, "actions generated for the large growth measurement")
	flag.IntVar(&o.clusterRows, "cluster-rows", 1_000_000, "actions generated for the large growth measurement on the local Citus cluster")
	flag.StringVar(&o.profile, "cpuprofile", "", "run one phase in-process with this CPU profile instead of the table")
	flag.StringVar(&o.phase, "phase", "ingest", "the phase -cpuprofile runs: ingest, e2e (0 ms destination) or slow (100 ms)")
	flag.StringVar(&o.peer, "peer", "on", "the comparison with the River peer (cmd/riverpeer): on, off, or only (no other phase)")
	flag.StringVar(&o.cluster, "cluster", "on", "the run on a local Citus cluster (a coordinator and two workers): on, off, or only (no other phase)")
	flag.StringVar(&o.profiles, "profiles", "", "write a CPU profile of each oncehook and peer process the comparison starts into this directory")
	flag.DurationVar(&o.outage, "outage", time.Minute, "how long the destination is down in the outage phase, run with the breaker off and on (0: leave the phase out)")
	flag.BoolVar(&o.outageOnly, "outage-only", false, "run the outage phase alone")
	flag.IntVar(&o.retentionRows, "retention-rows", 1_000_000, "deliveries in the day one retention pass drops, against the row-by-row delete (0: leave the phase out)")
	flag.BoolVar(&o.retentionOnly, "retention-only", false, "run the retention phase alone")
	flag.BoolVar(&o.growthOnly, "growth-only", false, "run the growth phase alone, its server with four clients, at 1,000, 1,000,000 and -rows actions (make bench-growth: 10,000,000)")
	flag.BoolVar(&o.keep, "keep", false, "keep the temporary directory (Postgres data, server log)")
	flag.BoolVar(&o.verbose, "v", false, "log progress in detail")
	flag.Parse()
	if o.peer != "on" && o.peer != "off" && o.peer != "only" {
		log.Fatalf("-peer %q: want on, off or only", o.peer)
	}
	if o.cluster != "on" && o.cluster != "off" && o.cluster != "only" {
		log.Fatalf("-cluster %q: want on, off or only", o.cluster)
	}
	if o.peer == "only" && o.cluster == "only" {
		log.Fatal("-peer only and -cluster only: choose one")
	}
	if o.profiles != "" {
		dir, err := filepath.Abs(o.profiles)
		if err == nil {
			err = os.MkdirAll(dir, 0o755)
		}
		if err != nil {
			log.Fatalf("-profiles: %v", err)
		}
		o.profiles = dir
	}
	log.SetFlags(log.Ltime)
	log.SetPrefix("bench: ")
	root, err := os.Getwd()
	if err != nil {
		log.Fatal(err)
	}
	o.repoRoot = root
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, o); err != nil {
		log.Fatal(err)
	}
}

func run(ctx context.Context, o options) (err error) {
	// The socket path lives under the data directory and must stay short: /tmp.
	dir, err := os.MkdirTemp("/tmp", "ohb-")
	if err != nil {
		return fmt.Errorf("temporary directory: %w", err)
	}
	if err := os.Chmod(dir, 0o755); err != nil { // Postgres may run as another user
		return err
	}
	defer func() {
		if o.keep {
			log.Printf("kept %s", dir)
			return
		}
		_ = os.RemoveAll(dir)
	}()
	pg, err := startPostgres(ctx, filepath.Join(dir, "pg"))
	if err != nil {
		return err
	}
	defer pg.stop()
	b := &bench{o: o, dir: dir, pg: pg, machine: describeMachine(ctx, pg)}
	if o.profile != "" {
		return b.profile(ctx)
	}
	t, err := b.measure(ctx)
	if t == nil {
		return err
	}
	text := t.String()
	fmt.Print(text)
	if o.out != "" {
		if werr := writeFile(o.out, text); werr != nil && err == nil {
			err = werr
		}
	}
	return err
}

func writeFile(path, text string) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := io.WriteString(f, text); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
