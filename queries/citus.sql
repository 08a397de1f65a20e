-- name: DatabaseMode :one
-- The database's mode (migration 00024): single, citus or citus-undistributed.
SELECT oncehook_mode()::text AS mode;

-- name: DatabaseDistribute :one
-- Distributes the tables not distributed yet by the rule of migration 00024 when
-- the database has Citus; returns the mode it leaves the database in (single
-- without Citus). db.Migrate runs it after the migrations.
SELECT oncehook_distribute()::text AS mode;
