package alerts

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// post sends body as JSON to target (whose URL may be a secret: a Slack
// webhook's is) with hdr, and returns the status. A reply other than 2xx is an
// error that quotes a little of it; a 429's Retry-After is kept (retryAfter).
// No error names the URL.
func (s *Sender) post(ctx context.Context, target string, hdr http.Header, body []byte) (int, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, target, bytes.NewReader(body))
	if err != nil {
		return 0, errors.New("the channel's URL is not one a request can go to")
	}
	for k, v := range hdr {
		req.Header[k] = v
	}
	if req.Header.Get("Content-Type") == "" {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("User-Agent", "oncehook-alerts")
	res, err := s.client.Do(req)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err // without the URL
		}
		return 0, fmt.Errorf("no answer: %v", err)
	}
	defer res.Body.Close()
	reply, _ := io.ReadAll(io.LimitReader(res.Body, 512))
	if res.StatusCode/100 == 2 {
		return res.StatusCode, nil
	}
	err = fmt.Errorf("answered HTTP %d: %s", res.StatusCode, excerpt(reply))
	if res.StatusCode == http.StatusTooManyRequests {
		if secs, perr := strconv.Atoi(strings.TrimSpace(res.Header.Get("Retry-After"))); perr == nil && secs > 0 {
			return res.StatusCode, retryAfter{error: err, d: time.Duration(secs) * time.Second}
		}
	}
	return res.StatusCode, err
}

// excerpt is a reply's first words, on one line.
func excerpt(b []byte) string {
	s := strings.Join(strings.Fields(string(b)), " ")
	if len(s) > 200 {
		s = s[:200] + "..."
	}
	if s == "" {
		return "(no body)"
	}
	return s
}
