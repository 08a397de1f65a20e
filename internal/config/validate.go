package config

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/goccy/go-yaml"
	"github.com/goccy/go-yaml/ast"
	"github.com/goccy/go-yaml/parser"
	"github.com/goccy/go-yaml/token"
	"github.com/oncehook/oncehook/internal/ledger"
	"github.com/oncehook/oncehook/internal/settings"
)

// loader reads the config from the YAML syntax tree instead of through a struct
// decoder: every value keeps its position, so each problem is reported at its own
// line, and all of them in one pass rather than the first one only.
type loader struct {
	file    string
	getenv  func(string) string
	anchors map[string][]*ast.AnchorNode // by name, in file order, for resolving aliases
	pos     map[string]*token.Position   // where each field path was read
	errs    []configError
	budget  int  // nodes const values may still expand to: aliases can nest exponentially
	tooBig  bool // the budget ran out and that was reported
	// baseURL is the config's base_url (or its default); baseURLSet says the file
	// names it, as a scheme that signs the request URL needs.
	baseURL    string
	baseURLSet bool
}

type configError struct {
	line, col int
	msg       string
}

// maxErrors keeps a badly broken file (or the wrong file) from flooding the terminal.
const maxErrors = 50

func newLoader(file string, getenv func(string) string) *loader {
	return &loader{file: file, getenv: getenv, anchors: map[string][]*ast.AnchorNode{},
		pos: map[string]*token.Position{}, budget: 10000}
}

// errorf records a problem with the field at path, at the position recorded for it
// or else for its nearest recorded parent (a missing field is reported where its
// mapping is).
func (l *loader) errorf(path, format string, args ...any) {
	p := path
	for l.pos[p] == nil && p != "" {
		p = parentPath(p)
	}
	l.errorAt(l.pos[p], path, format, args...)
}

// errorAt records a problem at a position (line 1 when unknown).
func (l *loader) errorAt(at *token.Position, path, format string, args ...any) {
	line, col := 1, 1
	if at != nil {
		line, col = at.Line, at.Column
	}
	msg := fmt.Sprintf(format, args...)
	if path != "" {
		msg = path + ": " + msg
	}
	l.errs = append(l.errs, configError{line, col, fmt.Sprintf("%s:%d:%d: %s", l.file, line, col, msg)})
}

// err returns the recorded problems as one EINVALID error, in file order.
func (l *loader) err() error {
	if len(l.errs) == 0 {
		return nil
	}
	sort.SliceStable(l.errs, func(i, j int) bool {
		a, b := l.errs[i], l.errs[j]
		return a.line < b.line || a.line == b.line && a.col < b.col
	})
	var lines []string
	for _, e := range l.errs {
		if len(lines) == 0 || lines[len(lines)-1] != e.msg {
			lines = append(lines, e.msg)
		}
	}
	if len(lines) > maxErrors {
		lines = append(lines[:maxErrors], fmt.Sprintf("%s: and %d more problems", l.file, len(lines)-maxErrors))
	}
	return &ledger.Error{Code: ledger.EINVALID, Message: strings.Join(lines, "\n")}
}

// load parses data into a Config, recording every problem found.
func (l *loader) load(data []byte) *settings.Config {
	body, ok := l.document(data)
	if !ok {
		return nil
	}
	m := l.mapping("", body, "listen", "base_url", "sources", "destinations", "actions", "retention", "clients", "notify", "alerts", "sessions",
		"trusted_proxies", "connections_per_address", "sign_in")
	c := &settings.Config{Path: l.file, Listen: m.hostPort("listen", settings.DefaultListen, false)}
	c.BaseURL = m.url("base_url", false, false)
	if c.BaseURL == "" && c.Listen != "" {
		c.BaseURL = defaultBaseURL(c.Listen)
	}
	c.BaseURL = strings.TrimRight(c.BaseURL, "/")
	l.baseURL, l.baseURLSet = c.BaseURL, m.has("base_url")
	c.Retention = l.retention(m)
	c.Notify = l.notify(m)
	c.Alerts = l.alerts(m)
	c.Sessions = l.sessions(m)
	c.TrustedProxies = l.trustedProxies(m)
	c.ConnectionsPerAddress = m.integer("connections_per_address", settings.DefaultConnectionsPerAddress, 0, 1<<20)
	for i, n := range l.list("sources", m.vals["sources"]) {
		c.Sources = append(c.Sources, l.source(fmt.Sprintf("sources[%d]", i), n))
	}
	if len(c.Sources) == 0 {
		l.errorf("sources", "at least one source is required")
	}
	for i, n := range l.list("destinations", m.vals["destinations"]) {
		c.Destinations = append(c.Destinations, l.destination(fmt.Sprintf("destinations[%d]", i), n))
	}
	for i, n := range l.list("actions", m.vals["actions"]) {
		c.Actions = append(c.Actions, l.action(fmt.Sprintf("actions[%d]", i), n))
	}
	c.SignIn = l.signIn(m, c)
	c.PerClient = l.clients(m, c)
	l.check(c)
	l.secretKeys(c)
	return c
}

