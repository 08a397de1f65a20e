// Package config loads and checks oncehook.yaml: the YAML primitives with their
// file:line:column errors, the reader of each section, the cross-references between
// them, and the one-line description `oncehook check` prints.
package config

import (
	"os"

	"github.com/oncehook/oncehook/internal/ledger"
	"github.com/oncehook/oncehook/internal/settings"
)

// Load reads and parses the config file at path; see Parse. A file that
// cannot be read is an EINVALID error too, so the command refuses to start.
func Load(path string, getenv func(string) string) (*settings.Config, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, &ledger.Error{Code: ledger.EINVALID, Message: path + ": cannot read config", Err: err}
	}
	return Parse(path, data, getenv)
}

// Parse parses and validates data, read from path, resolving secrets through
// getenv (os.Getenv when nil). Every problem found is reported in one *Error of code
// EINVALID, one "<path>:<line>:<column>: <field>: <reason>" line each, in file
// order. Messages name environment variables, never their values.
func Parse(path string, data []byte, getenv func(string) string) (*settings.Config, error) {
	if getenv == nil {
		getenv = os.Getenv
	}
	l := newLoader(path, getenv)
	cfg := l.load(data)
	if err := l.err(); err != nil {
		return nil, err
	}
	return cfg, nil
}
