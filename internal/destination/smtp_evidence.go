package destination

import (
	"encoding/json"
	"strings"

	"github.com/oncehook/oncehook/internal/ledger"
)

// Evidence is what a person looks for in the mail server's logs when an email's
// outcome is unknown: the Message-ID the send used (derived from the operation
// key, so it is the same on every attempt) and the recipients.
func (s *SMTP) Evidence(a ledger.Action) []ledger.Evidence {
	id, _ := mailMessageID(a.OperationKey)
	out := []ledger.Evidence{{Label: "Message-ID", Value: id}}
	var params map[string]json.RawMessage
	if json.Unmarshal(a.Params, &params) == nil {
		if list, err := mailRecipients(params["to"]); err == nil {
			to := make([]string, len(list))
			for i, addr := range list {
				to[i] = addr.Address
			}
			out = append(out, ledger.Evidence{Label: "Recipient", Value: strings.Join(to, ", ")})
		}
	}
	return out
}
