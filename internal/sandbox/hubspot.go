package sandbox

import (
	"fmt"
	"maps"
	"net/http"
	"strings"
	"time"
)

// HubSpot is the CRM v3 deals API (private app token as a Bearer) with one custom
// property marked hasUniqueValue: a second deal with the same value is refused with
// a 400 VALIDATION_ERROR saying the property "already has that value", and the
// batch upsert by that property (idProperty) updates the deal that holds it. A new
// deal needs a dealname and a dealstage. A read by ?idProperty= is strong; search
// lags behind (SetLag). It ignores idempotency headers, which HubSpot has none of.
type HubSpot struct {
	*Store
	refProp  string // the custom property holding the reference
	isUnique bool   // it has hasUniqueValue: true
}

// NewHubSpot returns an empty portal accepting token, whose deals have the custom
// property refProp, unique or not.
func NewHubSpot(token, refProp string, unique bool) *HubSpot {
	return &HubSpot{Store: newStore(token), refProp: refProp, isUnique: unique}
}

var hubspotProps = []string{"dealname", "amount", "dealstage", "pipeline", "closedate"}

// Handler serves the deals endpoints under /crm/v3/objects/deals.
func (h *HubSpot) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /crm/v3/objects/deals", h.create)
	mux.HandleFunc("POST /crm/v3/objects/deals/batch/upsert", h.upsert)
	mux.HandleFunc("GET /crm/v3/objects/deals", h.list)
	mux.HandleFunc("GET /crm/v3/objects/deals/{id}", h.read)
	mux.HandleFunc("POST /crm/v3/objects/deals/search", h.searchDeals)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !h.authorized(func(string) string { return r.Header.Get("Authorization") }, func(t string) string { return "Bearer " + t }) {
			hubspotError(w, 401, "INVALID_AUTHENTICATION", "Authentication credentials not found. This API supports OAuth 2.0 authentication.")
			return
		}
		mux.ServeHTTP(w, r)
	})
}

func hubspotError(w http.ResponseWriter, status int, category, msg string) {
	writeAny(w, status, map[string]any{"status": "error", "message": msg, "category": category,
		"correlationId": "00000000-0000-4000-8000-000000000000"})
}

func (h *HubSpot) create(w http.ResponseWriter, r *http.Request) {
	body, err := decodeJSON(r)
	if err != nil {
		hubspotError(w, 400, "VALIDATION_ERROR", "Invalid input JSON on line 1")
		return
	}
	props, msg := h.dealProps(body, true)
	if msg != "" {
		hubspotError(w, 400, "VALIDATION_ERROR", msg)
		return
	}
	ref, _ := str(props, h.refProp)
	h.Store.create(w, r, h.limited, func() func(http.ResponseWriter) {
		h.mu.Lock()
		if ref != "" && h.isUnique {
			for _, rec := range h.records {
				if rec.Ref == ref {
					h.mu.Unlock()
					return func(w http.ResponseWriter) {
						hubspotError(w, 400, "VALIDATION_ERROR", fmt.Sprintf(`Property values were not valid: `+
							`[{"isValid":false,"message":"%s already has that value on deal %s","error":"INVALID_UNIQUE_VALUE","name":"%s"}]`,
							h.refProp, rec.ID, h.refProp))
					}
				}
			}
		}
		h.mu.Unlock()
		rec := h.add(ref, props, func(n int) string { return fmt.Sprint(9000 + n) })
		return func(w http.ResponseWriter) { writeAny(w, 201, hubspotView(rec)) }
	})
}

func (h *HubSpot) limited(w http.ResponseWriter, reset time.Duration) {
	w.Header().Set("X-HubSpot-RateLimit-Interval-Milliseconds", fmt.Sprint(reset.Milliseconds()))
	w.Header().Set("X-HubSpot-RateLimit-Remaining", "0")
	writeAny(w, 429, map[string]any{"status": "error", "message": "You have reached your ten_secondly_rolling limit.",
		"errorType": "RATE_LIMIT", "policyName": "TEN_SECONDLY_ROLLING"})
}

// dealProps reads a deal's properties object, or says why HubSpot would refuse it.
// A new deal needs a name and a stage.
func (h *HubSpot) dealProps(body map[string]any, isNew bool) (map[string]any, string) {
	props, ok := obj(body, "properties")
	if !ok {
		return nil, "Invalid input JSON: the deal has no properties object"
	}
	for k, v := range props {
		if k != h.refProp && !contains(hubspotProps, k) {
			return nil, fmt.Sprintf("Property values were not valid: Property %q does not exist", k)
		}
		if _, nested := v.(map[string]any); nested {
			return nil, fmt.Sprintf("Property values were not valid: %q is not a scalar", k)
		}
	}
	for _, k := range []string{"dealname", "dealstage"} {
		if s, ok := str(props, k); isNew && (!ok || s == "") {
			return nil, fmt.Sprintf("Property values were not valid: %s is required", k)
		}
	}
	return props, ""
}

