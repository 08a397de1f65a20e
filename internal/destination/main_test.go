package destination

import (
	"os"
	"testing"

	"github.com/oncehook/oncehook/db/dbtest"
)

// TestMain starts Postgres on first use only: the OAuth2 tests store grants there.
// Started as the OAuth2 crash test's child, the binary is that child instead.
func TestMain(m *testing.M) {
	if os.Getenv(oauthChildEnv) != "" {
		runOAuthChild() // never returns
	}
	dbtest.Main(m)
}
