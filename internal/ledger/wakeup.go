package ledger

import (
	"context"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/oncehook/oncehook/db"
	"github.com/oncehook/oncehook/internal/batch"
)

// NewWakeup returns the wake-up that tells the routers or the performers of every
// process, through one notification channel, that there is new work. It is sent
// after the transaction that made the work has committed, as a statement of its
// own. NOTIFY takes a server-wide lock when its transaction commits and holds it
// until the commit is flushed: sent inside the inbox's group commits and the
// router's commits, it made each of them wait for the previous one's WAL flush
// instead of sharing it. A transaction that only notifies writes nothing before
// its commit record, so its commit does not wait for a flush, and it holds the
// lock for a moment.
//
// Calls that arrive while a notification is being sent are folded into one more
// (see batch.Wakeup): a burst of batches sends a few notifications, not one per
// batch. A notification that fails is logged and dropped; listeners poll.
func NewWakeup(pool *pgxpool.Pool, channel string, logger *slog.Logger) *batch.Wakeup {
	return batch.NewWakeup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), wakeTimeout)
		defer cancel()
		if err := db.New(pool).Notify(ctx, channel); err != nil {
			logger.Debug("wake-up not sent; listeners will poll", "channel", channel, "err", err)
		}
	})
}

// wakeTimeout bounds one notification.
const wakeTimeout = 5 * time.Second

// Notification channels: new events wake the router, new or due actions the performer.
const (
	ChannelEvents  = "oncehook_events"
	ChannelActions = "oncehook_actions"
)
