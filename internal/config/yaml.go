package config

import (
	"fmt"
	"net"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/goccy/go-yaml/ast"
	"github.com/oncehook/oncehook/internal/jsonpointer"
	"github.com/oncehook/oncehook/internal/ledger"
)

// The primitives below read one YAML value each, recording a problem at its own line
// when the value is not what the field needs.
// fields is one YAML mapping being read: its values, resolved, in file order.
type fields struct {
	l    *loader
	path string
	keys []string
	vals map[string]ast.Node // nil for null
}

// mapping reads the mapping n at path. Keys outside known are reported as unknown
// fields at their own line; with no known keys, any key is accepted.
func (l *loader) mapping(path string, n ast.Node, known ...string) fields {
	m := fields{l: l, path: path, vals: map[string]ast.Node{}}
	n = l.resolve(path, n)
	if n == nil {
		return m
	}
	mn, ok := n.(ast.MapNode)
	if !ok {
		l.errorf(path, "must be a mapping, not %s", kindOf(n))
		return m
	}
	for it := mn.MapRange(); it.Next(); {
		key, ok := l.key(path, it.Key())
		if !ok {
			continue
		}
		p := joinPath(path, key)
		l.record(p, it.Key())
		switch _, dup := m.vals[key]; {
		case len(known) > 0 && !slices.Contains(known, key):
			l.errorf(p, "unknown field (known: %s)", strings.Join(known, ", "))
		case dup:
			l.errorf(p, "is set twice")
		default:
			m.keys = append(m.keys, key)
			m.vals[key] = l.resolve(p, it.Value())
		}
	}
	return m
}

func (l *loader) key(path string, k ast.MapKeyNode) (string, bool) {
	var n ast.Node = k
	switch v := k.(type) {
	case *ast.MergeKeyNode:
		l.errorAt(posOf(v), path, "merge keys (<<) are not supported; alias the whole value instead")
		return "", false
	case *ast.MappingKeyNode:
		n = v.Value
	}
	s, ok := scalarText(l.resolve(path, n))
	if !ok {
		l.errorAt(posOf(k), path, "keys must be strings")
	}
	return s, ok
}

// list reads the list n at path, recording where each element is.
func (l *loader) list(path string, n ast.Node) []ast.Node {
	n = l.resolve(path, n)
	if n == nil {
		return nil
	}
	seq, ok := n.(*ast.SequenceNode)
	if !ok {
		l.errorf(path, "must be a list, not %s", kindOf(n))
		return nil
	}
	out := make([]ast.Node, len(seq.Values))
	for i, e := range seq.Values {
		p := fmt.Sprintf("%s[%d]", path, i)
		l.record(p, e)
		out[i] = l.resolve(p, e)
	}
	return out
}

func (m fields) has(key string) bool { _, ok := m.vals[key]; return ok }

func (m fields) at(key string) string { return joinPath(m.path, key) }

// sub reads the nested mapping under key.
func (m fields) sub(key string, known ...string) fields {
	return m.l.mapping(m.at(key), m.vals[key], known...)
}

func (m fields) str(key string) string {
	s, ok := scalarText(m.vals[key])
	if !ok {
		m.l.errorf(m.at(key), "must be a string, not %s", kindOf(m.vals[key]))
	}
	return s
}

func (m fields) required(key string) string {
	n := m.vals[key]
	s, ok := scalarText(n)
	switch {
	case !ok:
		m.l.errorf(m.at(key), "must be a string, not %s", kindOf(n))
	case n == nil:
		m.l.errorf(m.path, "%s is required", key)
	case strings.TrimSpace(s) == "":
		m.l.errorf(m.at(key), "must not be empty")
	}
	return s
}

// text reads a required or optional string.
func (m fields) text(key string, required bool) string {
	if required {
		return m.required(key)
	}
	return m.str(key)
}

