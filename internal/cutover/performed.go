// Package cutover moves a client's workflow into oncehook without repeating what
// was already done: it records the operations an earlier system performed as
// confirmed actions under their operation identities (oncehook import), so that
// a later event asking for one of them performs nothing.
package cutover

import (
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/oncehook/oncehook/internal/ledger"
	"github.com/oncehook/oncehook/internal/settings"
)

// MaxLine is the longest line a file of performed operations may hold.
const MaxLine = 1 << 20

// Performed is one operation an earlier system performed, as a line of the file
// says it: the action (a rule of the config), its business key parts in the
// order of the rule's key, the destination's record id or message reference,
// when it was done, and optionally the params it was done with and the
// destination's reply document (for the {result: ...} params of its successors).
type Performed struct {
	Line        int
	Action      string          `json:"action"`
	Key         []string        `json:"key"`
	ExternalRef string          `json:"external_ref"`
	PerformedAt time.Time       `json:"performed_at"`
	Params      json.RawMessage `json:"params"`
	Result      json.RawMessage `json:"result"`
}

// Problem is why one line of a file cannot be imported.
type Problem struct {
	Line   int
	Reason string
}

// Problems is the lines of a file that cannot be imported: the file is then
// loaded not at all. List keeps the first MaxProblems by line; Count is all.
type Problems struct {
	File  string
	List  []Problem
	Count int
}

// MaxProblems is how many problems an import keeps to report; shownProblems how
// many its error lists, the count saying the rest.
const (
	MaxProblems   = 1000
	shownProblems = 50
)

func (p *Problems) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s: %d line(s) cannot be imported; nothing was loaded", p.File, p.Count)
	for i, x := range p.List {
		if i == shownProblems {
			break
		}
		fmt.Fprintf(&b, "\n%s:%d: %s", p.File, x.Line, x.Reason)
	}
	if more := p.Count - min(len(p.List), shownProblems); more > 0 {
		fmt.Fprintf(&b, "\n... and %d more", more)
	}
	return b.String()
}

func (p *Problems) add(line int, format string, args ...any) {
	p.Count++
	if len(p.List) < MaxProblems {
		p.List = append(p.List, Problem{Line: line, Reason: fmt.Sprintf(format, args...)})
	}
}

// operation is a checked line: the action it makes and the identity it makes it
// under.
type operation struct {
	Performed
	rule   settings.ActionRule
	source settings.Source
	id     ledger.OperationIdentity
	params json.RawMessage // {} when the line gives none
	sum    []byte          // empty when the line gives no params: any event's params are its own
	owner  string
}

// decodeLine reads one line: a JSON object with known fields only.
func decodeLine(text []byte) (Performed, error) {
	var p Performed
	dec := json.NewDecoder(bytes.NewReader(text))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&p); err != nil {
		return p, fmt.Errorf("not a JSON object of a performed operation: %v", err)
	}
	if dec.More() {
		return p, errors.New("more than one JSON value on the line")
	}
	return p, nil
}

// check is the line's operation for client, or the reason it has none.
func check(p Performed, cfg *settings.Config, client string) (operation, string) {
	op := operation{Performed: p}
	if p.Action == "" {
		return op, `no "action": name the rule of the config that did it`
	}
	rule, ok := cfg.Action(p.Action)
	if !ok {
		return op, fmt.Sprintf("no action %q in the config", p.Action)
	}
	src, _ := cfg.Source(rule.Source)
	if src.Client != client {
		return op, fmt.Sprintf("action %q is client %s's (source %s), not %s's", p.Action, src.Client, src.Name, client)
	}
	if len(p.Key) != len(rule.Key) {
		return op, fmt.Sprintf("action %q has %d key part(s) (%s), the line gives %d",
			p.Action, len(rule.Key), strings.Join(rule.Key, ", "), len(p.Key))
	}
	for i, part := range p.Key {
		if strings.TrimSpace(part) == "" {
			return op, fmt.Sprintf("key part %d (%s) is empty", i+1, rule.Key[i])
		}
	}
	if strings.TrimSpace(p.ExternalRef) == "" {
		return op, `no "external_ref": give the destination's record id or message reference`
	}
	if p.PerformedAt.IsZero() {
		return op, `no "performed_at": give when it was done, as 2026-01-02T15:04:05Z`
	}
	if err := ledger.CheckText("import", append([]string{p.Action, p.ExternalRef}, p.Key...)...); err != nil {
		return op, err.Error()
	}
	op.params, op.sum = json.RawMessage(`{}`), []byte{}
	if len(p.Params) > 0 && string(p.Params) != "null" {
		canon, err := canonicalObject(p.Params)
		if err != nil {
			return op, fmt.Sprintf(`"params" %v`, err)
		}
		sum := sha256.Sum256(canon)
		op.params, op.sum = canon, sum[:]
	}
	if len(p.Result) > 0 && string(p.Result) != "null" {
		canon, err := canonicalObject(p.Result)
		if err != nil {
			return op, fmt.Sprintf(`"result" %v`, err)
		}
		op.Result = canon
	} else {
		op.Result = nil
	}
	op.rule, op.source = rule, src
	op.id = ledger.OperationIdentity{Client: src.Client, Environment: src.Environment, Name: rule.Name, KeyParts: p.Key}
	op.owner = rule.Owner
	if op.owner == "" {
		dest, _ := cfg.Destination(rule.Destination)
		op.owner = dest.Owner
	}
	return op, ""
}

// canonicalObject re-encodes a JSON object as the router encodes the params it
// renders (keys sorted, numbers as written), so that the same params hash the
// same whichever wrote them.
func canonicalObject(raw json.RawMessage) (json.RawMessage, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v map[string]any
	if err := dec.Decode(&v); err != nil || v == nil {
		return nil, errors.New("is not a JSON object")
	}
	b, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("cannot be encoded: %v", err)
	}
	return b, nil
}
