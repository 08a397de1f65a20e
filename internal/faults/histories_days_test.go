package faults

import (
	"context"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/oncehook/oncehook/db"
	"github.com/oncehook/oncehook/internal/partitions"
)

// The clock the histories move is the days of what is stored (see withDays).
// The histories' config keeps bodies two days and attempts and audit thirty, so
// a move of 3 days puts the bodies past their window and one of 40 the
// attempts and audit too; the times the rows record are left as they are, so
// the identities (remember) and the closed actions (retention.actions) stay
// and the checks see every one.
const historyRetention = "\nretention: {actions: 720h, drop_bodies_after: 48h}\n"

// historyClients are the clients of the histories' config: the days are moved a
// client at a time, as the carry does on Citus.
var historyClients = []string{"acme"}

// moveDays makes every row of the tables partitioned by day n days older, as a
// clock moved n days on would find it: the event bodies with their events'
// body_day, and each action's attempts and audit with its rows_day. An action
// a worker holds is left where it is, as the retention's carry leaves it (the
// worker records into the day it claimed): it is as if it had been made later.
// The partitions of the days moved to are made first.
func (h *history) moveDays(n int) {
	var bodies, actions int64
	h.retryDB("make the partitions of the days moved to", func(ctx context.Context) error {
		return h.makeDaysBack(ctx, n)
	})
	for _, client := range historyClients {
		h.retryDB("move the event bodies' days", func(ctx context.Context) error {
			tag, err := h.w.pool.Exec(ctx, `WITH b AS (
				UPDATE event_bodies SET day = day - $2::integer WHERE client = $1)
				UPDATE events SET body_day = body_day - $2::integer WHERE client = $1 AND body_day IS NOT NULL`,
				client, n)
			bodies = tag.RowsAffected()
			return err
		})
		h.retryDB("move the actions' days", func(ctx context.Context) error {
			return pgx.BeginFunc(ctx, h.w.pool, func(tx pgx.Tx) error {
				// Locked first, then moved by statements that see every row
				// committed before the lock: an attempt or an audit line written
				// while the lock was awaited moves with its action.
				rows, err := tx.Query(ctx, `SELECT id FROM actions WHERE client = $1 AND state <> 'processing'
					FOR UPDATE SKIP LOCKED`, client)
				if err != nil {
					return err
				}
				ids, err := pgx.CollectRows(rows, pgx.RowTo[int64])
				if err != nil {
					return err
				}
				for _, table := range []string{"attempts", "audit"} {
					if _, err := tx.Exec(ctx, `UPDATE `+table+` SET part_day = part_day - $3::integer
						WHERE client = $1 AND action_id = ANY($2)`, client, ids, n); err != nil {
						return fmt.Errorf("%s: %w", table, err)
					}
				}
				tag, err := tx.Exec(ctx, `UPDATE actions SET rows_day = rows_day - $3::integer
					WHERE client = $1 AND id = ANY($2)`, client, ids, n)
				actions = tag.RowsAffected()
				return err
			})
		})
	}
	h.note("   %d events' bodies and %d actions' rows are %d days older", bodies, actions, n)
}

// makeDaysBack makes the partitions of every day a row is in, and of today,
// moved n days back.
func (h *history) makeDaysBack(ctx context.Context, n int) error {
	rows, err := h.w.pool.Query(ctx, `SELECT day FROM event_bodies UNION SELECT part_day FROM attempts
		UNION SELECT part_day FROM audit UNION SELECT rows_day FROM actions`)
	if err != nil {
		return err
	}
	days, err := pgx.CollectRows(rows, pgx.RowTo[time.Time])
	if err != nil {
		return err
	}
	days = append(days, partitions.Day(time.Now()))
	q := db.New(h.w.pool)
	for _, d := range days {
		back := partitions.Day(d).AddDate(0, 0, -n)
		if _, err := partitions.Make(ctx, q, back, back); err != nil {
			return err
		}
	}
	return nil
}

// prunePass runs `oncehook prune` as the server's schedule would, while the
// history goes on, and waits for it. A pass that fails is tried again (Postgres
// may have been restarted just before); one that never succeeds fails the history.
func (h *history) prunePass() {
	deadline := time.Now().Add(2 * time.Minute)
	for try := 1; ; try++ {
		p := startProcess(h.t, fmt.Sprintf("prune-%d", try), h.w.env(), "prune", "--config", h.w.config(freePort(h.t)))
		p.wait(2 * time.Minute)
		out := strings.TrimSpace(p.out.String())
		if p.err == nil {
			h.note("   pruned: %s", strings.ReplaceAll(out, "\n", "; "))
			h.countPass(out)
			return
		}
		h.note("   prune failed (%v): %s", p.err, tail(out, 600))
		if time.Now().After(deadline) {
			h.t.Errorf("retention pass failed for 2 minutes: %v\n%s", p.err, tail(out, 2000))
			return
		}
		time.Sleep(200 * time.Millisecond) // before the next pass
	}
}

