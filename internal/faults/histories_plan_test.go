package faults

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"
)

// A history is planned from its seed alone, before anything runs: the same seed
// gives the same operations with the same arguments. Only their timing against the
// processes (which call is in flight when a kill lands) varies between runs.

type opKind string

const (
	opPost          opKind = "post"           // a new event for a new enquiry
	opRepeat        opKind = "repeat"         // an event already sent, the same body again
	opCopies        opKind = "copies"         // several copies of one event at once, over both servers
	opChangedBody   opKind = "changed-body"   // an event already sent, its id with another amount
	opChangedParams opKind = "changed-params" // a new event for a known enquiry with another amount
	opKill          opKind = "kill"           // kill -9 a process, then start it again
	opKillInCall    opKind = "kill-in-call"   // the CRM holds the next create; kill whoever made it
	opKillInLookup  opKind = "kill-in-lookup" // the next create is unsure and its lookup held; kill the looker
	opPostgres      opKind = "postgres"       // pg_ctl stop -m fast|immediate, then start
	opFault         opKind = "fault"          // the CRM misbehaves on its next create(s) or lookup
	opRevoke        opKind = "revoke"         // the CRM refuses the token from now on: 401s
	opReconnect     opKind = "reconnect"      // the token is accepted again; an admin reconnects the CRM
	opOutage        opKind = "outage"         // the CRM is down a while (503s, dropped connections or no reply)
	opDays          opKind = "days"           // the clock moves N days on: what is stored is N days older
	opRetention     opKind = "retention"      // a retention pass (oncehook prune) drops the days past their windows
)

// How many days an opDays moves the clock: within the bodies' window (2 days in
// the histories' config), past it, and past the attempts' and audit's (30 days).
var dayJumps = []int{1, 3, 40}

// The ways the CRM is down in an opOutage.
var outageModes = []string{"503", "drop", "hang"}

// The destination faults an opFault injects.
const (
	faultStoreHang  = "store-then-hang" // stored, then no reply until the client gives up
	fault500Before  = "500-before"
	fault500After   = "500-after" // stored, then 500
	faultDropBefore = "drop-before"
	faultDropAfter  = "drop-after" // stored, then the connection closes
	fault429        = "429"
	fault503Burst   = "503-burst"
	faultLookup503  = "lookup-503"
)

var faultKinds = []string{faultStoreHang, fault500Before, fault500After, faultDropBefore, faultDropAfter,
	fault429, fault503Burst, faultLookup503}

// The processes of a history.
var members = []string{"serve-a", "serve-b", "worker"}

// histEvent is one event a history sends: its id, its enquiry and amount.
type histEvent struct {
	ID      string
	Enquiry string
	Amount  int
	Created int64
}

func (e histEvent) body() []byte {
	return []byte(fmt.Sprintf(`{"id":%q,"type":"checkout.session.completed","created":%d,`+
		`"data":{"object":{"id":"cs_%s","amount_total":%d,"metadata":{"enquiry_id":%q}}}}`,
		e.ID, e.Created, e.Enquiry, e.Amount, e.Enquiry))
}

// op is one planned operation.
type op struct {
	Kind   opKind
	Pause  time.Duration // before it runs
	Event  histEvent     // what is sent (post, repeat, copies, changed-*)
	Server int           // the server it is sent to first; copies alternate
	Copies int
	Target string // the process killed (kill)
	Mode   string // fast | immediate (postgres); the fault (fault)
	N      int    // faults in a burst; how long Postgres stays down, in 100 ms
	Stored bool   // kill-in-call: the CRM stores the record before holding the reply
}

