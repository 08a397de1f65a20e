// Package retention removes what is past its window: closed actions with their
// attempts and audit, the events no open action needs, resources, and expired
// sessions (through accounts.DeleteExpiredSessions, its one door to another stage).
//
// cmd/oncehook runs it on a schedule and as "oncehook prune".
package retention
