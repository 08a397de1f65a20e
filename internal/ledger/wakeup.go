package ledger

import (
	"context"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/oncehook/oncehook/db"
)

// wakeup tells the routers or the performers of every process, through one
// notification channel, that there is new work. It is sent after the transaction
// that made the work has committed, as a statement of its own. NOTIFY takes a
// server-wide lock when its transaction commits and holds it until the commit is
// flushed: sent inside the inbox's group commits and the router's commits, it made
// each of them wait for the previous one's WAL flush instead of sharing it. A
// transaction that only notifies writes nothing before its commit record, so its
// commit does not wait for a flush, and it holds the lock for a moment.
//
// Calls that arrive while a notification is being sent are folded into one more,
// sent after it: a burst of batches sends a few notifications, not one per batch.
// A notification that fails is logged and dropped; listeners poll.
type wakeup struct {
	pool    *pgxpool.Pool
	channel string
	logger  *slog.Logger
	state   atomic.Int32 // wakeIdle, wakeSending or wakeAgain
}

const (
	wakeIdle    int32 = iota // no notification is being sent
	wakeSending              // one is being sent
	wakeAgain                // one is being sent, and another was asked for meanwhile
)

// wakeTimeout bounds one notification.
const wakeTimeout = 5 * time.Second

func newWakeup(pool *pgxpool.Pool, channel string, logger *slog.Logger) *wakeup {
	return &wakeup{pool: pool, channel: channel, logger: logger}
}

// send notifies the channel's listeners, or leaves it to the call already sending,
// which then sends once more. It returns once its notification, or the one it was
// folded into, is on its way.
func (w *wakeup) send() {
	for !w.state.CompareAndSwap(wakeIdle, wakeSending) {
		if w.state.CompareAndSwap(wakeSending, wakeAgain) || w.state.Load() == wakeAgain {
			return
		}
	}
	for {
		ctx, cancel := context.WithTimeout(context.Background(), wakeTimeout)
		if err := db.New(w.pool).Notify(ctx, w.channel); err != nil {
			w.logger.Debug("wake-up not sent; listeners will poll", "channel", w.channel, "err", err)
		}
		cancel()
		if w.state.CompareAndSwap(wakeSending, wakeIdle) {
			return
		}
		w.state.Store(wakeSending) // it was wakeAgain: send the one asked for meanwhile
	}
}
