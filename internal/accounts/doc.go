// Package accounts holds the people and API tokens who may use oncehook: users with
// their argon2id password hashes, sign-in with a password (rate limited) or through
// OIDC, roles and the clients each sees, and API tokens stored as hashes.
//
// web's sign-in and admin pages and cmd/oncehook's user and token commands call it.
package accounts
