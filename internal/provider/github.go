package provider

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"mime"
	"net/http"
	"net/url"
	"strings"

	"github.com/oncehook/oncehook/internal/ledger"
)

// githubKeptHeaders are the identity headers worth showing next to the event.
var githubKeptHeaders = []string{
	"X-GitHub-Delivery",
	"X-GitHub-Event",
	"X-GitHub-Hook-ID",
	"X-GitHub-Hook-Installation-Target-ID",
	"X-GitHub-Hook-Installation-Target-Type",
}

// verifyGitHub checks X-Hub-Signature-256, an HMAC-SHA256 of the raw body. GitHub signs
// no timestamp, so there is nothing to hold against the tolerance; replays are caught
// by the delivery id instead.
func verifyGitHub(p VerifyParams) (ledger.Delivery, error) {
	header := p.Header.Get("X-Hub-Signature-256")
	if header == "" {
		return ledger.Delivery{}, errSignature("missing X-Hub-Signature-256 header")
	}
	digest, ok := strings.CutPrefix(header, "sha256=")
	sig, err := hex.DecodeString(digest)
	if !ok || err != nil || len(sig) != sha256.Size {
		return ledger.Delivery{}, errSignature("malformed X-Hub-Signature-256 header")
	}
	if err := checkHMAC(p.Secrets, literalKey, [][]byte{sig}, p.Body); err != nil {
		return ledger.Delivery{}, err
	}

	id := p.Header.Get("X-GitHub-Delivery")
	if id == "" {
		return ledger.Delivery{}, ledger.Errorf(ledger.EINVALID, "missing X-GitHub-Delivery header")
	}
	payload, err := githubPayload(p.Header, p.Body)
	if err != nil {
		return ledger.Delivery{}, err
	}
	body, err := decodeJSONObject(payload, "action")
	if err != nil {
		return ledger.Delivery{}, err
	}
	// issues.opened and issues.closed ask for different work; the event name alone
	// would route them the same way.
	typ := p.Header.Get("X-GitHub-Event")
	if action := jsonString(body[0]); typ != "" && action != "" {
		typ += "." + action
	}
	return ledger.Delivery{
		ID:      id,
		Type:    typ,
		Headers: keepHeaders(p.Header, githubKeptHeaders...),
		Payload: payload,
	}, nil
}

// githubPayload returns the JSON document of the delivery. A webhook configured with
// content type application/x-www-form-urlencoded posts payload=<json>; the signature
// still covers the form body, so this runs only after it was checked.
func githubPayload(h http.Header, body []byte) ([]byte, error) {
	mediaType, _, err := mime.ParseMediaType(h.Get("Content-Type"))
	if err != nil || mediaType != "application/x-www-form-urlencoded" {
		return body, nil
	}
	form, err := url.ParseQuery(string(body))
	if err != nil {
		return nil, &ledger.Error{Code: ledger.EINVALID, Message: "the form body is malformed", Err: fmt.Errorf("parse form: %w", err)}
	}
	payload := form.Get("payload")
	if payload == "" {
		return nil, ledger.Errorf(ledger.EINVALID, "the form body has no payload field")
	}
	return []byte(payload), nil
}
