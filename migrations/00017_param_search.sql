-- +goose Up
-- The search box also finds an action by a value of its request: a customer's
-- email, an amount, an order number. action_param_values is every string (in
-- lower case) and every number (as its text) of an action's params, as one JSON
-- array; a search for a value is a containment test on it, which
-- actions_param_values_idx answers (jsonb_path_ops: one hash per value), so it
-- stays an index probe with a million actions. Params never change after the
-- insert, so the workers' updates of an action stay HOT.
-- +goose StatementBegin
CREATE FUNCTION action_param_values(params jsonb) RETURNS jsonb
LANGUAGE sql IMMUTABLE PARALLEL SAFE STRICT COST 1000
RETURN (SELECT coalesce(jsonb_agg(DISTINCT CASE jsonb_typeof(v) WHEN 'string' THEN to_jsonb(lower(v #>> '{}'))
                                                              ELSE to_jsonb(v #>> '{}') END), '[]'::jsonb)
        FROM jsonb_path_query(params, 'strict $.**') AS v
        WHERE jsonb_typeof(v) IN ('string', 'number'));
-- +goose StatementEnd
CREATE INDEX actions_param_values_idx ON actions USING gin (action_param_values(params) jsonb_path_ops);

-- +goose Down
DROP INDEX actions_param_values_idx;
DROP FUNCTION action_param_values(jsonb);
