package ledger

import (
	"strings"
	"unicode/utf8"
)

// Postgres text takes valid UTF-8 without NUL bytes. What oncehook is handed from
// outside (a destination's words, a form, a delivery's identity) is either cleaned
// to that (storableText) or refused (checkText); these are the only copies.

// isStorableText reports whether Postgres can store s as text unchanged.
func isStorableText(s string) bool {
	return utf8.ValidString(s) && strings.IndexByte(s, 0) < 0
}

// storableText is s without NUL bytes and with invalid UTF-8 replaced.
func storableText(s string) string {
	return strings.ReplaceAll(strings.ToValidUTF8(s, "\uFFFD"), "\x00", "")
}

// checkText refuses values Postgres cannot take as text (invalid UTF-8, NUL bytes)
// with EINVALID naming what, instead of letting the query fail as a 500.
func checkText(what string, values ...string) error {
	for _, v := range values {
		if !isStorableText(v) {
			return Errorf(EINVALID, "The %s is not valid text.", what)
		}
	}
	return nil
}

// truncate cuts s to at most n bytes plus an ellipsis, never inside a UTF-8 sequence.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}
