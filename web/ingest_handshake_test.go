package web_test

import (
	"context"
	"crypto/ed25519"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// discordSeed is RFC 8032 section 7.1 TEST 1's private key; its public key is what
// the discord source is configured with.
var discordSeed, _ = hex.DecodeString("9d61b19deffd5a60ba844af492ec2cc44449c5697b326919703bac031cae7f60")

func init() {
	testEnv["SLACK_SECRET"] = "test-slack-signing-secret"
	testEnv["ZOOM_SECRET"] = "test-zoom-secret-token"
	testEnv["DISCORD_KEY"] = "d75a980182b10ab7d54bfed3c964073a0ee172f3daa62325af021a68f707511a"
	testEnv["HUBSPOT_SECRET"] = "test-hubspot-client-secret"
}

const handshakeConfig = `
listen: 127.0.0.1:0
base_url: https://hooks.example.com
sources:
  - {name: slack, client: acme, provider: slack, environment: live, secret_env: SLACK_SECRET}
  - {name: zoom, client: acme, provider: zoom, environment: live, secret_env: ZOOM_SECRET}
  - {name: discord, client: acme, provider: discord, environment: live, secret_env: DISCORD_KEY}
  - {name: hs, client: acme, provider: hubspot, environment: live, secret_env: HUBSPOT_SECRET}
destinations:
  - name: crm
    type: http
    create: {method: POST, url: "http://127.0.0.1:1/opportunities"}
    auth: {bearer_env: CRM_TOKEN}
    owner: crm-admin@example.com
actions: []
`

func hexMAC(key, msg string) string {
	m := hmac.New(sha256.New, []byte(key))
	m.Write([]byte(msg))
	return hex.EncodeToString(m.Sum(nil))
}

func slackHeaders(ts, body string) http.Header {
	return http.Header{"X-Slack-Request-Timestamp": {ts}, "Content-Type": {"application/json"},
		"X-Slack-Signature": {"v0=" + hexMAC(testEnv["SLACK_SECRET"], "v0:"+ts+":"+body)}}
}

func zoomHeaders(ts, body string) http.Header {
	return http.Header{"X-Zm-Request-Timestamp": {ts}, "Content-Type": {"application/json"},
		"X-Zm-Signature": {"v0=" + hexMAC(testEnv["ZOOM_SECRET"], "v0:"+ts+":"+body)}}
}

func discordHeaders(ts, body string) http.Header {
	sig := ed25519.Sign(ed25519.NewKeyFromSeed(discordSeed), []byte(ts+body))
	return http.Header{"X-Signature-Timestamp": {ts}, "Content-Type": {"application/json"},
		"X-Signature-Ed25519": {hex.EncodeToString(sig)}}
}

// TestIngestHandshakes posts each provider's endpoint validation through the real
// ingest endpoint: verified, it gets the answer the provider expects and stores
// nothing; unverified, it is refused like any delivery.
func TestIngestHandshakes(t *testing.T) {
	t.Parallel()
	h := newHarness(t, handshakeConfig, nil)
	ts := fmt.Sprint(time.Now().Unix())
	slack := `{"token":"Jhj5dZrVaK7ZwHHjRyZWjbDl","challenge":"3eZbrw1aBm2rZgRNFdxV2595E9CY3gmdALWMmHkvFXO7tYXAYM8P","type":"url_verification"}`
	zoom := `{"payload":{"plainToken":"qgg8vlvZRS6UYooatFL8Aw"},"event_ts":1654503849680,"event":"endpoint.url_validation"}`
	ping := `{"id":"1067178433839755285","application_id":"1067160393869353010","type":1,"version":1}`
	cases := []struct {
		name, source, body string
		hdr                http.Header
		want               map[string]any
	}{
		{"SlackURLVerification", "slack", slack, slackHeaders(ts, slack),
			map[string]any{"challenge": "3eZbrw1aBm2rZgRNFdxV2595E9CY3gmdALWMmHkvFXO7tYXAYM8P"}},
		{"ZoomURLValidation", "zoom", zoom, zoomHeaders(ts, zoom),
			map[string]any{"plainToken": "qgg8vlvZRS6UYooatFL8Aw", "encryptedToken": hexMAC(testEnv["ZOOM_SECRET"], "qgg8vlvZRS6UYooatFL8Aw")}},
		{"DiscordPing", "discord", ping, discordHeaders(ts, ping), map[string]any{"type": float64(1)}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			status, got := h.do(http.MethodPost, "/hooks/"+c.source, c.hdr, []byte(c.body))
			if status != http.StatusOK {
				t.Fatalf("status = %d (%v), want 200", status, got)
			}
			if diff := cmp.Diff(c.want, got); diff != "" {
				t.Errorf("answer (-want +got):\n%s", diff)
			}
			bad := c.hdr.Clone()
			bad.Set("Content-Type", "application/json; charset=utf-8") // unsigned, so still fine
			tampered := []byte(c.body[:len(c.body)-1] + " }")
			if status, _ := h.do(http.MethodPost, "/hooks/"+c.source, bad, tampered); status != http.StatusUnauthorized {
				t.Errorf("tampered handshake status = %d, want 401", status)
			}
			if n := h.count(`SELECT count(*) FROM events WHERE source = $1`, c.source); n != 0 {
				t.Errorf("events stored for %s = %d, want none", c.source, n)
			}
		})
	}
	t.Run("DiscordInteractionAfterPingIsStored", func(t *testing.T) {
		body := `{"id":"1067178433839755286","application_id":"1067160393869353010","type":2,"data":{"name":"hello"}}`
		status, got := h.do(http.MethodPost, "/hooks/discord", discordHeaders(ts, body), []byte(body))
		if status != http.StatusOK || got["duplicate"] != false {
			t.Fatalf("status = %d (%v), want 200 stored", status, got)
		}
		var id, typ string
		if err := h.pool.QueryRow(context.Background(), `SELECT source_event_id, type FROM events WHERE source = 'discord'`).Scan(&id, &typ); err != nil {
			t.Fatal(err)
		}
		if id != "1067178433839755286" || typ != "2" {
			t.Errorf("stored id %q type %q", id, typ)
		}
	})
}

