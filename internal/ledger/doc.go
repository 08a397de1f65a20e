// Package ledger is the core every stage shares: the types it hands out (Action,
// Event, User without its hash), the states and their sets, the decision table
// (decide.go) and the outcomes it decides (outcomes.go), the breaker's states, the
// audit trail, the scope every read and act goes through, the wake-ups and the
// conversion of sqlc rows into its own types (rows.go). It also defines the
// interfaces the leaves implement: DestinationClient (internal/destination) and
// BackfillClient (internal/provider).
//
// The config's schema is internal/settings, below the core; the metrics, tracing,
// JSON pointers and money are leaves of their own. The core imports only db,
// batch and settings, and no stage. Every stage imports it; web and views see only
// its types and the services of the stages web may call (see walls_test.go).
package ledger
