package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"sync"
)

// demoLogMax is the size at which demo.log is set aside (as demo.log.1) when the
// demo starts, as the launcher does with Postgres's server.log beside it.
const demoLogMax = 10 << 20

// demoScreen keeps the demo's login the last thing on screen. Every log record
// goes to the log file. The terminal gets them all until the banner; then only
// the traffic's progress lines (requests and workers go to the file alone); once
// the script has played out and the banner is shown again, nothing. Errors, and
// everything after Ctrl-C, reach the terminal whatever the phase.
type demoScreen struct {
	ctx    context.Context // done on Ctrl-C
	stdout io.Writer
	file   *os.File

	mu    sync.Mutex // orders the banner and terminal records
	phase screenPhase
}

type screenPhase int

const (
	phaseStarting screenPhase = iota // every record to the terminal
	phaseProgress                    // the traffic's records only
	phaseQuiet                       // none
)

// openDemoScreen opens (appending) the log file at path.
func openDemoScreen(ctx context.Context, env *environment, path string) (*demoScreen, error) {
	if fi, err := os.Stat(path); err == nil && fi.Size() > demoLogMax {
		_ = os.Rename(path, path+".1")
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		return nil, fmt.Errorf("open the demo log: %w", err)
	}
	return &demoScreen{ctx: ctx, stdout: env.stdout, file: f}, nil
}

// loggers returns the loggers of the services and of the traffic, writing to the
// file and, by phase, through term to the terminal.
func (s *demoScreen) loggers(env *environment, term *slog.Logger) (services, traffic *slog.Logger) {
	file := newLoggerTo(env, s.file).Handler()
	return slog.New(&screenHandler{s: s, file: file, term: term.Handler()}),
		slog.New(&screenHandler{s: s, traffic: true, file: file, term: term.Handler()})
}

// show prints text on stdout, then moves to phase next.
func (s *demoScreen) show(text string, next screenPhase) {
	s.mu.Lock()
	defer s.mu.Unlock()
	fmt.Fprint(s.stdout, text)
	s.phase = next
}

func (s *demoScreen) onScreen(level slog.Level, traffic bool) bool {
	switch {
	case s.ctx.Err() != nil, level >= slog.LevelError, s.phase == phaseStarting:
		return true
	case s.phase == phaseProgress:
		return traffic
	}
	return false
}

func (s *demoScreen) Close() error { return s.file.Close() }

// screenHandler sends a record to the file and, when the screen's phase lets it
// through, to the terminal.
type screenHandler struct {
	s          *demoScreen
	traffic    bool
	file, term slog.Handler
}

func (h *screenHandler) Enabled(ctx context.Context, l slog.Level) bool {
	return h.file.Enabled(ctx, l) || h.term.Enabled(ctx, l)
}

func (h *screenHandler) Handle(ctx context.Context, r slog.Record) error {
	var errFile, errTerm error
	if h.file.Enabled(ctx, r.Level) {
		errFile = h.file.Handle(ctx, r.Clone())
	}
	h.s.mu.Lock()
	defer h.s.mu.Unlock()
	if h.term.Enabled(ctx, r.Level) && h.s.onScreen(r.Level, h.traffic) {
		errTerm = h.term.Handle(ctx, r)
	}
	return errors.Join(errFile, errTerm)
}

func (h *screenHandler) WithAttrs(as []slog.Attr) slog.Handler {
	return &screenHandler{s: h.s, traffic: h.traffic, file: h.file.WithAttrs(as), term: h.term.WithAttrs(as)}
}

func (h *screenHandler) WithGroup(name string) slog.Handler {
	return &screenHandler{s: h.s, traffic: h.traffic, file: h.file.WithGroup(name), term: h.term.WithGroup(name)}
}
