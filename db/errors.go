package db

import (
	"context"
	"errors"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// The one place that reads what a pgx or Postgres error means. Callers ask these
// questions instead of looking at SQLSTATE codes themselves.

// IsNotFound reports whether err means a query found no row.
func IsNotFound(err error) bool { return errors.Is(err, pgx.ErrNoRows) }

// IsUniqueViolation reports whether err is a unique-constraint violation.
func IsUniqueViolation(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && pgErr.Code == "23505"
}

// IsConflict reports whether err means the transaction lost to another
// running at the same time (a deadlock, or a serialization failure): run again,
// it goes through. On Citus, writes to one reference table from several
// transactions at once can deadlock across its nodes.
func IsConflict(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && (pgErr.Code == "40P01" || pgErr.Code == "40001")
}

// IsUnavailable reports whether err means the database could not be reached or
// answered in time, as opposed to refusing a statement: the caller should say
// "try again later" rather than "bad request".
func IsUnavailable(err error) bool {
	if err == nil {
		return false
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return true
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		// Class 08: connection exception; 57P01-57P03: admin shutdown, crash
		// shutdown, cannot connect now; 53: insufficient resources.
		c := pgErr.Code
		return c[:2] == "08" || c == "57P01" || c == "57P02" || c == "57P03" || c[:2] == "53"
	}
	var connErr *pgconn.ConnectError
	if errors.As(err, &connErr) {
		return true
	}
	return pgconn.SafeToRetry(err) || pgconn.Timeout(err)
}

// Refused reports whether the database refused the data of a statement rather than
// failing to store it: class 22 (data exception: a NUL byte, a number beyond
// numeric), 23 (integrity constraint) or 54 (program limit exceeded: a value too
// large for its index). Sending the same data again fails the same way, so the
// caller sets it aside or tells its sender; it returns the error to quote.
func Refused(err error) (*pgconn.PgError, bool) {
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) || IsUnavailable(err) {
		return nil, false
	}
	switch pgErr.Code[:2] {
	case "22", "23", "54":
		return pgErr, true
	}
	return nil, false
}
