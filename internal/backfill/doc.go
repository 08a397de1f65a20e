// Package backfill finds deliveries a provider sent that the inbox lacks
// (docs/providers.md, "Backfill"): on each source's schedule it lists what the provider
// sent in the window, stores what is missing through the inbox (its Inbox
// interface) or asks the provider to deliver it again, one process per source at a
// time under a lease.
//
// cmd/oncehook starts it; the pages show its status through review.
package backfill