func (o op) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "+%dms %s", o.Pause.Milliseconds(), o.Kind)
	switch o.Kind {
	case opPost, opRepeat, opChangedBody, opChangedParams:
		fmt.Fprintf(&b, " %s (%s, amount %d) to %s", o.Event.ID, o.Event.Enquiry, o.Event.Amount, members[o.Server])
	case opCopies:
		fmt.Fprintf(&b, " %d× %s (%s, amount %d)", o.Copies, o.Event.ID, o.Event.Enquiry, o.Event.Amount)
	case opKill:
		fmt.Fprintf(&b, " %s", o.Target)
	case opKillInCall:
		fmt.Fprintf(&b, " stored=%v, new %s", o.Stored, o.Event.ID)
	case opKillInLookup:
		fmt.Fprintf(&b, " new %s", o.Event.ID)
	case opPostgres:
		fmt.Fprintf(&b, " -m %s, down %dms", o.Mode, o.N*100)
	case opFault:
		fmt.Fprintf(&b, " %s", o.Mode)
		if o.Mode == fault503Burst {
			fmt.Fprintf(&b, " ×%d", o.N)
		}
	case opOutage:
		fmt.Fprintf(&b, " %s for %dms", o.Mode, o.N*100)
	case opDays:
		fmt.Fprintf(&b, " %d on", o.N)
	}
	return b.String()
}

// planHistory returns the operations of the history with this seed: 20 to 60.
func planHistory(seed uint64) []op {
	rng := rand.New(rand.NewPCG(seed, 0x6f6e6365686f6f6b))
	n := 20 + rng.IntN(41)
	var sent []histEvent
	enquiries := 0
	newEvent := func(enquiry string) histEvent {
		if enquiry == "" {
			enquiry = fmt.Sprintf("enq_%03d", enquiries)
			enquiries++
		}
		e := histEvent{ID: fmt.Sprintf("evt_%03d", len(sent)), Enquiry: enquiry,
			Amount: 1000 + 100*rng.IntN(50), Created: 1700000000 + int64(len(sent))}
		sent = append(sent, e)
		return e
	}
	pick := func() histEvent { return sent[rng.IntN(len(sent))] }
	var ops []op
	reconnectIn := 0 // ops until the revoked token is accepted again; 0: not revoked
	for len(ops) < n {
		o := op{Pause: time.Duration(rng.IntN(150)) * time.Millisecond, Server: rng.IntN(2)}
		if reconnectIn > 0 {
			if reconnectIn--; reconnectIn == 0 {
				o.Kind = opReconnect
				ops = append(ops, o)
				continue
			}
		}
		switch r := rng.IntN(100); {
		case r < 26 || len(sent) == 0:
			o.Kind, o.Event = opPost, newEvent("")
		case r < 36:
			o.Kind, o.Event = opRepeat, pick()
		case r < 44:
			o.Kind, o.Copies = opCopies, 2+rng.IntN(4)
			if rng.IntN(2) == 0 {
				o.Event = newEvent("")
			} else {
				o.Event = pick()
			}
		case r < 48:
			o.Kind, o.Event = opChangedBody, pick()
			o.Event.Amount++
		case r < 51:
			o.Kind, o.Event = opChangedParams, newEvent(pick().Enquiry)
		case r < 57:
			o.Kind, o.Target = opKill, members[rng.IntN(len(members))]
		// A held call is planned only while the CRM accepts the token: while it is
		// refused, no call reaches it until the reconnect, and the kill could not be done.
		case r < 62 && reconnectIn == 0:
			o.Kind, o.Stored, o.Event = opKillInCall, rng.IntN(2) == 0, newEvent("")
		case r < 65 && reconnectIn == 0:
			o.Kind, o.Event = opKillInLookup, newEvent("")
		case r < 69:
			o.Kind, o.Mode, o.N = opPostgres, []string{"fast", "immediate"}[rng.IntN(2)], rng.IntN(10)
		case r < 72 && reconnectIn == 0:
			o.Kind, reconnectIn = opRevoke, 2+rng.IntN(4)
		default:
			o.Kind, o.Mode = opFault, faultKinds[rng.IntN(len(faultKinds))]
			if o.Mode == fault503Burst {
				o.N = 2 + rng.IntN(3)
			}
		}
		ops = append(ops, o)
	}
	if reconnectIn > 0 {
		ops = append(ops, op{Kind: opReconnect})
	}
	return withDays(seed, withOutages(seed, ops))
}