// TestIngestSignedURLAndMethod posts a HubSpot v3 delivery, whose signature covers
// the method and the URL the provider saw (base_url + path + query as received).
func TestIngestSignedURLAndMethod(t *testing.T) {
	t.Parallel()
	h := newHarness(t, handshakeConfig, nil)
	ms := fmt.Sprint(time.Now().UnixMilli())
	body := `[{"eventId":1793913213,"subscriptionId":2345,"portalId":62515,"occurredAt":1679479653000,"subscriptionType":"contact.creation","attemptNumber":0,"objectId":123}]`
	m := hmac.New(sha256.New, []byte(testEnv["HUBSPOT_SECRET"]))
	m.Write([]byte("POST" + "https://hooks.example.com/hooks/hs?portal=62515" + body + ms))
	hdr := http.Header{"X-Hubspot-Request-Timestamp": {ms}, "Content-Type": {"application/json"},
		"X-Hubspot-Signature-V3": {base64.StdEncoding.EncodeToString(m.Sum(nil))}}
	if status, got := h.do(http.MethodPost, "/hooks/hs?portal=62516", hdr, []byte(body)); status != http.StatusUnauthorized {
		t.Fatalf("another query: status = %d (%v), want 401", status, got)
	}
	status, got := h.do(http.MethodPost, "/hooks/hs?portal=62515", hdr, []byte(body))
	if status != http.StatusOK {
		t.Fatalf("status = %d (%v), want 200", status, got)
	}
	var id, typ string
	if err := h.pool.QueryRow(context.Background(), `SELECT source_event_id, type FROM events WHERE source = 'hs'`).Scan(&id, &typ); err != nil {
		t.Fatal(err)
	}
	if id != "1793913213" || typ != "contact.creation" {
		t.Errorf("stored id %q type %q", id, typ)
	}
}
