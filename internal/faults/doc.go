// Package faults holds oncehook's fault, load and hostile-input tests. They build
// the real oncehook binary, run it as separate processes against real Postgres
// clusters they stop, start and kill, and check the destination's own records
// (a sandbox CRM served over loopback) rather than status codes alone.
//
// Run them with `make test-faults` or `go test -count=1 ./faults/...`.
package faults
