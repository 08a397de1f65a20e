package accounts

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/base64"
	"fmt"
	"net/mail"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/jackc/pgx/v5/pgxpool"
	"golang.org/x/crypto/argon2"

	"github.com/oncehook/oncehook/db"
	"github.com/oncehook/oncehook/internal/ledger"
	"github.com/oncehook/oncehook/internal/settings"
)

// MinPasswordLength is the shortest password a person may choose, in characters.
const MinPasswordLength = 12

// LoginLimits bounds failed sign-ins. The counts are kept in Postgres so that
// every oncehook process shares them and a restart does not reset them.
//
// An account is never locked out by what others type: failures lock only the
// pair of that account and the address they came from (PerAccount), and an
// address that fails too often on any accounts (PerAddress). Failures on an
// account from everywhere only slow its sign-ins down: past PerAccount of them
// within Window, each sign-in to it waits Delay, doubled for each further
// failure, at most MaxDelay, and then is checked.
type LoginLimits struct {
	PerAccount int           // failures per (account, address) within Window
	PerAddress int           // failures per client address within Window
	Window     time.Duration // how long failures are remembered
	Delay      time.Duration // the account's first wait; 0: none
	MaxDelay   time.Duration // the longest wait
}

// DefaultLoginLimits are generous to a person mistyping and tight on a guesser.
var DefaultLoginLimits = LoginLimits{PerAccount: 5, PerAddress: 20, Window: 15 * time.Minute,
	Delay: time.Second, MaxDelay: 15 * time.Second}

// delay is how long a sign-in to an account waits after failures before it.
func (l LoginLimits) delay(failures int) time.Duration {
	over := failures - l.PerAccount
	if l.Delay <= 0 || over <= 0 {
		return 0
	}
	d := l.Delay
	for i := 1; i < over && d < l.MaxDelay; i++ {
		d *= 2
	}
	return min(d, max(l.MaxDelay, l.Delay))
}

// argon2id parameters: OWASP's 19 MiB, 2 passes, 1 lane. They are written into
// every hash, so raising them later keeps old hashes verifiable.
const (
	argonTime    = 2
	argonMemory  = 19 * 1024
	argonThreads = 1
	argonKeyLen  = 32
)

// CreateUser adds a person who signs in to the dashboard, an admin or an operator
// or viewer of clients (checked against the config by CheckScope first). It
// returns EINVALID for a malformed email, an unknown role, clients given to an
// admin or none to anyone else, or a password shorter than MinPasswordLength, and
// ECONFLICT when the email is taken.
func CreateUser(ctx context.Context, pool *pgxpool.Pool, email, role, password string, clients ...string) (ledger.User, error) {
	email, err := cleanEmail(email)
	if err != nil {
		return ledger.User{}, err
	}
	if clients, err = ledger.ScopeShape(role, clients); err != nil {
		return ledger.User{}, err
	}
	if utf8.RuneCountInString(password) < MinPasswordLength {
		return ledger.User{}, ledger.Errorf(ledger.EINVALID, "The password must be at least %d characters long.", MinPasswordLength)
	}
	hash, err := hashPassword(password)
	if err != nil {
		return ledger.User{}, err
	}
	u, err := db.New(pool).UserInsert(ctx, db.UserInsertParams{Email: email, Role: role, Clients: clients, PasswordHash: hash})
	if db.IsUniqueViolation(err) {
		return ledger.User{}, ledger.Errorf(ledger.ECONFLICT, "A user with the email %s already exists.", email)
	}
	if err != nil {
		return ledger.User{}, fmt.Errorf("store user: %w", err)
	}
	return ledger.UserOf(u), nil
}

func cleanEmail(email string) (string, error) {
	email = strings.TrimSpace(email)
	a, err := mail.ParseAddress(email)
	if err != nil || a.Address != email || a.Name != "" {
		return "", ledger.Errorf(ledger.EINVALID, "%q is not an email address.", email)
	}
	return email, nil
}

