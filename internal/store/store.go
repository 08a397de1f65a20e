// Package store is the seam between the stages (inbox, router, performer,
// review) and the database for what differs between a single Postgres and a
// Citus cluster. Each operation has two forms, side by side here: Single's, for
// one Postgres, and Sharded's, for Citus, where each statement names its client
// to run on the client's shard and evaluates no stable function on the shards.
// The stages call a Store and never ask which database they are on; For picks
// the form from the database's own answer.
package store

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/oncehook/oncehook/db"
	"github.com/oncehook/oncehook/internal/ledger"
	"github.com/oncehook/oncehook/internal/settings"
)

// Store is what the stages do that a Citus cluster does differently.
type Store interface {
	// CancelResource marks the resource cancelled, at the event's time (or the
	// transaction's, without one), unless it was cancelled before, and moves its
	// last event time on.
	CancelResource(ctx context.Context, q *db.Queries, p db.ResourceCancelParams) error
	// ListDestinations lists the destinations' connection rows, by name, each
	// with how many actions of the clients scope sees it holds.
	ListDestinations(ctx context.Context, q *db.Queries, scope ledger.Scope) ([]db.DestinationListRow, error)
	// LinkEvents links routed events to the actions they asked for; a link that
	// exists is left as it is.
	LinkEvents(ctx context.Context, q *db.Queries, links db.ActionEventLinksParams) error
	// InsertActions inserts the actions p asks for, each in the state, with the
	// reason and due time its cutover, predecessor and destination give it, and
	// returns the rows it created: none for an operation that has an action.
	InsertActions(ctx context.Context, q *db.Queries, p db.ActionInsertParams) ([]db.ActionInsertRow, error)
	// InsertEvents inserts a batch of deliveries, one row an identity (see
	// EventInsertBatch), and commits it: c is a pool, or a transaction the
	// caller commits.
	InsertEvents(ctx context.Context, c Conn, p db.EventInsertBatchParams) ([]db.EventInsertBatchRow, error)
	// ClaimEvents claims up to n of client's received events for the router,
	// oldest first, skipping those another router holds.
	ClaimEvents(ctx context.Context, q *db.Queries, client string, n int) ([]db.EventClaimReceivedRow, error)
	// SetEventStatuses writes what became of one client's routed batch.
	SetEventStatuses(ctx context.Context, q *db.Queries, p db.EventSetStatusesParams) error

	// InTx runs fn in a transaction of the performer's, planned as plan says
	// where the database lets the plans be kept, and commits it when fn returns
	// nil.
	InTx(ctx context.Context, pool *pgxpool.Pool, plan Plan, fn func(q *db.Queries) error) error
	// ClaimActions claims up to p.MaxActions of one client's due actions under a
	// lease and starts the calls it can: the attempt counted, the attempt written
	// as started (its id in the row; 0 for a claim it did not start).
	ClaimActions(ctx context.Context, q *db.Queries, p db.ActionClaimParams) ([]db.ActionClaimRow, error)
	// StartCalls starts a call on each of one client's claimed actions this
	// worker still holds: the attempt counted and written as started.
	StartCalls(ctx context.Context, q *db.Queries, p db.ActionStartCallsParams) ([]db.ActionStartCallsRow, error)
	// RecordOutcomes writes the decisions on a batch of calls' outcomes and
	// closes their attempts, for the leases still held.
	RecordOutcomes(ctx context.Context, q *db.Queries, p db.ActionRecordBatchParams) ([]db.ActionRecordBatchRow, error)
	// RecoverLeases writes the decisions on expired leases.
	RecoverLeases(ctx context.Context, q *db.Queries, p db.ActionRecoverLeasesParams) ([]db.ActionRecoverLeasesRow, error)
	// ReleaseStrayHeld releases the held actions of connected destinations and
	// returns their ids.
	ReleaseStrayHeld(ctx context.Context, q *db.Queries, clients Clients) ([]int64, error)
	// ReleaseLeases hands back worker's claims that started no call and returns
	// their ids.
	ReleaseLeases(ctx context.Context, q *db.Queries, worker string, clients Clients) ([]int64, error)
	// HoldDestination holds the waiting actions of a destination that was
	// disconnected and returns their ids.
	HoldDestination(ctx context.Context, q *db.Queries, p db.ActionHoldDestinationParams, clients Clients) ([]int64, error)
	// ReleaseParked releases the actions an open breaker of destination parked,
	// due at once and with their deadlines moved on by the time they were
	// parked, and returns how many.
	ReleaseParked(ctx context.Context, q *db.Queries, destination string, at time.Time, clients Clients) (int64, error)

	// ListActions lists the actions p selects, in p.Sort's order, each state
	// bounded by p.StateRows and all by p.MaxRows; a list across clients goes
	// round clients.
	ListActions(ctx context.Context, pool *pgxpool.Pool, p db.ActionListParams, clients Clients) ([]db.Action, error)
	// CountByState counts the actions scope sees (its clients listed by
	// clients) by state, with the oldest of each; a count past 1,000 may be
	// the planner's estimate, kept a while in est.
	CountByState(ctx context.Context, pool *pgxpool.Pool, scope ledger.Scope, clients Clients, est *db.Estimates) ([]db.ActionCountByStateRow, error)
	// Causes groups the open actions by state, destination and the start of
	// their reason, with how many each group holds: past CausesCounted of a
	// group, on one Postgres, an estimate or a lower bound (CauseCount).
	Causes(ctx context.Context, pool *pgxpool.Pool, p db.DashboardCausesParams) ([]CauseCount, error)
	// SourceStats counts what each of sources has delivered.
	SourceStats(ctx context.Context, pool *pgxpool.Pool, sources []settings.Source, est *db.Estimates) ([]SourceCount, error)
	// TrendQueues counts the actions that arrived in each queue, bucket by
	// bucket; a count across clients goes round clients.
	TrendQueues(ctx context.Context, pool *pgxpool.Pool, p db.DashboardTrendQueuesParams, clients Clients) ([]db.DashboardTrendQueuesRow, error)
	// ReplayEvents sends the events p names back to the router, in the order
	// of their ids, and returns them.
	ReplayEvents(ctx context.Context, q *db.Queries, p db.EventReplayParams) ([]db.EventReplayRow, error)
	// StoredClients is every client with actions stored.
	StoredClients(ctx context.Context, q *db.Queries) ([]string, error)
	// EventClients is every client with events stored.
	EventClients(ctx context.Context, q *db.Queries) ([]string, error)
	// CarryBodies carries forward into day p.ToDay up to p.Batch (a client, on
	// Citus) of the bodies in day p.FromDay that are still needed or kept by a
	// client's longer window (EventBodiesCarry), and returns how many it
	// carried. p.Sharded and p.Client are the form's to set.
	CarryBodies(ctx context.Context, q *db.Queries, p db.EventBodiesCarryParams) (int64, error)
	// CarryActionRows carries forward into day to up to batch (a client, on
	// Citus) of the actions whose rows are in day from, with their attempts and
	// audit (ActionRowsLock, then ActionRowsMove, in a transaction of b's), and
	// returns how many it carried. q lists the clients.
	CarryActionRows(ctx context.Context, b db.Beginner, q *db.Queries, from, to time.Time, batch int32) (int64, error)
	// DropPartition detaches the daily partition name from parent and drops it;
	// pending says a detach of it was begun and not finished.
	DropPartition(ctx context.Context, pool *pgxpool.Pool, parent, name string, pending bool) error
	// ReadScope is the scope a read across clients takes: scope, or its
	// clients spelled out (listed by clients).
	ReadScope(ctx context.Context, scope ledger.Scope, clients Clients) (ledger.Scope, error)
	// GetAction reads the action by its id, among the clients clients lists;
	// pgx.ErrNoRows when none holds it.
	GetAction(ctx context.Context, q *db.Queries, id int64, clients Clients) (db.Action, error)
	// GetEvent reads the event by its id (see GetAction).
	GetEvent(ctx context.Context, q *db.Queries, id int64, clients Clients) (db.Event, error)
}

