package web

import "github.com/labstack/echo/v4"

// contentSecurityPolicy allows scripts and styles only from this server's own
// files: no inline script, no inline style, no eval. Pico's icons are data: SVGs.
const contentSecurityPolicy = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; " +
	"connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"

// strictTransportSecurity tells a browser that reached oncehook over HTTPS to use
// nothing else for a year, on subdomains too, so no plain-HTTP request leaks a
// session cookie or lets a network rewrite the page.
const strictTransportSecurity = "max-age=31536000; includeSubDomains"

// securityHeaders sets the headers every reply carries. They cost nothing on JSON
// replies and protect any HTML one, error pages included. HSTS is sent only when
// base_url is https: on a plain-HTTP site it would lock people out.
func securityHeaders(https bool) echo.MiddlewareFunc {
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			h := c.Response().Header()
			h.Set("Content-Security-Policy", contentSecurityPolicy)
			h.Set("X-Content-Type-Options", "nosniff")
			h.Set("X-Frame-Options", "DENY") // for browsers that predate frame-ancestors
			h.Set("Referrer-Policy", "same-origin")
			h.Set("Cross-Origin-Opener-Policy", "same-origin")
			if https {
				h.Set("Strict-Transport-Security", strictTransportSecurity)
			}
			return next(c)
		}
	}
}

// noStore keeps pages with people's data out of shared and back-button caches.
func noStore(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		c.Response().Header().Set("Cache-Control", "no-store")
		return next(c)
	}
}
