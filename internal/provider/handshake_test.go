package provider_test

import (
	"crypto/ed25519"
	"encoding/hex"
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/oncehook/oncehook/internal/ledger"
	"github.com/oncehook/oncehook/internal/provider"
)

// TestVerifyHandshakes checks the answers a verified endpoint validation gets, and
// that only a verified one gets any.
func TestVerifyHandshakes(t *testing.T) {
	ts := fmt.Sprint(verifyTestNow.Unix())
	zoomBody := `{"payload":{"plainToken":"qgg8vlvZRS6UYooatFL8Aw"},"event_ts":1654503849680,"event":"endpoint.url_validation"}`
	// Signed with the second of two live secret tokens: the answer uses that one.
	zoom := provider.VerifyParams{Provider: provider.PresetZoom, Secrets: []string{"old-token", "new-token"}, Now: verifyTestNow,
		Header: verifyHeaders("X-Zm-Request-Timestamp", ts, "X-Zm-Signature",
			"v0="+hex.EncodeToString(testHMAC([]byte("new-token"), "v0:"+ts+":"+zoomBody))),
		Body: []byte(zoomBody)}
	slackBody := `{"token":"x","challenge":"3eZbrw1aBm2rZgRNFdxV2595E9CY3gmdALWMmHkvFXO7tYXAYM8P","type":"url_verification"}`
	slack := provider.VerifyParams{Provider: provider.PresetSlack, Secrets: []string{"slack-secret"}, Now: verifyTestNow,
		Header: verifyHeaders("X-Slack-Request-Timestamp", ts, "X-Slack-Signature",
			"v0="+hex.EncodeToString(testHMAC([]byte("slack-secret"), "v0:"+ts+":"+slackBody))),
		Body: []byte(slackBody)}
	seed, _ := hex.DecodeString("9d61b19deffd5a60ba844af492ec2cc44449c5697b326919703bac031cae7f60") // RFC 8032 TEST 1
	pingBody := `{"id":"1","type":1,"application_id":"2"}`
	ping := provider.VerifyParams{Provider: provider.PresetDiscord,
		Secrets: []string{"d75a980182b10ab7d54bfed3c964073a0ee172f3daa62325af021a68f707511a"}, Now: verifyTestNow,
		Header: verifyHeaders("X-Signature-Timestamp", ts, "X-Signature-Ed25519",
			hex.EncodeToString(ed25519.Sign(ed25519.NewKeyFromSeed(seed), []byte(ts+pingBody)))),
		Body: []byte(pingBody)}
	answers := []struct {
		name   string
		params provider.VerifyParams
		want   string
	}{
		{"ZoomAnswersWithTheTokenThatSigned", zoom,
			`{"encryptedToken":"` + hex.EncodeToString(testHMAC([]byte("new-token"), "qgg8vlvZRS6UYooatFL8Aw")) + `","plainToken":"qgg8vlvZRS6UYooatFL8Aw"}`},
		{"SlackAnswersTheChallenge", slack, `{"challenge":"3eZbrw1aBm2rZgRNFdxV2595E9CY3gmdALWMmHkvFXO7tYXAYM8P"}`},
		{"DiscordPingGetsPong", ping, `{"type":1}`},
	}
	for _, a := range answers {
		t.Run(a.name, func(t *testing.T) {
			d, err := provider.Verify(a.params)
			if err != nil || d.Answer == nil {
				t.Fatalf("Verify() = %+v, %v; want an answer", d, err)
			}
			if diff := cmp.Diff(a.want, string(d.Answer.Body)); diff != "" || d.ID != "" || d.Payload != nil {
				t.Errorf("answer (-want +got):\n%s\ndelivery %+v", diff, d)
			}
		})
		t.Run(a.name+"UnsignedIsRefused", func(t *testing.T) {
			p := withParams(a.params, func(p *provider.VerifyParams) { p.Secrets = []string{"ab" + p.Secrets[0][2:]} })
			if _, err := provider.Verify(p); ledger.ErrorCode(err) != ledger.EUNAUTHORIZED {
				t.Fatalf("Verify() error = %v, want %s", err, ledger.EUNAUTHORIZED)
			}
		})
	}
	t.Run("SlackChallengeMissingIsInvalid", func(t *testing.T) {
		body := `{"type":"url_verification"}`
		p := withParams(slack, func(p *provider.VerifyParams) {
			p.Body = []byte(body)
			p.Header.Set("X-Slack-Signature", "v0="+hex.EncodeToString(testHMAC([]byte("slack-secret"), "v0:"+ts+":"+body)))
		})
		if _, err := provider.Verify(p); ledger.ErrorCode(err) != ledger.EINVALID {
			t.Fatalf("Verify() error = %v, want %s", err, ledger.EINVALID)
		}
	})
}
