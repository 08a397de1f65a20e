package views

import (
	"fmt"
	"maps"
	"math"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"github.com/a-h/templ"
)

func urlQuery(s string) string { return url.QueryEscape(s) }

func itoa(n int) string     { return strconv.Itoa(n) }
func itoa64(n int64) string { return strconv.FormatInt(n, 10) }
func itoa32(n int32) string { return strconv.FormatInt(int64(n), 10) }

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

// actLabel is an act's button label: "retry" reads Retry.
func actLabel(act string) string {
	if act == "" {
		return ""
	}
	return strings.ToUpper(act[:1]) + act[1:]
}

func about(estimate bool) string {
	if estimate {
		return "about "
	}
	return ""
}

// countWords is a count as a person reads it: exact, "about 310k" for an
// estimate (two figures, no more is known), or "1000+" for a lower bound.
func countWords(n int64, about, more bool) string {
	switch {
	case more:
		return itoa64(n) + "+"
	case about:
		return "about " + roundFigure(n)
	}
	return itoa64(n)
}

// roundFigure is n to two significant figures: 9400, 310k, 1.2M, 2B.
func roundFigure(n int64) string {
	if n < 10_000 {
		return itoa64(n)
	}
	f, unit := float64(n), ""
	switch {
	case n >= 1_000_000_000:
		f, unit = f/1e9, "B"
	case n >= 1_000_000:
		f, unit = f/1e6, "M"
	default:
		f, unit = f/1e3, "k"
	}
	switch {
	case f >= 100:
		return strconv.FormatFloat(math.Round(f/10)*10, 'f', 0, 64) + unit
	case f >= 10:
		return strconv.FormatFloat(math.Round(f), 'f', 0, 64) + unit
	}
	return strconv.FormatFloat(math.Round(f*10)/10, 'f', -1, 64) + unit
}

// bucketName is what one bar of a trend window covers.
func bucketName(window string) string {
	switch window {
	case "hour":
		return "five minutes"
	case "day":
		return "one hour"
	}
	return "one day"
}

// Active reports whether f narrows the list beyond its page and order.
func (f Filter) Active() bool {
	return f.set() > 0
}

// set is how many of f's fields narrow the list.
func (f Filter) set() int {
	n := 0
	for _, v := range []string{f.State, f.Source, f.Action, f.Destination, f.Owner, f.Client, f.Q, f.Reason,
		f.Since, f.Until, f.HTTPStatus, f.Snoozed} {
		if v != "" {
			n++
		}
	}
	return n
}

// filterSummary says on the folded filter what it holds: the search, and how
// many other fields are set.
func filterSummary(f Filter) string {
	n := f.set()
	switch {
	case f.Q != "" && n > 1:
		return fmt.Sprintf(": \u201c%s\u201d and %d more", f.Q, n-1)
	case f.Q != "":
		return fmt.Sprintf(": \u201c%s\u201d", f.Q)
	case n == 1:
		return ": 1 field set"
	case n > 1:
		return fmt.Sprintf(": %d fields set", n)
	}
	return ""
}

// matchWord ends a total: all of a queue, or what a filter matched.
func matchWord(f Filter) string {
	if f.Active() {
		return "match"
	}
	return "in all"
}

// plus marks a count that stopped: there are more.
func plus(more bool) string {
	if more {
		return "+"
	}
	return ""
}

// current marks the navigation link of the page shown.
func current(is bool) templ.Attributes {
	if is {
		return templ.Attributes{"aria-current": "page"}
	}
	return templ.Attributes{}
}

// contains reports whether list holds s.
func contains(list []string, s string) bool { return slices.Contains(list, s) }

// join lists names comma-separated.
func join(names []string) string { return strings.Join(names, ", ") }

// actURL is the URL of act on the item whose page is u: u's path and "/act",
// with u's query (the item's client) kept.
func actURL(u, act string) string { return ActURL(u, act) }

// ActURL is actURL for the server's own links.
func ActURL(u, act string) string {
	path, query, ok := strings.Cut(u, "?")
	if !ok {
		return path + "/" + act
	}
	return path + "/" + act + "?" + query
}

// queryFields is u's query as a form's fields: a browser replaces the query of a
// GET form's action with the form's fields, so a GET form carries it this way.
func queryFields(u string) [][2]string {
	_, query, _ := strings.Cut(u, "?")
	vs, err := url.ParseQuery(query)
	if err != nil {
		return nil
	}
	var out [][2]string
	for _, k := range slices.Sorted(maps.Keys(vs)) {
		for _, v := range vs[k] {
			out = append(out, [2]string{k, v})
		}
	}
	return out
}

// userEmail is the signed-in person's email, for the script's "assign to me"; "".
func userEmail(l Layout) string {
	if l.User == nil {
		return ""
	}
	return l.User.Email
}
