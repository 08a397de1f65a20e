package ledger_test

import (
	"fmt"
	"net/url"
	"strings"
	"testing"

	"github.com/oncehook/oncehook/internal/ledger"
)

// TestSecretsScrubEverySpelling: a secret is taken out as it is, as JSON, a
// query and a path would escape it; held tokens too, the latest ones kept.
func TestSecretsScrubEverySpelling(t *testing.T) {
	t.Parallel()
	const secret = `s3cr/t+"v&l ue<`
	s := &ledger.Secrets{}
	s.Add(secret)
	for _, form := range []string{secret, `s3cr/t+\"v\u0026l ue\u003c`, url.QueryEscape(secret), url.PathEscape(secret)} {
		if got := s.Scrub("before " + form + " after"); got != "before "+ledger.Redacted+" after" {
			t.Errorf("Scrub(%q) = %q", form, got)
		}
	}
	for i := range 70 {
		s.Hold(fmt.Sprintf("token-%03d", i))
	}
	got := s.Scrub("token-069 token-006 token-005")
	if want := ledger.Redacted + " " + ledger.Redacted + " token-005"; got != want {
		t.Errorf("held tokens: %q, want %q (the latest 64 kept)", got, want)
	}
	var none *ledger.Secrets
	if got := none.Scrub("x"); got != "x" {
		t.Errorf("nil Secrets scrubbed %q", got)
	}
	if strings.Contains(s.Scrub(secret+secret), "s3cr") {
		t.Error("adjacent secrets left a part")
	}
}
