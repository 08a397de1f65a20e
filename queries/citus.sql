-- name: DatabaseMode :one
-- The database's mode (migration 00019): single, citus or citus-undistributed.
SELECT oncehook_mode()::text AS mode;

-- name: DatabaseDistribute :one
-- Distributes the tables by client when the database has Citus and they are not
-- yet; returns the mode it leaves the database in (single without Citus).
SELECT oncehook_distribute()::text AS mode;
