// Package notify tells each owner once what waits for them: a digest mail (or a
// signed webhook) of the actions that failed, are held, or stayed uncertain a
// while, each action told once per owner, and only to an owner who may read it
// (the scope of their account; accounts.ListUsers is its one door to another stage).
//
// cmd/oncehook starts it.
package notify
