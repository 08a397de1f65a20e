package db

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// StopImmediate stops the server the way a power cut would: `pg_ctl -m immediate`
// ends every process without a checkpoint, so the next Start runs crash recovery
// from the WAL. Fault tests use it to prove that what was committed survives. Like
// Stop, it does nothing unless this process started the server.
func (e *Embedded) StopImmediate(ctx context.Context) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if !e.owned {
		return nil
	}
	unlock, err := lockDir(ctx, e.dir)
	if err != nil {
		return err
	}
	defer unlock()
	ctx, cancel := context.WithTimeout(ctx, stopWait+10*time.Second)
	defer cancel()
	out, err := e.command(ctx, "pg_ctl", "stop", "-w", "-t", secs(stopWait), "-m", "immediate", "-D", e.dir).CombinedOutput()
	if err != nil {
		if _, statErr := os.Stat(filepath.Join(e.dir, "postmaster.pid")); !errors.Is(statErr, fs.ErrNotExist) {
			return fmt.Errorf("stop postgres immediately: %w: %s", err, strings.TrimSpace(string(out)))
		}
	}
	e.owned = false
	return nil
}
