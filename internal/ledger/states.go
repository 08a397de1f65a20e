package ledger

// Queues group states for people.
const (
	QueueOutstanding = "outstanding"
	QueueUncertain   = "uncertain"
	QueueFailed      = "failed"
)

// The sets of states each rule reads, each written once. SQL that must repeat a set
// as a literal (a CHECK, a partial index's predicate, a statement whose plan must see
// the literal to use that index) is tied to the set here by TestStateSetLiterals,
// which fails when the two differ.
var (
	// AllStates are every state, open ones first, in the order the pages list them.
	AllStates = []string{StatePending, StateProcessing, StateRetrying, StateHeld, StateUncertain, StateFailed,
		StateConfirmed, StateResolved, StateCancelled}
	// WorkerStates are the open states a worker moves on by itself.
	WorkerStates = []string{StatePending, StateProcessing, StateRetrying}
	// PersonStates wait for a person: the ones actions_waiting_idx holds.
	PersonStates = []string{StateHeld, StateUncertain, StateFailed}
	// ClosedStates are final: nothing will be performed any more.
	ClosedStates = []string{StateConfirmed, StateResolved, StateCancelled}
	// DueStates are claimed by the performer once their next attempt is due: called
	// (pending, retrying) or looked up (uncertain).
	DueStates = []string{StatePending, StateRetrying, StateUncertain}
	// LaneStates are the actions that give a client a lane in the performer's round:
	// due work, leases to recover, or held work recovery may release (of a client
	// the config may no longer name).
	LaneStates = []string{StatePending, StateRetrying, StateUncertain, StateProcessing, StateHeld}
	// HoldableStates are held when their destination is disconnected.
	HoldableStates = []string{StatePending, StateRetrying}
	// EventCancellableStates are the actions a cancelling event still stops: not
	// performed, not in a worker's hands, not waiting on a person's judgement.
	EventCancellableStates = []string{StatePending, StateRetrying, StateHeld}
	// ConflictableStates are the actions a conflicting event still fails: not
	// performed or closed, and not in a worker's hands.
	ConflictableStates = []string{StatePending, StateRetrying, StateHeld, StateUncertain}
	// PredecessorDoneStates release a successor: its predecessor's work is settled.
	PredecessorDoneStates = []string{StateConfirmed, StateResolved}
	// SuccessorWaitStates are the states a successor waits for its predecessor
	// in: pending, or uncertain when a cutover makes it look its operation up
	// before any create (ObsCreatedInCutover).
	SuccessorWaitStates = []string{StatePending, StateUncertain}
	// NotifyAtOnceStates are told to their owner in the next digest; uncertain ones
	// only once they have stayed uncertain a while.
	NotifyAtOnceStates = []string{StateFailed, StateHeld}
	// UnconfiguredWaitStates wait for a person when their client is no longer
	// in the config: nobody reconnects for a held one, nobody corrects a failed
	// one; a person cancels or resolves them.
	UnconfiguredWaitStates = []string{StateHeld, StateFailed}
)

// QueueStates lists the states of each queue.
var QueueStates = map[string][]string{
	QueueOutstanding: append(append([]string(nil), WorkerStates...), StateHeld),
	QueueUncertain:   {StateUncertain},
	QueueFailed:      {StateFailed},
}

// OpenStates are the states of every queue, in the queues' order: what is not
// closed.
func OpenStates() []string {
	var out []string
	for _, q := range Queues {
		out = append(out, QueueStates[q]...)
	}
	return out
}

// Queues lists the three review queues in the order people work them.
var Queues = []string{QueueFailed, QueueUncertain, QueueOutstanding}

// Event statuses (exact strings, used in the API and the pages).
const (
	EventReceived = "received"
	EventRouted   = "routed"
	EventIgnored  = "ignored"
	EventStale    = "stale"
	EventConflict = "conflict"
)

// How an event reached the inbox (events.via).
const (
	ViaWebhook  = "webhook"
	ViaBackfill = "backfill"
)
