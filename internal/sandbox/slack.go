package sandbox

import (
	"encoding/json"
	"io"
	"mime"
	"net/http"
	"regexp"
	"sync"
	"time"
)

// Slack stands in for Slack's incoming webhooks as their documentation
// describes them (https://api.slack.com/messaging/webhooks and the errors of
// https://api.slack.com/changelog/2016-05-17-changes-to-errors-for-incoming-webhooks):
// a POST of a JSON message to /services/T.../B.../..., answered 200 "ok", or
// 400 "invalid_payload", "no_text" or "invalid_blocks", 404 "no_service" for
// an unknown hook, 403 "invalid_token" for a wrong secret part. A message has
// a text, blocks, or both; a block is a section (text or fields), context
// (1 to 10 elements), header, divider, image or actions, and a text object
// is {type: mrkdwn | plain_text, text} of at most 3000 characters.
type Slack struct {
	path string // the one webhook this workspace has: /services/T…/B…/secret

	mu       sync.Mutex
	messages []SlackMessage
	failing  bool // answer 500 "rollup_error" while set
	refused  int
}

// SlackMessage is one message a webhook accepted.
type SlackMessage struct {
	Text   string
	Blocks []map[string]any
	At     time.Time
}

// NewSlack returns a workspace whose one incoming webhook is at path, as Slack
// hands it out ("/services/T00000000/B00000000/XXXXXXXXXXXXXXXXXXXXXXXX").
func NewSlack(path string) *Slack { return &Slack{path: path} }

var slackHookPath = regexp.MustCompile(`^/services/T[A-Z0-9]{8,}/B[A-Z0-9]{8,}/[A-Za-z0-9]{24}$`)

// Messages returns what the webhook accepted, in order.
func (s *Slack) Messages() []SlackMessage {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]SlackMessage(nil), s.messages...)
}

// Fail makes the webhook answer 500 "rollup_error" (Slack's own failure)
// while on is true.
func (s *Slack) Fail(on bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.failing = on
}

// Refused counts the requests answered other than 200.
func (s *Slack) Refused() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.refused
}

func (s *Slack) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	status, answer, msg := s.take(r)
	s.mu.Lock()
	if status == http.StatusOK {
		s.messages = append(s.messages, msg)
	} else {
		s.refused++
	}
	s.mu.Unlock()
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.WriteHeader(status)
	io.WriteString(w, answer) //nolint:errcheck // the caller reads what it can
}

func (s *Slack) take(r *http.Request) (int, string, SlackMessage) {
	var msg SlackMessage
	s.mu.Lock()
	failing := s.failing
	s.mu.Unlock()
	switch {
	case r.Method != http.MethodPost:
		return http.StatusMethodNotAllowed, "invalid_request", msg
	case !slackHookPath.MatchString(r.URL.Path):
		return http.StatusNotFound, "no_service", msg
	case r.URL.Path != s.path:
		return http.StatusForbidden, "invalid_token", msg
	case failing:
		return http.StatusInternalServerError, "rollup_error", msg
	}
	if mt, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type")); mt != "application/json" {
		return http.StatusBadRequest, "invalid_payload", msg
	}
	var body struct {
		Text   *string          `json:"text"`
		Blocks []map[string]any `json:"blocks"`
	}
	dec := json.NewDecoder(io.LimitReader(r.Body, 1<<20))
	if err := dec.Decode(&body); err != nil {
		return http.StatusBadRequest, "invalid_payload", msg
	}
	if (body.Text == nil || *body.Text == "") && len(body.Blocks) == 0 {
		return http.StatusBadRequest, "no_text", msg
	}
	if len(body.Blocks) > 50 {
		return http.StatusBadRequest, "invalid_blocks", msg
	}
	for _, b := range body.Blocks {
		if !validSlackBlock(b) {
			return http.StatusBadRequest, "invalid_blocks", msg
		}
	}
	if body.Text != nil {
		msg.Text = *body.Text
	}
	msg.Blocks, msg.At = body.Blocks, time.Now()
	return http.StatusOK, "ok", msg
}

// validSlackBlock checks a block as Block Kit describes it, for the types a
// message sent by a webhook uses.
func validSlackBlock(b map[string]any) bool {
	switch b["type"] {
	case "section":
		fields, _ := b["fields"].([]any)
		if _, ok := b["text"]; !ok && len(fields) == 0 {
			return false
		}
		if t, ok := b["text"]; ok && !validSlackText(t) {
			return false
		}
		for _, f := range fields {
			if !validSlackText(f) {
				return false
			}
		}
		return len(fields) <= 10
	case "context":
		els, _ := b["elements"].([]any)
		if len(els) == 0 || len(els) > 10 {
			return false
		}
		for _, e := range els {
			if m, _ := e.(map[string]any); m["type"] != "image" && !validSlackText(e) {
				return false
			}
		}
		return true
	case "header":
		t, _ := b["text"].(map[string]any)
		return t["type"] == "plain_text" && validSlackText(t)
	case "divider":
		return true
	case "image":
		u, _ := b["image_url"].(string)
		alt, _ := b["alt_text"].(string)
		return u != "" && alt != ""
	case "actions":
		els, _ := b["elements"].([]any)
		return len(els) > 0 && len(els) <= 25
	}
	return false
}

func validSlackText(v any) bool {
	t, _ := v.(map[string]any)
	s, _ := t["text"].(string)
	return (t["type"] == "mrkdwn" || t["type"] == "plain_text") && s != "" && len([]rune(s)) <= 3000
}