// withOutages puts the outages of the history with this seed among its ops:
// about one history in three has one, some two. They are drawn from a stream
// of their own, so that the rest of a seed's history is the one it planned
// before outages were added (the seeds kept in testdata replay as they were).
// An outage lasts 0.8 to 4 s: at the histories' breaker (open_for 200ms, which
// doubles) that is 3 to 5 probes, as a two-hour outage is at the default's 30s
// capped at 10 minutes about twenty.
func withOutages(seed uint64, ops []op) []op {
	rng := rand.New(rand.NewPCG(seed, 0x6f7574616765))
	for range rng.IntN(3) {
		if rng.IntN(2) == 0 {
			continue
		}
		at := rng.IntN(len(ops) + 1)
		o := op{Kind: opOutage, Mode: outageModes[rng.IntN(len(outageModes))], N: 8 + rng.IntN(33),
			Pause: time.Duration(rng.IntN(150)) * time.Millisecond}
		ops = slices.Insert(ops, at, o)
	}
	return ops
}

// withDays puts among ops one or two moves of the clock, each followed later by
// a retention pass, drawn from a stream of their own (as withOutages). The
// clock the tests move is the days of what is stored: an opDays makes every row
// of the tables partitioned by day N days older, as a server whose clock moved
// N days on would find them (the times the rows record stay: no identity or
// closed action is pruned meanwhile, so the checks see them all). The pass that
// follows drops the days past their windows with the real code, carrying what is
// still needed forward, while deliveries, calls and faults go on.
func withDays(seed uint64, ops []op) []op {
	rng := rand.New(rand.NewPCG(seed, 0x64617973))
	for range 1 + rng.IntN(2) {
		at := rng.IntN(len(ops) + 1)
		ops = slices.Insert(ops, at, op{Kind: opDays, N: dayJumps[rng.IntN(len(dayJumps))],
			Pause: time.Duration(rng.IntN(150)) * time.Millisecond})
		pass := at + 1 + rng.IntN(len(ops)-at)
		ops = slices.Insert(ops, pass, op{Kind: opRetention, Pause: time.Duration(rng.IntN(150)) * time.Millisecond})
	}
	return ops
}

// plannedFaults is how many faults ops plan, less those left out by
// -histories.without: what the history's tally must count once it has run.
func plannedFaults(ops []op) int {
	n := 0
	for _, o := range ops {
		switch o.Kind {
		case opKill, opKillInCall, opKillInLookup, opPostgres, opRevoke, opOutage, opDays, opRetention:
			n++
		case opFault:
			if !excluded(o.Mode) {
				n++
			}
		}
	}
	return n
}

func planText(seed uint64, ops []op) string {
	var b strings.Builder
	fmt.Fprintf(&b, "history seed %d, %d operations:\n", seed, len(ops))
	for i, o := range ops {
		fmt.Fprintf(&b, "  %2d %s\n", i, o)
	}
	return b.String()
}

// TestHistoryPlanReplays: a seed names one history, and different seeds differ.
func TestHistoryPlanReplays(t *testing.T) {
	t.Parallel()
	kinds := map[opKind]bool{}
	for seed := uint64(1); seed <= 50; seed++ {
		a, b := planHistory(seed), planHistory(seed)
		if !slices.Equal(a, b) {
			t.Fatalf("seed %d planned two different histories:\n%s\n%s", seed, planText(seed, a), planText(seed, b))
		}
		if len(a) < 22 || len(a) > 67 {
			t.Errorf("seed %d: %d operations, want 20 to 60 (and a closing reconnect, up to two outages, "+
				"and one or two moves of the clock each with a retention pass after it)", seed, len(a))
		}
		if slices.Equal(a, planHistory(seed+1000)) {
			t.Errorf("seeds %d and %d planned the same history", seed, seed+1000)
		}
		revoked, moved := false, false
		for _, o := range a {
			kinds[o.Kind] = true
			switch o.Kind {
			case opRevoke:
				revoked = true
			case opReconnect:
				revoked = false
			case opDays:
				moved = true
			case opRetention:
				if !moved {
					t.Errorf("seed %d plans a retention pass before any move of the clock", seed)
				}
			case opKillInCall, opKillInLookup:
				if revoked {
					t.Errorf("seed %d plans a %s while the CRM refuses the token: it could not be done", seed, o.Kind)
				}
			}
		}
	}
	for _, k := range []opKind{opPost, opRepeat, opCopies, opChangedBody, opChangedParams, opKill, opKillInCall,
		opKillInLookup, opPostgres, opFault, opRevoke, opReconnect, opOutage, opDays, opRetention} {
		if !kinds[k] {
			t.Errorf("50 seeds never planned a %s", k)
		}
	}
}
