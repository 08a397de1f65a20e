package db

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

func TestErrorClasses(t *testing.T) {
	type class struct{ NotFound, Unique, Unavailable, Refused, Conflict bool }
	pg := func(code string) error { return fmt.Errorf("insert: %w", &pgconn.PgError{Code: code}) }
	cases := []struct {
		name string
		err  error
		want class
	}{
		{"Nil", nil, class{}},
		{"NoRows", fmt.Errorf("get: %w", pgx.ErrNoRows), class{NotFound: true}},
		{"UniqueViolation", pg("23505"), class{Unique: true, Refused: true}},
		{"CheckViolation", pg("23514"), class{Refused: true}},
		{"NulInText", pg("22021"), class{Refused: true}},
		{"NumericOverflow", pg("22003"), class{Refused: true}},
		{"IndexRowTooBig", pg("54000"), class{Refused: true}},
		{"ConnectionLost", pg("08006"), class{Unavailable: true}},
		{"AdminShutdown", pg("57P01"), class{Unavailable: true}},
		{"TooManyConnections", pg("53300"), class{Unavailable: true}},
		{"Deadline", fmt.Errorf("query: %w", context.DeadlineExceeded), class{Unavailable: true}},
		{"Deadlock", pg("40P01"), class{Conflict: true}},
		{"SerializationFailure", pg("40001"), class{Conflict: true}},
		{"SyntaxError", pg("42601"), class{}},
		{"Plain", errors.New("something else"), class{}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, refused := Refused(c.err)
			got := class{IsNotFound(c.err), IsUniqueViolation(c.err), IsUnavailable(c.err), refused, IsConflict(c.err)}
			if diff := cmp.Diff(c.want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}
