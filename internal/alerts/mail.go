package alerts

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/oncehook/oncehook/internal/ledger"
	"github.com/oncehook/oncehook/internal/settings"
)

// sendMail mails a to the channel's addresses, or the destination's owner.
func (s *Sender) sendMail(ctx context.Context, ch settings.AlertChannel, a Alert) (int, error) {
	if s.mail == nil {
		return 0, fmt.Errorf("mail is not set up: notify.smtp is not configured")
	}
	to := strings.Join(ch.To, ", ")
	if to == "" {
		to = a.Owner
	}
	if to == "" {
		return 0, fmt.Errorf("destination %s has no owner to mail", a.Destination)
	}
	params, err := json.Marshal(map[string]string{"to": to, "subject": "oncehook: " + a.Summary(), "text": a.Text()})
	if err != nil {
		return 0, fmt.Errorf("encode the mail: %w", err)
	}
	out := s.mail.Perform(ctx, ledger.Call{OperationKey: fmt.Sprintf("alert-%d", a.ID), Params: params})
	if out.Observed != ledger.ObsSuccess {
		return out.HTTPStatus, fmt.Errorf("mail to %s: %s", to, out.Detail)
	}
	return out.HTTPStatus, nil
}
