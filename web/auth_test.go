package web

import "testing"

// hostileNext are post-login targets that would leave this site, or that a
// browser, a proxy or a later decode could turn into another site: each must
// become "/". Percent-encoded forms are listed as they reach safeNext, decoded
// once by the query or form parser.
var hostileNext = []string{
	"",
	"other.host/x",
	"//other.host/x",
	"///other.host/x",
	"/\\other.host/x",
	"\\\\other.host/x",
	"/\t/other.host/x",  // ?next=/%09/other.host/x
	"/\r/other.host/x",  // %0D
	"/\n/other.host/x",  // %0A
	"/\r\nSet-Cookie:x", // header splitting
	"\t//other.host/x",
	" //other.host/x",
	"/ /other.host/x",
	"/x\x00y",
	"/x\x7fy",
	"/x\u2028y",         // a line separator
	"/x\u00a0y",         // a no-break space
	"/%2F%2Fother.host", // ?next=/%252F%252F...: one more decode gives //other.host
	"/%5Cother.host",    // one more decode gives /\other.host
	"/%09/other.host/x", // one more decode gives a tab
	"/actions/12\\x",    // a backslash anywhere
	"/actions?q=\\x",    // in the query too
	"/actions?q=a b",    // a raw space
	"https:",
	"https://other.host/x",
	"https:/other.host/x",
	"HTTPS://other.host",
	"javascript:alert(1)",
	"JavaScript:alert(1)",
	"data:text/html,x",
	"mailto:x@other.host",
	"?next=//other.host",
	"#//other.host",
	"/x\xffy", // not UTF-8
}

// TestSafeNextRefusesOtherSites: every hostile target becomes "/".
func TestSafeNextRefusesOtherSites(t *testing.T) {
	t.Parallel()
	for _, next := range hostileNext {
		if got := safeNext(next); got != "/" {
			t.Errorf("safeNext(%q) = %q, want \"/\"", next, got)
		}
	}
}

// TestSafeNextKeepsPaths: paths on this site are kept as they are, with their
// query, percent-encoding included.
func TestSafeNextKeepsPaths(t *testing.T) {
	t.Parallel()
	for _, next := range []string{
		"/",
		"/actions/12",
		"/queue/failed?state=failed",
		"/queue/failed?state=failed&sort=-age",
		"/actions?q=a%20b&owner=ada%40example.com",
		"/actions?q=a%2Fb",
		"/events?source=stripe-live#top",
		"/destinations/crm/oauth/callback?state=x&code=y",
		"/https://other.host", // a path that merely spells a URL
		"/a:b",
	} {
		if got := safeNext(next); got != next {
			t.Errorf("safeNext(%q) = %q, want it kept", next, got)
		}
	}
}
