-- name: PartitionsMake :one
-- The daily partitions of @parent from @first_day to @last_day that it does not
-- have yet (see migration 00038); how many it made.
SELECT oncehook_partitions_make(@parent::text, @first_day::date, @last_day::date)::integer AS made;

-- name: PartitionsPast :many
-- The daily partitions of @parent wholly past a window that ends at @before
-- (see migration 00040), oldest first.
SELECT p.name::text AS name, p.day::date AS day, p.detach_pending::boolean AS detach_pending
FROM oncehook_partitions_past(@parent::text, @before::date) p;
