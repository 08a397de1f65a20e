package batch

import (
	"context"
	"log/slog"
	"time"
)

// Loop runs step until it finds no work, then waits for a wake-up or the poll.
func Loop(ctx context.Context, logger *slog.Logger, poll time.Duration, wakeCh <-chan struct{}, name string, step func(context.Context) (int, error)) {
	timer := time.NewTimer(0)
	defer timer.Stop()
	for {
		n, err := step(ctx)
		if err != nil && ctx.Err() == nil {
			logger.Warn(name+" step failed", "err", err)
		}
		if n > 0 && err == nil {
			continue
		}
		timer.Reset(poll)
		select {
		case <-ctx.Done():
			return
		case <-wakeCh:
		case <-timer.C:
		}
	}
}

// Sleep waits d or until ctx ends, whichever comes first.
func Sleep(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}