func hubspotView(rec APIRecord) map[string]any {
	props := map[string]any{}
	for k, v := range rec.Body {
		props[k] = fmt.Sprint(v) // HubSpot answers every value as a string
	}
	at := rec.At.UTC().Format(time.RFC3339)
	return map[string]any{"id": rec.ID, "properties": props, "createdAt": at, "updatedAt": at, "archived": false}
}

func (h *HubSpot) read(w http.ResponseWriter, r *http.Request) {
	id, prop := r.PathValue("id"), r.URL.Query().Get("idProperty")
	recs := h.find(func(rec APIRecord) bool {
		if prop == "" {
			return rec.ID == id
		}
		return prop == h.refProp && h.isUnique && rec.Ref == id
	})
	if len(recs) == 0 {
		hubspotError(w, 404, "OBJECT_NOT_FOUND", "Object not found.  objectId are usually numeric.")
		return
	}
	writeAny(w, 200, hubspotView(recs[0]))
}

func (h *HubSpot) list(w http.ResponseWriter, r *http.Request) {
	var results []map[string]any
	for _, rec := range h.Records() {
		results = append(results, hubspotView(rec))
	}
	writeAny(w, 200, map[string]any{"results": results})
}

// searchDeals answers filterGroups[0].filters[0] (EQ) from the lagging index; an
// empty body lists every deal, as HubSpot does.
func (h *HubSpot) searchDeals(w http.ResponseWriter, r *http.Request) {
	body, err := decodeJSON(r)
	if err != nil {
		hubspotError(w, 400, "VALIDATION_ERROR", "Invalid input JSON")
		return
	}
	prop, value := "", ""
	if groups, ok := body["filterGroups"].([]any); ok && len(groups) > 0 {
		g, _ := groups[0].(map[string]any)
		if filters, ok := g["filters"].([]any); ok && len(filters) > 0 {
			f, _ := filters[0].(map[string]any)
			prop, _ = str(f, "propertyName")
			value, _ = str(f, "value")
			if op, _ := str(f, "operator"); op != "EQ" {
				hubspotError(w, 400, "VALIDATION_ERROR", "only EQ is served by this sandbox")
				return
			}
		}
	}
	recs := h.search(func(rec APIRecord) bool {
		return prop == "" || fmt.Sprint(rec.Body[prop]) == value
	})
	results := []map[string]any{}
	for _, rec := range recs {
		results = append(results, hubspotView(rec))
	}
	writeAny(w, 200, map[string]any{"total": len(results), "results": results})
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if strings.EqualFold(x, s) {
			return true
		}
	}
	return false
}

// upsert is POST /crm/v3/objects/deals/batch/upsert: each input names its deal by
// the unique property idProperty; a deal holding that value is updated, else one
// is created with it. A repeat of the same input therefore updates the same deal.
func (h *HubSpot) upsert(w http.ResponseWriter, r *http.Request) {
	body, err := decodeJSON(r)
	if err != nil {
		hubspotError(w, 400, "VALIDATION_ERROR", "Invalid input JSON on line 1")
		return
	}
	inputs, _ := body["inputs"].([]any)
	if len(inputs) == 0 || len(inputs) > 100 {
		hubspotError(w, 400, "VALIDATION_ERROR", "inputs must hold 1 to 100 objects")
		return
	}
	type input struct {
		ref   string
		props map[string]any
	}
	var in []input
	for _, raw := range inputs {
		m, _ := raw.(map[string]any)
		ref, _ := str(m, "id")
		if prop, _ := str(m, "idProperty"); prop != h.refProp || !h.isUnique {
			hubspotError(w, 400, "VALIDATION_ERROR", fmt.Sprintf("idProperty %q is not a property with unique values", prop))
			return
		}
		props, msg := h.dealProps(m, len(h.find(func(rec APIRecord) bool { return rec.Ref == ref })) == 0)
		if ref == "" || msg != "" {
			hubspotError(w, 400, "VALIDATION_ERROR", msg+" (each input needs an id)")
			return
		}
		in = append(in, input{ref, props})
	}
	h.Store.create(w, r, h.limited, func() func(http.ResponseWriter) {
		results := []map[string]any{}
		for _, x := range in {
			rec, isNew := h.put(x.ref, x.props)
			v := hubspotView(rec)
			v["new"] = isNew
			results = append(results, v)
		}
		now := time.Now().UTC().Format(time.RFC3339)
		return func(w http.ResponseWriter) {
			writeAny(w, 200, map[string]any{"status": "COMPLETE", "results": results, "startedAt": now, "completedAt": now})
		}
	})
}

// put updates the deal whose unique property holds ref with props, or creates it.
func (h *HubSpot) put(ref string, props map[string]any) (APIRecord, bool) {
	h.mu.Lock()
	for i, rec := range h.records {
		if rec.Ref == ref {
			body := maps.Clone(rec.Body) // readers hold the old map
			maps.Copy(body, props)
			rec.Body = body
			h.records[i] = rec
			h.mu.Unlock()
			return rec, false
		}
	}
	h.mu.Unlock()
	props[h.refProp] = ref
	return h.add(ref, props, func(n int) string { return fmt.Sprint(9000 + n) }), true
}
