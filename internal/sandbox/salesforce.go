package sandbox

import (
	"fmt"
	"net/http"
	"time"
)

// Salesforce is the REST API's upsert by external id on Opportunity.Source_Ref__c
// (External ID, Unique), API v62.0: PATCH .../Source_Ref__c/{value} creates (201)
// or updates (200, created false) in place, GET on the same URL reads it (strong).
// Errors are JSON arrays; the daily limit is a 403 REQUEST_LIMIT_EXCEEDED with no
// reset header; a wrong session is 401 INVALID_SESSION_ID.
type Salesforce struct {
	*Store
	updates int
}

// NewSalesforce returns an empty org accepting the access token.
func NewSalesforce(token string) *Salesforce { return &Salesforce{Store: newStore(token)} }

// SalesforceUpsertPath is the external-id path the sandbox serves, before the value.
const SalesforceUpsertPath = "/services/data/v62.0/sobjects/Opportunity/Source_Ref__c/"

// Updates is how many upserts found their record and updated it.
func (s *Salesforce) Updates() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.updates
}

// Handler serves the upsert, the read and /limits.
func (s *Salesforce) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("PATCH "+SalesforceUpsertPath+"{ref}", s.upsert)
	mux.HandleFunc("GET "+SalesforceUpsertPath+"{ref}", s.read)
	mux.HandleFunc(SalesforceUpsertPath+"{ref}", func(w http.ResponseWriter, r *http.Request) {
		sfError(w, 405, "METHOD_NOT_ALLOWED", fmt.Sprintf("HTTP Method '%s' not allowed. Allowed are GET,PATCH,DELETE,HEAD", r.Method))
	})
	mux.HandleFunc("GET /services/data/v62.0/limits", func(w http.ResponseWriter, r *http.Request) {
		writeAny(w, 200, map[string]any{"DailyApiRequests": map[string]any{"Max": 15000, "Remaining": 14000}})
	})
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		sfError(w, 404, "NOT_FOUND", "The requested resource does not exist")
	})
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !s.authorized(func(string) string { return r.Header.Get("Authorization") }, func(t string) string { return "Bearer " + t }) {
			sfError(w, 401, "INVALID_SESSION_ID", "Session expired or invalid")
			return
		}
		mux.ServeHTTP(w, r)
	})
}

func sfError(w http.ResponseWriter, status int, code, msg string) {
	writeAny(w, status, []map[string]any{{"message": msg, "errorCode": code}})
}

func (s *Salesforce) upsert(w http.ResponseWriter, r *http.Request) {
	ref := r.PathValue("ref")
	body, err := decodeJSON(r)
	if err != nil {
		sfError(w, 400, "JSON_PARSER_ERROR", "The request body is not JSON")
		return
	}
	for _, k := range []string{"Id", "Source_Ref__c"} {
		if _, ok := body[k]; ok {
			writeAny(w, 400, []map[string]any{{"message": "Source_Ref__c: the external id field must not be in the body",
				"errorCode": "INVALID_FIELD", "fields": []string{k}}})
			return
		}
	}
	for _, k := range []string{"Name", "StageName", "CloseDate"} {
		if _, ok := str(body, k); !ok {
			writeAny(w, 400, []map[string]any{{"message": "Required fields are missing: [" + k + "]",
				"errorCode": "REQUIRED_FIELD_MISSING", "fields": []string{k}}})
			return
		}
	}
	s.create(w, r, func(w http.ResponseWriter, _ time.Duration) {
		sfError(w, 403, "REQUEST_LIMIT_EXCEEDED", "TotalRequests Limit exceeded.")
	}, func() func(http.ResponseWriter) {
		s.mu.Lock()
		for i, rec := range s.records {
			if rec.Ref == ref {
				for k, v := range body {
					s.records[i].Body[k] = v
				}
				s.updates++
				s.mu.Unlock()
				return func(w http.ResponseWriter) {
					writeAny(w, 200, map[string]any{"id": rec.ID, "success": true, "errors": []any{}, "created": false})
				}
			}
		}
		s.mu.Unlock()
		rec := s.add(ref, body, func(n int) string { return fmt.Sprintf("006Hs00000%08dAAA", n) })
		return func(w http.ResponseWriter) {
			writeAny(w, 201, map[string]any{"id": rec.ID, "success": true, "errors": []any{}, "created": true})
		}
	})
}

func (s *Salesforce) read(w http.ResponseWriter, r *http.Request) {
	ref := r.PathValue("ref")
	recs := s.find(func(rec APIRecord) bool { return rec.Ref == ref })
	if len(recs) == 0 {
		sfError(w, 404, "NOT_FOUND", "The requested resource does not exist")
		return
	}
	rec := recs[0]
	view := map[string]any{"attributes": map[string]any{"type": "Opportunity",
		"url": "/services/data/v62.0/sobjects/Opportunity/" + rec.ID}, "Id": rec.ID, "Source_Ref__c": rec.Ref}
	for k, v := range rec.Body {
		view[k] = v
	}
	writeAny(w, 200, view)
}
