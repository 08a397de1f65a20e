package settings

import (
	"fmt"
	"strings"
	"time"
)

// BreakerSettings is a destination's breaker: it opens when at least
// FailureRate of the calls a process made over Window were unwell and there were
// at least MinCalls of them, stays open OpenFor, doubled at each failed probe up
// to MaxOpenFor, then lets one probe go.
type BreakerSettings struct {
	Off         bool // breaker: off: it never opens
	FailureRate float64
	MinCalls    int
	Window      time.Duration
	OpenFor     time.Duration
	MaxOpenFor  time.Duration
}

// The defaults, after Convoy's (docs/destinations.md says why): 70% of at least
// ten calls over five minutes, half-open after thirty seconds; the wait doubles
// at each failed probe up to ten minutes, so a long outage costs a dead API a
// call every ten minutes.
const (
	DefaultBreakerFailureRate = 0.7
	DefaultBreakerMinCalls    = 10
	DefaultBreakerWindow      = 5 * time.Minute
	DefaultBreakerOpenFor     = 30 * time.Second
	DefaultBreakerMaxOpenFor  = 10 * time.Minute
)

// OrDefault is s with the defaults in place of its zero fields: a destination
// made in code, or a config that sets some fields only.
func (s BreakerSettings) OrDefault() BreakerSettings {
	if s.FailureRate <= 0 {
		s.FailureRate = DefaultBreakerFailureRate
	}
	if s.MinCalls <= 0 {
		s.MinCalls = DefaultBreakerMinCalls
	}
	if s.Window <= 0 {
		s.Window = DefaultBreakerWindow
	}
	if s.OpenFor <= 0 {
		s.OpenFor = DefaultBreakerOpenFor
	}
	if s.MaxOpenFor <= 0 {
		s.MaxOpenFor = max(DefaultBreakerMaxOpenFor, s.OpenFor)
	}
	return s
}

// NextOpenFor is the wait after a failed probe: the last one doubled, within
// OpenFor and MaxOpenFor.
func (s BreakerSettings) NextOpenFor(last time.Duration) time.Duration {
	return min(max(2*last, s.OpenFor), s.MaxOpenFor)
}

// String says the settings in the config's words, for oncehook check.
func (s BreakerSettings) String() string {
	if s.Off {
		return "breaker off"
	}
	return fmt.Sprintf("breaker opens at %.0f%% unwell of at least %d calls in %s; probes after %s, doubling up to %s",
		100*s.FailureRate, s.MinCalls, shortDuration(s.Window), shortDuration(s.OpenFor), shortDuration(s.MaxOpenFor))
}

// shortDuration writes d as the config does: 5m, not 5m0s.
func shortDuration(d time.Duration) string {
	out := d.String()
	if strings.HasSuffix(out, "m0s") {
		out = strings.TrimSuffix(out, "0s")
	}
	if strings.HasSuffix(out, "h0m") {
		out = strings.TrimSuffix(out, "0m")
	}
	return out
}
