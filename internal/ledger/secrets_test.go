package ledger_test

import (
	"fmt"
	"net/url"
	"strings"
	"testing"

	"github.com/oncehook/oncehook/internal/settings"
)

// TestSecretsScrubEverySpelling: a secret is taken out as it is, as JSON, a
// query and a path would escape it; held tokens too, the latest ones kept.
func TestSecretsScrubEverySpelling(t *testing.T) {
	t.Parallel()
	const secret = `s3cr/t+"v&l ue<`
	s := &settings.Secrets{}
	s.Add(secret)
	for _, form := range []string{secret, `s3cr/t+\"v\u0026l ue\u003c`, url.QueryEscape(secret), url.PathEscape(secret)} {
		if got := s.Scrub("before " + form + " after"); got != "before "+settings.Redacted+" after" {
			t.Errorf("Scrub(%q) = %q", form, got)
		}
	}
	for i := range 70 {
		s.Hold(fmt.Sprintf("token-%03d", i))
	}
	got := s.Scrub("token-069 token-006 token-005")
	if want := settings.Redacted + " " + settings.Redacted + " token-005"; got != want {
		t.Errorf("held tokens: %q, want %q (the latest 64 kept)", got, want)
	}
	var none *settings.Secrets
	if got := none.Scrub("x"); got != "x" {
		t.Errorf("nil Secrets scrubbed %q", got)
	}
	if strings.Contains(s.Scrub(secret+secret), "s3cr") {
		t.Error("adjacent secrets left a part")
	}
}
