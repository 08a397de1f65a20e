package alerts

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/oncehook/oncehook/internal/settings"
)

// Slack's incoming webhooks take a message as {"text", "blocks"}: text is the
// notification's fallback, blocks what the channel shows (Block Kit: a section
// of mrkdwn, a context line). https://api.slack.com/messaging/webhooks

// slackMessage is the message a posts to Slack.
func slackMessage(a Alert) map[string]any {
	var head, body string
	if a.Down() {
		head = fmt.Sprintf(":red_circle: *%s is down* since %s UTC", slackEscape(a.Destination), a.OpenedAt.UTC().Format("2006-01-02 15:04"))
		body = "Its breaker is open: its work is parked until a probe finds it well.\n*Waiting:* " + slackEscape(a.WaitingText())
		if a.Reason != "" {
			body += "\n*Last error:* " + slackEscape(a.Reason)
		}
	} else {
		head = fmt.Sprintf(":large_green_circle: *%s is back* since %s UTC, after %s down", slackEscape(a.Destination),
			a.ClosedAt.UTC().Format("2006-01-02 15:04"), a.Duration())
		body = "Its breaker closed: its parked actions are released, oldest first.\n*Waiting:* " + slackEscape(a.WaitingText())
	}
	blocks := []any{
		map[string]any{"type": "section", "text": map[string]any{"type": "mrkdwn", "text": head + "\n" + body}},
	}
	if a.URL != "" {
		blocks = append(blocks, map[string]any{"type": "context", "elements": []any{
			map[string]any{"type": "mrkdwn", "text": fmt.Sprintf("<%s|%s in oncehook>", a.URL, slackEscape(a.Destination))},
		}})
	}
	return map[string]any{"text": a.Summary(), "blocks": blocks}
}

// slackEscape escapes the three characters Slack's mrkdwn reserves.
func slackEscape(s string) string {
	return strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;").Replace(s)
}

// postSlack posts a to the channel's incoming webhook.
func (s *Sender) postSlack(ctx context.Context, ch settings.AlertChannel, a Alert) (int, error) {
	body, err := json.Marshal(slackMessage(a))
	if err != nil {
		return 0, fmt.Errorf("encode the Slack message: %w", err)
	}
	status, err := s.post(ctx, ch.URL, nil, body)
	if err != nil {
		return status, fmt.Errorf("Slack %w", err)
	}
	return status, nil
}
