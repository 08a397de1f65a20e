// Package metrics is oncehook's Prometheus metrics, all named oncehook_*: what the
// stages count as they go, and the gauges read from the database at scrape time.
package metrics

import (
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/oncehook/oncehook/db"
	"github.com/oncehook/oncehook/internal/ledger"
)

// Metrics are oncehook's Prometheus metrics, all named oncehook_*. A nil *Metrics
// records nothing, so tests and tools can leave it out.
type Metrics struct {
	Registry *prometheus.Registry

	deliveries      *prometheus.CounterVec
	ingestSeconds   prometheus.Histogram
	ingestBatch     prometheus.Histogram
	attempts        *prometheus.CounterVec
	attemptSeconds  *prometheus.HistogramVec
	reconciles      *prometheus.CounterVec
	leaseRecoveries *prometheus.CounterVec
	backfillPasses  *prometheus.CounterVec
	backfillEvents  *prometheus.CounterVec
	oauthRefreshes  *prometheus.CounterVec
	breakerChanges  *prometheus.CounterVec
}

// New registers every metric, including the gauges read from the database
// at scrape time (actions by state and queue, oldest age, held per destination).
func New(pool *pgxpool.Pool) *Metrics {
	m := &Metrics{
		Registry: prometheus.NewRegistry(),
		deliveries: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "oncehook_deliveries_total",
			Help: "Webhook deliveries by source and outcome (new, duplicate, conflict, rejected, handshake).",
		}, []string{"source", "outcome", "reason"}),
		ingestSeconds: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "oncehook_ingest_duration_seconds",
			Help:    "Time from receiving a webhook to acknowledging it.",
			Buckets: []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5},
		}),
		ingestBatch: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "oncehook_ingest_batch_size",
			Help:    "Deliveries written per group commit.",
			Buckets: []float64{1, 2, 4, 8, 16, 32, 64, 128},
		}),
		attempts: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "oncehook_attempts_total",
			Help: "Destination calls by destination and observed outcome (a row of the decision table).",
		}, []string{"destination", "outcome"}),
		attemptSeconds: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "oncehook_attempt_duration_seconds",
			Help:    "Destination call latency.",
			Buckets: prometheus.DefBuckets,
		}, []string{"destination"}),
		reconciles: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "oncehook_reconcile_total",
			Help: "Reconciliations of uncertain actions by outcome.",
		}, []string{"outcome"}),
		leaseRecoveries: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "oncehook_lease_recoveries_total",
			Help: "Expired leases recovered, by the state the action went to.",
		}, []string{"to"}),
		backfillPasses: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "oncehook_backfill_passes_total",
			Help: "Backfill passes by source and outcome (ok, unauthorized, rate_limited, unavailable, error).",
		}, []string{"source", "outcome"}),
		backfillEvents: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "oncehook_backfill_events_total",
			Help: "What backfill passes found, by source: listed by the provider, missing from the inbox, stored, redelivered.",
		}, []string{"source", "result"}),
		oauthRefreshes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "oncehook_oauth_refreshes_total",
			Help: "OAuth2 token requests by destination and result (refreshed, refused, unavailable, connected).",
		}, []string{"destination", "result"}),
		breakerChanges: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "oncehook_breaker_transitions_total",
			Help: "Changes of a destination's breaker that this process made, by the state it went to (open, half_open, closed).",
		}, []string{"destination", "to"}),
	}
	m.Registry.MustRegister(m.breakerChanges, m.deliveries, m.ingestSeconds, m.ingestBatch, m.attempts, m.attemptSeconds,
		m.reconciles, m.leaseRecoveries, m.backfillPasses, m.backfillEvents, m.oauthRefreshes, &ledgerCollector{pool: pool},
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

// Delivery counts one webhook: outcome new, duplicate, conflict, rejected (with
// the reason: signature, unknown_source, too_large, slow_body, invalid, unavailable)
// or handshake (an endpoint validation answered, nothing stored).
func (m *Metrics) Delivery(source, outcome, reason string, took time.Duration) {
	if m == nil {
		return
	}
	m.deliveries.WithLabelValues(source, outcome, reason).Inc()
	if outcome != "rejected" {
		m.ingestSeconds.Observe(took.Seconds())
	}
}

// IngestBatch records the size of one group commit.
func (m *Metrics) IngestBatch(n int) {
	if m != nil {
		m.ingestBatch.Observe(float64(n))
	}
}

// Attempt counts one destination call.
func (m *Metrics) Attempt(destination string, obs ledger.Observation, took time.Duration) {
	if m == nil {
		return
	}
	m.attempts.WithLabelValues(destination, obs.Code()).Inc()
	m.attemptSeconds.WithLabelValues(destination).Observe(took.Seconds())
}

// Reconcile counts one reconciliation outcome.
func (m *Metrics) Reconcile(obs ledger.Observation) {
	if m != nil {
		m.reconciles.WithLabelValues(obs.Code()).Inc()
	}
}

// LeaseRecovered counts one recovered lease.
func (m *Metrics) LeaseRecovered(to string) {
	if m != nil {
		m.leaseRecoveries.WithLabelValues(to).Inc()
	}
}

// BackfillPass counts one backfill pass and what it found.
func (m *Metrics) BackfillPass(r ledger.BackfillResult) {
	if m == nil {
		return
	}
	outcome := "ok"
	var pe *ledger.ProviderError
	switch {
	case r.Err == nil:
	case errors.As(r.Err, &pe) && (pe.Status == 401 || pe.Status == 403 && pe.RetryAfter == 0):
		outcome = "unauthorized"
	case errors.As(r.Err, &pe) && pe.Status == 429 || pe != nil && pe.RetryAfter > 0:
		outcome = "rate_limited"
	case errors.As(r.Err, &pe) && (pe.Status == 0 || pe.Status >= 500):
		outcome = "unavailable"
	default:
		outcome = "error"
	}
	m.backfillPasses.WithLabelValues(r.Source, outcome).Inc()
	for result, n := range map[string]int{"listed": r.Listed, "missing": r.Missing, "stored": r.Stored, "redelivered": r.Redelivered} {
		m.backfillEvents.WithLabelValues(r.Source, result).Add(float64(n))
	}
}

// ledgerCollector reads the open actions at scrape time. Closed actions are not
// counted here: their number only grows, and counting it would scan the ledger.
type ledgerCollector struct {
	pool *pgxpool.Pool
}

var (
	descActions = prometheus.NewDesc("oncehook_actions", "Open actions by state and queue.",
		[]string{"state", "queue"}, nil)
	descOldest = prometheus.NewDesc("oncehook_queue_oldest_age_seconds", "Age of the oldest action in each queue.",
		[]string{"queue"}, nil)
	descHeld = prometheus.NewDesc("oncehook_held_actions", "Actions held because their destination is disconnected.",
		[]string{"destination"}, nil)
	descBreaker = prometheus.NewDesc("oncehook_breaker_state",
		"A destination's breaker: 0 closed, 1 half-open (a probe is out), 2 open (its actions are parked).",
		[]string{"destination"}, nil)
	descUp = prometheus.NewDesc("oncehook_database_up", "1 when the database answered this scrape.", nil, nil)
)

func (c *ledgerCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- descActions
	ch <- descOldest
	ch <- descHeld
	ch <- descBreaker
	ch <- descUp
}

func (c *ledgerCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	q := db.New(c.pool)
	rows, err := q.MetricsOpenActions(ctx)
	if err != nil {
		ch <- prometheus.MustNewConstMetric(descUp, prometheus.GaugeValue, 0)
		return
	}
	ch <- prometheus.MustNewConstMetric(descUp, prometheus.GaugeValue, 1)
	counts := map[string]int64{}
	oldest := map[string]float64{ledger.QueueOutstanding: 0, ledger.QueueUncertain: 0, ledger.QueueFailed: 0}
	for _, r := range rows {
		counts[r.State] = r.N
		q := ledger.QueueOf(r.State)
		oldest[q] = max(oldest[q], r.OldestSeconds)
	}
	for queue, states := range ledger.QueueStates {
		for _, s := range states {
			ch <- prometheus.MustNewConstMetric(descActions, prometheus.GaugeValue, float64(counts[s]), s, queue)
		}
		ch <- prometheus.MustNewConstMetric(descOldest, prometheus.GaugeValue, oldest[queue], queue)
	}
	held, err := q.MetricsHeldByDestination(ctx)
	if err != nil {
		return
	}
	for _, h := range held {
		ch <- prometheus.MustNewConstMetric(descHeld, prometheus.GaugeValue, float64(h.N), h.Destination)
	}
	breakers, err := ledger.Breakers(ctx, q)
	if err != nil {
		return
	}
	for _, b := range breakers {
		ch <- prometheus.MustNewConstMetric(descBreaker, prometheus.GaugeValue, BreakerGauge(b.State), b.Destination)
	}
}

// BreakerGauge is a breaker's state as oncehook_breaker_state reports it: 0
// closed, 1 half-open, 2 open.
func BreakerGauge(state string) float64 {
	switch state {
	case ledger.BreakerOpen:
		return 2
	case ledger.BreakerHalfOpen:
		return 1
	}
	return 0
}

// BreakerChanged counts one change of a destination's breaker this process made.
func (m *Metrics) BreakerChanged(destination, to string) {
	if m != nil {
		m.breakerChanges.WithLabelValues(destination, to).Inc()
	}
}

// OAuthRefresh counts one OAuth2 token request of destination.
func (m *Metrics) OAuthRefresh(destination, result string) {
	if m != nil {
		m.oauthRefreshes.WithLabelValues(destination, result).Inc()
	}
}
