package store_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/oncehook/oncehook/db"
	"github.com/oncehook/oncehook/db/dbtest"
	"github.com/oncehook/oncehook/internal/partitions"
	"github.com/oncehook/oncehook/internal/store"
)

// delivery is one row of an event insert: its identity, body and how it came.
type delivery struct {
	client, id, body, via string
	deliveries            int32
	conflict              bool
}

// today and yesterday are partition days: the migrations made both.
var (
	today     = partitions.Day(time.Now())
	yesterday = today.AddDate(0, 0, -1)
)

func eventBatch(day time.Time, ds ...delivery) db.EventInsertBatchParams {
	p := db.EventInsertBatchParams{Day: day}
	for _, d := range ds {
		sum := []byte(d.body) // the rows compare sums for equality only
		p.Clients, p.Environments = append(p.Clients, d.client), append(p.Environments, "live")
		p.Sources, p.SourceEventIds = append(p.Sources, "stripe-live"), append(p.SourceEventIds, d.id)
		p.Types, p.Bodies, p.Payloads = append(p.Types, "checkout.session.completed"), append(p.Bodies, []byte(d.body)), append(p.Payloads, []byte(d.body))
		p.BodySha256s, p.Headers = append(p.BodySha256s, sum), append(p.Headers, json.RawMessage(`{}`))
		p.OccurredAts, p.Deliveries = append(p.OccurredAts, ""), append(p.Deliveries, d.deliveries)
		p.Conflicts, p.Vias = append(p.Conflicts, d.conflict), append(p.Vias, d.via)
	}
	return p
}

// storedEvent is an event's row as the inbox's rules read it, with its bytes in
// event_bodies: the day they were written and how many rows of them it has.
type storedEvent struct {
	Client, SourceEventID, Body, Payload, Headers, Via, Status, Reason string
	Deliveries, Bodies                                                 int32
	Conflict, Queued                                                   bool
	BodyDay                                                            *time.Time
}

