package settings

// ProviderHMAC is the declarative scheme: a source's verify section says how its
// sender signs (VerifySpec). Every other provider name except the four built-in
// ones is a preset of the same description.
const ProviderHMAC = "hmac"

// Verification kinds: what proves the sender.
const (
	VerifyKindHMAC    = "hmac"    // an HMAC of the signed parts under a shared secret
	VerifyKindEd25519 = "ed25519" // an Ed25519 signature; the secret is the hex public key
	VerifyKindECDSA   = "ecdsa"   // an ECDSA P-256 SHA-256 ASN.1 signature; the secret is the base64 DER public key
	VerifyKindToken   = "token"   // the header's value is the shared secret itself
	VerifyKindBasic   = "basic"   // HTTP basic credentials; the secret is "user:password"
)

// Signature header formats.
const (
	SignaturePlain  = "plain"  // the whole value is the signature
	SignaturePrefix = "prefix" // a fixed prefix such as "sha256=", then the signature
	SignatureList   = "list"   // key=value items such as "t=1,v1=ab,v1=cd"
)

// Signed part kinds, concatenated in order into the signed content.
const (
	PartBody      = "body"      // the raw body
	PartTimestamp = "timestamp" // the timestamp exactly as received
	PartURL       = "url"       // the ingest URL as the provider saw it, query included
	PartMethod    = "method"    // the request method
	PartHeader    = "header"    // a header's value (Value names it)
	PartLiteral   = "literal"   // Value itself
	PartPointer   = "pointer"   // a string in the JSON body (Value is the pointer)
	PartForm      = "form"      // the form parameters sorted by name, each name then value
)

// Timestamp formats.
const (
	TimeUnix    = "unix"    // decimal seconds
	TimeUnixMS  = "unix_ms" // decimal milliseconds
	TimeRFC3339 = "rfc3339"
)

// Endpoint handshakes: requests a provider sends to validate the endpoint, answered
// after verification and never stored.
const (
	HandshakeSlack   = "slack"   // url_verification: answer the challenge
	HandshakeZoom    = "zoom"    // endpoint.url_validation: plainToken and its HMAC
	HandshakeDiscord = "discord" // PING (type 1): answer {"type":1}
)

// VerifySpec says how a source's sender proves itself and where a request carries
// its identity. Presets fill it in code; provider hmac reads it from the verify
// section (the yaml names are in docs/configuration.md).
type VerifySpec struct {
	Kind      string // a VerifyKind; default VerifyKindHMAC
	Signature SignatureSpec
	Algorithm string // hmac: sha1, sha256 or sha512
	Encoding  string // hex or base64
	// Key says how a secret becomes the HMAC key: "literal" (its bytes, the default),
	// "base64" (decoded after an optional whsec_ prefix) or "hex".
	Key       string
	Signed    []SignedPart
	Timestamp TimestampSpec
	ID        IdentitySpec
	Type      TypeSpec
	Occurred  TimestampSpec // where the event's own time is; zero: none
	// OccurredFromTimestamp uses the signed timestamp when Occurred finds nothing.
	OccurredFromTimestamp bool
	// URL is this source's ingest URL as the provider sees it (base_url +
	// /hooks/{name}); set by the config loader, required by url parts.
	URL string
	// Form reads an application/x-www-form-urlencoded body: its field of this name
	// holds the JSON document (GitHub's payload=), or with "*" the fields
	// themselves are the document, as a JSON object of strings.
	Form string
	// FormFields reads a form without the Form field as its fields (Slack's slash
	// commands beside its payload= interactions).
	FormFields bool
	// Array accepts a body that is a JSON list (HubSpot's and SendGrid's batches).
	Array     bool
	Handshake string   // a Handshake constant, or ""
	Keep      []string // identity headers stored beside the event
	// Fallback is tried when the request carries none of Signature.Header: the same
	// scheme under another family of header names (Svix's for Standard Webhooks).
	Fallback *VerifySpec
}

// SignatureSpec is where the signature is and how it is written.
type SignatureSpec struct {
	Header    string   // the header carrying it
	Pointer   string   // or a string in the JSON body
	Format    string   // SignaturePlain (default), SignaturePrefix or SignatureList
	Prefix    string   // prefix: before the signature, e.g. "sha256="
	Separator string   // list: between items; default ","
	Pair      string   // list: between an item's key and value; default "="
	Keys      []string // list: the keys of signature items, e.g. ["v1"]
}

// SignedPart is one piece of the signed content.
type SignedPart struct {
	Kind  string // a Part constant
	Value string // the header name, literal text or pointer
}

// TimestampSpec is where a time is and how it is written. At most one place is set.
type TimestampSpec struct {
	Header    string
	Signature string // the key of a list-format signature item, e.g. "t"
	Pointer   string
	Format    string // a Time constant; default TimeUnix
}

// Set reports whether a place is named.
func (t TimestampSpec) Set() bool { return t.Header != "" || t.Signature != "" || t.Pointer != "" }

// IdentitySpec is where the delivery identity is. Exactly one way is set.
type IdentitySpec struct {
	Header    string
	Pointer   string
	Composite []string // pointers whose values, joined, name the delivery
	BodyHash  bool     // last resort: the SHA-256 of the raw body
}

// Set reports whether any way is named.
func (i IdentitySpec) Set() bool {
	return i.Header != "" || i.Pointer != "" || len(i.Composite) > 0 || i.BodyHash
}

// TypeSpec is where the event type is. With both set, the type is the header's
// value, a dot, and the pointer's (GitHub's issues.opened).
type TypeSpec struct {
	Header  string
	Pointer string
}
