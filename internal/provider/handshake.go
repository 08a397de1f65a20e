package provider

import (
	"encoding/json"

	"github.com/oncehook/oncehook/internal/ledger"
	"github.com/oncehook/oncehook/internal/settings"
)

// handshake recognises a verified request that only validates the endpoint and
// returns the reply its provider expects. ok is false for an ordinary delivery.
func (r *request) handshake() (*ledger.Answer, bool, error) {
	switch r.spec.Handshake {
	case settings.HandshakeSlack:
		// Events API: {"type":"url_verification","challenge":"..."}, answered with the
		// challenge.
		if r.pointerString("/type") != "url_verification" {
			return nil, false, nil
		}
		challenge := r.pointerString("/challenge")
		if challenge == "" {
			return nil, true, ledger.Errorf(ledger.EINVALID, "the url_verification request has no challenge")
		}
		return jsonAnswer(map[string]string{"challenge": challenge})
	case settings.HandshakeZoom:
		// {"event":"endpoint.url_validation","payload":{"plainToken":"..."}}, answered
		// with the token and its HMAC under the secret token.
		if r.pointerString("/event") != "endpoint.url_validation" {
			return nil, false, nil
		}
		plain := r.pointerString("/payload/plainToken")
		if plain == "" {
			return nil, true, ledger.Errorf(ledger.EINVALID, "the endpoint.url_validation request has no plainToken")
		}
		return jsonAnswer(map[string]string{"plainToken": plain, "encryptedToken": zoomToken(r.secret, plain)})
	case settings.HandshakeDiscord:
		// An interaction of type 1 (PING) is answered with type 1 (PONG).
		if r.pointerString("/type") != "1" {
			return nil, false, nil
		}
		return jsonAnswer(map[string]int{"type": 1})
	}
	return nil, false, nil
}

func jsonAnswer(v any) (*ledger.Answer, bool, error) {
	body, err := json.Marshal(v)
	if err != nil {
		return nil, true, err
	}
	return &ledger.Answer{ContentType: "application/json", Body: body}, true, nil
}
