package provider

import (
	"crypto/sha256"
	"encoding/base64"
	"strings"
	"time"

	"github.com/oncehook/oncehook/internal/ledger"
)

// verifyStandardWebhooks checks webhook-signature, a space-separated list of
// "v1,<base64>" HMAC-SHA256 of id + "." + timestamp + "." + body. The key is the base64
// after the whsec_ prefix. The id is part of the signed content, so a missing id is only
// reported as such when the signature over an empty id holds.
//
// Svix, where the scheme comes from, sends the same three headers named svix-id,
// svix-timestamp and svix-signature; a request that carries no webhook-signature is
// read through that family instead, so both kinds of sender are accepted.
func verifyStandardWebhooks(p VerifyParams) (ledger.Delivery, error) {
	prefix := "webhook-"
	if p.Header.Get("webhook-signature") == "" && p.Header.Get("svix-signature") != "" {
		prefix = "svix-"
	}
	header := p.Header.Get(prefix + "signature")
	if header == "" {
		return ledger.Delivery{}, errSignature("missing webhook-signature header")
	}
	ts := p.Header.Get(prefix + "timestamp")
	if ts == "" {
		return ledger.Delivery{}, errSignature("missing %stimestamp header", prefix)
	}
	at, ok := parseUnixSeconds(ts)
	if !ok {
		return ledger.Delivery{}, errSignature("malformed %stimestamp header", prefix)
	}
	sigs := parseStandardSignatures(header)
	if len(sigs) == 0 {
		return ledger.Delivery{}, errSignature("no v1 signature in %ssignature header", prefix)
	}
	id := p.Header.Get(prefix + "id")
	dot := []byte(".")
	if err := checkHMAC(p.Secrets, standardKey, sigs, []byte(id), dot, []byte(ts), dot, p.Body); err != nil {
		return ledger.Delivery{}, err
	}
	if err := checkTolerance(at, verifyNow(p), p.Tolerance); err != nil {
		return ledger.Delivery{}, err
	}

	if id == "" {
		return ledger.Delivery{}, ledger.Errorf(ledger.EINVALID, "missing %sid header", prefix)
	}
	body, err := decodeJSONObject(p.Body, "type", "timestamp")
	if err != nil {
		return ledger.Delivery{}, err
	}
	// The payload's own timestamp is when the event happened; webhook-timestamp is
	// when this attempt was signed, which moves on every retry.
	occurred := at
	if t, err := time.Parse(time.RFC3339, jsonString(body[1])); err == nil {
		occurred = t.UTC()
	}
	return ledger.Delivery{
		ID:         id,
		Type:       jsonString(body[0]),
		OccurredAt: occurred,
		Headers:    keepHeaders(p.Header, prefix+"id", prefix+"timestamp"),
		Payload:    p.Body,
	}, nil
}

// parseStandardSignatures returns the decodable v1 signatures. Other versions (v1a is
// the asymmetric scheme) and unreadable entries are skipped, as the specification
// asks, so a sender may add schemes without breaking receivers.
func parseStandardSignatures(header string) [][]byte {
	var sigs [][]byte
	for entry := range strings.FieldsSeq(header) {
		version, value, ok := strings.Cut(entry, ",")
		if !ok || version != "v1" {
			continue
		}
		if sig, err := base64.StdEncoding.DecodeString(value); err == nil && len(sig) == sha256.Size {
			sigs = append(sigs, sig)
		}
	}
	return sigs
}

// standardKey decodes a whsec_ secret; one that is not base64 yields nil and so never
// matches rather than failing the whole request.
func standardKey(secret string) []byte {
	key, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(secret, "whsec_"))
	if err != nil {
		return nil
	}
	return key
}
