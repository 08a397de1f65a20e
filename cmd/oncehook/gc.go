package main

import (
	"os"
	"runtime/debug"
)

// gcPercent is the garbage collector's target for serve and worker when GOGC is not
// set. Go's default, 100, collects each time the heap doubles over the live data;
// a webhook allocates its request's buffers and a routed event its decoded body, so
// under load the collector takes a large share of the CPU. At 200 it runs half as
// often, for a heap up to three times the live data (docs/performance.md has the
// measurements). GOGC in the environment takes precedence, and GOMEMLIMIT bounds
// the heap whatever the target.
const gcPercent = 200

// tuneGC sets gcPercent unless the operator set GOGC.
func tuneGC() {
	if _, set := os.LookupEnv("GOGC"); !set {
		debug.SetGCPercent(gcPercent)
	}
}
