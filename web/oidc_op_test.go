package web_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/rsa"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"html/template"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	jose "github.com/go-jose/go-jose/v4"
	"github.com/zitadel/oidc/v3/example/server/storage"
	"github.com/zitadel/oidc/v3/pkg/oidc"
	"github.com/zitadel/oidc/v3/pkg/op"
	"golang.org/x/text/language"
)

// testOP is a real OpenID provider (zitadel's op package, over its in-memory
// example storage) serving discovery, authorize, token and keys on 127.0.0.1,
// with a sign-in form of its own. Its people's groups can change between
// sign-ins, and a test can have it issue bad ID tokens on purpose (tamper).
type testOP struct {
	*storage.Storage
	issuer   string
	clientID string
	secret   string
	key      *rsa.PrivateKey
	keyID    string

	mu     sync.Mutex
	groups map[string][]string         // by user id (the subject)
	tamper func(claims map[string]any) // nil: the ID tokens are left as issued
}

// opUsers are the provider's people: id (the subject), username = password.
var opUsers = map[string]*storage.User{
	"248289761001": {ID: "248289761001", Username: "ann", Password: "ann-password", Email: "ann@example.com",
		EmailVerified: true, FirstName: "Ann", LastName: "Lee", PreferredLanguage: language.English},
	"248289761002": {ID: "248289761002", Username: "ben", Password: "ben-password", Email: "ben@example.com",
		EmailVerified: true, FirstName: "Ben", LastName: "Ng", PreferredLanguage: language.English},
}

type opUserStore struct{}

func (opUserStore) GetUserByID(id string) *storage.User { return opUsers[id] }
func (opUserStore) ExampleClientID() string             { return "service" }
func (opUserStore) GetUserByUsername(name string) *storage.User {
	for _, u := range opUsers {
		if u.Username == name {
			return u
		}
	}
	return nil
}

// startOP serves a provider whose one client is clientID with redirectURI.
func startOP(t *testing.T, clientID, redirectURI string) *testOP {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	o := &testOP{issuer: "http://" + ln.Addr().String(), clientID: clientID, secret: "op-client-secret-" + rand.Text(),
		key: key, keyID: "k-" + rand.Text()[:8], groups: map[string][]string{}}
	o.Storage = storage.NewStorageWithClients(opUserStore{},
		map[string]*storage.Client{clientID: storage.WebClient(clientID, o.secret, redirectURI)})
	var cryptoKey [32]byte
	_, _ = rand.Read(cryptoKey[:])
	provider, err := op.NewProvider(&op.Config{CryptoKey: cryptoKey, CodeMethodS256: true, AuthMethodPost: true},
		o, op.StaticIssuer(o.issuer), op.WithAllowInsecure())
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	callback := op.AuthCallbackURL(provider)
	mux.Handle("/login/username", op.NewIssuerInterceptor(provider.IssuerFromRequest).HandlerFunc(
		func(w http.ResponseWriter, r *http.Request) { o.signInForm(w, r, callback) }))
	mux.Handle("/", o.tampering(provider))
	srv := httptest.NewUnstartedServer(mux)
	srv.Listener.Close()
	srv.Listener = ln
	srv.Start()
	t.Cleanup(srv.Close)
	return o
}

var opForm = template.Must(template.New("f").Parse(`<!doctype html><title>Test provider</title>
<form method="post" action="/login/username"><input type="hidden" name="id" value="{{.}}">
<input id="username" name="username"><input id="password" name="password" type="password">
<button id="op-submit" type="submit">Sign in to the provider</button></form>`))

// signInForm is the provider's own sign-in page, then the way back to its
// authorize endpoint, which sends the browser to the relying party.
func (o *testOP) signInForm(w http.ResponseWriter, r *http.Request, callback func(context.Context, string) string) {
	if r.Method == http.MethodGet {
		_ = opForm.Execute(w, r.FormValue("authRequestID"))
		return
	}
	id := r.FormValue("id")
	if err := o.CheckUsernamePassword(r.FormValue("username"), r.FormValue("password"), id); err != nil {
		http.Error(w, err.Error(), http.StatusUnauthorized)
		return
	}
	http.Redirect(w, r, callback(r.Context(), id), http.StatusFound)
}

