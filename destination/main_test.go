package destination

import (
	"testing"

	"github.com/oncehook/oncehook/db/dbtest"
)

// TestMain starts Postgres on first use only: the OAuth2 tests store grants there.
func TestMain(m *testing.M) { dbtest.Main(m) }
