package ledger

import (
	"errors"
	"fmt"
)

// Error codes. The web layer maps each to one HTTP status in one place; people see
// Message, logs see the wrapped error.
const (
	ENOTFOUND     = "not_found"
	EINVALID      = "invalid"
	ECONFLICT     = "conflict"
	EUNAVAILABLE  = "unavailable"
	EUNAUTHORIZED = "unauthorized"
	EFORBIDDEN    = "forbidden"
	ETOOLARGE     = "too_large"
	ETIMEOUT      = "timeout" // the request arrived too slowly
	EINTERNAL     = "internal"
	ETHROTTLED    = "throttled" // a sign-in refused because too many failed before it
)

// Error is a domain error: a code the program acts on and a message a person can read.
type Error struct {
	Code    string
	Message string
	Err     error // optional cause, for logs only
}

func (e *Error) Error() string {
	if e.Err != nil {
		return e.Message + ": " + e.Err.Error()
	}
	return e.Message
}

func (e *Error) Unwrap() error { return e.Err }

// Errorf returns an *Error with the given code and a formatted message.
func Errorf(code, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

// ErrorCode returns the code of the first *Error in err's chain, EINTERNAL for any
// other non-nil error and "" for nil.
func ErrorCode(err error) string {
	if err == nil {
		return ""
	}
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	return EINTERNAL
}

// ErrorMessage returns the human message of the first *Error in err's chain, or a
// generic sentence for other errors, whose detail belongs in the logs only.
func ErrorMessage(err error) string {
	if err == nil {
		return ""
	}
	var e *Error
	if errors.As(err, &e) {
		return e.Message
	}
	return "Internal error."
}