// Conn is a pool or a transaction: what an operation that opens its own
// transaction runs on.
type Conn interface {
	db.DBTX
	db.Beginner
}

// Single is the Store of one Postgres.
type Single struct{}

// Sharded is the Store of a Citus cluster.
type Sharded struct{}

// For is the Store of the database behind pool: each call takes the form the
// database answered (DatabaseMode), asked once it answers, when first needed.
// The database may be down when the service starts; until it answers, the
// calls take Single's form, and fail as the database does.
func For(pool *pgxpool.Pool) Store { return &chosen{pool: pool} }

type chosen struct {
	pool  *pgxpool.Pool
	known atomic.Pointer[Store] // the form, once the database answered
	mu    sync.Mutex            // one question at a time until then
}

// form is the form the database answered, read without a lock once known: the
// claims and records call it many times a second.
func (ch *chosen) form(ctx context.Context) Store {
	if f := ch.known.Load(); f != nil {
		return *f
	}
	ch.mu.Lock()
	defer ch.mu.Unlock()
	if f := ch.known.Load(); f != nil {
		return *f
	}
	mode, err := db.New(ch.pool).DatabaseMode(ctx)
	if err != nil {
		return Single{} // fails as the database does; asked again next time
	}
	var f Store = Single{}
	if mode == "citus" {
		f = Sharded{}
	}
	ch.known.Store(&f)
	return f
}

