// Package engine is where the workers start: it wires one process's router and
// performer, their shared wake-ups and database mode, and the listener that turns
// Postgres notifications into wake-ups. cmd/oncehook, cmd/bench and the tests call
// New and Run; nothing else starts a router or a performer.
package engine
