package web_test

import (
	"net/http"
	"strings"
	"testing"
)

// TestStrictTransportSecurity: with an https base_url every reply asks the browser
// to use HTTPS only (pages, errors, the API, webhooks, health); with an http one,
// or none, no reply does, since a site on plain HTTP would lock its people out.
func TestStrictTransportSecurity(t *testing.T) {
	t.Parallel()
	const want = "max-age=31536000; includeSubDomains"
	for _, tc := range []struct {
		name, baseURL, want string
	}{
		{"HTTPSBaseURL", "base_url: https://oncehook.example.com\n", want},
		{"HTTPBaseURL", "base_url: http://oncehook.example.com\n", ""},
		{"NoBaseURL", "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			h := newHarness(t, tc.baseURL+testConfig, nil)
			for _, r := range []struct{ method, path string }{
				{http.MethodGet, "/healthz"},
				{http.MethodGet, "/login"},
				{http.MethodGet, "/"},
				{http.MethodGet, "/no/such/page"},
				{http.MethodGet, "/api/v1/actions"},
				{http.MethodPost, "/hooks/stripe-live"},
				{http.MethodPost, "/login"},
			} {
				req, _ := http.NewRequest(r.method, h.url+r.path, strings.NewReader(""))
				res, err := http.DefaultTransport.RoundTrip(req)
				if err != nil {
					t.Fatal(err)
				}
				res.Body.Close()
				if got := res.Header.Get("Strict-Transport-Security"); got != tc.want {
					t.Errorf("%s %s (%d): Strict-Transport-Security %q, want %q", r.method, r.path, res.StatusCode, got, tc.want)
				}
			}
		})
	}
}
