package destination

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/oncehook/oncehook/internal/ledger"
	"github.com/oncehook/oncehook/internal/sandbox"
	"github.com/oncehook/oncehook/internal/settings"
)

// newMailEnv starts a sink and returns it with a destination pointing at it.
func newMailEnv(t *testing.T) (*sandbox.Mail, settings.Destination) {
	t.Helper()
	m, err := sandbox.StartMail("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(m.Close)
	return m, settings.Destination{Name: "mail", Type: settings.DestinationSMTP, Addr: m.Addr(), From: "hello@example.com", Timeout: 5 * time.Second}
}

var mailCall = ledger.Call{OperationKey: "opk_1", Params: json.RawMessage(
	`{"to":"ada@example.com","subject":"Willkommen – schön","text":"Thanks!"}`)}

func TestSMTPDestinationPerform(t *testing.T) {
	t.Parallel()
	delivered := ledger.Outcome{Observed: ledger.ObsSuccess, HTTPStatus: 250, ExternalRef: "<opk_1@oncehook>",
		Result: json.RawMessage(`{"message_id":"<opk_1@oncehook>"}`), Detail: "SMTP 250: 2.0.0 OK: queued"}
	tests := []struct {
		name           string
		setup          func(t *testing.T, m *sandbox.Mail, d *settings.Destination)
		params         string // replaces the call's params when set
		want           ledger.Outcome
		detailContains string // when set, Detail is checked by substring instead
		wantMessages   int
	}{
		{name: "DeliveredWithDerivedMessageID", want: delivered, wantMessages: 1},
		{name: "AuthenticatedDelivery", want: delivered, wantMessages: 1,
			setup: func(t *testing.T, m *sandbox.Mail, d *settings.Destination) {
				m.RequireAuth("sender", "s3cret")
				d.Username, d.Password = "sender", "s3cret"
			}},
		{name: "WrongPasswordIsUnauthorized",
			setup: func(t *testing.T, m *sandbox.Mail, d *settings.Destination) {
				m.RequireAuth("sender", "s3cret")
				d.Username, d.Password = "sender", "old"
			},
			want: ledger.Outcome{Observed: ledger.ObsUnauthorized, HTTPStatus: 535, Detail: "SMTP 535: Authentication failed"}},
		{name: "MissingLoginIsUnauthorized",
			setup: func(t *testing.T, m *sandbox.Mail, d *settings.Destination) { m.RequireAuth("sender", "s3cret") },
			want:  ledger.Outcome{Observed: ledger.ObsUnauthorized, HTTPStatus: 530, Detail: "SMTP 530: Authentication required"}},
		{name: "TemporaryFailureIsThrottled",
			setup: func(t *testing.T, m *sandbox.Mail, d *settings.Destination) { m.FailNext(451, "try again later") },
			want:  ledger.Outcome{Observed: ledger.ObsThrottled, HTTPStatus: 451, Detail: "SMTP 451: try again later"}},
		{name: "PermanentFailureIsRejected",
			setup: func(t *testing.T, m *sandbox.Mail, d *settings.Destination) { m.FailNext(554, "message refused") },
			want:  ledger.Outcome{Observed: ledger.ObsRejected, HTTPStatus: 554, Detail: "SMTP 554: message refused"}},
		{name: "ReplyQuotingThePasswordIsScrubbed",
			setup: func(t *testing.T, m *sandbox.Mail, d *settings.Destination) {
				m.RequireAuth("sender", "s3cret")
				d.Username, d.Password = "sender", "s3cret"
				m.FailNext(554, "refused: account sender/s3cret is over its quota")
			},
			want: ledger.Outcome{Observed: ledger.ObsRejected, HTTPStatus: 554,
				Detail: "SMTP 554: refused: account sender/" + settings.Redacted + " is over its quota"}},
		{name: "SilenceAfterDataIsUnsure",
			setup: func(t *testing.T, m *sandbox.Mail, d *settings.Destination) {
				release := make(chan struct{})
				t.Cleanup(func() { close(release) })
				m.HangNext(release)
				d.Timeout = 300 * time.Millisecond
			},
			want: ledger.Outcome{Observed: ledger.ObsUnsure}, detailContains: "the message was sent but no reply came (timed out after 300ms)"},
		{name: "RefusedConnectionIsThrottled",
			setup: func(t *testing.T, m *sandbox.Mail, d *settings.Destination) { d.Addr = refusedAddr(t) },
			want:  ledger.Outcome{Observed: ledger.ObsThrottled}, detailContains: "not sent: connect to "},
		{name: "MissingRecipientIsRejected", params: `{"subject":"Hi","text":"x"}`,
			want: ledger.Outcome{Observed: ledger.ObsRejected, Detail: "param to is required"}},
		{name: "InvalidRecipientIsRejected", params: `{"to":"not an address"}`,
			want: ledger.Outcome{Observed: ledger.ObsRejected, Detail: `param to "not an address" is not a list of email addresses`}},
		{name: "NonStringSubjectIsRejected", params: `{"to":"ada@example.com","subject":7}`,
			want: ledger.Outcome{Observed: ledger.ObsRejected, Detail: "param subject must be a string"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			m, d := newMailEnv(t)
			if tt.setup != nil {
				tt.setup(t, m, &d)
			}
			call := mailCall
			if tt.params != "" {
				call.Params = json.RawMessage(tt.params)
			}
			got := NewSMTP(d).Perform(context.Background(), call)
			if tt.detailContains != "" {
				if !strings.Contains(got.Detail, tt.detailContains) {
					t.Errorf("Detail = %q, want it to contain %q", got.Detail, tt.detailContains)
				}
				got.Detail = ""
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("Perform() mismatch (-want +got):\n%s", diff)
			}
			if n := len(m.Messages()); n != tt.wantMessages {
				t.Errorf("sink holds %d messages, want %d", n, tt.wantMessages)
			}
		})
	}
}

func TestSMTPDestinationMessage(t *testing.T) {
	t.Parallel()
	m, d := newMailEnv(t)
	if out := NewSMTP(d).Perform(context.Background(), mailCall); out.Observed != ledger.ObsSuccess {
		t.Fatalf("Perform() = %+v, want success", out)
	}
	want := []sandbox.Message{{From: "hello@example.com", To: []string{"ada@example.com"},
		Subject: "Willkommen – schön", MessageID: "<opk_1@oncehook>", Body: "Thanks!"}}
	got := m.Messages()
	if diff := cmp.Diff(want, got, cmpopts.IgnoreFields(sandbox.Message{}, "Data")); diff != "" {
		t.Errorf("sink messages mismatch (-want +got):\n%s", diff)
	}
	if len(got) == 1 && !strings.Contains(string(got[0].Data), "\r\nX-Oncehook-Operation-Key: opk_1\r\n") {
		t.Errorf("message lacks the operation key header:\n%s", got[0].Data)
	}
}

func TestSMTPDestinationHTMLIsAnAlternative(t *testing.T) {
	t.Parallel()
	m, d := newMailEnv(t)
	call := mailCall
	call.Params = json.RawMessage(`{"to":["ada@example.com","bob@example.com"],"subject":"Hi","text":"plain words","html":"<p>rich words</p>"}`)
	if out := NewSMTP(d).Perform(context.Background(), call); out.Observed != ledger.ObsSuccess {
		t.Fatalf("Perform() = %+v, want success", out)
	}
	got := m.Messages()
	if len(got) != 1 {
		t.Fatalf("sink holds %d messages, want 1", len(got))
	}
	if diff := cmp.Diff([]string{"ada@example.com", "bob@example.com"}, got[0].To); diff != "" {
		t.Errorf("recipients mismatch (-want +got):\n%s", diff)
	}
	for _, s := range []string{"multipart/alternative", "text/plain", "plain words", "text/html", "<p>rich words</p>"} {
		if !strings.Contains(string(got[0].Data), s) {
			t.Errorf("message lacks %q:\n%s", s, got[0].Data)
		}
	}
}

func TestSMTPDestinationCheck(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		setup   func(t *testing.T, m *sandbox.Mail, d *settings.Destination)
		wantErr string // "" for nil; else a prefix
	}{
		{name: "NoCredentialsConnects"},
		{name: "AcceptedCredentials", setup: func(t *testing.T, m *sandbox.Mail, d *settings.Destination) {
			m.RequireAuth("sender", "s3cret")
			d.Username, d.Password = "sender", "s3cret"
		}},
		{name: "RefusedCredentials", setup: func(t *testing.T, m *sandbox.Mail, d *settings.Destination) {
			m.RequireAuth("sender", "s3cret")
			d.Username, d.Password = "sender", "old"
		}, wantErr: "the destination refused the credentials (SMTP 535)"},
		{name: "UnreachableIsAnError", setup: func(t *testing.T, m *sandbox.Mail, d *settings.Destination) { d.Addr = refusedAddr(t) },
			wantErr: "the destination could not be reached: "},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			m, d := newMailEnv(t)
			if tt.setup != nil {
				tt.setup(t, m, &d)
			}
			err := NewSMTP(d).Check(context.Background())
			got := ""
			if err != nil {
				got = err.Error()
				if tt.wantErr != "" && strings.HasPrefix(got, tt.wantErr) {
					got = tt.wantErr
				}
			}
			if diff := cmp.Diff(tt.wantErr, got); diff != "" {
				t.Errorf("Check() error mismatch (-want +got):\n%s", diff)
			}
			if n := len(m.Messages()); n != 0 {
				t.Errorf("Check sent %d messages", n)
			}
		})
	}
}

