package sandbox

import (
	"context"
	"net/http"
	"slices"
	"time"
)

// Fault is one scheduled misbehaviour, applied to the next request of its method.
// Without AfterCommit the CRM waits (Delay, Hang), then answers Status without
// storing anything; with it, the record is stored first and the wait and the Status
// come after, which is how a client ends up unsure about a record that exists. A
// Status of 0 means the normal reply after the wait; Drop closes the connection
// instead of replying at all.
type Fault struct {
	Method      string // the method it applies to; "" means POST
	Status      int
	RetryAfter  string // the Retry-After header sent with Status, if any
	Message     string // the reason in the error body; default the status text
	AfterCommit bool   // store the record, then reply Status
	// Drop closes the connection without a reply (after storing, with AfterCommit):
	// what a client sees when a kept-alive connection dies under its request.
	Drop  bool
	Delay time.Duration
	// Hang, if non-nil, holds the request until it is closed or the client leaves.
	Hang chan struct{}
	// Reached, if non-nil, is closed when a request picks up this fault, so a test
	// knows the request has arrived (and claimed its idempotency key) without sleeping.
	Reached chan struct{}
	// Field and Value, when set, aim a create's fault at the create whose body has
	// Field equal to Value; an aimed fault is taken before the others, so a test
	// can hold one operation's create whatever was queued before it.
	Field, Value string
}

// Fail queues f behind the faults already scheduled.
func (c *CRM) Fail(f Fault) {
	if f.Method == "" {
		f.Method = http.MethodPost
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.faults = append(c.faults, f)
}

// takeFault removes and returns the first fault aimed at a request of method
// with body fields, else the first one for method not aimed at all, else the
// zero Fault.
func (c *CRM) takeFault(method string, fields map[string]any) Fault {
	c.mu.Lock()
	defer c.mu.Unlock()
	i := slices.IndexFunc(c.faults, func(f Fault) bool {
		v, ok := fields[f.Field].(string)
		return f.Method == method && f.Field != "" && ok && v == f.Value
	})
	if i < 0 {
		i = slices.IndexFunc(c.faults, func(f Fault) bool { return f.Method == method && f.Field == "" })
	}
	if i < 0 {
		return Fault{}
	}
	f := c.faults[i]
	c.faults = slices.Delete(c.faults, i, i+1)
	if f.Reached != nil {
		close(f.Reached)
	}
	return f
}

// lookupFaulted plays the next queued GET fault on a lookup: it reports whether the
// fault answered (or hung up on) the request, so the handler must not.
func (c *CRM) lookupFaulted(w http.ResponseWriter, r *http.Request) bool {
	f := c.takeFault(http.MethodGet, nil)
	if !f.hold(r.Context()) {
		return true
	}
	if f.Status != 0 {
		f.write(w)
		return true
	}
	return false
}

// hold waits out the fault's Delay and Hang. It reports false when the client left
// first, and the request should end without a reply.
func (f Fault) hold(ctx context.Context) bool {
	if f.Delay > 0 {
		t := time.NewTimer(f.Delay)
		defer t.Stop()
		select {
		case <-t.C:
		case <-ctx.Done():
			return false
		}
	}
	if f.Hang != nil {
		select {
		case <-f.Hang:
		case <-ctx.Done():
			return false
		}
	}
	return true
}

func (f Fault) write(w http.ResponseWriter) {
	if f.Drop {
		// The client sees its connection end with no reply: it cannot know whether
		// the request took effect. The server hangs up once the handler's deferred
		// work is done, so a client that retries at once finds the first request in
		// the logs before its retry (a hijacked connection closed here let the retry
		// overtake them).
		drop(w)
	}
	if f.RetryAfter != "" {
		w.Header().Set("Retry-After", f.RetryAfter)
	}
	status := f.Status
	if status == 0 { // a drop that found no connection to take
		status = http.StatusBadGateway
	}
	msg := f.Message
	if msg == "" {
		msg = http.StatusText(status)
	}
	writeError(w, status, msg)
}

// LookupOutage makes searches (GET /opportunities) answer 503 for d: uncertain
// actions then stay uncertain, since a failed lookup proves nothing.
func (c *CRM) LookupOutage(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.lookupDownUntil = c.now().Add(d)
}

// InspectPath shows every record to whoever runs the sandbox, whatever the token
// and the faults: it is how a person (or a test) sees what the CRM really holds.
const InspectPath = "/_sandbox/records"

func (c *CRM) inspect(w http.ResponseWriter) {
	recs := c.Records()
	views := make([]map[string]any, 0, len(recs))
	for _, rec := range recs {
		views = append(views, recordView(rec))
	}
	writeJSON(w, http.StatusOK, views)
}
