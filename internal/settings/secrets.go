package settings

import (
	"encoding/base64"
	"encoding/json"
	"net/url"
	"slices"
	"strings"
	"sync"
)

// Secrets is every secret value the process holds: those the config was given
// and the tokens it obtains while running. Scrub takes each of them out of text
// before the text is cut, stored or shown, since a cut could leave the start of
// one that a later replacement no longer recognises. Safe for concurrent use.
type Secrets struct {
	mu    sync.RWMutex
	forms []string // each value and its escaped spellings, longest first
	held  []string // tokens obtained lately, oldest first (see Hold)
}

// heldTokens bounds how many obtained tokens Scrub knows: enough for every
// OAuth destination's access and refresh tokens and those they replaced.
const heldTokens = 64

// NewSecrets returns the configured secrets of cfg: the sources' signing
// secrets and backfill credentials, every destination's credentials (and the
// basic-auth pair as the Authorization header encodes it), the mail servers'
// credentials and the notification webhook's secret.
func NewSecrets(cfg *Config) *Secrets {
	s := &Secrets{}
	if cfg == nil {
		return s
	}
	for _, src := range cfg.Sources {
		s.Add(src.Secrets...)
		s.Add(src.Backfill.APIKey, src.Backfill.Token)
	}
	for _, d := range cfg.Destinations {
		s.AddAuth(d.Auth)
		s.Add(d.Password)
	}
	s.Add(cfg.Notify.SMTP.Password, cfg.Notify.Webhook.Secret)
	return s
}

// AddAuth adds a destination's credentials, the basic pair as sent included.
func (s *Secrets) AddAuth(a Auth) {
	s.Add(a.Secrets()...)
	if a.Basic.Password != "" {
		s.Add(base64.StdEncoding.EncodeToString([]byte(a.Basic.User() + ":" + a.Basic.Password)))
	}
}

// Add adds values (empty ones are ignored), each also as JSON, a query and a
// path would escape it, since a reply may quote it in any of those.
func (s *Secrets) Add(values ...string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, v := range values {
		if v == "" {
			continue
		}
		quoted, _ := json.Marshal(v)
		for _, f := range []string{v, string(quoted[1 : len(quoted)-1]), url.QueryEscape(v), url.PathEscape(v)} {
			if !slices.Contains(s.forms, f) {
				s.forms = append(s.forms, f)
			}
		}
	}
	slices.SortFunc(s.forms, func(a, b string) int { return len(b) - len(a) })
}

// Hold adds tokens the process has obtained (access and refresh tokens), keeping
// the latest heldTokens of them.
func (s *Secrets) Hold(tokens ...string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, t := range tokens {
		if t != "" && !slices.Contains(s.held, t) {
			s.held = append(s.held, t)
		}
	}
	s.held = s.held[max(0, len(s.held)-heldTokens):]
}

// Scrub returns text with every secret replaced by Redacted. A nil Secrets
// scrubs nothing.
func (s *Secrets) Scrub(text string) string {
	if s == nil {
		return text
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	held := slices.Clone(s.held)
	slices.SortFunc(held, func(a, b string) int { return len(b) - len(a) })
	for _, f := range append(held, s.forms...) {
		text = strings.ReplaceAll(text, f, Redacted)
	}
	return text
}