func TestSMTPDestinationMessageID(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, key, want string
	}{
		{name: "HexKeyIsKept", key: "9f86d081884c7d65", want: "<9f86d081884c7d65@oncehook>"},
		{name: "Base64URLKeyIsKept", key: "n4bQgYhMfWWa-_x", want: "<n4bQgYhMfWWa-_x@oncehook>"},
		{name: "KeyWithSpacesIsHashed", key: "a b",
			want: "<c8687a08aa5d6ed2044328fa6a697ab8e96dc34291e8c2034ae8c38e6fcc6d65@oncehook>"},
		{name: "KeyWithBracketIsHashed", key: "a>b\r\nBcc: x", want: ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, token := mailMessageID(tt.key)
			if tt.want == "" {
				if strings.ContainsAny(got, " \r\n") || strings.Count(got, ">") != 1 || len(token) != 64 {
					t.Errorf("mailMessageID(%q) = %q, want a hashed id", tt.key, got)
				}
				return
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("mailMessageID(%q) mismatch (-want +got):\n%s", tt.key, diff)
			}
		})
	}
}

func TestSMTPDestinationCapabilities(t *testing.T) {
	t.Parallel()
	s := NewSMTP(settings.Destination{Addr: "127.0.0.1:1", Timeout: 5 * time.Second})
	if diff := cmp.Diff(ledger.Capabilities{}, s.Capabilities()); diff != "" {
		t.Errorf("Capabilities() mismatch (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(ledger.LookupResult{Detail: "smtp offers no lookup"}, s.Lookup(context.Background(), "opk_1")); diff != "" {
		t.Errorf("Lookup() mismatch (-want +got):\n%s", diff)
	}
}