// Authenticate returns the enabled user with this email and password. Every try is
// counted against the account, the address and the pair of both before the
// password is checked, so a burst of guesses cannot all pass the limit at once:
// past the pair's or the address's limit the try is refused (ETHROTTLED)
// unchecked; past the account's, it waits (see LoginLimits) and is checked. A wrong email or password is EUNAUTHORIZED with the same
// words either way, so the reply does not tell which accounts exist.
func Authenticate(ctx context.Context, pool *pgxpool.Pool, limits LoginLimits, email, password, address string) (ledger.User, error) {
	q := db.New(pool)
	account := strings.ToLower(strings.TrimSpace(email))
	accountKey, addressKey := "account:"+account, "address:"+address
	pairKey := "pair:" + address + " " + account
	failures, err := countTry(ctx, q, limits, accountKey, pairKey, addressKey)
	if err != nil {
		return ledger.User{}, err
	}
	if err := wait(ctx, limits.delay(failures)); err != nil {
		return ledger.User{}, err
	}
	u, err := q.UserGetByEmail(ctx, strings.TrimSpace(email))
	if err != nil && !db.IsNotFound(err) {
		return ledger.User{}, &ledger.Error{Code: ledger.EUNAVAILABLE, Message: "Sign-in is unavailable; try again shortly.", Err: err}
	}
	hash := u.PasswordHash
	if hash == "" {
		hash = decoyHash() // spend the same time as for a real account
	}
	// An identity provider's user has no password (hash ''): the decoy's own
	// password must not open their account.
	ok := verifyPassword(hash, password) && u.ID != 0 && u.PasswordHash != ""
	if ok && u.Disabled {
		return ledger.User{}, ledger.Errorf(ledger.EFORBIDDEN, "This account is disabled. Ask an admin to enable it.")
	}
	if !ok {
		return ledger.User{}, ledger.Errorf(ledger.EUNAUTHORIZED, "The email or password is wrong.")
	}
	// Success: the account and the pair start over, and the address gets this
	// try back.
	for _, k := range []string{accountKey, pairKey} {
		if err := q.LoginThrottleClear(ctx, k); err != nil {
			return ledger.User{}, fmt.Errorf("clear failed sign-ins: %w", err)
		}
	}
	if err := q.LoginThrottleRefund(ctx, addressKey); err != nil {
		return ledger.User{}, fmt.Errorf("refund sign-in try: %w", err)
	}
	return ledger.UserOf(u), nil
}

// countTry counts a sign-in up front (a success gives it back), so a burst
// cannot pass the limits all at once. It returns ETHROTTLED when the pair or the
// address is over its limit, else the account's failures before this try.
func countTry(ctx context.Context, q *db.Queries, limits LoginLimits, accountKey, pairKey, addressKey string) (int, error) {
	window := limits.Window.Seconds()
	var counts [3]int
	for i, key := range []string{accountKey, pairKey, addressKey} {
		n, err := q.LoginThrottleFail(ctx, db.LoginThrottleFailParams{Key: key, WindowSeconds: window})
		if err != nil {
			return 0, &ledger.Error{Code: ledger.EUNAVAILABLE, Message: "Sign-in is unavailable; try again shortly.", Err: err}
		}
		counts[i] = int(n)
	}
	if counts[1] > limits.PerAccount || counts[2] > limits.PerAddress {
		return 0, ledger.Errorf(ledger.ETHROTTLED, "Too many failed sign-ins from here. Wait %s, then try again.", plainDuration(limits.Window))
	}
	return counts[0] - 1, nil
}

// wait holds a sign-in for d, or until ctx ends.
func wait(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return &ledger.Error{Code: ledger.EUNAVAILABLE, Message: "Sign-in was interrupted; try again.", Err: ctx.Err()}
	}
}

func plainDuration(d time.Duration) string {
	if d >= time.Minute && d%time.Minute == 0 {
		return fmt.Sprintf("%d minutes", int(d/time.Minute))
	}
	return d.String()
}

// GetUser returns one user, ENOTFOUND if there is none.
func GetUser(ctx context.Context, pool *pgxpool.Pool, id int64) (ledger.User, error) {
	u, err := db.New(pool).UserGet(ctx, id)
	if db.IsNotFound(err) {
		return ledger.User{}, ledger.Errorf(ledger.ENOTFOUND, "User %d does not exist.", id)
	}
	if err != nil {
		return ledger.User{}, fmt.Errorf("read user: %w", err)
	}
	return ledger.UserOf(u), nil
}

// ListUsers returns every user by email; enabledOnly keeps those who can be assigned.
func ListUsers(ctx context.Context, pool *pgxpool.Pool, enabledOnly bool) ([]ledger.User, error) {
	q := db.New(pool)
	var us []db.User
	var err error
	if enabledOnly {
		us, err = q.UserListEnabled(ctx)
	} else {
		us, err = q.UserList(ctx)
	}
	if err != nil {
		return nil, fmt.Errorf("list users: %w", err)
	}
	out := make([]ledger.User, len(us))
	for i, x := range us {
		out[i] = ledger.UserOf(x)
	}
	return out, nil
}

// SetUserRole changes a user's role and the clients they see (none for an admin,
// some for anyone else: EINVALID otherwise). Admins only; the last enabled admin
// cannot be demoted (ECONFLICT), or nobody could administer oncehook from the
// dashboard.
func SetUserRole(ctx context.Context, pool *pgxpool.Pool, actor ledger.Actor, id int64, role string, clients ...string) error {
	clients, err := ledger.ScopeShape(role, clients)
	if err != nil {
		return err
	}
	return changeUser(ctx, pool, actor, id, role != settings.RoleAdmin, func(q *db.Queries) error {
		return q.UserSetRole(ctx, db.UserSetRoleParams{ID: id, Role: role, Clients: clients})
	})
}

// SetUserDisabled disables or enables a user. Admins only; the last enabled admin
// cannot be disabled. A disabled user's sessions stop working on their next request.
func SetUserDisabled(ctx context.Context, pool *pgxpool.Pool, actor ledger.Actor, id int64, disabled bool) error {
	return changeUser(ctx, pool, actor, id, disabled, func(q *db.Queries) error {
		return q.UserSetDisabled(ctx, db.UserSetDisabledParams{ID: id, Disabled: disabled})
	})
}

