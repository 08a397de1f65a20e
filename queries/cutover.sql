-- The import of operations an earlier system performed (oncehook import,
-- internal/cutover): a file's lines are staged in import_lines within the
-- import's transaction, checked in bulk and loaded with one statement. Every
-- statement names the client, so on Citus each runs on the client's shard.

-- name: ImportLinesCopy :copyfrom
INSERT INTO import_lines (client, run, line, environment, source, name, business_key, key_parts,
                          operation_key, destination, params, params_sha256, owner, max_attempts,
                          performed_at, external_ref, result)
VALUES (@client, @run, @line, @environment, @source, @name, @business_key, @key_parts,
        @operation_key, @destination, @params, @params_sha256, @owner, @max_attempts,
        @performed_at, @external_ref, @result);

-- name: ImportLinesRepeating :many
-- The lines of a run that repeat an earlier line's operation with another record
-- or other params, each with that earlier line (its first): up to @max_rows.
SELECT l.line, f.line AS first_line, l.name, l.business_key
FROM import_lines l
JOIN LATERAL (SELECT x.line, x.external_ref, x.params_sha256 FROM import_lines x
              WHERE x.client = l.client AND x.run = l.run AND x.operation_key = l.operation_key
              ORDER BY x.line LIMIT 1) f ON true
WHERE l.client = @client AND l.run = @run AND l.line <> f.line
  AND (l.external_ref <> f.external_ref OR l.params_sha256 <> f.params_sha256)
ORDER BY l.line
LIMIT @max_rows;

-- name: ImportLinesAgainstActions :many
-- The operations of a run (each at its first line) that an existing action stands
-- for otherwise than the line says: the action is not done (@done_states), or
-- holds another record, or, where both are known, other params (an operation
-- imported or routed with params has their hash; one imported without has none).
-- Up to @max_rows. An action that stands for the operation the same way is
-- "already recorded" and left as it is.
SELECT f.line, f.name, f.business_key, f.external_ref, a.id AS action_id, a.state,
       a.external_ref AS action_ref
FROM (SELECT DISTINCT ON (l.operation_key) l.line, l.name, l.business_key, l.operation_key,
             l.external_ref, l.params_sha256
      FROM import_lines l WHERE l.client = @client AND l.run = @run
      ORDER BY l.operation_key, l.line) f
JOIN actions a ON a.client = @client AND a.operation_key = f.operation_key
WHERE NOT (a.state = ANY(@done_states::text[]) AND a.external_ref = f.external_ref
           AND (length(f.params_sha256) = 0 OR length(a.params_sha256) = 0 OR f.params_sha256 = a.params_sha256))
ORDER BY f.line
LIMIT @max_rows;

-- name: ImportLinesCount :one
-- A run's lines, the operations they name, and how many of those an action
-- stands for already.
SELECT (SELECT count(*) FROM import_lines l WHERE l.client = @client AND l.run = @run)::bigint AS lines,
       (SELECT count(DISTINCT l.operation_key) FROM import_lines l WHERE l.client = @client AND l.run = @run)::bigint AS operations,
       (SELECT count(*) FROM actions a
        WHERE a.client = @client
          AND a.operation_key IN (SELECT l.operation_key FROM import_lines l WHERE l.client = @client AND l.run = @run))::bigint AS existing;

-- name: ImportLinesLoad :exec
-- Records the run's operations as actions in @state (confirmed), each as its
-- first line says, created at @imported_at (which names them for
-- ImportLinesAudit, which counts them: on Citus the count of rows an INSERT ...
-- SELECT reports is of the rows it tried); an operation an action stands for
-- already is left as it is.
INSERT INTO actions (client, environment, source, name, business_key, key_parts, operation_key,
                     destination, params, param_values, params_sha256, state, reason, owner,
                     max_attempts, give_up_at, next_attempt_at, first_attempt_at, last_attempt_at,
                     external_ref, result, created_at, updated_at, state_since, imported_from)
SELECT DISTINCT ON (l.operation_key)
       l.client, l.environment, l.source, l.name, l.business_key, l.key_parts, l.operation_key,
       l.destination, l.params, action_param_values(l.params), l.params_sha256, @state, @reason, l.owner,
       l.max_attempts, l.performed_at, l.performed_at, l.performed_at, l.performed_at,
       l.external_ref, l.result, @imported_at, @imported_at, @imported_at, @file::text
FROM import_lines l
WHERE l.client = @client AND l.run = @run
ORDER BY l.operation_key, l.line
ON CONFLICT (client, operation_key) DO NOTHING;

-- name: ImportLinesAudit :execrows
-- The audit entry of each action ImportLinesLoad created (at @imported_at), with
-- the file and line it came from.
INSERT INTO audit (client, action_id, actor, act, note, detail, part_day)
SELECT a.client, a.id, @actor, @act, @note,
       jsonb_build_object('file', @file::text, 'line', f.line, 'performed_at', f.performed_at), a.rows_day
FROM (SELECT DISTINCT ON (l.operation_key) l.client, l.operation_key, l.line, l.performed_at
      FROM import_lines l WHERE l.client = @client AND l.run = @run
      ORDER BY l.operation_key, l.line) f
JOIN actions a ON a.client = f.client AND a.operation_key = f.operation_key
WHERE a.client = @client AND a.created_at = @imported_at;

-- name: ImportLinesClear :exec
-- Deletes a run's staged lines, before its transaction commits.
DELETE FROM import_lines WHERE client = @client AND run = @run;

-- name: ImportLinesFreshByAction :many
-- How many of a run's operations no action stands for yet, by action name.
SELECT f.name, count(*)::bigint AS n
FROM (SELECT DISTINCT ON (l.operation_key) l.operation_key, l.name FROM import_lines l
      WHERE l.client = @client AND l.run = @run
      ORDER BY l.operation_key, l.line) f
WHERE NOT EXISTS (SELECT 1 FROM actions a WHERE a.client = @client AND a.operation_key = f.operation_key)
GROUP BY f.name
ORDER BY f.name;
