package provider

import (
	"strings"

	"github.com/oncehook/oncehook/internal/settings"
)

// Describe says in one line how a scheme proves the sender and where the delivery
// identity is, for `oncehook check`. A nil spec is the named preset's.
func Describe(name string, spec *settings.VerifySpec) string {
	if spec == nil {
		var ok bool
		if spec, ok = Preset(name); !ok {
			return name
		}
	}
	var proof string
	switch spec.Kind {
	case settings.VerifyKindToken:
		proof = "shared token in " + spec.Signature.Header
	case settings.VerifyKindBasic:
		proof = "HTTP basic credentials"
	case settings.VerifyKindEd25519:
		proof = "Ed25519 in " + spec.Signature.Header + " over " + describeParts(spec.Signed)
	case settings.VerifyKindECDSA:
		proof = "ECDSA P-256 in " + spec.Signature.Header + " over " + describeParts(spec.Signed)
	default:
		where := spec.Signature.Header
		if spec.Signature.Pointer != "" {
			where = "body " + spec.Signature.Pointer
		}
		proof = "HMAC-" + strings.ToUpper(spec.Algorithm) + " " + spec.Encoding + " in " + where +
			" over " + describeParts(spec.Signed)
	}
	if spec.Timestamp.Set() {
		proof += ", timestamped"
	}
	return proof + "; id " + describeID(spec.ID)
}

func describeParts(parts []settings.SignedPart) string {
	out := make([]string, len(parts))
	for i, p := range parts {
		switch p.Kind {
		case settings.PartLiteral:
			out[i] = `"` + p.Value + `"`
		case settings.PartHeader, settings.PartPointer:
			out[i] = p.Value
		default:
			out[i] = p.Kind
		}
	}
	return strings.Join(out, " + ")
}

func describeID(id settings.IdentitySpec) string {
	switch {
	case id.Header != "":
		return id.Header
	case id.Pointer != "":
		return id.Pointer
	case len(id.Composite) > 0:
		return strings.Join(id.Composite, "+")
	case id.BodyHash:
		return "body hash"
	}
	return "none"
}
