// Command riverpeer is the bench's peer: the same job as oncehook's webhook path,
// built the way a Go engineer who cares about speed would build it with River. A
// net/http handler checks a Stripe webhook's signature and age on the raw bytes with
// stripe-go (webhook.ValidatePayloadWithTolerance, no Event decoded), decodes only
// the id, the type and what the job needs, then in one transaction per webhook
// stores the delivery in its own inbox (INSERT ... ON CONFLICT DO NOTHING RETURNING:
// a repeat answers 200 and stores nothing) and inserts a River job that is unique by
// the business key; it commits and answers 200. A River worker calls the destination
// (the bench's sandbox CRM) with the business key as idempotency key and reference.
//
// It is its own module so that oncehook's module never depends on River; the
// bench builds it with `go build` in this directory and runs it as its own
// process, on a fresh database of the bench's Postgres.
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"runtime/pprof"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivermigrate"
	"github.com/stripe/stripe-go/v82"
	"github.com/stripe/stripe-go/v82/webhook"
)

type options struct {
	databaseURL   string
	listen        string
	destination   string // base URL of the CRM: POST {destination}/opportunities
	poolSize      int
	workers       int           // River's MaxWorkers for the default queue: calls in flight
	fetchCooldown time.Duration // River's FetchCooldown
	fetchPoll     time.Duration // River's FetchPollInterval
	maxBody       int64
	cpuProfile    string // write a CPU profile here until the process stops
}

func main() {
	var o options
	flag.StringVar(&o.databaseURL, "database-url", os.Getenv("DATABASE_URL"), "Postgres connection string (default $DATABASE_URL)")
	flag.StringVar(&o.listen, "listen", "127.0.0.1:8090", "HTTP listen address")
	flag.StringVar(&o.destination, "destination", "http://127.0.0.1:8091", "the CRM's base URL")
	flag.IntVar(&o.poolSize, "pool", 16, "database connections (oncehook serve opens 16)")
	flag.IntVar(&o.workers, "workers", 100, "River MaxWorkers: destination calls in flight")
	// River's defaults (100 ms, 1 s) cap a queue at MaxWorkers jobs per 100 ms.
	flag.DurationVar(&o.fetchCooldown, "fetch-cooldown", 10*time.Millisecond, "River FetchCooldown")
	flag.DurationVar(&o.fetchPoll, "fetch-poll", 20*time.Millisecond, "River FetchPollInterval")
	flag.Int64Var(&o.maxBody, "max-body", 256<<10, "largest webhook body accepted, bytes")
	flag.StringVar(&o.cpuProfile, "cpuprofile", "", "write a CPU profile to FILE until the process stops (for go tool pprof)")
	flag.Parse()
	if o.cpuProfile != "" {
		f, err := os.Create(o.cpuProfile)
		if err == nil {
			err = pprof.StartCPUProfile(f)
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "riverpeer: cpu profile:", err)
			os.Exit(1)
		}
		defer f.Close()
		defer pprof.StopCPUProfile()
	}
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, o, logger); err != nil {
		logger.Error("riverpeer", "err", err)
		pprof.StopCPUProfile()
		os.Exit(1)
	}
}

// The secrets come from the environment, as oncehook's do.
func secret(name string) (string, error) {
	v := os.Getenv(name)
	if v == "" {
		return "", fmt.Errorf("%s is not set", name)
	}
	return v, nil
}

func run(ctx context.Context, o options, logger *slog.Logger) error {
	signingSecret, err := secret("STRIPE_WEBHOOK_SECRET")
	if err != nil {
		return err
	}
	crmToken, err := secret("CRM_TOKEN")
	if err != nil {
		return err
	}
	pool, err := openPool(ctx, o.databaseURL, o.poolSize)
	if err != nil {
		return err
	}
	defer pool.Close()
	if err := migrate(ctx, pool, logger); err != nil {
		return err
	}
	rc, err := startRiver(ctx, pool, o, crmToken, logger)
	if err != nil {
		return err
	}
	h := &receiver{pool: pool, river: rc, secret: signingSecret, maxBody: o.maxBody, logger: logger}
	mux := routes(h, pool)
	ln, err := net.Listen("tcp", o.listen)
	if err != nil {
		return err
	}
	return serve(ctx, ln, mux, rc, logger)
}