func (ch *chosen) CancelResource(ctx context.Context, q *db.Queries, p db.ResourceCancelParams) error {
	return ch.form(ctx).CancelResource(ctx, q, p)
}

func (ch *chosen) ListDestinations(ctx context.Context, q *db.Queries, scope ledger.Scope) ([]db.DestinationListRow, error) {
	return ch.form(ctx).ListDestinations(ctx, q, scope)
}

func (ch *chosen) LinkEvents(ctx context.Context, q *db.Queries, links db.ActionEventLinksParams) error {
	return ch.form(ctx).LinkEvents(ctx, q, links)
}

func (ch *chosen) InsertActions(ctx context.Context, q *db.Queries, p db.ActionInsertParams) ([]db.ActionInsertRow, error) {
	return ch.form(ctx).InsertActions(ctx, q, p)
}

func (ch *chosen) InsertEvents(ctx context.Context, c Conn, p db.EventInsertBatchParams) ([]db.EventInsertBatchRow, error) {
	return ch.form(ctx).InsertEvents(ctx, c, p)
}

func (ch *chosen) ClaimEvents(ctx context.Context, q *db.Queries, client string, n int) ([]db.EventClaimReceivedRow, error) {
	return ch.form(ctx).ClaimEvents(ctx, q, client, n)
}

func (ch *chosen) SetEventStatuses(ctx context.Context, q *db.Queries, p db.EventSetStatusesParams) error {
	return ch.form(ctx).SetEventStatuses(ctx, q, p)
}

func (ch *chosen) InTx(ctx context.Context, pool *pgxpool.Pool, plan Plan, fn func(q *db.Queries) error) error {
	return ch.form(ctx).InTx(ctx, pool, plan, fn)
}

func (ch *chosen) ClaimActions(ctx context.Context, q *db.Queries, p db.ActionClaimParams) ([]db.ActionClaimRow, error) {
	return ch.form(ctx).ClaimActions(ctx, q, p)
}

func (ch *chosen) StartCalls(ctx context.Context, q *db.Queries, p db.ActionStartCallsParams) ([]db.ActionStartCallsRow, error) {
	return ch.form(ctx).StartCalls(ctx, q, p)
}

func (ch *chosen) RecordOutcomes(ctx context.Context, q *db.Queries, p db.ActionRecordBatchParams) ([]db.ActionRecordBatchRow, error) {
	return ch.form(ctx).RecordOutcomes(ctx, q, p)
}

func (ch *chosen) RecoverLeases(ctx context.Context, q *db.Queries, p db.ActionRecoverLeasesParams) ([]db.ActionRecoverLeasesRow, error) {
	return ch.form(ctx).RecoverLeases(ctx, q, p)
}

