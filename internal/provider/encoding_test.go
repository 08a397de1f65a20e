package provider

import (
	"encoding/base64"
	"testing"
)

func TestDecodeBase64RefusesOtherSpellings(t *testing.T) {
	const canonical = "B23tXN681gZ0qIWNRrgtzBE9XSDo5yaUu6wfmhu3a7g=" // 32 bytes: two unused bits in the last g
	if _, err := decodeBase64(canonical); err != nil {
		t.Fatalf("the canonical spelling was refused: %v", err)
	}
	for name, s := range map[string]string{
		"unused bits set":       "B23tXN681gZ0qIWNRrgtzBE9XSDo5yaUu6wfmhu3a7h=",
		"padding missing":       "B23tXN681gZ0qIWNRrgtzBE9XSDo5yaUu6wfmhu3a7g",
		"padding doubled":       canonical + "=",
		"trailing garbage":      canonical + "A",
		"line break inside":     "B23tXN681gZ0qIWNRrgt\nzBE9XSDo5yaUu6wfmhu3a7g=",
		"CRLF at the end":       canonical + "\r\n",
		"space inside":          "B23tXN681gZ0qIWNRrgt zBE9XSDo5yaUu6wfmhu3a7g=",
		"URL alphabet":          "g0hM9SsE-OTPJTGt_tmIKtSyZlE3uFJELVlNIOLJ1OE=",
		"empty":                 "",
		"padding in the middle": "B23t=N681gZ0qIWNRrgtzBE9XSDo5yaUu6wfmhu3a7g=",
	} {
		if b, err := decodeBase64(s); err == nil && len(b) > 0 {
			t.Errorf("%s: %q decoded to %d bytes, want it refused", name, s, len(b))
		}
	}
}

// FuzzDecodeBase64 holds decodeBase64 to one spelling per value: whatever it accepts
// is exactly what the standard encoding writes for the bytes it returns.
func FuzzDecodeBase64(f *testing.F) {
	for _, s := range []string{"B23tXN681gZ0qIWNRrgtzBE9XSDo5yaUu6wfmhu3a7g=", "B23tXN681gZ0qIWNRrgtzBE9XSDo5yaUu6wfmhu3a7h=",
		"YQ==", "YR==", "YWI=", "YWJ=", "Y\nQ==", "====", "g0hM9SsE-OTPJTGt_tmIKtSyZlE3uFJELVlNIOLJ1OE="} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		b, err := decodeBase64(s)
		if err != nil {
			return
		}
		if again := base64.StdEncoding.EncodeToString(b); again != s {
			t.Fatalf("%q was accepted, but its bytes are written %q", s, again)
		}
	})
}
