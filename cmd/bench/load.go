package main

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

const (
	stripeSecret = "whsec_bench_only_not_a_secret"
	crmToken     = "bench-crm-token"
	// typeRouted is the event type the action rule acts on; typeIgnored is stored and
	// routed as "no rule", so ingest alone is measured without destination calls.
	typeRouted  = "checkout.session.completed"
	typeIgnored = "invoice.paid"
)

// eventBody is a Stripe event of about 2 KB, unique by id and enquiry, and the same
// bytes every time for the same arguments, so a repeat is a faithful repeat. The
// document is formatted once per type; each body then only splices in its id and
// enquiry (plain ASCII: letters, digits and "_"), so that making bodies takes
// little of the CPU the server and Postgres are measured on.
func eventBody(id, enquiry, typ string) []byte {
	t := bodyTemplate(typ)
	b := make([]byte, 0, t.size+len(id)+12*len(enquiry))
	for i, part := range t.parts {
		b = append(b, part...)
		switch {
		case i == len(t.parts)-1:
		case t.holes[i] == holeID:
			b = append(b, id...)
		default:
			b = append(b, enquiry...)
		}
	}
	return b
}

const (
	holeID      = "@@ID@@"
	holeEnquiry = "@@ENQ@@"
)

// template is a formatted body cut at its holes: parts[i] comes before holes[i].
type template struct {
	parts [][]byte
	holes []string
	size  int
}

var templates sync.Map // event type -> *template

func bodyTemplate(typ string) *template {
	if t, ok := templates.Load(typ); ok {
		return t.(*template)
	}
	doc := formatEventBody(holeID, holeEnquiry, typ)
	t := &template{size: len(doc)}
	for {
		i, j := bytes.Index(doc, []byte(holeID)), bytes.Index(doc, []byte(holeEnquiry))
		hole := holeID
		if i < 0 || j >= 0 && j < i {
			i, hole = j, holeEnquiry
		}
		if i < 0 {
			t.parts = append(t.parts, doc)
			break
		}
		t.parts, t.holes = append(t.parts, doc[:i]), append(t.holes, hole)
		doc = doc[i+len(hole):]
	}
	templates.Store(typ, t)
	return t
}

// formatEventBody writes the whole document; eventBody gives the same bytes.
func formatEventBody(id, enquiry, typ string) []byte {
	var lines strings.Builder
	for i := range 9 {
		if i > 0 {
			lines.WriteByte(',')
		}
		fmt.Fprintf(&lines, `{"id":"li_%02d_%s","object":"item","description":"Workshop seat, remote, full day","price":{"id":"price_1NxQ7fKZ","unit_amount":4500,"currency":"eur"},"quantity":1}`, i, enquiry)
	}
	return fmt.Appendf(nil, `{"id":%q,"object":"event","api_version":"2024-06-20","created":%d,"type":%q,`+
		`"livemode":true,"pending_webhooks":1,"request":{"id":null,"idempotency_key":null},`+
		`"data":{"object":{"id":"cs_%s","object":"checkout.session","amount_total":40500,"currency":"eur",`+
		`"customer_details":{"email":"ada@example.com","name":"Ada Lovelace","address":{"country":"GB","city":"London"}},`+
		`"metadata":{"enquiry_id":%q},"payment_status":"paid","status":"complete","line_items":[%s]}}}`,
		id, 1700000000, typ, enquiry, enquiry, lines.String())
}

// poster posts signed webhooks to one oncehook server. Each sender goroutine of
// runLoad and postAll posts over a connection of its own (rawpost.go), a lean
// client so that the bench measures the server rather than net/http's client.
type poster struct {
	addr   string   // host:port, also the Host header
	prefix string   // of every path
	paths  []string // the sources' webhook paths: sender i posts to paths[i%len]
}

// newPoster posts to the server at url ("http://host:port"). The second argument,
// how many senders will post at once, needs no pool: each sender has a connection.
func newPoster(url string, _ int) *poster {
	hostport := strings.TrimPrefix(url, "http://")
	prefix := ""
	if i := strings.IndexByte(hostport, '/'); i >= 0 {
		hostport, prefix = hostport[:i], strings.TrimSuffix(hostport[i:], "/")
	}
	return &poster{addr: hostport, prefix: prefix, paths: hookPaths(nil)}
}

