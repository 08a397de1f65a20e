-- An action's audit entries are in the partition of its rows_day (see migration
-- 00039): each statement reads that day from the action's row, or is given it,
-- and touches that one partition.

-- name: ActionRowsDay :one
-- The day of the partitions the action's rows are in.
SELECT rows_day FROM actions WHERE client = @client AND id = @id;

-- name: AuditInsert :exec
-- In @part_day, the action's rows_day (ActionRowsDay, read in the same
-- transaction: Citus plans no insert that selects it).
INSERT INTO audit (client, action_id, actor, act, note, detail, part_day)
VALUES (@client, @action_id, @actor, @act, @note, @detail, @part_day);

-- name: AuditList :many
SELECT u.* FROM audit u
WHERE u.client = @client AND u.action_id = @action_id
  AND u.part_day = (SELECT a.rows_day FROM actions a WHERE a.client = @client AND a.id = @action_id)
ORDER BY u.id;

-- name: AuditLatest :one
SELECT u.* FROM audit u
WHERE u.client = @client AND u.action_id = @action_id AND u.act = @act
  AND u.part_day = (SELECT a.rows_day FROM actions a WHERE a.client = @client AND a.id = @action_id)
ORDER BY u.id DESC LIMIT 1;

-- name: AuditLatestNotes :many
-- The newest note of each of a client's actions ids, for the queues' rows: one
-- read of the client's shard, each action's along audit_action_idx in its
-- rows_day's partition.
SELECT n.action_id, n.actor, n.note, n.at
FROM actions a
CROSS JOIN LATERAL (SELECT u.action_id, u.actor, u.note, u.at FROM audit u
                    WHERE u.client = a.client AND u.action_id = a.id AND u.part_day = a.rows_day
                      AND u.act = 'note'
                    ORDER BY u.id DESC LIMIT 1) n
WHERE a.client = @client AND a.id = ANY(@action_ids::bigint[]);

-- name: AuditLast :one
-- The newest audit entry of an action, whatever its act: what an undo undoes.
SELECT u.* FROM audit u
WHERE u.client = @client AND u.action_id = @action_id
  AND u.part_day = (SELECT a.rows_day FROM actions a WHERE a.client = @client AND a.id = @action_id)
ORDER BY u.id DESC LIMIT 1;
