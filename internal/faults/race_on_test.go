//go:build race

package faults

// raceEnabled: under `go test -race` the oncehook binary is built with the race
// detector too, and a race it reports fails the test that ran it.
const raceEnabled = true
