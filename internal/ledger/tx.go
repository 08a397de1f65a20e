package ledger

import "github.com/oncehook/oncehook/db"

// Splittable says whether a group write that failed with err is worth writing
// again item by item: not when storage is unavailable, which would fail each one
// alone too, but when the database refused something, which may be one item's.
func Splittable(err error) bool { return !db.IsUnavailable(err) }
