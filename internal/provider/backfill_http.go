package provider

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"time"

	"github.com/oncehook/oncehook/internal/ledger"
	"github.com/oncehook/oncehook/internal/settings"
)

// maxListReply bounds one page of a provider's list: 100 Stripe events of the
// largest kind fit many times over.
const maxListReply = 32 << 20

// apiTimeout bounds each call to a provider's API.
const apiTimeout = 30 * time.Second

// NewBackfillClients returns a client for every source with a backfill section, by
// source name. Stripe lists the event types the source's rules use.
func NewBackfillClients(cfg *settings.Config) map[string]ledger.BackfillClient {
	client := &http.Client{Timeout: apiTimeout}
	out := map[string]ledger.BackfillClient{}
	for _, src := range cfg.Sources {
		if !src.Backfill.On() {
			continue
		}
		switch src.Provider {
		case ledger.ProviderStripe:
			out[src.Name] = NewStripeEvents(src.Backfill.APIURL, src.Backfill.APIKey, RuleTypes(cfg, src.Name), client)
		case ledger.ProviderGitHub:
			out[src.Name] = NewGitHubDeliveries(src.Backfill.APIURL, src.Backfill.Token, src.Backfill.Hook, src.Account, client)
		}
	}
	return out
}

// RuleTypes are the event types the rules of a source start or cancel on, in config
// order, each once.
func RuleTypes(cfg *settings.Config, source string) []string {
	var types []string
	seen := map[string]bool{}
	for _, a := range cfg.Actions {
		if a.Source != source {
			continue
		}
		for _, t := range append(append([]string(nil), a.On...), a.CancelledBy...) {
			if !seen[t] {
				seen[t] = true
				types = append(types, t)
			}
		}
	}
	return types
}

// call sends req and decodes a 2xx JSON reply into v (when v is not nil). Any other
// reply, or none, is a *ledger.ProviderError naming the provider.
func call(client *http.Client, req *http.Request, name string, v any) (http.Header, error) {
	res, err := client.Do(req)
	if err != nil {
		var timeout interface{ Timeout() bool }
		if errors.As(err, &timeout) && timeout.Timeout() {
			return nil, &ledger.ProviderError{Message: fmt.Sprintf("%s did not answer in time", name)}
		}
		if req.Context().Err() != nil {
			return nil, &ledger.ProviderError{Message: fmt.Sprintf("the pass ended before %s answered", name)}
		}
		return nil, &ledger.ProviderError{Message: fmt.Sprintf("%s could not be reached: %v", name, unwrapNet(err))}
	}
	defer res.Body.Close()
	body, err := io.ReadAll(io.LimitReader(res.Body, maxListReply+1))
	if err != nil {
		return nil, &ledger.ProviderError{Status: res.StatusCode, Message: fmt.Sprintf("%s's reply could not be read", name)}
	}
	if res.StatusCode < 200 || res.StatusCode > 299 {
		return nil, refusal(name, res, body)
	}
	if len(body) > maxListReply {
		return nil, &ledger.ProviderError{Status: res.StatusCode, Message: fmt.Sprintf("%s's reply is larger than %d MiB", name, maxListReply>>20)}
	}
	if v != nil {
		if err := json.Unmarshal(body, v); err != nil {
			return nil, &ledger.ProviderError{Status: res.StatusCode, Message: fmt.Sprintf("%s's reply is not the JSON expected: %v", name, err)}
		}
	}
	return res.Header, nil
}

// unwrapNet keeps the innermost cause of a transport error: the URL is already known.
func unwrapNet(err error) error {
	for {
		next := errors.Unwrap(err)
		if next == nil {
			return err
		}
		err = next
	}
}

// refusal describes a non-2xx reply: its status, the provider's own message, and
// when a rate limit says to come back.
func refusal(name string, res *http.Response, body []byte) error {
	var reply struct {
		Message string `json:"message"` // GitHub
		Error   struct {
			Message string `json:"message"`
		} `json:"error"` // Stripe
	}
	_ = json.Unmarshal(body, &reply) // a reply that is not JSON only loses its message
	msg := reply.Error.Message
	if msg == "" {
		msg = reply.Message
	}
	e := &ledger.ProviderError{Status: res.StatusCode, RetryAfter: retryAfter(res.Header)}
	what := map[int]string{401: "refused the credentials", 403: "forbids this", 404: "does not know this",
		429: "is rate limiting"}[res.StatusCode]
	if what == "" {
		what = "answered " + http.StatusText(res.StatusCode)
	}
	e.Message = fmt.Sprintf("%s %s (%d)", name, what, res.StatusCode)
	if msg != "" {
		e.Message += ": " + truncateRunes(msg, 300)
	}
	if e.RetryAfter > 0 {
		e.Message += fmt.Sprintf("; next try in %s", e.RetryAfter.Round(time.Second))
	}
	return e
}

// retryAfter reads Retry-After (seconds), or GitHub's rate limit reset when the limit
// is spent.
func retryAfter(h http.Header) time.Duration {
	if s, err := strconv.Atoi(h.Get("Retry-After")); err == nil && s > 0 {
		return time.Duration(s) * time.Second
	}
	if h.Get("X-Ratelimit-Remaining") == "0" {
		if reset, err := strconv.ParseInt(h.Get("X-Ratelimit-Reset"), 10, 64); err == nil {
			if d := time.Until(time.Unix(reset, 0)); d > 0 {
				return d
			}
		}
	}
	return 0
}

func truncateRunes(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n]) + "…"
}

func newRequest(ctx context.Context, method, url, token string) (*http.Request, error) {
	req, err := http.NewRequestWithContext(ctx, method, url, nil)
	if err != nil {
		return nil, fmt.Errorf("build request: %w", err)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("User-Agent", "oncehook-backfill")
	return req, nil
}
