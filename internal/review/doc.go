// Package review is the service behind the dashboard and the JSON API: lists,
// queues, causes and next steps, counts and trends, corrections, replay, and the
// table of manual acts (review.go), each guarded and written to the audit trail,
// every read and act held to the reader's scope (For).
//
// web's pages and API handlers call it. It reaches another stage only through the
// doors walls_test.go in internal/ledger lists: accounts.ListUsers, for the people
// work can be assigned to.
package review
