package sandbox

import (
	"encoding/base64"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// A config that gets an API's shape wrong fails against its sandbox, as it would
// against the API: the wrong auth scheme, a flat body where the API nests, a body
// where it wants a form, a method it does not serve. Nothing is stored.
func TestAPISandboxesRefuseWrongShapes(t *testing.T) {
	t.Parallel()
	const tok = "tok-1"
	bearer := map[string]string{"Authorization": "Bearer " + tok, "Content-Type": "application/json", "Accept": "application/json"}
	with := func(m map[string]string, k, v string) map[string]string {
		out := map[string]string{}
		for a, b := range m {
			out[a] = b
		}
		if v == "" {
			delete(out, k)
		} else {
			out[k] = v
		}
		return out
	}
	basic := map[string]string{"Authorization": "Basic " + base64.StdEncoding.EncodeToString([]byte("api:"+tok)),
		"Content-Type": "application/x-www-form-urlencoded"}
	postmark := map[string]string{"X-Postmark-Server-Token": tok, "Content-Type": "application/json", "Accept": "application/json"}
	pipedrive := map[string]string{"x-api-token": tok, "Content-Type": "application/json"}
	type api interface {
		Handler() http.Handler
		Len() int
	}
	tests := []struct {
		name, method, path string
		api                api
		hdr                map[string]string
		body               string
		want               int
		wantIn             string
	}{
		{"HubSpotWithoutPropertiesWrapper", "POST", "/crm/v3/objects/deals", NewHubSpot(tok, "ref", true), bearer,
			`{"dealname":"x","ref":"r"}`, 400, "VALIDATION_ERROR"},
		{"HubSpotUnknownProperty", "POST", "/crm/v3/objects/deals", NewHubSpot(tok, "ref", true), bearer,
			`{"properties":{"dealname":"x","source_ref":"r"}}`, 400, "does not exist"},
		{"HubSpotWrongToken", "POST", "/crm/v3/objects/deals", NewHubSpot(tok, "ref", true), with(bearer, "Authorization", "Bearer no"),
			`{"properties":{"dealname":"x"}}`, 401, "INVALID_AUTHENTICATION"},
		{"SalesforcePostInsteadOfPatch", "POST", SalesforceUpsertPath + "oh_1", NewSalesforce(tok), bearer,
			`{"Name":"x","StageName":"s","CloseDate":"2026-01-01"}`, 405, "METHOD_NOT_ALLOWED"},
		{"SalesforceExternalIDInTheBody", "PATCH", SalesforceUpsertPath + "oh_1", NewSalesforce(tok), bearer,
			`{"Name":"x","StageName":"s","CloseDate":"2026-01-01","Source_Ref__c":"oh_1"}`, 400, "INVALID_FIELD"},
		{"SalesforceUnknownExternalIDField", "PATCH", "/services/data/v62.0/sobjects/Opportunity/Ref__c/oh_1", NewSalesforce(tok), bearer,
			`{"Name":"x"}`, 404, "NOT_FOUND"},
		{"PipedriveTokenAsBearer", "POST", "/api/v2/deals", NewPipedrive(tok, "h"), bearer, `{"title":"x"}`, 401, "Unauthorized"},
		{"PipedriveStringForANumber", "POST", "/api/v2/deals", NewPipedrive(tok, "h"), pipedrive, `{"title":"x","value":"12"}`, 400, "must be a number"},
		{"PipedriveV1Path", "POST", "/v1/deals", NewPipedrive(tok, "h"), pipedrive, `{"title":"x"}`, 404, ""},
		{"PostmarkBearerInsteadOfItsHeader", "POST", "/email", NewPostmark(tok, "example.com"), bearer,
			`{"From":"a@example.com","To":"b@x","TextBody":"t"}`, 401, `"ErrorCode":10`},
		{"PostmarkLowercaseFields", "POST", "/email", NewPostmark(tok, "example.com"), postmark,
			`{"from":"a@example.com","to":"b@x","textBody":"t"}`, 422, `"ErrorCode":300`},
		{"PostmarkUnconfirmedSender", "POST", "/email", NewPostmark(tok, "example.com"), postmark,
			`{"From":"a@elsewhere.com","To":"b@x","TextBody":"t"}`, 422, `"ErrorCode":400`},
		{"ResendWithoutKey", "POST", "/emails", NewResend(tok), with(bearer, "Authorization", ""),
			`{"from":"a","to":"b","subject":"s"}`, 401, "missing_api_key"},
		{"SendGridFlatTo", "POST", "/v3/mail/send", NewSendGrid(tok, "example.com"), bearer,
			`{"to":"b@x","from":{"email":"a@example.com"},"subject":"s","content":[{"type":"text/plain","value":"v"}]}`, 400, "personalizations"},
		{"SendGridNumericCustomArg", "POST", "/v3/mail/send", NewSendGrid(tok, "example.com"), bearer,
			`{"personalizations":[{"to":[{"email":"b@x"}]}],"from":{"email":"a@example.com"},"subject":"s","content":[{"type":"text/plain","value":"v"}],"custom_args":{"n":1}}`, 400, ""},
		{"SendGridUnverifiedSender", "POST", "/v3/mail/send", NewSendGrid(tok, "example.com"), bearer,
			`{"personalizations":[{"to":[{"email":"b@x"}]}],"from":{"email":"a@elsewhere.com"},"subject":"s","content":[{"type":"text/plain","value":"v"}]}`, 403, `"field":"from"`},
		{"MailgunJSONBody", "POST", "/v3/mg.example.com/messages", NewMailgun(tok, "mg.example.com"),
			with(basic, "Content-Type", "application/json"), `{"from":"a","to":"b","subject":"s","text":"t"}`, 400, ""},
		{"MailgunWrongUser", "POST", "/v3/mg.example.com/messages", NewMailgun(tok, "mg.example.com"),
			with(basic, "Authorization", "Basic "+base64.StdEncoding.EncodeToString([]byte("user:"+tok))), "from=a&to=b&subject=s&text=t", 401, "Forbidden"},
		{"MailgunUnknownDomain", "POST", "/v3/other.example.com/messages", NewMailgun(tok, "mg.example.com"), basic,
			"from=a&to=b&subject=s&text=t", 404, "Domain not found"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			srv := httptest.NewServer(tt.api.Handler())
			t.Cleanup(srv.Close)
			req, err := http.NewRequest(tt.method, srv.URL+tt.path, strings.NewReader(tt.body))
			if err != nil {
				t.Fatal(err)
			}
			for k, v := range tt.hdr {
				req.Header.Set(k, v)
			}
			res, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer res.Body.Close()
			body, _ := io.ReadAll(res.Body)
			if res.StatusCode != tt.want || !strings.Contains(string(body), tt.wantIn) {
				t.Errorf("%s %s = %d %s, want %d with %q", tt.method, tt.path, res.StatusCode, body, tt.want, tt.wantIn)
			}
			if n := tt.api.Len(); n != 0 {
				t.Errorf("stored %d records", n)
			}
		})
	}
}

// Postmark's message search looks in one message stream: outbound unless
// messagestream names another.
func TestPostmarkSearchesOneStream(t *testing.T) {
	t.Parallel()
	p := NewPostmark("tok", "example.com")
	srv := httptest.NewServer(p.Handler())
	t.Cleanup(srv.Close)
	do := func(method, path, body string) string {
		req, _ := http.NewRequest(method, srv.URL+path, strings.NewReader(body))
		req.Header.Set("X-Postmark-Server-Token", "tok")
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json")
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		return string(b)
	}
	do("POST", "/email", `{"From":"a@example.com","To":"b@example.org","TextBody":"x","MessageStream":"welcome","Metadata":{"oncehook_ref":"r1"}}`)
	for query, want := range map[string]string{
		"":                        `"TotalCount":0`,
		"&messagestream=outbound": `"TotalCount":0`,
		"&messagestream=welcome":  `"TotalCount":1`,
	} {
		if got := do("GET", "/messages/outbound?count=2&offset=0&metadata_oncehook_ref=r1"+query, ""); !strings.Contains(got, want) {
			t.Errorf("search%s: %s, want %s", query, got, want)
		}
	}
}
