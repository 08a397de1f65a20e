package ledger

import (
	"strings"
	"unicode/utf8"
)

// Postgres text takes valid UTF-8 without NUL bytes. What oncehook is handed from
// outside (a destination's words, a form, a delivery's identity) is either cleaned
// to that (storableText) or refused (checkText); these are the only copies.

// IsStorableText reports whether Postgres can store s as text unchanged.
func IsStorableText(s string) bool {
	return utf8.ValidString(s) && strings.IndexByte(s, 0) < 0
}

// StorableText is s without NUL bytes and with invalid UTF-8 replaced.
func StorableText(s string) string {
	return strings.ReplaceAll(strings.ToValidUTF8(s, "\uFFFD"), "\x00", "")
}

// CheckText refuses values Postgres cannot take as text (invalid UTF-8, NUL bytes)
// with EINVALID naming what, instead of letting the query fail as a 500.
func CheckText(what string, values ...string) error {
	for _, v := range values {
		if !IsStorableText(v) {
			return Errorf(EINVALID, "The %s is not valid text.", what)
		}
	}
	return nil
}

// Truncate cuts s to at most n bytes plus an ellipsis, never inside a UTF-8 sequence.
func Truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}
