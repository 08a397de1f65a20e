// Package inbox is the inbox: it stores each verified delivery once per delivery
// identity and acknowledges it only after the commit (docs/how-it-works.md), writing
// the deliveries that arrive together in one group commit.
//
// It owns the events table's writes on ingest. web's webhook handlers call it
// (Inbox.Accept); the backfill stage calls Inbox.Backfill through its own
// backfill.Inbox interface.
package inbox
