package alerts

import (
	"fmt"
	"strings"
	"time"

	"github.com/oncehook/oncehook/internal/ledger"
)

// Alert is what one alert tells: an outage of a destination that began, or
// that is over.
type Alert struct {
	ID          int64
	OutageID    int64
	Destination string
	Channel     string
	Kind        string // ledger.AlertDown or ledger.AlertRecovered
	OpenedAt    time.Time
	ClosedAt    *time.Time // set for a recovered alert
	Reason      string     // the last unwell answer when the breaker opened, in words
	Reopened    int        // how often it opened again within the quiet time
	OpenedBy    string     // the workers, or the person who opened it by hand
	Waiting     []Waiting  // the actions that wait for the destination, by client, most first
	URL         string     // the destination's page
	Owner       string     // the destination's owner
}

// Waiting is how many actions of a client wait for the destination.
type Waiting struct {
	Client  string `json:"client"`
	Actions int64  `json:"actions"`
}

// Down reports whether the alert says the destination went down.
func (a Alert) Down() bool { return a.Kind == ledger.AlertDown }

// DedupKey names the outage for every message about it, stable across its
// alerts and their retries: PagerDuty's dedup_key, a webhook's outage id.
func (a Alert) DedupKey() string {
	return fmt.Sprintf("oncehook/%s/outage-%d", a.Destination, a.OutageID)
}

// WaitingTotal is how many actions wait, every client.
func (a Alert) WaitingTotal() int64 {
	var n int64
	for _, w := range a.Waiting {
		n += w.Actions
	}
	return n
}

// WaitingText says how many actions of which clients wait, in words.
func (a Alert) WaitingText() string {
	if len(a.Waiting) == 0 {
		return "no action waits for it"
	}
	parts := make([]string, len(a.Waiting))
	for i, w := range a.Waiting {
		parts[i] = fmt.Sprintf("%s %d", w.Client, w.Actions)
	}
	return fmt.Sprintf("%d %s for it (%s)", a.WaitingTotal(), plural(a.WaitingTotal(), "action waits", "actions wait"),
		strings.Join(parts, ", "))
}

// Summary is the alert in one line: the subject of a mail, PagerDuty's summary.
func (a Alert) Summary() string {
	if a.Down() {
		return fmt.Sprintf("%s is down since %s UTC: %s", a.Destination, clock(a.OpenedAt), a.WaitingText())
	}
	return fmt.Sprintf("%s is back since %s UTC, after %s down", a.Destination, clock(*a.ClosedAt), a.Duration())
}

// Duration is how long the outage lasted (or has lasted, while down).
func (a Alert) Duration() time.Duration {
	end := time.Now()
	if a.ClosedAt != nil {
		end = *a.ClosedAt
	}
	return end.Sub(a.OpenedAt).Round(time.Second)
}

// Text is the alert in a few lines, for a mail or a chat message.
func (a Alert) Text() string {
	var b strings.Builder
	if a.Down() {
		fmt.Fprintf(&b, "%s is down since %s UTC", a.Destination, a.OpenedAt.UTC().Format("2006-01-02 15:04:05"))
		if a.OpenedBy != "" && a.OpenedBy != ledger.BreakerActorWorkers {
			fmt.Fprintf(&b, " (opened by hand by %s)", a.OpenedBy)
		}
		fmt.Fprintf(&b, ".\nIts breaker is open: its work is parked, and a probe asks it now and then.\n")
		fmt.Fprintf(&b, "Waiting: %s.\n", a.WaitingText())
		if a.Reason != "" {
			fmt.Fprintf(&b, "Last error: %s\n", a.Reason)
		}
	} else {
		fmt.Fprintf(&b, "%s is back since %s UTC, after %s down (from %s UTC).\n", a.Destination,
			a.ClosedAt.UTC().Format("2006-01-02 15:04:05"), a.Duration(), a.OpenedAt.UTC().Format("15:04:05"))
		fmt.Fprintf(&b, "Its breaker closed: its parked actions are released, oldest first. Waiting: %s.\n", a.WaitingText())
		if a.Reopened > 0 {
			fmt.Fprintf(&b, "It went down again %d %s within the quiet time: one outage.\n", a.Reopened, plural(int64(a.Reopened), "time", "times"))
		}
	}
	if a.URL != "" {
		fmt.Fprintf(&b, "%s\n", a.URL)
	}
	return b.String()
}

func clock(t time.Time) string { return t.UTC().Format("15:04") }

func plural(n int64, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}
