package sandbox

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"time"
)

// Pipedrive is API v2 deals with an API token in the x-api-token header (a Bearer
// or ?api_token= is refused, as v2 does). Custom fields live in custom_fields,
// keyed by their 40-character hash; deals/search matches them from an index that
// lags (SetLag) and lists, per item, the values of the deal's text custom fields in
// an order the API does not document (here another field's value comes first), so
// only GET /api/v2/deals/{id} tells which field holds what. Nothing is unique and
// idempotency headers are ignored.
type Pipedrive struct {
	*Store
	refField string // the hash of the text custom field holding the reference
}

// NewPipedrive returns an empty company accepting token, whose reference lives in
// the custom field refField.
func NewPipedrive(token, refField string) *Pipedrive {
	return &Pipedrive{Store: newStore(token), refField: refField}
}

// Handler serves /api/v2/deals, /api/v2/deals/search, /api/v2/deals/{id} and
// /api/v1/users/me.
func (p *Pipedrive) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /api/v2/deals", p.create)
	mux.HandleFunc("GET /api/v2/deals/search", p.searchDeals)
	mux.HandleFunc("GET /api/v2/deals/{id}", p.readDeal)
	mux.HandleFunc("GET /api/v1/users/me", func(w http.ResponseWriter, r *http.Request) {
		writeAny(w, 200, map[string]any{"success": true, "data": map[string]any{"id": 1, "name": "Sandbox"}})
	})
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "" || r.URL.Query().Has("api_token") ||
			!p.authorized(func(string) string { return r.Header.Get("x-api-token") }, func(t string) string { return t }) {
			pipedriveError(w, 401, "Unauthorized access")
			return
		}
		mux.ServeHTTP(w, r)
	})
}

func pipedriveError(w http.ResponseWriter, status int, msg string) {
	writeAny(w, status, map[string]any{"success": false, "error": msg,
		"error_info": "Please check developers.pipedrive.com", "data": nil, "additional_data": nil})
}

func (p *Pipedrive) create(w http.ResponseWriter, r *http.Request) {
	body, err := decodeJSON(r)
	if err != nil {
		pipedriveError(w, 400, "Invalid JSON")
		return
	}
	if t, ok := str(body, "title"); !ok || t == "" {
		pipedriveError(w, 400, "Validation failed: title: Parameter is required")
		return
	}
	if v, ok := body["value"]; ok {
		if _, num := v.(json.Number); !num {
			pipedriveError(w, 400, "Validation failed: value: Parameter must be a number")
			return
		}
	}
	ref := ""
	if cf, ok := obj(body, "custom_fields"); ok {
		ref, _ = str(cf, p.refField)
	}
	p.Store.create(w, r, func(w http.ResponseWriter, reset time.Duration) {
		w.Header().Set("x-ratelimit-limit", "20")
		w.Header().Set("x-ratelimit-remaining", "0")
		w.Header().Set("x-ratelimit-reset", seconds(reset))
		pipedriveError(w, 429, "Request over limit")
	}, func() func(http.ResponseWriter) {
		rec := p.add(ref, body, func(n int) string { return fmt.Sprint(n) })
		return func(w http.ResponseWriter) {
			writeAny(w, 201, map[string]any{"success": true, "data": p.view(rec)})
		}
	})
}

func (p *Pipedrive) view(rec APIRecord) map[string]any {
	v := map[string]any{}
	for k, x := range rec.Body {
		v[k] = x
	}
	v["id"] = json.Number(rec.ID)
	return v
}

// searchDeals finds deals by a custom field's value; exact_match is not case
// sensitive, as Pipedrive documents.
func (p *Pipedrive) searchDeals(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	term := q.Get("term")
	if len(term) < 1 || q.Get("exact_match") != "true" && len(term) < 2 {
		pipedriveError(w, 400, "term must be at least 2 characters long")
		return
	}
	exact := q.Get("exact_match") == "true"
	recs := p.search(func(rec APIRecord) bool {
		if q.Get("fields") != "custom_fields" {
			return false
		}
		if exact {
			return strings.EqualFold(rec.Ref, term)
		}
		return strings.Contains(strings.ToLower(rec.Ref), strings.ToLower(term))
	})
	items := []map[string]any{}
	for _, rec := range recs {
		title, _ := str(rec.Body, "title")
		items = append(items, map[string]any{"result_score": 1.0, "item": map[string]any{
			"id": json.Number(rec.ID), "type": "deal", "title": title, "custom_fields": []string{"Inbound", rec.Ref}}})
	}
	writeAny(w, 200, map[string]any{"success": true, "data": map[string]any{"items": items},
		"additional_data": map[string]any{"next_cursor": nil}})
}

// readDeal is GET /api/v2/deals/{id}: the deal with its custom_fields by key, read
// at once (no index).
func (p *Pipedrive) readDeal(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	recs := p.find(func(rec APIRecord) bool { return rec.ID == id })
	if len(recs) == 0 {
		pipedriveError(w, 404, "Deal not found")
		return
	}
	writeAny(w, 200, map[string]any{"success": true, "data": p.view(recs[0])})
}