// setGroups sets the groups the provider says the user is in.
func (o *testOP) setGroups(userID string, groups ...string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.groups[userID] = groups
}

// issueBad makes the provider change each ID token's claims with f and sign it
// again with its own key, so only what f changed is wrong; nil stops it.
func (o *testOP) issueBad(f func(claims map[string]any)) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.tamper = f
}

// SetUserinfoFromRequest puts the email and the groups in the ID token, as the
// providers people use do when configured for it.
func (o *testOP) SetUserinfoFromRequest(ctx context.Context, info *oidc.UserInfo, req op.IDTokenRequest, scopes []string) error {
	if err := o.Storage.SetUserinfoFromRequest(ctx, info, req, scopes); err != nil {
		return err
	}
	u := opUsers[req.GetSubject()]
	info.Email, info.EmailVerified = u.Email, oidc.Bool(u.EmailVerified)
	o.mu.Lock()
	defer o.mu.Unlock()
	info.AppendClaims("groups", append([]string{}, o.groups[u.ID]...))
	return nil
}

type opKey struct{ o *testOP }

func (k opKey) SignatureAlgorithm() jose.SignatureAlgorithm { return jose.RS256 }
func (k opKey) Algorithm() jose.SignatureAlgorithm          { return jose.RS256 }
func (k opKey) Key() any                                    { return k.o.key }
func (k opKey) ID() string                                  { return k.o.keyID }
func (k opKey) Use() string                                 { return "sig" }

type opPublicKey struct{ opKey }

func (k opPublicKey) Key() any { return &k.o.key.PublicKey }

// The provider signs with a key the test holds, so issueBad can sign too.
func (o *testOP) SigningKey(context.Context) (op.SigningKey, error) { return opKey{o}, nil }
func (o *testOP) SignatureAlgorithms(context.Context) ([]jose.SignatureAlgorithm, error) {
	return []jose.SignatureAlgorithm{jose.RS256}, nil
}
func (o *testOP) KeySet(context.Context) ([]op.Key, error) {
	return []op.Key{opPublicKey{opKey{o}}}, nil
}

// tampering passes the provider's replies through, but for the token endpoint's
// while issueBad is on: its ID token's claims are changed and signed again.
func (o *testOP) tampering(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		o.mu.Lock()
		tamper := o.tamper
		o.mu.Unlock()
		if tamper == nil || r.URL.Path != "/oauth/token" {
			next.ServeHTTP(w, r)
			return
		}
		rec := httptest.NewRecorder()
		next.ServeHTTP(rec, r)
		var body map[string]any
		if err := json.Unmarshal(rec.Body.Bytes(), &body); err != nil || body["id_token"] == nil {
			w.WriteHeader(rec.Code)
			_, _ = w.Write(rec.Body.Bytes())
			return
		}
		body["id_token"] = o.resign(body["id_token"].(string), tamper)
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(body)
	})
}

// forgeClaim, set by an issueBad function, has the ID token signed with a key
// that is not the provider's.
const forgeClaim = "test-forge-signature"

func (o *testOP) resign(idToken string, tamper func(map[string]any)) string {
	parts := strings.Split(idToken, ".")
	raw, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		panic(fmt.Sprintf("id token payload: %v", err))
	}
	var claims map[string]any
	d := json.NewDecoder(bytes.NewReader(raw))
	d.UseNumber()
	if err := d.Decode(&claims); err != nil {
		panic(fmt.Sprintf("id token claims: %v", err))
	}
	tamper(claims)
	key := o.key
	if _, forged := claims[forgeClaim]; forged {
		// Signed by someone else under the provider's key id: the signature fails.
		delete(claims, forgeClaim)
		if key, err = rsa.GenerateKey(rand.Reader, 2048); err != nil {
			panic(err)
		}
	}
	signer, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.RS256, Key: jose.JSONWebKey{Key: key, KeyID: o.keyID}},
		(&jose.SignerOptions{}).WithType("JWT"))
	if err != nil {
		panic(err)
	}
	payload, err := json.Marshal(claims)
	if err != nil {
		panic(err)
	}
	jws, err := signer.Sign(payload)
	if err != nil {
		panic(err)
	}
	s, err := jws.CompactSerialize()
	if err != nil {
		panic(err)
	}
	return s
}
