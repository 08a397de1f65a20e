package ledger

import (
	"context"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/oncehook/oncehook/internal/settings"
)

// laneRefresh is how often a worker looks for clients with work beyond its
// config's (a source renamed or removed while its work waited).
const laneRefresh = 10 * time.Second

// Lanes are the clients a worker goes round when it claims work. Each claim names
// one client, so that one client's backlog does not hold up another's work, and on
// a database sharded by client each claim reads and locks rows of one shard only.
// They are the config's clients and the clients found with work in the database.
type Lanes struct {
	configured []string
	find       func(context.Context) ([]string, error)
	logger     *slog.Logger

	mu      sync.Mutex
	clients []string
	next    int
	foundAt time.Time
}

// NewLanes returns the lanes of cfg's clients; find lists the clients with work in
// the database, asked again every laneRefresh.
func NewLanes(cfg *settings.Config, logger *slog.Logger, find func(context.Context) ([]string, error)) *Lanes {
	var configured []string
	for _, s := range cfg.Sources {
		if !slices.Contains(configured, s.Client) {
			configured = append(configured, s.Client)
		}
	}
	slices.Sort(configured)
	return &Lanes{configured: configured, clients: configured, find: find, logger: logger}
}

// Round returns every client once, starting one further than the previous round
// did, so that each client in turn is claimed for first.
func (l *Lanes) Round(ctx context.Context) []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	if time.Since(l.foundAt) >= laneRefresh {
		l.refresh(ctx)
	}
	if len(l.clients) == 0 {
		return nil
	}
	start := l.next % len(l.clients)
	l.next = start + 1
	return append(slices.Clone(l.clients[start:]), l.clients[:start]...)
}

// All returns every client, without moving the round on.
func (l *Lanes) All(ctx context.Context) []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	if time.Since(l.foundAt) >= laneRefresh {
		l.refresh(ctx)
	}
	return slices.Clone(l.clients)
}

// refresh adds the clients found with work to the configured ones. A failed look
// keeps the lanes as they were and is tried again at the next refresh.
func (l *Lanes) refresh(ctx context.Context) {
	l.foundAt = time.Now()
	found, err := l.find(ctx)
	if err != nil {
		if ctx.Err() == nil {
			l.logger.Warn("look for clients with work", "err", err)
		}
		return
	}
	clients := slices.Clone(l.configured)
	for _, c := range found {
		if !slices.Contains(clients, c) {
			clients = append(clients, c)
		}
	}
	slices.Sort(clients)
	l.clients = clients
}