var validName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$`)

// name reads a name used in URLs (/hooks/{source}) and references between rules.
func (m fields) name(key string) string {
	s := m.required(key)
	if s != "" && !validName.MatchString(s) {
		m.l.errorf(m.at(key), "%q must be 1-64 letters, digits, '.', '_' or '-', starting with a letter or digit", s)
	}
	return s
}

// oneOf reads one of options; with no default the field is required.
func (m fields) oneOf(key, def string, options ...string) string {
	s := m.text(key, def == "")
	switch {
	case s == "":
		return def
	case !slices.Contains(options, s):
		m.l.errorf(m.at(key), "%q is not one of %s", s, strings.Join(options, ", "))
	}
	return s
}

func (m fields) duration(key string, def time.Duration) time.Duration {
	s := m.str(key)
	if s == "" {
		return def
	}
	d, err := time.ParseDuration(s)
	switch {
	case err != nil:
		m.l.errorf(m.at(key), "%q is not a duration like 90s, 5m or 72h (30 days is 720h)", s)
	case d <= 0:
		m.l.errorf(m.at(key), "%q must be positive", s)
	}
	return d
}

func (m fields) size(key string, def int64) int64 {
	s := m.str(key)
	if s == "" {
		return def
	}
	n, err := ParseSize(s)
	switch {
	case err != nil:
		m.l.errorf(m.at(key), "%s", ledger.ErrorMessage(err))
	case n <= 0:
		m.l.errorf(m.at(key), "%q must be positive", s)
	}
	return n
}

func (m fields) integer(key string, def, lo, hi int) int {
	s := m.str(key)
	if s == "" {
		return def
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < lo || n > hi {
		m.l.errorf(m.at(key), "%q is not a whole number from %d to %d", s, lo, hi)
	}
	return n
}

func (m fields) boolean(key string) bool {
	switch v := m.vals[key].(type) {
	case nil:
		return false
	case *ast.BoolNode:
		return v.Value
	}
	m.l.errorf(m.at(key), "must be true or false, not %s", kindOf(m.vals[key]))
	return false
}

// strs reads a list of non-empty, distinct strings; a single string is a list of one.
func (m fields) strs(key string, required bool) []string {
	n, p := m.vals[key], m.at(key)
	nodes := []ast.Node{n}
	switch n.(type) {
	case nil:
		if required {
			m.l.errorf(m.path, "%s is required", key)
		}
		return nil
	case *ast.SequenceNode:
		if nodes = m.l.list(p, n); len(nodes) == 0 && required {
			m.l.errorf(p, "must list at least one")
		}
	}
	_, isList := n.(*ast.SequenceNode)
	var out []string
	for i, e := range nodes {
		s, ok := scalarText(e)
		ep := p
		if isList {
			ep = fmt.Sprintf("%s[%d]", p, i)
		}
		switch {
		case !ok:
			m.l.errorf(ep, "must be a string, not %s", kindOf(e))
		case strings.TrimSpace(s) == "":
			m.l.errorf(ep, "must not be empty")
		case slices.Contains(out, s):
			m.l.errorf(ep, "%q is listed twice", s)
		default:
			out = append(out, s)
		}
	}
	return out
}

// pointer reads a JSON pointer into a document; "" (the whole document) is never
// what a config means, so a pointer here must start with "/".
func (m fields) pointer(key, def string) string {
	s := m.str(key)
	if s == "" {
		return def
	}
	m.l.checkPointer(m.at(key), s)
	return s
}

func (l *loader) checkPointer(path, s string) {
	if !strings.HasPrefix(s, "/") {
		l.errorf(path, "%q is not a JSON pointer: it must start with \"/\"", s)
	} else if err := jsonpointer.Valid(s); err != nil {
		l.errorf(path, "%s", err)
	}
}

// hostPort reads host:port with a numeric port; with no default the field is required.
func (m fields) hostPort(key, def string, needHost bool) string {
	s := m.text(key, def == "")
	if s == "" {
		return def
	}
	host, port, err := net.SplitHostPort(s)
	if _, perr := strconv.ParseUint(port, 10, 16); err != nil || perr != nil || needHost && host == "" {
		m.l.errorf(m.at(key), "%q is not host:port", s)
		return ""
	}
	return s
}

// url reads an absolute http(s) URL; withRef requires the "{ref}" placeholder.
func (m fields) url(key string, required, withRef bool) string {
	s := m.text(key, required)
	if s == "" {
		return ""
	}
	if withRef && !strings.Contains(s, "{ref}") {
		m.l.errorf(m.at(key), "%q has no {ref}, where the operation key goes", s)
		return s
	}
	u, err := url.Parse(strings.ReplaceAll(s, "{ref}", "ref"))
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		m.l.errorf(m.at(key), "%q is not an absolute http or https URL", s)
	}
	return s
}

var envName = regexp.MustCompile(`^[A-Z_][A-Z0-9_]*$`)

// env reads the name of an environment variable and returns its value, trimmed
// unless raw. A value that does not look like a variable name is probably the secret
// itself pasted into the file, so the message does not repeat it.
func (m fields) env(key string, required, raw bool) (name, value string) {
	name = m.text(key, required)
	switch {
	case name == "":
		return "", ""
	case !envName.MatchString(name):
		m.l.errorf(m.at(key), "must name an environment variable (A-Z, 0-9, _), not hold the secret itself")
		return "", ""
	}
	value = m.l.getenv(name)
	if !raw {
		value = strings.TrimSpace(value)
	}
	if value == "" {
		m.l.errorf(m.at(key), "environment variable %s is not set or empty", name)
	}
	return name, value
}

// envValue reads the variable name listed at path, trimmed, as env does.
func (l *loader) envValue(path, name string) string {
	if !envName.MatchString(name) {
		l.errorf(path, "must name an environment variable (A-Z, 0-9, _), not hold the secret itself")
		return ""
	}
	value := strings.TrimSpace(l.getenv(name))
	if value == "" {
		l.errorf(path, "environment variable %s is not set or empty", name)
	}
	return value
}

// value converts a {const: v} value at root to what encoding/json would have
// decoded, so a destination can render it like any other param.
func (l *loader) value(root, path string, n ast.Node, depth int) any {
	n = l.resolve(path, n)
	// Children are paid for before they are visited, so an alias repeated many times
	// costs at most the budget plus one list.
	switch v := n.(type) {
	case *ast.SequenceNode:
		l.budget -= len(v.Values)
	case *ast.MappingNode:
		l.budget -= len(v.Values)
	}
	if l.budget < 0 || depth > 32 {
		if !l.tooBig {
			l.tooBig = true
			l.errorf(root, "is nested too deeply or expands too far")
		}
		return nil
	}
	switch v := n.(type) {
	case nil:
		return nil
	case *ast.IntegerNode:
		return v.Value
	case *ast.FloatNode:
		return v.Value
	case *ast.BoolNode:
		return v.Value
	case *ast.InfinityNode, *ast.NanNode:
		l.errorf(path, "%s has no JSON form", kindOf(v))
		return nil
	case *ast.SequenceNode:
		out := []any{}
		for i, e := range l.list(path, v) {
			out = append(out, l.value(root, fmt.Sprintf("%s[%d]", path, i), e, depth+1))
		}
		return out
	case ast.MapNode:
		m, out := l.mapping(path, n), map[string]any{}
		for _, k := range m.keys {
			out[k] = l.value(root, m.at(k), m.vals[k], depth+1)
		}
		return out
	}
	s, _ := scalarText(n)
	return s
}

// check validates what no single field shows: unique names and the references
// between sections.
