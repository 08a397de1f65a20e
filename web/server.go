// Package web is oncehook's HTTP layer: Echo routes, handlers and the one place
// where domain errors become HTTP statuses.
package web

import (
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/alexedwards/scs/v2"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/labstack/echo/v4"

	"github.com/oncehook/oncehook/internal/accounts"
	"github.com/oncehook/oncehook/internal/inbox"
	"github.com/oncehook/oncehook/internal/metrics"
	"github.com/oncehook/oncehook/internal/review"
	"github.com/oncehook/oncehook/internal/settings"
)

// Params is everything the HTTP layer needs, passed explicitly.
type Params struct {
	Config *settings.Config
	Pool   *pgxpool.Pool
	Inbox  *inbox.Inbox
	Review *review.Review
	Logger *slog.Logger
	Now    func() time.Time // nil means time.Now
	// Metrics is served at /metrics; MetricsToken, when set, must come as a
	// bearer token (from ONCEHOOK_METRICS_TOKEN).
	Metrics      *metrics.Metrics
	MetricsToken string
	// LoginLimits sets the sign-in throttling; zero takes DefaultLoginLimits.
	// The session timeouts are the config's (Config.Sessions).
	LoginLimits accounts.LoginLimits
}

// Server holds the handlers' dependencies.
type Server struct {
	cfg       *settings.Config
	pool      *pgxpool.Pool
	inbox     *inbox.Inbox
	reviewAll *review.Review // sees every client: handlers read through review(c)
	logger    *slog.Logger
	now       func() time.Time

	metrics      *metrics.Metrics
	metricsToken string

	sessions *scs.SessionManager
	secure   bool                        // served over HTTPS (base_url): Secure, __Host- cookies
	origins  *http.CrossOriginProtection // see checkCSRF
	limits   accounts.LoginLimits
	oidc     *oidcClient // nil when no identity provider is configured
}

// New returns the Echo instance serving every route of oncehook.
func New(p Params) *echo.Echo {
	s := &Server{cfg: p.Config, pool: p.Pool, inbox: p.Inbox, reviewAll: p.Review, logger: p.Logger, now: p.Now}
	s.metrics, s.metricsToken = p.Metrics, p.MetricsToken
	s.secure = strings.HasPrefix(p.Config.BaseURL, "https://")
	s.sessions = newSessions(p.Pool, p.Config.Sessions, p.Config.BaseURL)
	s.limits = p.LoginLimits
	s.oidc = newOIDCClient(p.Config.SignIn.OIDC, p.Config.BaseURL)
	if s.limits == (accounts.LoginLimits{}) {
		s.limits = accounts.DefaultLoginLimits
	}
	if s.now == nil {
		s.now = time.Now
	}
	if s.logger == nil {
		s.logger = slog.Default()
	}
	origins, err := newOriginCheck(p.Config.BaseURL)
	if err != nil {
		s.logger.Warn("base_url is not trusted as an origin; forms work only where the Host matches", "err", err)
	}
	s.origins = origins
	e := echo.New()
	e.HideBanner = true
	e.HidePort = true
	e.HTTPErrorHandler = s.handleError
	e.IPExtractor = clientIP(p.Config.TrustedProxies)
	s.routes(e)
	return e
}

// review is the review service as the person or token of c sees it: only their
// clients' records.
func (s *Server) review(c echo.Context) *review.Review {
	return s.reviewAll.For(actorOf(c))
}

// item is review for the routes of one action or event: their URL names the
// item's client (?client=, which every link to an item carries), so on Citus the
// item is read on that client's shard alone (review.In).
func (s *Server) item(c echo.Context) *review.Review {
	return s.review(c).In(c.QueryParam("client"))
}
