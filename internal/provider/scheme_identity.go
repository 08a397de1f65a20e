package provider

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"
	"time"

	"github.com/oncehook/oncehook/internal/ledger"
)

// delivery reads what a verified request says about itself.
func (r *request) delivery(signed time.Time) (ledger.Delivery, error) {
	if _, err := r.document(); err != nil {
		return ledger.Delivery{}, err
	}
	id, err := r.identity()
	if err != nil {
		return ledger.Delivery{}, err
	}
	payload, _ := r.payload() // document() succeeded, so this does too
	return ledger.Delivery{
		ID:         id,
		Type:       r.eventType(),
		OccurredAt: r.occurred(signed),
		Headers:    keepHeaders(r.p.Header, r.spec.Keep...),
		Payload:    payload,
	}, nil
}

// compositeSep joins the parts of a composite identity; a unit separator, which no
// provider's id or time contains, so two different part lists never join alike.
const compositeSep = "\x1f"

// identity reads the delivery identity the spec names. A composite needs at least
// one of its parts; absent ones count as empty.
func (r *request) identity() (string, error) {
	id := r.spec.ID
	switch {
	case id.Header != "":
		if v := r.p.Header.Get(id.Header); v != "" {
			return v, nil
		}
		return "", ledger.Errorf(ledger.EINVALID, "missing %s header", id.Header)
	case id.Pointer != "":
		if v := r.pointerText(id.Pointer); v != "" {
			return v, nil
		}
		return "", ledger.Errorf(ledger.EINVALID, "the body has no delivery id (a string) at %s", id.Pointer)
	case len(id.Composite) > 0:
		parts := make([]string, len(id.Composite))
		found := false
		for i, ptr := range id.Composite {
			parts[i] = r.pointerString(ptr)
			found = found || parts[i] != ""
		}
		if !found {
			return "", ledger.Errorf(ledger.EINVALID, "the body has none of %s", strings.Join(id.Composite, ", "))
		}
		return compositeID(parts), nil
	case id.BodyHash:
		sum := sha256.Sum256(r.p.Body)
		return "sha256:" + hex.EncodeToString(sum[:]), nil
	}
	return "", ledger.Errorf(ledger.EINVALID, "the request carries no delivery id")
}

// compositeID keeps a readable id, the parts joined by "|", when it is short and no
// part holds a "|" (which would let two part lists join alike); otherwise their hash.
func compositeID(parts []string) string {
	s := strings.Join(parts, compositeSep)
	if len(s) <= 200 && !strings.Contains(s, "|") {
		return strings.ReplaceAll(s, compositeSep, "|")
	}
	sum := sha256.Sum256([]byte(s))
	return "sha256:" + hex.EncodeToString(sum[:])
}

func (r *request) eventType() string {
	t := r.spec.Type
	h := ""
	if t.Header != "" {
		h = r.p.Header.Get(t.Header)
	}
	if t.Pointer == "" {
		return h
	}
	if t.Header == "" {
		return r.pointerString(t.Pointer)
	}
	v := r.pointerText(t.Pointer)
	switch {
	case h != "" && v != "":
		return h + "." + v
	}
	return h
}
