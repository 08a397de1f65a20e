package destination

import (
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/oncehook/oncehook/internal/jsonpointer"
	"github.com/oncehook/oncehook/internal/ledger"
	"github.com/oncehook/oncehook/internal/settings"
)

// classify maps a reply to its row of the decision table: the destination's own
// errors rules first, in order, then the default classification by status.
func (h *HTTP) classify(resp *http.Response, reply []byte, readErr error) ledger.Outcome {
	s := resp.StatusCode
	o := ledger.Outcome{HTTPStatus: s, Detail: h.statusDetail(s, reply)}
	if rule, ok := h.matchRule(s, reply); ok {
		o.Observed = h.means(rule.Means)
		if o.Observed == ledger.ObsThrottled {
			o.RetryAfter = h.retryAfter(resp.Header)
		}
		return o
	}
	o.Observed = ledger.ObserveStatus(s)
	switch o.Observed {
	case ledger.ObsSuccess:
		o.ExternalRef, o.Result, o.Detail = h.evidence(resp, reply, readErr)
	case ledger.ObsThrottled:
		o.RetryAfter = h.retryAfter(resp.Header)
	}
	return o
}

// matchRule returns the first errors rule that applies to the reply. A reply that
// is not JSON (Mailgun's plain "Forbidden") has no value at any pointer.
func (h *HTTP) matchRule(status int, reply []byte) (settings.ErrorRule, bool) {
	if len(h.d.Errors) == 0 {
		return settings.ErrorRule{}, false
	}
	doc, err := decodeReply(reply)
	parsed := err == nil
	for _, r := range h.d.Errors {
		if r.Status != 0 && r.Status != status {
			continue
		}
		// A rule without a status never turns a reply that may come after the
		// destination acted into a reason to call again (the loader refuses such a
		// rule with a status), nor a success into anything else.
		if r.Status == 0 && (status >= 200 && status < 300 || ledger.MayHavePerformed(status) && ledger.Repeats(r.Means)) {
			continue
		}
		if r.Pointer == "" {
			return r, true
		}
		if !parsed {
			continue
		}
		v, ok := jsonpointer.Get(doc, r.Pointer)
		if !ok {
			continue
		}
		switch text := valueText(v); {
		case r.HasEquals && text != r.Equals:
		case r.Contains != "" && !strings.Contains(text, r.Contains):
		default:
			return r, true
		}
	}
	return settings.ErrorRule{}, false
}

// valueText is a JSON value as a rule's equals is written: strings as they are,
// numbers as their digits, booleans as true or false.
func valueText(v any) string {
	switch x := v.(type) {
	case string:
		return x
	case nil:
		return "null"
	}
	return fmt.Sprint(v)
}

// means turns a rule's meaning into an observation (ledger.ObserveMeaning).
func (h *HTTP) means(m string) ledger.Observation {
	return ledger.ObserveMeaning(m, h.d.Lookup.URL != "")
}

// retryAfter is how long the destination asks to wait: the longer of Retry-After
// and the configured reset header.
func (h *HTTP) retryAfter(hdr http.Header) time.Duration {
	now := h.now()
	wait := parseRetryAfter(hdr.Get("Retry-After"), now)
	if r := h.d.RateLimitReset; r.Header != "" {
		wait = max(wait, parseReset(hdr.Get(r.Header), r.Unit, now))
	}
	return wait
}

// parseReset reads a reset header in its unit. Anything unreadable, or a time
// already past, is 0: the worker's own backoff applies.
func parseReset(v, unit string, now time.Time) time.Duration {
	f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
	if err != nil || f <= 0 || f > 1e13 {
		return 0
	}
	var d time.Duration
	switch unit {
	case settings.ResetEpoch:
		d = time.Unix(int64(f), 0).Sub(now)
	case settings.ResetMilliseconds:
		d = time.Duration(f * float64(time.Millisecond))
	default:
		d = time.Duration(f * float64(time.Second))
	}
	return max(d, 0)
}

// parseRetryAfter reads a Retry-After value: delta-seconds or an HTTP date. Anything
// else, or a date already past, is 0: the worker's own backoff applies.
func parseRetryAfter(v string, now time.Time) time.Duration {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0
	}
	if n, err := strconv.ParseUint(v, 10, 32); err == nil {
		return time.Duration(n) * time.Second
	}
	if t, err := http.ParseTime(v); err == nil && t.After(now) {
		return t.Sub(now)
	}
	return 0
}
