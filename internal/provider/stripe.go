package provider

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"strconv"
	"strings"
	"time"

	"github.com/oncehook/oncehook/internal/ledger"
)

// stripeSignature is a parsed Stripe-Signature header: t=<unix>,v1=<hex>[,v1=...].
type stripeSignature struct {
	t  string // as received: the signed content uses these exact bytes
	at time.Time
	v1 [][]byte
}

// verifyStripe checks Stripe-Signature, an HMAC-SHA256 of t + "." + body keyed with the
// literal secret. Stripe sends one v1 per live secret while a secret is being rolled.
func verifyStripe(p VerifyParams) (ledger.Delivery, error) {
	header := p.Header.Get("Stripe-Signature")
	if header == "" {
		return ledger.Delivery{}, errSignature("missing Stripe-Signature header")
	}
	sig, err := parseStripeSignature(header)
	if err != nil {
		return ledger.Delivery{}, err
	}
	if err := checkHMAC(p.Secrets, literalKey, sig.v1, []byte(sig.t), []byte("."), p.Body); err != nil {
		return ledger.Delivery{}, err
	}
	if err := checkTolerance(sig.at, verifyNow(p), p.Tolerance); err != nil {
		return ledger.Delivery{}, err
	}

	event, err := decodeJSONObject(p.Body, "id", "type", "created")
	if err != nil {
		return ledger.Delivery{}, err
	}
	id := jsonString(event[0])
	if id == "" {
		return ledger.Delivery{}, ledger.Errorf(ledger.EINVALID, "the Stripe event has no id")
	}
	return ledger.Delivery{
		ID:         id,
		Type:       jsonString(event[1]),
		OccurredAt: stripeCreated(event[2]),
		Payload:    p.Body,
	}, nil
}

// parseStripeSignature reads the header the way Stripe's libraries do: unknown schemes
// (v0, future ones) and v1 values that are not a SHA-256 in hex are ignored, so a header
// carrying an extra scheme keeps working; a missing or repeated timestamp is malformed.
func parseStripeSignature(header string) (stripeSignature, error) {
	var s stripeSignature
	for item := range strings.SplitSeq(header, ",") {
		key, value, ok := strings.Cut(strings.TrimSpace(item), "=")
		if !ok {
			return s, errSignature("malformed Stripe-Signature header")
		}
		switch key {
		case "t":
			at, ok := parseUnixSeconds(value)
			if !ok || s.t != "" {
				return s, errSignature("malformed Stripe-Signature header")
			}
			s.t, s.at = value, at
		case "v1":
			if sig, err := hex.DecodeString(value); err == nil && len(sig) == sha256.Size {
				s.v1 = append(s.v1, sig)
			}
		}
	}
	if s.t == "" {
		return s, errSignature("malformed Stripe-Signature header: no timestamp")
	}
	if len(s.v1) == 0 {
		return s, errSignature("no v1 signature in Stripe-Signature header")
	}
	return s, nil
}

// stripeCreated reads the event's created field: unix seconds on classic events, an
// RFC 3339 string on v2 event notifications. Zero when absent or unreadable.
func stripeCreated(raw json.RawMessage) time.Time {
	if n, err := strconv.ParseInt(string(raw), 10, 64); err == nil {
		return time.Unix(n, 0).UTC()
	}
	if t, err := time.Parse(time.RFC3339, jsonString(raw)); err == nil {
		return t.UTC()
	}
	return time.Time{}
}