func openPool(ctx context.Context, databaseURL string, size int) (*pgxpool.Pool, error) {
	cfg, err := pgxpool.ParseConfig(databaseURL)
	if err != nil {
		return nil, fmt.Errorf("database url: %w", err)
	}
	cfg.MaxConns = int32(size)
	return pgxpool.NewWithConfig(ctx, cfg)
}

// startRiver starts the River client that works the default queue with o.workers
// workers, each calling the CRM with crmToken.
func startRiver(ctx context.Context, pool *pgxpool.Pool, o options, crmToken string, logger *slog.Logger) (*river.Client[pgx.Tx], error) {
	workers := river.NewWorkers()
	river.AddWorker(workers, &OpenOpportunityWorker{
		url:   o.destination + "/opportunities",
		token: crmToken,
		client: &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{
			// One kept-alive connection per worker; net/http keeps 2 by default.
			MaxIdleConnsPerHost: o.workers,
			IdleConnTimeout:     90 * time.Second,
		}},
	})
	rc, err := river.NewClient(riverpgxv5.New(pool), &river.Config{
		Queues:            map[string]river.QueueConfig{river.QueueDefault: {MaxWorkers: o.workers}},
		Workers:           workers,
		FetchCooldown:     o.fetchCooldown,
		FetchPollInterval: o.fetchPoll,
		Logger:            logger,
	})
	if err != nil {
		return nil, err
	}
	if err := rc.Start(ctx); err != nil {
		return nil, err
	}
	return rc, nil
}

// routes are the webhook and the readiness check, which pings the database.
func routes(h *receiver, pool *pgxpool.Pool) *http.ServeMux {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /hooks/stripe", h.stripe)
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, r *http.Request) {
		if err := pool.Ping(r.Context()); err != nil {
			http.Error(w, "database unavailable", http.StatusServiceUnavailable)
			return
		}
		_, _ = io.WriteString(w, "ok\n")
	})
	return mux
}

// serve answers on ln until ctx ends or serving fails; then it stops taking
// webhooks and lets River's running jobs finish, within 20 s in all.
func serve(ctx context.Context, ln net.Listener, h http.Handler, rc *river.Client[pgx.Tx], logger *slog.Logger) error {
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()

	select {
	case <-ctx.Done():
	case err := <-served:
		return err
	}
	// Stop taking webhooks, then let running jobs finish.
	sctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		logger.Warn("http shutdown", "err", err)
	}
	return rc.Stop(sctx)
}

// inboxTable is the peer's own inbox: the delivery's exact bytes, unique on the
// provider's event id.
const inboxTable = `CREATE TABLE IF NOT EXISTS deliveries (
    id          bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    event_id    text        NOT NULL UNIQUE,
    type        text        NOT NULL,
    body        bytea       NOT NULL,
    received_at timestamptz NOT NULL DEFAULT now()
)`

// migrate runs River's migrations and creates the inbox.
func migrate(ctx context.Context, pool *pgxpool.Pool, logger *slog.Logger) error {
	m, err := rivermigrate.New(riverpgxv5.New(pool), &rivermigrate.Config{Logger: logger})
	if err != nil {
		return err
	}
	if _, err := m.Migrate(ctx, rivermigrate.DirectionUp, nil); err != nil {
		return fmt.Errorf("river migrations: %w", err)
	}
	_, err = pool.Exec(ctx, inboxTable)
	return err
}

// OpenOpportunityArgs is the job: one CRM opportunity per enquiry. Only the
// enquiry id (the business key) makes it unique.
type OpenOpportunityArgs struct {
	EnquiryID string `json:"enquiry_id" river:"unique"`
	Amount    int64  `json:"amount"`
	Email     string `json:"email"`
	EventID   string `json:"event_id"`
}

func (OpenOpportunityArgs) Kind() string { return "open_opportunity" }

func (OpenOpportunityArgs) InsertOpts() river.InsertOpts {
	return river.InsertOpts{UniqueOpts: river.UniqueOpts{ByArgs: true}}
}

// receiver is POST /hooks/stripe.
type receiver struct {
	pool    *pgxpool.Pool
	river   *river.Client[pgx.Tx]
	secret  string
	maxBody int64
	logger  *slog.Logger
}

