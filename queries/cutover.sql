-- name: ActionImportOne :batchmany
-- Records one operation an earlier system performed as a closed action under its
-- operation identity (oncehook import): @state is confirmed, and the destination's
-- record is its external ref. An operation that exists already is left as it is
-- and returns nothing. One row a statement, named by its client: on Citus each runs
-- on the client's shard; the rows of a file are sent together, in one transaction.
INSERT INTO actions (client, environment, source, name, business_key, key_parts, operation_key,
                     destination, params, param_values, params_sha256, state, reason, owner,
                     max_attempts, give_up_at, next_attempt_at, first_attempt_at, last_attempt_at,
                     external_ref, result)
VALUES (@client, @environment, @source, @name, @business_key, @key_parts, @operation_key,
        @destination, @params, action_param_values(@params), @params_sha256, @state, @reason, @owner,
        @max_attempts, @performed_at, @performed_at, @performed_at, @performed_at,
        @external_ref, sqlc.narg(result))
ON CONFLICT (client, operation_key) DO NOTHING
RETURNING id, operation_key;

-- name: ActionsByOperationKey :many
-- The client's actions that stand for these operations, for what an import checks
-- each line against.
SELECT id, name, state, operation_key, external_ref, params_sha256 FROM actions
WHERE client = @client AND operation_key = ANY(@operation_keys::text[]);

-- name: AuditInsertEach :batchexec
-- AuditInsert, one row of a batch sent together.
INSERT INTO audit (client, action_id, actor, act, note, detail)
VALUES (@client, @action_id, @actor, @act, @note, @detail);
