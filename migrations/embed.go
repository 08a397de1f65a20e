// Package migrations holds the SQL schema as goose migrations, embedded in the binary.
package migrations

import "embed"

// FS holds every migration file, applied in order by db.Migrate.
//
//go:embed *.sql
var FS embed.FS
