-- name: PartitionsMake :one
-- The daily partitions of @parent from @first_day to @last_day that it does not
-- have yet (see migration 00038); how many it made.
SELECT oncehook_partitions_make(@parent::text, @first_day::date, @last_day::date)::integer AS made;
