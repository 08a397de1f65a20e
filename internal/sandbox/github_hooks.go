package sandbox

import (
	"bytes"
	"crypto"
	"crypto/hmac"
	"crypto/rsa"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// GitHubHook is a sandbox of one GitHub webhook and its deliveries API, for a
// repository hook, an organisation hook or an App's hook: it posts deliveries to
// Target signed with Secret, keeps every attempt (GET .../deliveries, newest first,
// paginated with a Link header), and sends an attempt again on
// POST .../deliveries/{id}/attempts, counting each such request.
type GitHubHook struct {
	Base   string // the hook's path as configured, e.g. repos/acme/shop/hooks/1, or app/hook
	Token  string // the token it accepts
	Secret string
	Target string // where deliveries go: oncehook's /hooks/{source}
	Client *http.Client
	// AppKey, when set, makes it an App's hook: the bearer must be a JWT signed
	// with the App's key (RS256), issued by AppID, and not expired.
	AppKey *rsa.PublicKey
	AppID  string

	mu          sync.Mutex
	next        int64
	attempts    []GitHubAttempt // oldest first
	bodies      map[string]githubDelivery
	redelivered map[string]int // by guid: redeliveries asked for
	perPage     int
}

// GitHubAttempt is one delivery attempt as the deliveries API lists it.
type GitHubAttempt struct {
	ID          int64     `json:"id"`
	GUID        string    `json:"guid"`
	DeliveredAt time.Time `json:"delivered_at"`
	Redelivery  bool      `json:"redelivery"`
	Status      string    `json:"status"`
	StatusCode  int       `json:"status_code"`
	Event       string    `json:"event"`
	Action      *string   `json:"action"`
}

type githubDelivery struct {
	event string
	body  []byte
}

// SetTarget points the deliveries at target from now on (a refused address stands
// for oncehook being down).
func (g *GitHubHook) SetTarget(target string) { g.mu.Lock(); g.Target = target; g.mu.Unlock() }

// SetPerPage caps the page size below per_page (0: no cap).
func (g *GitHubHook) SetPerPage(n int) { g.mu.Lock(); g.perPage = n; g.mu.Unlock() }

// Deliver sends a new delivery (guid, event, body) to Target, or, when down is
// set, records it failed as if the endpoint could not be reached.
func (g *GitHubHook) Deliver(guid, event string, body []byte, down bool) int {
	g.mu.Lock()
	if g.bodies == nil {
		g.bodies, g.redelivered = map[string]githubDelivery{}, map[string]int{}
	}
	g.bodies[guid] = githubDelivery{event: event, body: body}
	g.mu.Unlock()
	status := 0
	if !down {
		status = g.post(guid, event, body)
	}
	g.record(guid, event, body, status, false)
	return status
}

// Redelivered says how many times a redelivery of guid was asked for.
func (g *GitHubHook) Redelivered(guid string) int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.redelivered[guid]
}

func (g *GitHubHook) record(guid, event string, body []byte, status int, redelivery bool) {
	var action *string
	var b struct {
		Action string `json:"action"`
	}
	if json.Unmarshal(body, &b) == nil && b.Action != "" {
		action = &b.Action
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	g.next++
	text := "OK"
	if status < 200 || status > 299 {
		text = "failed to connect to host"
		if status != 0 {
			text = strconv.Itoa(status)
		}
	}
	g.attempts = append(g.attempts, GitHubAttempt{ID: g.next, GUID: guid, DeliveredAt: time.Now().UTC(), Redelivery: redelivery,
		Status: text, StatusCode: status, Event: event, Action: action})
}

func (g *GitHubHook) post(guid, event string, body []byte) int {
	g.mu.Lock()
	target := g.Target
	g.mu.Unlock()
	req, err := http.NewRequest(http.MethodPost, target, bytes.NewReader(body))
	if err != nil {
		return 0
	}
	mac := hmac.New(sha256.New, []byte(g.Secret))
	mac.Write(body)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-GitHub-Delivery", guid)
	req.Header.Set("X-GitHub-Event", event)
	req.Header.Set("X-Hub-Signature-256", "sha256="+hex.EncodeToString(mac.Sum(nil)))
	client := g.Client
	if client == nil {
		client = http.DefaultClient
	}
	res, err := client.Do(req)
	if err != nil {
		return 0
	}
	res.Body.Close()
	return res.StatusCode
}

// Handler serves the hook's deliveries API under /{Base}/deliveries.
func (g *GitHubHook) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /"+g.Base+"/deliveries", g.list)
	mux.HandleFunc("POST /"+g.Base+"/deliveries/{id}/attempts", g.redeliver)
	return mux
}

