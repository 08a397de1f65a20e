package web

import (
	"errors"
	"io"
	"net"
	"net/http"
	"net/netip"
	"os"
	"sync"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/oncehook/oncehook/internal/ledger"
)

// The server's timeouts (docs/operations.md, Security notes). A request's
// headers must arrive within ReadHeaderTimeout and the whole request within
// ReadTimeout, except a webhook's body, which is held to a minimum rate instead
// (see hookBody); a reply must be written within WriteTimeout of the request's
// arrival, long enough for a bulk act on many actions; a kept-alive connection is closed after IdleTimeout without a request.
const (
	ReadHeaderTimeout = 10 * time.Second
	ReadTimeout       = 30 * time.Second
	WriteTimeout      = 2 * time.Minute
	IdleTimeout       = 120 * time.Second

	// HookBodyGrace is how long a webhook's body may take before its rate counts;
	// after it, the body must have arrived at HookBodyFloor bytes a second on
	// average, or it is cut with a 408.
	HookBodyGrace = 5 * time.Second
	HookBodyFloor = 16 << 10
)

// NewHTTPServer returns the server for h with the timeouts above.
func NewHTTPServer(h http.Handler) *http.Server {
	return &http.Server{Handler: h, ReadHeaderTimeout: ReadHeaderTimeout, ReadTimeout: ReadTimeout,
		WriteTimeout: WriteTimeout, IdleTimeout: IdleTimeout}
}

// hookBody is a webhook's body held to a minimum rate: each read may wait only
// until the time by which the bytes so far had to arrive at HookBodyFloor a
// second, after HookBodyGrace. The reply's write deadline follows, so a large
// body arriving fast enough is answered.
type hookBody struct {
	r     io.Reader
	rc    *http.ResponseController
	start time.Time
	n     int64
}

func newHookBody(c echo.Context) *hookBody {
	return &hookBody{r: c.Request().Body, rc: http.NewResponseController(c.Response()), start: time.Now()}
}

func (b *hookBody) Read(p []byte) (int, error) {
	due := b.start.Add(HookBodyGrace + time.Duration(b.n+int64(len(p)))*time.Second/HookBodyFloor)
	// Errors only where the connection cannot take deadlines (tests' recorders).
	_ = b.rc.SetReadDeadline(due)
	_ = b.rc.SetWriteDeadline(due.Add(WriteTimeout))
	n, err := b.r.Read(p)
	b.n += int64(n)
	if errors.Is(err, os.ErrDeadlineExceeded) {
		return n, ledger.Errorf(ledger.ETIMEOUT, "The body arrived too slowly: under %d bytes a second.", HookBodyFloor)
	}
	return n, err
}

// LimitListener wraps ln so that an address holds at most perAddr open
// connections; one more is closed at once. Addresses in exempt (trusted
// proxies, which carry many people's connections) are not limited. perAddr <= 0
// means no limit.
func LimitListener(ln net.Listener, perAddr int, exempt func(netip.Addr) bool) net.Listener {
	if perAddr <= 0 {
		return ln
	}
	return &limitListener{Listener: ln, perAddr: perAddr, exempt: exempt, open: map[string]int{}}
}

type limitListener struct {
	net.Listener
	perAddr int
	exempt  func(netip.Addr) bool
	mu      sync.Mutex
	open    map[string]int
}

func (l *limitListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		ap, _ := netip.ParseAddrPort(c.RemoteAddr().String())
		host := ap.Addr().Unmap().String()
		if l.exempt != nil && l.exempt(ap.Addr()) {
			return c, nil
		}
		l.mu.Lock()
		full := l.open[host] >= l.perAddr
		if !full {
			l.open[host]++
		}
		l.mu.Unlock()
		if full {
			c.Close()
			continue
		}
		return &countedConn{Conn: c, release: func() { l.release(host) }}, nil
	}
}

func (l *limitListener) release(host string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.open[host]--; l.open[host] <= 0 {
		delete(l.open, host)
	}
}

// countedConn gives its address's place back once, when closed.
type countedConn struct {
	net.Conn
	once    sync.Once
	release func()
}

func (c *countedConn) Close() error {
	c.once.Do(c.release)
	return c.Conn.Close()
}