func (ch *chosen) ReleaseStrayHeld(ctx context.Context, q *db.Queries, clients Clients) ([]int64, error) {
	return ch.form(ctx).ReleaseStrayHeld(ctx, q, clients)
}

func (ch *chosen) ReleaseLeases(ctx context.Context, q *db.Queries, worker string, clients Clients) ([]int64, error) {
	return ch.form(ctx).ReleaseLeases(ctx, q, worker, clients)
}

func (ch *chosen) HoldDestination(ctx context.Context, q *db.Queries, p db.ActionHoldDestinationParams, clients Clients) ([]int64, error) {
	return ch.form(ctx).HoldDestination(ctx, q, p, clients)
}

func (ch *chosen) ReleaseParked(ctx context.Context, q *db.Queries, destination string, at time.Time, clients Clients) (int64, error) {
	return ch.form(ctx).ReleaseParked(ctx, q, destination, at, clients)
}

func (ch *chosen) ListActions(ctx context.Context, pool *pgxpool.Pool, p db.ActionListParams, clients Clients) ([]db.Action, error) {
	return ch.form(ctx).ListActions(ctx, pool, p, clients)
}

func (ch *chosen) CountByState(ctx context.Context, pool *pgxpool.Pool, scope ledger.Scope, clients Clients, est *db.Estimates) ([]db.ActionCountByStateRow, error) {
	return ch.form(ctx).CountByState(ctx, pool, scope, clients, est)
}

func (ch *chosen) Causes(ctx context.Context, pool *pgxpool.Pool, p db.DashboardCausesParams) ([]CauseCount, error) {
	return ch.form(ctx).Causes(ctx, pool, p)
}

func (ch *chosen) SourceStats(ctx context.Context, pool *pgxpool.Pool, sources []settings.Source, est *db.Estimates) ([]SourceCount, error) {
	return ch.form(ctx).SourceStats(ctx, pool, sources, est)
}

func (ch *chosen) TrendQueues(ctx context.Context, pool *pgxpool.Pool, p db.DashboardTrendQueuesParams, clients Clients) ([]db.DashboardTrendQueuesRow, error) {
	return ch.form(ctx).TrendQueues(ctx, pool, p, clients)
}

func (ch *chosen) ReplayEvents(ctx context.Context, q *db.Queries, p db.EventReplayParams) ([]db.EventReplayRow, error) {
	return ch.form(ctx).ReplayEvents(ctx, q, p)
}

func (ch *chosen) StoredClients(ctx context.Context, q *db.Queries) ([]string, error) {
	return ch.form(ctx).StoredClients(ctx, q)
}

func (ch *chosen) EventClients(ctx context.Context, q *db.Queries) ([]string, error) {
	return ch.form(ctx).EventClients(ctx, q)
}

func (ch *chosen) CarryBodies(ctx context.Context, q *db.Queries, p db.EventBodiesCarryParams) (int64, error) {
	return ch.form(ctx).CarryBodies(ctx, q, p)
}

func (ch *chosen) CarryActionRows(ctx context.Context, b db.Beginner, q *db.Queries, from, to time.Time, batch int32) (int64, error) {
	return ch.form(ctx).CarryActionRows(ctx, b, q, from, to, batch)
}

func (ch *chosen) DropPartition(ctx context.Context, pool *pgxpool.Pool, parent, name string, pending bool) error {
	return ch.form(ctx).DropPartition(ctx, pool, parent, name, pending)
}

func (ch *chosen) ReadScope(ctx context.Context, scope ledger.Scope, clients Clients) (ledger.Scope, error) {
	return ch.form(ctx).ReadScope(ctx, scope, clients)
}

func (ch *chosen) GetAction(ctx context.Context, q *db.Queries, id int64, clients Clients) (db.Action, error) {
	return ch.form(ctx).GetAction(ctx, q, id, clients)
}

func (ch *chosen) GetEvent(ctx context.Context, q *db.Queries, id int64, clients Clients) (db.Event, error) {
	return ch.form(ctx).GetEvent(ctx, q, id, clients)
}
