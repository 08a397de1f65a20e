package sandbox

import "net/http"

// MailInspectPath is where Mail.Handler lists the messages the sink accepted,
// as InspectPath lists the CRM's records: what a person checks at the
// destination by hand.
const MailInspectPath = "/_sandbox/mail"

// Handler serves the accepted messages, newest first, as JSON at
// MailInspectPath (envelope, subject, message id and decoded body).
func (m *Mail) Handler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet || r.URL.Path != MailInspectPath {
			http.NotFound(w, r)
			return
		}
		msgs := m.Messages()
		out := make([]map[string]any, 0, len(msgs))
		for i := len(msgs) - 1; i >= 0; i-- {
			x := msgs[i]
			out = append(out, map[string]any{"from": x.From, "to": x.To, "subject": x.Subject,
				"message_id": x.MessageID, "body": x.Body})
		}
		writeJSON(w, http.StatusOK, out)
	})
}
