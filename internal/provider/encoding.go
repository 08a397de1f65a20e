package provider

import (
	"encoding/base64"
	"errors"
	"strings"
)

// decodeBase64 decodes s in the standard alphabet with its padding, as Shopify and
// the Standard Webhooks senders write signatures and secrets, and refuses every other
// spelling: encoding/base64 on its own skips line breaks anywhere and accepts unused
// bits that are not zero, so that one signature would have several spellings.
func decodeBase64(s string) ([]byte, error) {
	if strings.ContainsAny(s, "\r\n") {
		return nil, errors.New("a line break inside base64")
	}
	return base64.StdEncoding.Strict().DecodeString(s)
}
