package provider

import (
	"crypto/sha256"
	"encoding/base64"
	"time"

	"github.com/oncehook/oncehook/internal/ledger"
)

// shopifyKeptHeaders are the identity headers worth showing next to the event.
var shopifyKeptHeaders = []string{
	"X-Shopify-Webhook-Id",
	"X-Shopify-Event-Id",
	"X-Shopify-Topic",
	"X-Shopify-Shop-Domain",
	"X-Shopify-Triggered-At",
	"X-Shopify-API-Version",
}

// verifyShopify checks X-Shopify-Hmac-Sha256, a base64 HMAC-SHA256 of the raw body.
// Shopify signs no timestamp: X-Shopify-Triggered-At is unsigned, so it feeds
// OccurredAt (staleness) but never the tolerance check.
func verifyShopify(p VerifyParams) (ledger.Delivery, error) {
	header := p.Header.Get("X-Shopify-Hmac-Sha256")
	if header == "" {
		return ledger.Delivery{}, errSignature("missing X-Shopify-Hmac-Sha256 header")
	}
	sig, err := base64.StdEncoding.DecodeString(header)
	if err != nil || len(sig) != sha256.Size {
		return ledger.Delivery{}, errSignature("malformed X-Shopify-Hmac-Sha256 header")
	}
	if err := checkHMAC(p.Secrets, literalKey, [][]byte{sig}, p.Body); err != nil {
		return ledger.Delivery{}, err
	}

	id := p.Header.Get("X-Shopify-Webhook-Id")
	if id == "" {
		return ledger.Delivery{}, ledger.Errorf(ledger.EINVALID, "missing X-Shopify-Webhook-Id header")
	}
	if _, err := decodeJSONObject(p.Body); err != nil {
		return ledger.Delivery{}, err
	}
	var occurred time.Time
	// RFC3339 parsing accepts the fractional seconds Shopify sends.
	if t, err := time.Parse(time.RFC3339, p.Header.Get("X-Shopify-Triggered-At")); err == nil {
		occurred = t.UTC()
	}
	return ledger.Delivery{
		ID:         id,
		Type:       p.Header.Get("X-Shopify-Topic"),
		OccurredAt: occurred,
		Headers:    keepHeaders(p.Header, shopifyKeptHeaders...),
		Payload:    p.Body,
	}, nil
}
