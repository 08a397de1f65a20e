// Package jsonscan walks JSON that is already known to be valid (Valid said so), by
// its bytes: where a value ends, what an object's members are. It decodes nothing
// and, Valid apart, checks nothing: given invalid JSON its answers mean nothing,
// though it never reads past the end of its input.
package jsonscan

import (
	"bytes"

	segmentjson "github.com/segmentio/encoding/json"
)

// Valid reports whether b is one valid JSON value, with the answer of
// encoding/json.Valid (FuzzValid compares them) in a fraction of its time: the
// router and verification check every body, so the check is on the hot path. It is
// segmentio/encoding's check, and encoding/json's limit on nesting, which that
// check does not have.
func Valid(b []byte) bool {
	if !segmentjson.Valid(b) {
		return false
	}
	if bytes.Count(b, []byte{'{'})+bytes.Count(b, []byte{'['}) <= maxDepth {
		return true // not enough brackets to nest too deep
	}
	return depth(b) <= maxDepth
}

// maxDepth is the deepest nesting encoding/json accepts.
const maxDepth = 10000

// depth is how deep the arrays and objects of valid JSON nest.
func depth(b []byte) int {
	deepest, open := 0, 0
	for i := 0; i < len(b); {
		switch b[i] {
		case '"':
			i = SkipString(b, i)
			continue
		case '{', '[':
			open++
			deepest = max(deepest, open)
		case '}', ']':
			open--
		}
		i++
	}
	return deepest
}

// SkipSpace returns the index of the first byte from b[i] on that is not JSON
// whitespace.
func SkipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}

// SkipString returns the index after the string starting at b[i] (a quote).
func SkipString(b []byte, i int) int {
	for i++; i < len(b); i++ {
		switch b[i] {
		case '\\':
			i++
		case '"':
			return i + 1
		}
	}
	return len(b)
}

// SkipValue returns the index after the value starting at b[i].
func SkipValue(b []byte, i int) int {
	switch b[i] {
	case '"':
		return SkipString(b, i)
	case '{', '[':
		depth := 0
		for ; i < len(b); i++ {
			switch b[i] {
			case '"':
				i = SkipString(b, i) - 1
			case '{', '[':
				depth++
			case '}', ']':
				if depth--; depth == 0 {
					return i + 1
				}
			}
		}
		return len(b)
	default: // a number, true, false or null
		for i < len(b) && b[i] != ',' && b[i] != '}' && b[i] != ']' && b[i] != ' ' &&
			b[i] != '\t' && b[i] != '\n' && b[i] != '\r' {
			i++
		}
		return i
	}
}

// Members calls fn with each member of the object starting at b[i], in order: its
// name as written (a JSON string, quotes included) and its value, both slices of b.
// It stops when fn returns false.
func Members(b []byte, i int, fn func(name, value []byte) bool) {
	for i = SkipSpace(b, i+1); i < len(b) && b[i] != '}'; {
		end := SkipString(b, i)
		name := b[i:end]
		i = SkipSpace(b, end)
		i = SkipSpace(b, i+1) // the colon
		if i >= len(b) {
			return
		}
		end = SkipValue(b, i)
		if !fn(name, b[i:end]) {
			return
		}
		if i = SkipSpace(b, end); i < len(b) && b[i] == ',' {
			i = SkipSpace(b, i+1)
		}
	}
}
