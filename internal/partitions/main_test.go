package partitions_test

import (
	"testing"

	"github.com/oncehook/oncehook/db/dbtest"
)

// TestMain starts the tests' Postgres (or the Citus cluster) once for the package.
func TestMain(m *testing.M) { dbtest.Main(m) }