// document parses data as one YAML document and records its anchors; ok is false
// (with the error recorded) when it is not YAML or its top is not a mapping.
func (l *loader) document(data []byte) (body ast.Node, ok bool) {
	f, err := parser.ParseBytes(data, 0)
	if err != nil {
		var ye yaml.Error
		if errors.As(err, &ye) && ye.GetToken() != nil {
			l.errorAt(ye.GetToken().Position, "", "invalid YAML: %s", ye.GetMessage())
		} else {
			l.errorf("", "invalid YAML: %s", strings.SplitN(err.Error(), "\n", 2)[0])
		}
		return nil, false
	}
	if len(f.Docs) > 0 {
		body = f.Docs[0].Body
	}
	for _, doc := range f.Docs[min(1, len(f.Docs)):] {
		if doc.Body != nil {
			l.errorAt(posOf(doc.Body), "", "the config is one YAML document; this is a second one")
			break
		}
	}
	ast.Walk(anchorCollector{l}, body)
	for _, same := range l.anchors {
		sort.SliceStable(same, func(i, j int) bool { return posOf(same[i]).Offset < posOf(same[j]).Offset })
	}
	l.record("", body)
	if n := l.resolve("", body); n != nil {
		if _, ok := n.(ast.MapNode); !ok {
			l.errorAt(posOf(n), "", "the config must be a mapping of listen, sources, destinations and actions, not %s", kindOf(n))
			return nil, false
		}
	}
	return body, true
}

// defaultBaseURL makes links work from the machine itself when listen binds every
// interface, where "http://:8080" would not be a URL.
// PortEnv names the variable that, when set, makes the server listen on that port on
// every interface, overriding listen: the convention of container platforms.
const PortEnv = "PORT"

// ListenOnPort applies PortEnv's value to a loaded config: listen becomes ":port" and a
// base_url that was only listen's default follows it. An empty port changes nothing;
// one that is not a port number is an error of code invalid.
func ListenOnPort(c *settings.Config, port string) error {
	port = strings.TrimSpace(port)
	if port == "" {
		return nil
	}
	if n, err := strconv.ParseUint(port, 10, 16); err != nil || n == 0 {
		return ledger.Errorf(ledger.EINVALID, "%s=%q is not a port number", PortEnv, port)
	}
	wasDefault := c.BaseURL == defaultBaseURL(c.Listen)
	c.Listen = net.JoinHostPort("", port)
	if wasDefault {
		c.BaseURL = defaultBaseURL(c.Listen)
	}
	return nil
}

func defaultBaseURL(listen string) string {
	host, port, err := net.SplitHostPort(listen)
	if err != nil {
		return ""
	}
	if host == "" || host == "0.0.0.0" || host == "::" {
		host = "localhost"
	}
	return "http://" + net.JoinHostPort(host, port)
}

type anchorCollector struct{ l *loader }

func (v anchorCollector) Visit(n ast.Node) ast.Visitor {
	if a, ok := n.(*ast.AnchorNode); ok && a.Value != nil && posOf(a) != nil {
		name := tokenValue(a.Name)
		v.l.anchors[name] = append(v.l.anchors[name], a)
	}
	return v
}

// record remembers where the field at path is.
func (l *loader) record(path string, n ast.Node) {
	if p := posOf(n); p != nil {
		l.pos[path] = p
	}
}

