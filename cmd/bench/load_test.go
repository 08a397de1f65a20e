package main

import (
	"bytes"
	"encoding/json"
	"testing"
)

// The spliced body is byte for byte the formatted one: a repeat posted by the
// duplicates phase must be the delivery stored by the ingest phase.
func TestEventBodyIsTheFormattedDocument(t *testing.T) {
	for _, typ := range []string{typeRouted, typeIgnored} {
		for _, id := range []string{"evt_in_1", "evt_p_123456"} {
			got, want := eventBody(id, "enq_"+id, typ), formatEventBody(id, "enq_"+id, typ)
			if !bytes.Equal(got, want) {
				t.Fatalf("eventBody(%s, %s):\n%s\nwant\n%s", id, typ, got, want)
			}
			if !json.Valid(got) {
				t.Fatalf("eventBody(%s, %s) is not JSON: %s", id, typ, got)
			}
		}
	}
}
