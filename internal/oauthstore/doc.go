// Package oauthstore keeps the destinations' OAuth2 tokens, sealed with the secret
// key (AES-GCM, the destination as associated data) so that none is at rest in
// plain text, and refreshes each under a row lock so that one process refreshes it.
//
// internal/destination uses it as its Tokens; review's connect flow saves the
// first grant; cmd/oncehook opens it (OpenTokens) at start.
package oauthstore
