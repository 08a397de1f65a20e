package sandbox_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/smtp"
	"testing"

	"github.com/oncehook/oncehook/internal/sandbox"
)

// TestMailViewerListsWhatTheSinkAccepted: a message sent over SMTP shows on the
// sink's viewer, with its recipient, subject and body.
func TestMailViewerListsWhatTheSinkAccepted(t *testing.T) {
	t.Parallel()
	m, err := sandbox.StartMail("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(m.Close)
	msg := "From: hello@example.com\r\nTo: ada@example.com\r\nSubject: Welcome\r\nMessage-ID: <m1@example.com>\r\n\r\nThanks!\r\n"
	if err := smtp.SendMail(m.Addr(), nil, "hello@example.com", []string{"ada@example.com"}, []byte(msg)); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(m.Handler())
	t.Cleanup(srv.Close)
	res, err := http.Get(srv.URL + sandbox.MailInspectPath)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	var got []struct {
		To      []string `json:"to"`
		Subject string   `json:"subject"`
		Body    string   `json:"body"`
	}
	if err := json.NewDecoder(res.Body).Decode(&got); err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0].Subject != "Welcome" || len(got[0].To) != 1 || got[0].To[0] != "ada@example.com" || got[0].Body != "Thanks!" {
		t.Errorf("the viewer lists %+v", got)
	}
}
