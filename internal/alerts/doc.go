// Package alerts tells the people who own a destination that it is down, and
// that it is back: once per outage, on the channels the config names (Slack,
// PagerDuty's Events API v2, a signed webhook, mail), never once per action.
// The alerts are rows written by the transaction that changes the breaker
// (internal/ledger's outages); a Sender in every server and worker sends those
// that are due, each channel on its own, with retries and backoff, and records
// every attempt, so that a channel that is down delays only its own alerts and
// never the breaker or the work.
package alerts
