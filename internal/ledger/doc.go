// Package ledger is the core every stage shares: the types it hands out (Action,
// Event, User without its hash, the config), the states and their sets, the decision
// table (decide.go) and the outcomes it decides (outcomes.go), the audit trail, the
// scope every read and act goes through, the transaction helpers and the conversion
// of sqlc rows into its own types (rows.go). It also defines the interfaces the
// leaves implement: DestinationClient (internal/destination) and BackfillClient
// (internal/provider).
//
// It imports no stage. Every stage imports it; web and views see only its types
// and the services of the stages web may call (see walls_test.go).
package ledger