func posOf(n ast.Node) *token.Position {
	switch v := n.(type) {
	case nil:
		return nil
	case *ast.MappingNode:
		// Its own token is the first ":"; people read a mapping as starting at its first key.
		if len(v.Values) > 0 {
			return posOf(v.Values[0].Key)
		}
	case *ast.MappingValueNode:
		return posOf(v.Key)
	}
	if tk := n.GetToken(); tk != nil {
		return tk.Position
	}
	return nil
}

// resolve follows anchors, tags and aliases to the node that holds the value, and
// turns null into nil, so that "key:" and a missing key mean the same.
func (l *loader) resolve(path string, n ast.Node) ast.Node {
	for range 64 {
		switch v := n.(type) {
		case *ast.AnchorNode:
			n = v.Value
		case *ast.TagNode:
			n = v.Value
		case *ast.AliasNode:
			if n = l.alias(path, v); n == nil {
				return nil
			}
		case *ast.NullNode:
			return nil
		default:
			return n
		}
	}
	l.errorf(path, "aliases refer to each other in a loop")
	return nil
}

// alias finds the anchor an alias names: the closest one before it, as YAML says.
func (l *loader) alias(path string, a *ast.AliasNode) ast.Node {
	name, at := tokenValue(a.Value), posOf(a)
	same := l.anchors[name]
	i := 0
	if at != nil {
		i = sort.Search(len(same), func(i int) bool { return posOf(same[i]).Offset >= at.Offset })
	}
	if i == 0 {
		l.errorf(path, "alias *%s has no anchor &%s before it", name, name)
		return nil
	}
	return same[i-1].Value
}

func tokenValue(n ast.Node) string {
	if n == nil || n.GetToken() == nil {
		return ""
	}
	return n.GetToken().Value
}

// scalarText is the text of a scalar as the file wrote it (quotes and escapes
// resolved); false for mappings and lists. Numbers and booleans count as text so
// "account: 123" works.
func scalarText(n ast.Node) (string, bool) {
	switch v := n.(type) {
	case nil:
		return "", true
	case *ast.StringNode:
		return v.Value, true
	case *ast.LiteralNode:
		if v.Value == nil {
			return "", true
		}
		return v.Value.Value, true
	case *ast.IntegerNode, *ast.FloatNode, *ast.BoolNode, *ast.InfinityNode, *ast.NanNode:
		return tokenValue(v), true
	}
	return "", false
}

func kindOf(n ast.Node) string {
	switch n.(type) {
	case *ast.MappingNode, *ast.MappingValueNode:
		return "a mapping"
	case *ast.SequenceNode:
		return "a list"
	}
	if s, ok := scalarText(n); ok {
		return strconv.Quote(s)
	}
	return n.Type().String()
}

var plainKey = regexp.MustCompile(`^[A-Za-z0-9_-]+$`)

// joinPath names a field the way a person would type it: "sources[1].provider".
func joinPath(path, key string) string {
	if !plainKey.MatchString(key) {
		return path + "[" + strconv.Quote(key) + "]"
	}
	if path == "" {
		return key
	}
	return path + "." + key
}

func parentPath(path string) string {
	return path[:max(0, strings.LastIndexAny(path, ".["))]
}

