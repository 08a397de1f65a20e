package batch

import "time"

// The waits. Each holds work back for a few milliseconds so that it is done
// together: a transaction costs Postgres about the same for one row as for dozens
// (parsing, planning, its commit), so a short wait trades a little latency for
// far fewer transactions. Each is about what a commit takes and far below what a
// sender notices; each waits only while company is to be expected, and ends as
// soon as there is enough of it. They are kept together because they follow one
// another: the router gathers what the inbox's groups commit, and a claim gathers
// the room its previous claim's calls free as they answer.
const (
	// GroupWait is how long a submission to a Writer waits for company: while a
	// group is being written (the inbox's deliveries), or while the caller expects
	// more (the outcomes of calls in flight, which answer together when they went
	// out together).
	GroupWait = 2 * time.Millisecond
	// ClaimWait is how long a claim of actions waits for room for a whole batch of
	// calls: a claim costs about the same for one action as for a batch, and
	// claiming for the room each answer frees as it comes would claim in fragments.
	ClaimWait = 3 * time.Millisecond
	// RouteWait is how long the router waits before a batch that may not fill, so
	// that a wave of deliveries, committed by the inbox's groups within about
	// GroupWait of one another, is routed by one transaction rather than by one each.
	RouteWait = 5 * time.Millisecond
)