func changeUser(ctx context.Context, pool *pgxpool.Pool, actor ledger.Actor, id int64, removesAdmin bool, apply func(*db.Queries) error) error {
	if actor.Role != settings.RoleAdmin {
		return ledger.Errorf(ledger.EFORBIDDEN, "Only admins can change users.")
	}
	return db.WithTx(ctx, pool, func(q *db.Queries) error {
		// Two admins removing each other at once would each count the other and
		// leave none: the enabled admins are locked first, so the second change
		// counts what the first one left. The user is read after the lock for the
		// same reason.
		var admins []int64
		if removesAdmin {
			var err error
			if admins, err = q.UserLockAdmins(ctx); err != nil {
				return fmt.Errorf("lock admins: %w", err)
			}
		}
		u, err := q.UserGet(ctx, id)
		if db.IsNotFound(err) {
			return ledger.Errorf(ledger.ENOTFOUND, "User %d does not exist.", id)
		}
		if err != nil {
			return fmt.Errorf("read user: %w", err)
		}
		if removesAdmin && u.Role == settings.RoleAdmin && !u.Disabled && len(admins) <= 1 {
			return ledger.Errorf(ledger.ECONFLICT, "%s is the last admin; make another admin first.", u.Email)
		}
		if err := apply(q); err != nil {
			return fmt.Errorf("change user: %w", err)
		}
		return nil
	})
}

// DeleteExpiredSessions removes dashboard sessions past their expiry. The server
// calls it at each sign-in, which keeps the table small without a timer goroutine.
func DeleteExpiredSessions(ctx context.Context, pool *pgxpool.Pool) (int64, error) {
	n, err := db.New(pool).SessionDeleteExpired(ctx)
	if err != nil {
		return 0, fmt.Errorf("delete expired sessions: %w", err)
	}
	return n, nil
}

// hashPassword returns the argon2id hash of password in the PHC string format.
func hashPassword(password string) (string, error) {
	salt := make([]byte, 16)
	if _, err := rand.Read(salt); err != nil {
		return "", fmt.Errorf("generate salt: %w", err)
	}
	key := argon2.IDKey([]byte(password), salt, argonTime, argonMemory, argonThreads, argonKeyLen)
	b64 := base64.RawStdEncoding
	return fmt.Sprintf("$argon2id$v=%d$m=%d,t=%d,p=%d$%s$%s", argon2.Version, argonMemory, argonTime,
		argonThreads, b64.EncodeToString(salt), b64.EncodeToString(key)), nil
}

// verifyPassword reports whether password matches an argon2id PHC hash, using the
// parameters stored in the hash.
func verifyPassword(hash, password string) bool {
	parts := strings.Split(hash, "$")
	if len(parts) != 6 || parts[1] != "argon2id" {
		return false
	}
	var version int
	var memory, passes uint32
	var threads uint8
	if _, err := fmt.Sscanf(parts[2], "v=%d", &version); err != nil || version != argon2.Version {
		return false
	}
	if _, err := fmt.Sscanf(parts[3], "m=%d,t=%d,p=%d", &memory, &passes, &threads); err != nil {
		return false
	}
	salt, err := base64.RawStdEncoding.DecodeString(parts[4])
	if err != nil {
		return false
	}
	want, err := base64.RawStdEncoding.DecodeString(parts[5])
	if err != nil || len(want) == 0 {
		return false
	}
	got := argon2.IDKey([]byte(password), salt, passes, memory, threads, uint32(len(want)))
	return subtle.ConstantTimeCompare(got, want) == 1
}

// decoyHash is verified against when the email is unknown, so that a wrong email
// costs as long as a wrong password.
// It is made on first use, not at start, since hashing is deliberately slow.
var decoyHash = sync.OnceValue(func() string {
	h, err := hashPassword("decoy password that no account has")
	if err != nil {
		return "$argon2id$v=19$m=19456,t=2,p=1$AAAAAAAAAAAAAAAAAAAAAA$AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"
	}
	return h
})

// OwnersWithoutAccount returns the owners cfg names that no enabled user has, sorted:
// they cannot sign in to see what is assigned to them.
func OwnersWithoutAccount(ctx context.Context, pool *pgxpool.Pool, cfg *settings.Config) ([]string, error) {
	known, err := AccountHolders(ctx, pool)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, o := range cfg.Owners() {
		if !known[strings.ToLower(o)] {
			out = append(out, o)
		}
	}
	return out, nil
}

// AccountHolders returns the emails of the enabled users, lowercased.
func AccountHolders(ctx context.Context, pool *pgxpool.Pool) (map[string]bool, error) {
	users, err := ListUsers(ctx, pool, true)
	if err != nil {
		return nil, err
	}
	out := make(map[string]bool, len(users))
	for _, u := range users {
		out[strings.ToLower(u.Email)] = true
	}
	return out, nil
}