// prunedRx reads what a retention pass dropped and carried from its output.
var prunedRx = regexp.MustCompile(`dropped (\d+) days of event bodies \((\d+) bodies still needed carried forward\), ` +
	`(\d+) days of attempts and audit \((\d+) actions' rows carried forward\); (\d+) days kept`)

// countPass adds what a retention pass printed to the history's tally.
func (h *history) countPass(out string) {
	m := prunedRx.FindStringSubmatch(out)
	if m == nil {
		h.t.Errorf("a retention pass printed no line of what it dropped:\n%s", out)
		return
	}
	n := func(i int) int { v, _ := strconv.Atoi(m[i]); return v }
	h.tally.bodyDays += n(1)
	h.tally.bodiesCarried += n(2)
	h.tally.rowDays += n(3)
	h.tally.actionsCarried += n(4)
	h.tally.daysKept += n(5)
}

// checkPasses returns a violation when the history moved the clock past a
// window before a retention pass and no pass dropped (or kept, an action of it
// held) a day past it: the pass would have proved nothing.
func (h *history) checkPasses() []string {
	moved, past := 0, map[string]bool{}
	for _, o := range h.ops {
		switch o.Kind {
		case opDays:
			moved += o.N
		case opRetention:
			past["bodies"] = past["bodies"] || moved >= 3
			past["attempts and audit"] = past["attempts and audit"] || moved >= 31
		}
	}
	var v []string
	if past["bodies"] && h.tally.bodyDays == 0 {
		v = append(v, "the clock moved past the bodies' window before a retention pass, but no day of bodies was dropped")
	}
	if past["attempts and audit"] && h.tally.rowDays+h.tally.daysKept == 0 {
		v = append(v, "the clock moved past the attempts' window before a retention pass, but no day of attempts was dropped or kept")
	}
	return v
}

// checkDays returns the violations of what the tables partitioned by day must
// keep, whatever the clock and the retention passes did:
//   - every attempt and audit line is in its action's day (a reader finds it),
//     and has its action;
//   - every event not routed, or linked to an action that is not final (a retry
//     or a correction may read it), has its body.
func (h *history) checkDays() []string {
	v := h.queryStrings(`
		SELECT 'attempt ' || t.id || ' of action ' || t.action_id || ' is in ' || t.part_day || ', its action in ' ||
		       coalesce(a.rows_day::text, 'none: the action is gone')
		FROM attempts t LEFT JOIN actions a ON a.client = t.client AND a.id = t.action_id
		WHERE a.rows_day IS DISTINCT FROM t.part_day
		UNION ALL
		SELECT 'audit line ' || u.id || ' (' || u.act || ') of action ' || u.action_id || ' is in ' || u.part_day ||
		       ', its action in ' || coalesce(a.rows_day::text, 'none: the action is gone')
		FROM audit u LEFT JOIN actions a ON a.client = u.client AND a.id = u.action_id
		WHERE a.rows_day IS DISTINCT FROM u.part_day`)
	// The events without a body, and the open actions' events, apart: Citus
	// plans no correlated subquery between them.
	bodiless := map[string]string{} // client/id -> the event, in words
	rows, err := h.w.pool.Query(context.Background(), `SELECT e.client || '/' || e.id, e.status,
			e.source_event_id || ' (' || e.status || ', body in ' || coalesce(e.body_day::text, 'its row') || ')'
		FROM events e LEFT JOIN event_bodies b ON b.client = e.client AND b.event_id = e.id AND b.day = e.body_day
		WHERE e.body IS NULL AND b.event_id IS NULL`)
	if err != nil {
		h.t.Fatalf("check the bodies: %v", err)
	}
	var key, status, what string
	if _, err := pgx.ForEachRow(rows, []any{&key, &status, &what}, func() error {
		bodiless[key] = what
		if status == "received" {
			v = append(v, "event "+what+" is not routed yet but has lost its body")
		}
		return nil
	}); err != nil {
		h.t.Fatalf("check the bodies: %v", err)
	}
	for _, l := range h.queryStrings(`SELECT ae.client || '/' || ae.event_id || ' action ' || a.id || ' is ' || a.state
		FROM action_events ae JOIN actions a ON a.client = ae.client AND a.id = ae.action_id
		WHERE a.state NOT IN ('confirmed', 'resolved', 'cancelled')`) {
		key, open, _ := strings.Cut(l, " ")
		if what, ok := bodiless[key]; ok {
			v = append(v, "event "+what+" has lost its body while its "+open)
		}
	}
	slices.Sort(v)
	return v
}

// queryStrings runs a query of one text column and returns its rows.
func (h *history) queryStrings(sql string) []string {
	h.t.Helper()
	rows, err := h.w.pool.Query(context.Background(), sql)
	if err != nil {
		h.t.Fatalf("check the days: %v", err)
	}
	out, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		h.t.Fatalf("check the days: %v", err)
	}
	return out
}
