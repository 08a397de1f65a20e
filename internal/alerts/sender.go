package alerts

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/oncehook/oncehook/db"
	"github.com/oncehook/oncehook/internal/destination"
	"github.com/oncehook/oncehook/internal/ledger"
	"github.com/oncehook/oncehook/internal/settings"
)

// Sender sends the alerts that are due. Every process runs one; an alert is
// taken by one sender at a time (AlertTake), and each channel's alerts are sent
// on a goroutine of their own, one after another, so that a channel that hangs
// or fails delays only its own.
type Sender struct {
	pool    *pgxpool.Pool
	cfg     *settings.Config
	mail    ledger.DestinationClient
	client  *http.Client
	logger  *slog.Logger
	poll    time.Duration
	backoff Backoff

	mu   sync.Mutex
	busy map[string]bool // channels sending now
	wg   sync.WaitGroup
}

// Params is the input of New.
type Params struct {
	Pool   *pgxpool.Pool
	Config *settings.Config
	// Mail sends the mail channels' alerts; nil means a client for
	// notify.smtp when it is set (else a mail alert fails, saying why).
	Mail   ledger.DestinationClient
	HTTP   *http.Client // nil: timeouts of 10 s, no cookies
	Logger *slog.Logger
	Poll   time.Duration // how often due alerts are looked for; default 1 s
	// Backoff spaces the attempts of an alert that failed; the zero value is
	// DefaultBackoff.
	Backoff Backoff
}

// Backoff is the wait after an alert's nth failed attempt: First doubling up to
// Max, and the alert given up (failed) once GiveUp has passed since it was
// written.
type Backoff struct {
	First, Max, GiveUp time.Duration
}

// DefaultBackoff waits 2 s, then 4 s, up to 5 minutes, for a day.
var DefaultBackoff = Backoff{First: 2 * time.Second, Max: 5 * time.Minute, GiveUp: 24 * time.Hour}

// After is the wait after the nth failed attempt (n from 1).
func (b Backoff) After(n int) time.Duration {
	d := b.First
	for i := 1; i < n && d < b.Max; i++ {
		d *= 2
	}
	return min(d, b.Max)
}

// lease is how long a taken alert is left to its sender before another may
// take it again: longer than a channel's batch of sends.
const lease = 2 * time.Minute

// perChannel bounds the alerts a channel sends in one go.
const perChannel = 10

// New returns a Sender.
func New(p Params) *Sender {
	if p.Logger == nil {
		p.Logger = slog.Default()
	}
	if p.Poll <= 0 {
		p.Poll = time.Second
	}
	if p.HTTP == nil {
		p.HTTP = &http.Client{Timeout: 10 * time.Second}
	}
	if p.Backoff == (Backoff{}) {
		p.Backoff = DefaultBackoff
	}
	if p.Mail == nil && p.Config.Notify.SMTP.Addr != "" {
		p.Mail = destination.NewSMTP(p.Config.Notify.SMTP.Destination())
	}
	return &Sender{pool: p.Pool, cfg: p.Config, mail: p.Mail, client: p.HTTP, logger: p.Logger, poll: p.Poll,
		backoff: p.Backoff, busy: map[string]bool{}}
}

// Run sends the due alerts until ctx ends, then waits for the sends in flight.
func (s *Sender) Run(ctx context.Context) {
	tick := time.NewTicker(s.poll)
	defer tick.Stop()
	for {
		if _, err := s.SendDue(ctx); err != nil && ctx.Err() == nil {
			s.logger.Warn("send alerts", "err", err)
		}
		select {
		case <-ctx.Done():
			s.wg.Wait()
			return
		case <-tick.C:
		}
	}
}

// SendDue takes the due alerts of the channels not sending now and starts
// sending them, a goroutine a channel. It returns how many it took.
func (s *Sender) SendDue(ctx context.Context) (int, error) {
	q := db.New(s.pool)
	due, err := q.AlertsDue(ctx, 100)
	if err != nil {
		return 0, fmt.Errorf("read the due alerts: %w", err)
	}
	byChannel := map[string][]db.AlertTakeRow{}
	for _, d := range due {
		if s.isBusy(d.Channel) || len(byChannel[d.Channel]) >= perChannel {
			continue
		}
		a, err := q.AlertTake(ctx, db.AlertTakeParams{ID: d.ID, LeaseSeconds: lease.Seconds()})
		if db.IsNotFound(err) {
			continue // another sender took it
		}
		if err != nil {
			return 0, fmt.Errorf("take alert %d: %w", d.ID, err)
		}
		byChannel[a.Channel] = append(byChannel[a.Channel], a)
	}
	n := 0
	for channel, alerts := range byChannel {
		n += len(alerts)
		s.setBusy(channel, true)
		s.wg.Go(func() {
			defer s.setBusy(channel, false)
			for _, a := range alerts {
				s.send(context.WithoutCancel(ctx), a)
			}
		})
	}
	return n, nil
}

