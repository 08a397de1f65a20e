package db

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/jackc/pgx/v5"
	_ "github.com/jackc/pgx/v5/stdlib" // the "pgx" database/sql driver
	"github.com/pressly/goose/v3"
	"github.com/pressly/goose/v3/lock"

	"github.com/oncehook/oncehook/migrations"
)

// Migrate applies every pending migration to the database at dsn, then, on a
// database with Citus, distributes the tables not distributed yet (see
// distribute). Concurrent callers are safe: goose takes a Postgres advisory lock
// while it works, and so does the distribution.
func Migrate(ctx context.Context, dsn string) error {
	sqlDB, err := sql.Open("pgx", dsn)
	if err != nil {
		return fmt.Errorf("open database for migrations: %w", err)
	}
	defer sqlDB.Close()
	fresh, err := migrate(ctx, sqlDB)
	if err != nil {
		return err
	}
	return distribute(ctx, dsn, fresh)
}

// distribute runs the distribution of migration 00024 after the migrations,
// rather than as a migration of its own, so that a table any migration adds is
// distributed by the same rule whatever its number. It distributes a database
// that is distributed already (the tables added since) or that these migrations
// created; a database migrated on a single Postgres before Citus was installed
// is left as it is, since distributing copies every row: oncehook citus
// distribute does that, when the operator chooses.
func distribute(ctx context.Context, dsn string, fresh bool) error {
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return fmt.Errorf("connect to distribute: %w", err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	q := New(conn)
	mode, err := q.DatabaseMode(ctx)
	if err != nil {
		return fmt.Errorf("read the database's mode: %w", err)
	}
	if mode == "single" || mode == "citus-undistributed" && !fresh {
		return nil
	}
	if _, err := q.DatabaseDistribute(ctx); err != nil {
		return fmt.Errorf("distribute tables by client: %w", err)
	}
	return nil
}

// migrate applies the pending migrations, and reports whether the database had
// none applied before (a new database).
func migrate(ctx context.Context, sqlDB *sql.DB) (fresh bool, err error) {
	locker, err := lock.NewPostgresSessionLocker()
	if err != nil {
		return false, fmt.Errorf("prepare migration lock: %w", err)
	}
	provider, err := goose.NewProvider(goose.DialectPostgres, sqlDB, migrations.FS,
		goose.WithSessionLocker(locker))
	if err != nil {
		return false, fmt.Errorf("prepare migrations: %w", err)
	}
	results, err := provider.Up(ctx)
	if err != nil {
		return false, fmt.Errorf("apply migrations: %w", err)
	}
	return len(results) > 0 && results[0].Source.Version == 1, nil
}