func githubError(w http.ResponseWriter, status int, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]any{"message": msg})
}

func (g *GitHubHook) authorized(w http.ResponseWriter, r *http.Request) bool {
	bearer := strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")
	if g.AppKey != nil {
		if err := checkAppJWT(bearer, g.AppKey, g.AppID); err != nil {
			githubError(w, http.StatusUnauthorized, "A JSON web token could not be decoded: "+err.Error())
			return false
		}
		return true
	}
	if bearer != g.Token {
		githubError(w, http.StatusUnauthorized, "Bad credentials")
		return false
	}
	return true
}

func (g *GitHubHook) list(w http.ResponseWriter, r *http.Request) {
	if !g.authorized(w, r) {
		return
	}
	perPage, err := strconv.Atoi(r.URL.Query().Get("per_page"))
	if err != nil || perPage < 1 || perPage > 100 {
		perPage = 30
	}
	g.mu.Lock()
	if g.perPage > 0 {
		perPage = min(perPage, g.perPage)
	}
	newest := slices.Clone(g.attempts)
	g.mu.Unlock()
	slices.Reverse(newest)
	start := 0
	if c := r.URL.Query().Get("cursor"); c != "" {
		start, _ = strconv.Atoi(c)
	}
	start = min(start, len(newest))
	end := min(len(newest), start+perPage)
	if end < len(newest) {
		next := fmt.Sprintf("http://%s%s?per_page=%d&cursor=%d", r.Host, r.URL.Path, perPage, end)
		w.Header().Set("Link", fmt.Sprintf(`<%s>; rel="next"`, next))
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(newest[start:end])
}

func (g *GitHubHook) redeliver(w http.ResponseWriter, r *http.Request) {
	if !g.authorized(w, r) {
		return
	}
	id, _ := strconv.ParseInt(r.PathValue("id"), 10, 64)
	g.mu.Lock()
	i := slices.IndexFunc(g.attempts, func(a GitHubAttempt) bool { return a.ID == id })
	var a GitHubAttempt
	var d githubDelivery
	if i >= 0 {
		a = g.attempts[i]
		d = g.bodies[a.GUID]
		g.redelivered[a.GUID]++
	}
	g.mu.Unlock()
	if i < 0 {
		githubError(w, http.StatusNotFound, "Not Found")
		return
	}
	w.WriteHeader(http.StatusAccepted)
	_, _ = w.Write([]byte("{}"))
	// GitHub sends the redelivery after answering; here it goes before the handler
	// returns, so a test sees it once the pass is over.
	status := g.post(a.GUID, d.event, d.body)
	g.record(a.GUID, d.event, d.body, status, true)
}

// checkAppJWT verifies an App's JWT as GitHub does: RS256 under key, iss, and a
// lifetime that has begun, has not ended and is at most ten minutes.
func checkAppJWT(token string, key *rsa.PublicKey, iss string) error {
	parts := strings.Split(token, ".")
	if len(parts) != 3 {
		return errors.New("not a JWT")
	}
	sig, err := base64.RawURLEncoding.DecodeString(parts[2])
	if err != nil {
		return err
	}
	sum := sha256.Sum256([]byte(parts[0] + "." + parts[1]))
	if err := rsa.VerifyPKCS1v15(key, crypto.SHA256, sum[:], sig); err != nil {
		return errors.New("bad signature")
	}
	raw, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		return err
	}
	var c struct {
		Iat, Exp int64
		Iss      string
	}
	if err := json.Unmarshal(raw, &c); err != nil {
		return err
	}
	now := time.Now().Unix()
	switch {
	case c.Iss != iss:
		return errors.New("wrong issuer")
	case c.Iat > now || c.Exp <= now || c.Exp-c.Iat > 600:
		return errors.New("expired or too long")
	}
	return nil
}