func storedEvents(t *testing.T, tx pgx.Tx) []storedEvent {
	t.Helper()
	rows, err := tx.Query(context.Background(), `SELECT e.client, e.source_event_id,
		coalesce(convert_from(b.body, 'UTF8'), ''), coalesce(convert_from(b.payload, 'UTF8'), ''), coalesce(b.headers::text, ''),
		e.via, e.status, e.reason, e.deliveries,
		(SELECT count(*) FROM event_bodies x WHERE x.client = e.client AND x.event_id = e.id)::integer,
		e.conflict, EXISTS (SELECT 1 FROM event_queue q WHERE q.client = e.client AND q.id = e.id), e.body_day
		FROM events e LEFT JOIN event_bodies b ON b.client = e.client AND b.event_id = e.id AND b.day = e.body_day
		ORDER BY e.client, e.source_event_id`)
	if err != nil {
		t.Fatal(err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (e storedEvent, err error) {
		err = r.Scan(&e.Client, &e.SourceEventID, &e.Body, &e.Payload, &e.Headers, &e.Via, &e.Status, &e.Reason,
			&e.Deliveries, &e.Bodies, &e.Conflict, &e.Queued, &e.BodyDay)
		return e, err
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestInsertEventsFormsAgree: both forms answer the same and store the same rows
// for new events, repeats with the same body and another, of an event stored
// today and of one stored yesterday, backfilled copies and a batch of two
// clients: a new event's bytes in today's partition, a repeat's nowhere.
func TestInsertEventsFormsAgree(t *testing.T) {
	t.Parallel()
	dbtest.SinglePostgresOnly(t, "the single Postgres's form does not run on Citus: the forms are compared where both run")
	pool := dbtest.New(t)
	yesterdays := []delivery{{client: "acme", id: "evt_old", body: `{"v":1}`, via: "webhook", deliveries: 1},
		{client: "acme", id: "evt_backfilled", body: `{"api":1}`, via: "backfill", deliveries: 1}}
	todays := []delivery{{client: "acme", id: "evt_today", body: `{"t":1}`, via: "webhook", deliveries: 1}}
	cases := map[string][]delivery{
		"new":                        {{client: "acme", id: "evt_new", body: `{"v":1}`, via: "webhook", deliveries: 1}},
		"a repeat, the same body":    {{client: "acme", id: "evt_old", body: `{"v":1}`, via: "webhook", deliveries: 2}},
		"a repeat of today's event":  {{client: "acme", id: "evt_today", body: `{"t":2}`, via: "webhook", deliveries: 1}},
		"a repeat, another body":     {{client: "acme", id: "evt_old", body: `{"v":2}`, via: "webhook", deliveries: 1}},
		"a backfilled repeat":        {{client: "acme", id: "evt_old", body: `{"api":1}`, via: "backfill", deliveries: 1}},
		"a webhook after a backfill": {{client: "acme", id: "evt_backfilled", body: `{"v":1}`, via: "webhook", deliveries: 1}},
		"folded repeats that differ": {{client: "acme", id: "evt_new", body: `{"v":1}`, via: "webhook", deliveries: 3, conflict: true}},
		"two clients, one identity":  {{client: "acme", id: "evt_x", body: `{}`, via: "webhook", deliveries: 1}, {client: "beta", id: "evt_x", body: `{}`, via: "webhook", deliveries: 1}},
		"an empty batch":             nil,
	}
	for name, ds := range cases {
		t.Run(name, func(t *testing.T) {
			setup := func(t *testing.T, tx pgx.Tx) {
				if _, err := (store.Single{}).InsertEvents(context.Background(), tx, eventBatch(yesterday, yesterdays...)); err != nil {
					t.Fatal(err)
				}
				if _, err := (store.Single{}).InsertEvents(context.Background(), tx, eventBatch(today, todays...)); err != nil {
					t.Fatal(err)
				}
			}
			type result struct {
				Replies []db.EventInsertBatchRow
				Rows    []storedEvent
			}
			agree(t, pool, setup, func(t *testing.T, s store.Store, tx pgx.Tx, _ *db.Queries) result {
				replies, err := s.InsertEvents(context.Background(), tx, eventBatch(today, ds...))
				if err != nil {
					t.Fatalf("%T: %v", s, err)
				}
				for i := range replies {
					replies[i].ID = 0 // drawn from a sequence a rollback does not give back
				}
				return result{replies, storedEvents(t, tx)}
			})
		})
	}
}

// TestClaimEventsFormsAgree: both forms claim the same received events, oldest
// first, up to the limit, one client's only, and leave the same queue behind; an
// event routed meanwhile by an older router leaves the queue without a claim.
func TestClaimEventsFormsAgree(t *testing.T) {
	t.Parallel()
	dbtest.SinglePostgresOnly(t, "the single Postgres's form does not run on Citus: the forms are compared where both run")
	pool := dbtest.New(t)
	ctx := context.Background()
	setup := func(t *testing.T, tx pgx.Tx) {
		var ds []delivery
		for _, id := range []string{"evt_1", "evt_2", "evt_3", "evt_4"} {
			ds = append(ds, delivery{client: "acme", id: id, body: `{}`, via: "webhook", deliveries: 1})
		}
		ds = append(ds, delivery{client: "beta", id: "evt_9", body: `{}`, via: "webhook", deliveries: 1})
		if _, err := (store.Single{}).InsertEvents(ctx, tx, eventBatch(today, ds...)); err != nil {
			t.Fatal(err)
		}
		exec(t, tx, `UPDATE events SET status = 'routed' WHERE source_event_id = 'evt_2'`)
	}
	for _, n := range []int{1, 3, 10} {
		agree(t, pool, setup, func(t *testing.T, s store.Store, tx pgx.Tx, q *db.Queries) []storedEvent {
			claimed, err := s.ClaimEvents(ctx, q, "acme", n)
			if err != nil {
				t.Fatalf("%T: %v", s, err)
			}
			out := []storedEvent{}
			for _, c := range claimed {
				out = append(out, storedEvent{Client: c.Client, SourceEventID: c.SourceEventID})
			}
			return append(out, storedEvents(t, tx)...)
		})
	}
}

// TestSetEventStatusesFormsAgree: both forms write the same statuses and reasons
// to a routed batch's events and to no other.
func TestSetEventStatusesFormsAgree(t *testing.T) {
	t.Parallel()
	dbtest.SinglePostgresOnly(t, "the single Postgres's form does not run on Citus: the forms are compared where both run")
	pool := dbtest.New(t)
	ctx := context.Background()
	var ids []int64
	setup := func(t *testing.T, tx pgx.Tx) {
		rows, err := (store.Single{}).InsertEvents(ctx, tx, eventBatch(today,
			delivery{client: "acme", id: "evt_1", body: `{}`, via: "webhook", deliveries: 1},
			delivery{client: "acme", id: "evt_2", body: `{}`, via: "webhook", deliveries: 1},
			delivery{client: "acme", id: "evt_3", body: `{}`, via: "webhook", deliveries: 1}))
		if err != nil {
			t.Fatal(err)
		}
		ids = ids[:0]
		for _, r := range rows {
			ids = append(ids, r.ID)
		}
	}
	agree(t, pool, setup, func(t *testing.T, s store.Store, tx pgx.Tx, q *db.Queries) []storedEvent {
		err := s.SetEventStatuses(ctx, q, db.EventSetStatusesParams{Client: "acme",
			Clients: []string{"acme", "acme"}, Ids: ids[:2], Statuses: []string{"routed", "ignored"}, Reasons: []string{"", "no rule"}})
		if err != nil {
			t.Fatalf("%T: %v", s, err)
		}
		return storedEvents(t, tx)
	})
}
