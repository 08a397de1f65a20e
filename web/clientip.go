package web

import (
	"net"
	"net/netip"

	"github.com/labstack/echo/v4"
)

// clientIP is how a request's client address is found, for sign-in throttling
// and the logs. Without trusted proxies it is the peer's address: a header anyone
// can send must not let a guesser pass for someone else. Behind trusted proxies it
// is the nearest address in X-Forwarded-For that is not one of them, so each
// person behind the proxy is counted apart, and a proxy's own address is never
// counted for everyone behind it.
func clientIP(trusted []netip.Prefix) echo.IPExtractor {
	if len(trusted) == 0 {
		return echo.ExtractIPDirect()
	}
	// Echo trusts loopback, link-local and private addresses by default; only
	// the configured ranges are trusted here.
	opts := []echo.TrustOption{echo.TrustLoopback(false), echo.TrustLinkLocal(false), echo.TrustPrivateNet(false)}
	for _, p := range trusted {
		opts = append(opts, echo.TrustIPRange(&net.IPNet{IP: p.Addr().AsSlice(), Mask: net.CIDRMask(p.Bits(), p.Addr().BitLen())}))
	}
	return echo.ExtractIPFromXFFHeader(opts...)
}