// spread makes the senders post to the sources of clients (hookPaths), sender i
// to the (i mod len(clients))th, so each client gets an equal share of the load.
func (p *poster) spread(clients []string) *poster {
	p.paths = hookPaths(clients)
	return p
}

// conn returns sender i's own connection to the server, dialled on first use; the
// sender closes it when done.
func (p *poster) conn(i int) *rawConn {
	return &rawConn{addr: p.addr, path: p.prefix + p.paths[i%len(p.paths)]}
}

// loadResult is what a closed-loop load run saw.
type loadResult struct {
	acked    int           // 200 replies inside the measured window
	failed   int           // other replies or errors, anywhere in the run
	window   time.Duration // measured window
	p50, p99 time.Duration
	statuses map[int]int // non-200 statuses seen
	firstErr error
}

func (r loadResult) rate() float64 { return float64(r.acked) / r.window.Seconds() }

// runLoad keeps senders requests in flight: each sender posts next(i) as soon as
// its previous request is answered. The first warmup is not counted; then replies
// are counted for d. next returns nil when there is nothing left to send.
func (p *poster) runLoad(ctx context.Context, senders int, warmup, d time.Duration, next func() []byte) loadResult {
	start := time.Now()
	measureFrom, measureTo := start.Add(warmup), start.Add(warmup+d)
	ctx, cancel := context.WithDeadline(ctx, measureTo)
	defer cancel()
	var mu sync.Mutex
	res := loadResult{statuses: map[int]int{}}
	var latencies []time.Duration
	var wg sync.WaitGroup
	for s := range senders {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := p.conn(s)
			defer c.close()
			var mine []time.Duration
			acked, failed := 0, 0
			for ctx.Err() == nil {
				body := next()
				if body == nil {
					break
				}
				t0 := time.Now()
				status, err := c.post(ctx, body)
				t1 := time.Now()
				if ctx.Err() != nil && t1.After(measureTo) {
					break // cut off by the end of the window, not answered
				}
				if err != nil || status != http.StatusOK {
					failed++
					mu.Lock()
					if err != nil && res.firstErr == nil {
						res.firstErr = err
					}
					res.statuses[status]++
					mu.Unlock()
					continue
				}
				if t0.After(measureFrom) && !t1.After(measureTo) {
					acked++
					mine = append(mine, t1.Sub(t0))
				}
			}
			mu.Lock()
			res.acked += acked
			res.failed += failed
			latencies = append(latencies, mine...)
			mu.Unlock()
		}()
	}
	wg.Wait()
	res.window = min(time.Since(start), warmup+d) - warmup
	slices.Sort(latencies)
	res.p50, res.p99 = percentile(latencies, 0.50), percentile(latencies, 0.99)
	return res
}

// postAll posts body(0) to body(n-1) once each with senders in flight and returns
// how many were acknowledged; a refused delivery is posted again, as a provider would.
func (p *poster) postAll(ctx context.Context, senders, n int, body func(i int) []byte) (int, error) {
	var next atomic.Int64
	var acked atomic.Int64
	var wg sync.WaitGroup
	errc := make(chan error, senders)
	for s := range senders {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := p.conn(s)
			defer c.close()
			for {
				i := int(next.Add(1)) - 1
				if i >= n || ctx.Err() != nil {
					return
				}
				b := body(i)
				for tries := 0; ; tries++ {
					status, err := c.post(ctx, b)
					if err == nil && status == http.StatusOK {
						acked.Add(1)
						break
					}
					if tries == 20 || ctx.Err() != nil {
						errc <- fmt.Errorf("delivery %d: status %d: %v", i, status, err)
						return
					}
					time.Sleep(100 * time.Millisecond) // a provider's retry, much compressed
				}
			}
		}()
	}
	wg.Wait()
	close(errc)
	return int(acked.Load()), <-errc
}

func percentile(sorted []time.Duration, q float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(q * float64(len(sorted)-1))
	return sorted[i]
}
