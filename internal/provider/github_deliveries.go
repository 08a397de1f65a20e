package provider

import (
	"context"
	"crypto/rsa"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/oncehook/oncehook/internal/ledger"
)

// githubPageSize is the largest per_page GitHub's deliveries list accepts.
const githubPageSize = 100

// GitHubDeliveries lists one webhook's recent deliveries and asks GitHub to send a
// failed one again, for a repository hook (repos/OWNER/REPO/hooks/ID), an
// organisation hook (orgs/ORG/hooks/ID) or a GitHub App's hook (app).
type GitHubDeliveries struct {
	apiURL, token, base string
	client              *http.Client
	appKey              *rsa.PrivateKey // app hooks: signs a JWT per request
	appID               string          // the JWT's issuer
	keyErr              error           // the configured key could not be read
}

// NewGitHubDeliveries returns the client of hook (as the config names it). For
// hook "app", token may be the App's private key (PEM): each request then carries
// a fresh JWT issued as appID (the source's account: the App's id or client id).
func NewGitHubDeliveries(apiURL, token, hook, appID string, client *http.Client) *GitHubDeliveries {
	g := &GitHubDeliveries{apiURL: strings.TrimRight(apiURL, "/"), token: token, base: hook, client: client}
	if hook == "app" {
		g.base = "app/hook"
		if IsPrivateKey(token) {
			g.appID = appID
			g.appKey, g.keyErr = githubAppKey(token)
		}
	}
	return g
}

// List returns one page of the hook's delivery attempts delivered at or after since,
// newest first; the cursor is GitHub's own, from the Link header's next page. A page
// that reaches past since is the last.
func (g *GitHubDeliveries) List(ctx context.Context, since time.Time, cursor string) (ledger.BackfillPage, error) {
	q := url.Values{"per_page": {strconv.Itoa(githubPageSize)}}
	if cursor != "" {
		q.Set("cursor", cursor)
	}
	req, err := g.request(ctx, http.MethodGet, "/"+g.base+"/deliveries?"+q.Encode())
	if err != nil {
		return ledger.BackfillPage{}, err
	}
	var reply []struct {
		ID          int64     `json:"id"`
		GUID        string    `json:"guid"`
		DeliveredAt time.Time `json:"delivered_at"`
		StatusCode  int       `json:"status_code"`
		Redelivery  bool      `json:"redelivery"`
		Event       string    `json:"event"`
		Action      *string   `json:"action"`
	}
	header, err := call(g.client, req, "GitHub", &reply)
	if err != nil {
		return ledger.BackfillPage{}, err
	}
	page := ledger.BackfillPage{}
	older := false
	for _, d := range reply {
		if d.DeliveredAt.Before(since) {
			older = true
			continue
		}
		typ := d.Event
		if d.Action != nil && *d.Action != "" {
			typ += "." + *d.Action
		}
		page.Items = append(page.Items, ledger.BackfillItem{ID: d.GUID, Type: typ, OccurredAt: d.DeliveredAt,
			Failed: d.StatusCode < 200 || d.StatusCode > 299, Status: d.StatusCode, AttemptID: strconv.FormatInt(d.ID, 10),
			Redelivery: d.Redelivery})
	}
	if !older {
		page.Next = nextCursor(header.Get("Link"))
	}
	return page, nil
}

var linkNext = regexp.MustCompile(`<([^>]+)>;\s*rel="next"`)

// nextCursor reads the cursor of the next page from a Link header; "" when none.
func nextCursor(link string) string {
	m := linkNext.FindStringSubmatch(link)
	if m == nil {
		return ""
	}
	u, err := url.Parse(m[1])
	if err != nil {
		return ""
	}
	return u.Query().Get("cursor")
}

// Redeliver asks GitHub to send the delivery attempt again; it arrives signed,
// through POST /hooks/{source}, with the same X-GitHub-Delivery.
func (g *GitHubDeliveries) Redeliver(ctx context.Context, attemptID string) error {
	if _, err := strconv.ParseInt(attemptID, 10, 64); err != nil {
		return &ledger.ProviderError{Message: "GitHub listed a delivery without a numeric id"}
	}
	req, err := g.request(ctx, http.MethodPost, "/"+g.base+"/deliveries/"+attemptID+"/attempts")
	if err != nil {
		return err
	}
	_, err = call(g.client, req, "GitHub", nil)
	return err
}

func (g *GitHubDeliveries) request(ctx context.Context, method, path string) (*http.Request, error) {
	if g.keyErr != nil {
		return nil, &ledger.ProviderError{Message: "the GitHub App's private key cannot be read: " + g.keyErr.Error()}
	}
	token, err := g.bearer()
	if err != nil {
		return nil, err
	}
	req, err := newRequest(ctx, method, g.apiURL+path, token)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", "application/vnd.github+json")
	req.Header.Set("X-GitHub-Api-Version", "2022-11-28")
	return req, nil
}
