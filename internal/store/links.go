package store

import (
	"context"

	"github.com/oncehook/oncehook/db"
)

// LinkEvents is ActionEventLinks: one statement for the batch.
func (Single) LinkEvents(ctx context.Context, q *db.Queries, links db.ActionEventLinksParams) error {
	return q.ActionEventLinks(ctx, links)
}

// LinkEvents is ActionEventLinkOne for each link, sent together: an insert of
// rows selected from arrays runs through the coordinator, one that names its
// client runs on the client's shard.
func (Sharded) LinkEvents(ctx context.Context, q *db.Queries, links db.ActionEventLinksParams) error {
	one := make([]db.ActionEventLinkOneParams, len(links.ActionIds))
	for i := range one {
		one[i] = db.ActionEventLinkOneParams{Client: links.Clients[i], ActionID: links.ActionIds[i],
			EventID: links.EventIds[i], Params: links.Params[i], ParamsSha256: links.ParamsSha256s[i],
			Conflict: links.Conflicts[i]}
	}
	var first error
	q.ActionEventLinkOne(ctx, one).Exec(func(_ int, err error) {
		if first == nil {
			first = err
		}
	})
	return first
}