// stripeEvent is what the peer reads of a Stripe event: its id and type, and of a
// checkout the business key and what the job carries.
type stripeEvent struct {
	ID   string `json:"id"`
	Type string `json:"type"`
	Data struct {
		Object struct {
			AmountTotal     int64 `json:"amount_total"`
			CustomerDetails struct {
				Email string `json:"email"`
			} `json:"customer_details"`
			Metadata struct {
				EnquiryID string `json:"enquiry_id"`
			} `json:"metadata"`
		} `json:"object"`
	} `json:"data"`
}

// signatureTolerance is stripe-go's own default age limit.
const signatureTolerance = 5 * time.Minute

func (h *receiver) stripe(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, h.maxBody))
	if err != nil {
		http.Error(w, "body too large or unreadable", http.StatusRequestEntityTooLarge)
		return
	}
	if err := webhook.ValidatePayloadWithTolerance(body, r.Header.Get("Stripe-Signature"), h.secret, signatureTolerance); err != nil {
		http.Error(w, "signature verification failed", http.StatusBadRequest)
		return
	}
	var ev stripeEvent
	if err := json.Unmarshal(body, &ev); err != nil || ev.ID == "" {
		http.Error(w, "not a Stripe event", http.StatusBadRequest)
		return
	}
	if err := h.store(r.Context(), &ev, body); err != nil {
		h.logger.Warn("store delivery", "event_id", ev.ID, "err", err)
		http.Error(w, "storage unavailable, retry", http.StatusServiceUnavailable)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_, _ = io.WriteString(w, `{"received":true}`)
}

// store writes the delivery and, for a checkout, its job in one transaction. A
// repeat of a stored delivery changes nothing.
func (h *receiver) store(ctx context.Context, ev *stripeEvent, body []byte) error {
	tx, err := h.pool.Begin(ctx)
	if err != nil {
		return err
	}
	defer tx.Rollback(context.WithoutCancel(ctx)) //nolint:errcheck // after Commit, a no-op
	var id int64
	err = tx.QueryRow(ctx, `INSERT INTO deliveries (event_id, type, body) VALUES ($1, $2, $3)
		ON CONFLICT (event_id) DO NOTHING RETURNING id`, ev.ID, ev.Type, body).Scan(&id)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil // a repeat: already stored, and its job with it
	}
	if err != nil {
		return err
	}
	obj := &ev.Data.Object
	if ev.Type == string(stripe.EventTypeCheckoutSessionCompleted) && obj.Metadata.EnquiryID != "" {
		args := OpenOpportunityArgs{EnquiryID: obj.Metadata.EnquiryID, Amount: obj.AmountTotal,
			Email: obj.CustomerDetails.Email, EventID: ev.ID}
		if _, err := h.river.InsertTx(ctx, tx, args, nil); err != nil {
			return err
		}
	}
	return tx.Commit(ctx)
}

// OpenOpportunityWorker creates the opportunity at the CRM. The business key is
// the idempotency key and the record's reference, so a retry after a lost reply
// is answered with the record already made.
type OpenOpportunityWorker struct {
	river.WorkerDefaults[OpenOpportunityArgs]
	url, token string
	client     *http.Client
}

func (w *OpenOpportunityWorker) Work(ctx context.Context, job *river.Job[OpenOpportunityArgs]) error {
	ref := "open_opportunity:" + job.Args.EnquiryID
	payload, err := json.Marshal(map[string]any{"enquiry_id": job.Args.EnquiryID, "amount": job.Args.Amount,
		"email": job.Args.Email, "source_ref": ref})
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, w.url, bytes.NewReader(payload))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+w.token)
	req.Header.Set("Idempotency-Key", ref)
	res, err := w.client.Do(req)
	if err != nil {
		return err
	}
	defer res.Body.Close()
	_, _ = io.Copy(io.Discard, res.Body)
	switch {
	case res.StatusCode == http.StatusOK || res.StatusCode == http.StatusCreated:
		return nil
	case res.StatusCode >= 400 && res.StatusCode < 500 && res.StatusCode != http.StatusConflict &&
		res.StatusCode != http.StatusTooManyRequests:
		return river.JobCancel(fmt.Errorf("the CRM refused the opportunity: %d", res.StatusCode))
	default:
		return errors.New("the CRM answered " + res.Status) // River retries with backoff
	}
}