func (s *Sender) isBusy(channel string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.busy[channel]
}

func (s *Sender) setBusy(channel string, busy bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.busy[channel] = busy
}

// send makes one attempt at the alert and records it: sent, or due again
// after the backoff (or given up).
func (s *Sender) send(ctx context.Context, t db.AlertTakeRow) {
	q := db.New(s.pool)
	a, tries, err := s.alert(ctx, q, t)
	var status int
	if err == nil {
		status, err = s.deliver(ctx, a)
	}
	attempt := db.AlertAttemptAddParams{AlertID: t.ID, Ok: err == nil}
	if status != 0 {
		st := int32(status)
		attempt.HttpStatus = &st
	}
	if err != nil {
		attempt.Error = ledger.Truncate(err.Error(), 500)
	}
	if rerr := s.record(ctx, func(q *db.Queries) error {
		if err := q.AlertAttemptAdd(ctx, attempt); err != nil {
			return err
		}
		if err == nil {
			return q.AlertSent(ctx, t.ID)
		}
		wait := s.backoff.After(tries + 1)
		var ra retryAfter
		if errors.As(err, &ra) && ra.d > wait {
			wait = ra.d
		}
		return q.AlertRetryIn(ctx, db.AlertRetryInParams{ID: t.ID, AfterSeconds: wait.Seconds(),
			GiveUp: time.Since(t.CreatedAt) > s.backoff.GiveUp})
	}); rerr != nil {
		s.logger.Warn("record an alert's attempt; it is sent again once its lease passes", "alert", t.ID, "err", rerr)
		return
	}
	if err != nil {
		s.logger.Warn("alert not sent; it is tried again", "destination", t.Destination, "channel", t.Channel,
			"kind", t.Kind, "attempt", tries+1, "err", err)
		return
	}
	s.logger.Info("alert sent", "destination", t.Destination, "channel", t.Channel, "kind", t.Kind, "outage", t.OutageID)
}

// record runs fn in a transaction, again when it lost to another (on Citus the
// channels' records, writes to reference tables, can deadlock each other): an
// attempt not recorded would be sent again once its lease passes.
func (s *Sender) record(ctx context.Context, fn func(q *db.Queries) error) error {
	var err error
	for range 5 {
		if err = db.WithTx(ctx, s.pool, fn); !db.IsConflict(err) {
			return err
		}
	}
	return err
}

// alert reads what t tells, and how often it was tried before.
func (s *Sender) alert(ctx context.Context, q *db.Queries, t db.AlertTakeRow) (Alert, int, error) {
	f, err := q.AlertFacts(ctx, db.AlertFactsParams{AlertID: t.ID, OutageID: t.OutageID})
	if err != nil {
		return Alert{}, 0, fmt.Errorf("read the outage: %w", err)
	}
	waiting, err := q.ActionWaitingByClient(ctx, t.Destination)
	if err != nil {
		return Alert{}, int(f.Tries), fmt.Errorf("count the actions waiting: %w", err)
	}
	a := Alert{ID: t.ID, OutageID: t.OutageID, Destination: t.Destination, Channel: t.Channel, Kind: t.Kind,
		OpenedAt: f.OpenedAt, ClosedAt: f.ClosedAt, Reason: f.Reason, Reopened: int(f.Reopened), OpenedBy: f.OpenedBy,
		URL: s.cfg.BaseURL + "/destinations#dest-" + t.Destination}
	if a.Kind == ledger.AlertRecovered && a.ClosedAt == nil {
		now := time.Now()
		a.ClosedAt = &now // ended, then reopened past the quiet time: told as it ended
	}
	for _, w := range waiting {
		a.Waiting = append(a.Waiting, Waiting{Client: w.Client, Actions: w.Waiting})
	}
	if d, ok := s.cfg.Destination(t.Destination); ok {
		a.Owner = d.Owner
	}
	return a, int(f.Tries), nil
}

// deliver sends a on its channel once, and returns the HTTP status (or SMTP
// code) when one came.
func (s *Sender) deliver(ctx context.Context, a Alert) (int, error) {
	ch, ok := s.cfg.AlertChannel(a.Channel)
	if !ok {
		return 0, fmt.Errorf("no alert channel is named %q in the config now", a.Channel)
	}
	switch ch.Kind {
	case settings.AlertMail:
		return s.sendMail(ctx, ch, a)
	case settings.AlertSlack:
		return s.postSlack(ctx, ch, a)
	case settings.AlertPagerDuty:
		return s.postPagerDuty(ctx, ch, a)
	case settings.AlertWebhook:
		return s.postWebhook(ctx, ch, a)
	}
	return 0, fmt.Errorf("channel %q has no kind oncehook sends to (%q)", ch.Name, ch.Kind)
}

// retryAfter is a channel's answer that names how long to wait (429's Retry-After).
type retryAfter struct {
	error
	d time.Duration
}

func (r retryAfter) Unwrap() error { return r.error }
