// Package sender signs webhooks the way each provider does. The demo's traffic, the
// tests and the benchmarks post through it, and oncehook signs the owner digests it
// posts to a webhook (notify.go) with it, as a Standard Webhooks sender.
package sender

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// Delivery is one webhook to sign: its identity, type and body.
type Delivery struct {
	ID   string
	Type string // GitHub event (X-GitHub-Event) or Shopify topic; Stripe and Standard carry it in the body
	Body []byte
	At   time.Time // signing time; zero means now
}

// Headers returns the request headers a provider would send for d, signed with secret.
func Headers(provider, secret string, d Delivery) (http.Header, error) {
	at := d.At
	if at.IsZero() {
		at = time.Now()
	}
	h := http.Header{}
	h.Set("Content-Type", "application/json")
	switch provider {
	case "stripe":
		ts := strconv.FormatInt(at.Unix(), 10)
		h.Set("Stripe-Signature", fmt.Sprintf("t=%s,v1=%s", ts, hexHMAC([]byte(secret), ts+"."+string(d.Body))))
	case "github":
		h.Set("X-GitHub-Delivery", d.ID)
		h.Set("X-GitHub-Event", d.Type)
		h.Set("X-Hub-Signature-256", "sha256="+hexHMAC([]byte(secret), string(d.Body)))
	case "shopify":
		h.Set("X-Shopify-Webhook-Id", d.ID)
		h.Set("X-Shopify-Event-Id", "evt-"+d.ID)
		h.Set("X-Shopify-Topic", d.Type)
		h.Set("X-Shopify-Triggered-At", at.UTC().Format(time.RFC3339Nano))
		mac := hmac.New(sha256.New, []byte(secret))
		mac.Write(d.Body)
		h.Set("X-Shopify-Hmac-Sha256", base64.StdEncoding.EncodeToString(mac.Sum(nil)))
	case "standard-webhooks":
		key, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(secret, "whsec_"))
		if err != nil {
			return nil, fmt.Errorf("decode standard webhooks secret: %w", err)
		}
		ts := strconv.FormatInt(at.Unix(), 10)
		mac := hmac.New(sha256.New, key)
		mac.Write([]byte(d.ID + "." + ts + "." + string(d.Body)))
		h.Set("webhook-id", d.ID)
		h.Set("webhook-timestamp", ts)
		h.Set("webhook-signature", "v1,"+base64.StdEncoding.EncodeToString(mac.Sum(nil)))
	default:
		return nil, fmt.Errorf("unknown provider %q", provider)
	}
	return h, nil
}

func hexHMAC(key []byte, msg string) string {
	mac := hmac.New(sha256.New, key)
	mac.Write([]byte(msg))
	return hex.EncodeToString(mac.Sum(nil))
}