func (l *loader) check(c *settings.Config) {
	srcs := l.unique("sources", len(c.Sources), func(i int) string { return c.Sources[i].Name })
	dests := l.unique("destinations", len(c.Destinations), func(i int) string { return c.Destinations[i].Name })
	rules := l.unique("actions", len(c.Actions), func(i int) string { return c.Actions[i].Name })
	l.checkAlerts(c)
	for i := range c.Actions {
		a, path := &c.Actions[i], fmt.Sprintf("actions[%d]", i)
		if _, ok := srcs[a.Source]; !ok && a.Source != "" {
			l.errorf(path+".source", "no source is named %q (sources: %s)", a.Source, names(srcs))
		}
		if j, ok := dests[a.Destination]; ok {
			l.checkTarget(path, a, c.Destinations[j])
		} else if a.Destination != "" {
			l.errorf(path+".destination", "no destination is named %q (destinations: %s)", a.Destination, names(dests))
		}
		if j, ok := rules[a.After]; ok && c.Actions[j].Source != a.Source {
			l.errorf(path+".after", "%q acts on source %q, not %q: after links rules of one source", a.After, c.Actions[j].Source, a.Source)
		} else if !ok && a.After != "" {
			l.errorf(path+".after", "no action is named %q (actions: %s)", a.After, names(rules))
		}
		chain := afterChain(c, rules, i)
		for _, p := range a.Params {
			for _, r := range results(joinPath(path+".params", p.Name), p) {
				if !slices.Contains(chain, r.name) {
					l.errorf(r.path, "%q is not on this action's after chain (%s): only a result it waits for exists in time",
						r.name, strings.Join(append([]string{a.Name}, chain...), " -> "))
				}
			}
		}
		if cycle := afterCycle(c, rules, i); cycle != nil {
			l.errorf(path+".after", "after forms a cycle: %s", strings.Join(cycle, " -> "))
		}
	}
}

// checkTarget validates a rule's params against its destination and gives the rule
// the destination's owner when it names none, so every failure has a person.
// checkAlerts checks that the channels are named once and that each
// destination names channels that exist; a mail channel without addresses
// needs the destination's owner.
func (l *loader) checkAlerts(c *settings.Config) {
	channels := l.unique("alerts.channels", len(c.Alerts.Channels), func(i int) string { return c.Alerts.Channels[i].Name })
	for i, d := range c.Destinations {
		for j, name := range d.Alerts {
			path := fmt.Sprintf("destinations[%d].alerts[%d]", i, j)
			k, ok := channels[name]
			switch {
			case name == settings.AlertOwnerMail:
				if d.Owner == "" {
					l.errorf(path, "%q mails the destination's owner, and %q has none", name, d.Name)
				} else if c.Notify.SMTP.Addr == "" {
					l.errorf(path, "%q sends mail, and notify.smtp is not set", name)
				}
			case !ok:
				l.errorf(path, "no alert channel is named %q (alerts.channels: %s)", name, names(channels))
			case c.Alerts.Channels[k].Kind == settings.AlertMail && c.Notify.SMTP.Addr == "":
				l.errorf(path, "channel %q sends mail, and notify.smtp is not set", name)
			case c.Alerts.Channels[k].Kind == settings.AlertMail && len(c.Alerts.Channels[k].To) == 0 && d.Owner == "":
				l.errorf(path, "channel %q mails the destination's owner, and %q has none", name, d.Name)
			}
		}
	}
}

func (l *loader) checkTarget(path string, a *settings.ActionRule, d settings.Destination) {
	if a.Owner == "" {
		a.Owner = d.Owner
	}
	if d.ReferenceField != "" {
		if p, ok := paramAt(a.Params, d.ReferenceField); ok {
			l.errorf(joinPath(path+".params", p), "is where reference_field %s of destination %q puts the operation key", d.ReferenceField, d.Name)
		}
	}
	if d.Create.Encoding == settings.EncodingForm {
		for _, p := range a.Params {
			if p.IsObject || p.IsList {
				l.errorf(joinPath(path+".params", p.Name), "destination %q sends a form, which holds flat fields only", d.Name)
			}
		}
	}
	has := func(name string) bool {
		return slices.ContainsFunc(a.Params, func(p settings.Param) bool { return p.Name == name })
	}
	if d.Type == settings.DestinationSMTP && !has("to") {
		l.errorf(path+".params", "a mail needs a \"to\" param")
	}
	l.checkStream(path, a, d)
}

// checkStream refuses a Postmark-style lookup that searches another message stream
// than the one the create sends on: Postmark's message search looks in the stream
// its messagestream parameter names (outbound when absent), so it would never find
// the message, and an absence would be read from the wrong place.
func (l *loader) checkStream(path string, a *settings.ActionRule, d settings.Destination) {
	i := slices.IndexFunc(a.Params, func(p settings.Param) bool { return p.Name == "MessageStream" })
	if i < 0 || d.Lookup.URL == "" {
		return
	}
	at := joinPath(path+".params", "MessageStream")
	u, err := url.Parse(d.Lookup.URL)
	if err != nil {
		return
	}
	searched := u.Query().Get("messagestream")
	if searched == "" {
		searched = "outbound"
	}
	sent, ok := a.Params[i].Const.(string)
	if !ok {
		l.errorf(at, "the lookup of destination %q searches one message stream (%s): the create's MessageStream must be a {const: ...}",
			d.Name, searched)
		return
	}
	if sent != searched {
		l.errorf(at, "sends on message stream %q but the lookup of destination %q searches %q: add messagestream=%s to its url",
			sent, d.Name, searched, url.QueryEscape(sent))
	}
}

