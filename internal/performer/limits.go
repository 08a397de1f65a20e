package performer

import (
	"context"
	"math"
	"sort"
	"time"

	"golang.org/x/time/rate"

	"github.com/oncehook/oncehook/internal/batch"
	"github.com/oncehook/oncehook/internal/settings"
)

// destLimit bounds one destination's calls in this process (docs/destinations.md,
// "limits"): a destination with limits has call slots of its own, so that when it is
// slow or rate-limited its actions wait for it alone and never hold the slots the
// other destinations share. Its actions are claimed only for its free slots, and
// each waits for its rate while holding its own slot only, its lease renewed.
type destLimit struct {
	name  string
	slots *batch.Slots  // limits.concurrency, or the engine's concurrency when only per_second is set
	rate  *rate.Limiter // nil without per_second
}

// newLimits returns the limits of the destinations this process calls, by name.
func newLimits(cfg *settings.Config, callable []string, concurrency int) map[string]*destLimit {
	out := map[string]*destLimit{}
	for _, d := range cfg.Destinations {
		l := d.Limits
		if l.Concurrency <= 0 && l.PerSecond <= 0 || !contains(callable, d.Name) {
			continue
		}
		n := concurrency
		if l.Concurrency > 0 {
			n = l.Concurrency
		}
		dl := &destLimit{name: d.Name, slots: batch.NewSlots(n)}
		if l.PerSecond > 0 {
			dl.rate = rate.NewLimiter(rate.Limit(l.PerSecond), max(1, int(math.Ceil(l.PerSecond))))
		}
		out[d.Name] = dl
	}
	return out
}

// limitedNames lists the limited destinations, sorted.
func limitedNames(limits map[string]*destLimit) []string {
	out := make([]string, 0, len(limits))
	for name := range limits {
		out = append(out, name)
	}
	sort.Strings(out)
	return out
}

// room is how many more calls the destination takes now.
func (l *destLimit) room() int { return l.slots.Room() }

// wait blocks until the destination's rate allows one more call, and says whether
// it had to wait at all.
func (l *destLimit) wait(ctx context.Context) (waited bool, err error) {
	if l == nil || l.rate == nil {
		return false, nil
	}
	r := l.rate.Reserve()
	if !r.OK() {
		return false, l.rate.Wait(ctx) // a burst of 0: Wait reports why
	}
	delay := r.Delay()
	if delay == 0 {
		return false, nil
	}
	t := time.NewTimer(delay)
	defer t.Stop()
	select {
	case <-t.C:
		return true, nil
	case <-ctx.Done():
		r.Cancel()
		return true, ctx.Err()
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