// unique reports repeated names and returns each name's first index.
func (l *loader) unique(section string, n int, name func(int) string) map[string]int {
	idx := map[string]int{}
	for i := range n {
		s := name(i)
		if s == "" {
			continue
		}
		if j, dup := idx[s]; dup {
			first := fmt.Sprintf("%s[%d].name", section, j)
			line := 0
			if p := l.pos[first]; p != nil {
				line = p.Line
			}
			l.errorf(fmt.Sprintf("%s[%d].name", section, i), "%q is already the name of %s[%d] (line %d)", s, section, j, line)
			continue
		}
		idx[s] = i
	}
	return idx
}

func names(idx map[string]int) string {
	if len(idx) == 0 {
		return "none"
	}
	out := make([]string, 0, len(idx))
	for s := range idx {
		out = append(out, s)
	}
	sort.Strings(out)
	return strings.Join(out, ", ")
}

// afterChain lists the rules rule i waits for, nearest first; it stops at a cycle.
func afterChain(c *settings.Config, rules map[string]int, i int) []string {
	var chain []string
	seen := map[int]bool{i: true}
	for j, ok := rules[c.Actions[i].After]; ok && !seen[j]; j, ok = rules[c.Actions[j].After] {
		seen[j] = true
		chain = append(chain, c.Actions[j].Name)
	}
	return chain
}

// afterCycle returns the cycle through rule i, reported for the cycle's first rule
// in the file only, so a cycle is one error and not one per member.
func afterCycle(c *settings.Config, rules map[string]int, i int) []string {
	cycle := []string{c.Actions[i].Name}
	for j, ok := rules[c.Actions[i].After]; ok && len(cycle) <= len(c.Actions); j, ok = rules[c.Actions[j].After] {
		if j < i {
			return nil
		}
		cycle = append(cycle, c.Actions[j].Name)
		if j == i {
			return cycle
		}
	}
	return nil
}

type resultRef struct{ path, name string }

// results lists the {result: action} params in p, nested ones included.
func results(path string, p settings.Param) []resultRef {
	switch {
	case p.Result != "":
		return []resultRef{{joinPath(path, "result"), p.Result}}
	case p.IsObject:
		var out []resultRef
		for _, q := range p.Object {
			out = append(out, results(joinPath(path, q.Name), q)...)
		}
		return out
	case p.IsList:
		var out []resultRef
		for i, q := range p.List {
			out = append(out, results(fmt.Sprintf("%s[%d]", path, i), q)...)
		}
		return out
	}
	return nil
}

// paramAt reports whether a param (or a nested one) renders at the JSON pointer
// ptr, or above or below it, and names its top-level param.
func paramAt(params []settings.Param, ptr string) (string, bool) {
	tokens := strings.Split(ptr, "/")[1:]
	for i, t := range tokens {
		tokens[i] = strings.NewReplacer("~1", "/", "~0", "~").Replace(t)
	}
	if objectHas(params, tokens) {
		return tokens[0], true
	}
	return "", false
}

func objectHas(params []settings.Param, tokens []string) bool {
	for _, p := range params {
		if p.Name == tokens[0] {
			return paramHas(p, tokens[1:])
		}
	}
	return false
}

// paramHas reports whether the param p holds the place rest names below it: an
// object's member, a list's element, or anything under a leaf.
func paramHas(p settings.Param, rest []string) bool {
	switch {
	case len(rest) == 0:
		return true
	case p.IsObject:
		return objectHas(p.Object, rest)
	case p.IsList:
		i, err := strconv.Atoi(rest[0])
		return err == nil && i >= 0 && i < len(p.List) && paramHas(p.List[i], rest[1:])
	}
	return true
}
