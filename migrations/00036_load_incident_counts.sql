-- +goose Up
-- The incidents read their minutes from the load rollup instead of the raw attempts: it now keeps
-- a fallback model's attempts apart from the model's own (fallback, and fallback_from: the model
-- they stood in for) and counts per minute the calls (first attempts), failed attempts (status
-- error), answers (status ok), the cost of the priced attempts that gave no answer and the
-- unpriced attempts. internal/rollup/load.go says what each column holds.
ALTER TABLE rollup_load_minute
    ADD COLUMN fallback      boolean NOT NULL DEFAULT false,
    ADD COLUMN fallback_from text NOT NULL DEFAULT '',
    ADD COLUMN calls         bigint NOT NULL DEFAULT 0,
    ADD COLUMN failed        bigint NOT NULL DEFAULT 0,
    ADD COLUMN answered      bigint NOT NULL DEFAULT 0,
    ADD COLUMN wasted_nanos  bigint NOT NULL DEFAULT 0,
    ADD COLUMN unpriced_attempts bigint NOT NULL DEFAULT 0;
ALTER TABLE rollup_load_minute DROP CONSTRAINT rollup_load_minute_pkey,
    ADD PRIMARY KEY (project_id, bucket, org, provider, model, service, fallback, fallback_from);

-- The deltas still pending lack the new key and counts; their attempts are stored, and counted
-- below with the rest. The pending table is made again in the rollup's new shape.
DROP TABLE pending_load_minute;
CREATE TABLE pending_load_minute (LIKE rollup_load_minute);
ALTER TABLE pending_load_minute ADD COLUMN day date NOT NULL;
ALTER TABLE pending_load_minute SET (autovacuum_vacuum_scale_factor = 0, autovacuum_vacuum_threshold = 5000);

-- Recount the minutes of every month whose raw attempts exist (partitions are months, dropped
-- whole); the minutes of dropped months keep their load and count no calls.
CREATE TEMP TABLE load_months ON COMMIT DROP AS
    SELECT DISTINCT project_id, date_trunc('month', bucket, 'UTC') AS month FROM rollup_load_minute;
DELETE FROM load_months m WHERE NOT EXISTS (SELECT 1 FROM attempts a WHERE a.project_id = m.project_id
    AND a.started_at >= m.month AND a.started_at < (m.month AT TIME ZONE 'UTC' + interval '1 month') AT TIME ZONE 'UTC');
DELETE FROM rollup_load_minute r USING load_months m
    WHERE r.project_id = m.project_id AND date_trunc('month', r.bucket, 'UTC') = m.month;
-- rollup.LoadRebuildSQL as of this version.
INSERT INTO rollup_load_minute (project_id, bucket, org, provider, model, service, fallback, fallback_from, requests, rate_limited, input_tokens, output_tokens, calls, failed, answered, wasted_nanos, unpriced_attempts, requests_remaining, requests_limit, tokens_remaining, tokens_limit, input_tokens_remaining, input_tokens_limit, output_tokens_remaining, output_tokens_limit) SELECT a.project_id, date_trunc('minute', started_at, 'UTC'), coalesce(a.org, ''), s.provider, s.model, s.service, a.fallback, s.fallback_from, count(*), count(*) FILTER (WHERE http_status = 429 OR error_class = 'rate_limited'), sum8(input_tokens + cache_write_tokens + cache_read_tokens), sum8(output_tokens), count(*) FILTER (WHERE attempt_no = 1), count(*) FILTER (WHERE status = 'error'), count(*) FILTER (WHERE status = 'ok'), coalesce(sum(cost_nanos) FILTER (WHERE status <> 'ok'), 0), count(*) FILTER (WHERE cost_nanos IS NULL), (min(ARRAY[ratelimit_remaining_requests::numeric(40,28) / ratelimit_limit_requests, -ratelimit_limit_requests, ratelimit_remaining_requests]) FILTER (WHERE ratelimit_limit_requests IS NOT NULL))[3]::int8 AS requests_remaining, (-(min(ARRAY[ratelimit_remaining_requests::numeric(40,28) / ratelimit_limit_requests, -ratelimit_limit_requests, ratelimit_remaining_requests]) FILTER (WHERE ratelimit_limit_requests IS NOT NULL))[2])::int8 AS requests_limit, (min(ARRAY[ratelimit_remaining_tokens::numeric(40,28) / ratelimit_limit_tokens, -ratelimit_limit_tokens, ratelimit_remaining_tokens]) FILTER (WHERE ratelimit_limit_tokens IS NOT NULL))[3]::int8 AS tokens_remaining, (-(min(ARRAY[ratelimit_remaining_tokens::numeric(40,28) / ratelimit_limit_tokens, -ratelimit_limit_tokens, ratelimit_remaining_tokens]) FILTER (WHERE ratelimit_limit_tokens IS NOT NULL))[2])::int8 AS tokens_limit, (min(ARRAY[ratelimit_remaining_input_tokens::numeric(40,28) / ratelimit_limit_input_tokens, -ratelimit_limit_input_tokens, ratelimit_remaining_input_tokens]) FILTER (WHERE ratelimit_limit_input_tokens IS NOT NULL))[3]::int8 AS input_tokens_remaining, (-(min(ARRAY[ratelimit_remaining_input_tokens::numeric(40,28) / ratelimit_limit_input_tokens, -ratelimit_limit_input_tokens, ratelimit_remaining_input_tokens]) FILTER (WHERE ratelimit_limit_input_tokens IS NOT NULL))[2])::int8 AS input_tokens_limit, (min(ARRAY[ratelimit_remaining_output_tokens::numeric(40,28) / ratelimit_limit_output_tokens, -ratelimit_limit_output_tokens, ratelimit_remaining_output_tokens]) FILTER (WHERE ratelimit_limit_output_tokens IS NOT NULL))[3]::int8 AS output_tokens_remaining, (-(min(ARRAY[ratelimit_remaining_output_tokens::numeric(40,28) / ratelimit_limit_output_tokens, -ratelimit_limit_output_tokens, ratelimit_remaining_output_tokens]) FILTER (WHERE ratelimit_limit_output_tokens IS NOT NULL))[2])::int8 AS output_tokens_limit FROM attempts a JOIN series s ON s.project_id = a.project_id AND s.id = a.series_id GROUP BY 1, 2, 3, 4, 5, 6, 7, 8 ORDER BY 1, 2;
ANALYZE rollup_load_minute;

-- +goose Down
-- The minutes lose the counts and are summed over the fallback key. Deltas still pending are
-- dropped: `ledgerd rollups rebuild` recounts them.
CREATE TEMP TABLE load_rows ON COMMIT DROP AS
    SELECT project_id, bucket, org, provider, model, service, sum8(requests) AS requests, sum8(rate_limited) AS rate_limited,
        sum8(input_tokens) AS input_tokens, sum8(output_tokens) AS output_tokens,
        (min(ARRAY[requests_remaining::numeric(40,28) / requests_limit, -requests_limit, requests_remaining]) FILTER (WHERE requests_limit IS NOT NULL))[3]::int8 AS requests_remaining,
        (-(min(ARRAY[requests_remaining::numeric(40,28) / requests_limit, -requests_limit, requests_remaining]) FILTER (WHERE requests_limit IS NOT NULL))[2])::int8 AS requests_limit,
        (min(ARRAY[tokens_remaining::numeric(40,28) / tokens_limit, -tokens_limit, tokens_remaining]) FILTER (WHERE tokens_limit IS NOT NULL))[3]::int8 AS tokens_remaining,
        (-(min(ARRAY[tokens_remaining::numeric(40,28) / tokens_limit, -tokens_limit, tokens_remaining]) FILTER (WHERE tokens_limit IS NOT NULL))[2])::int8 AS tokens_limit,
        (min(ARRAY[input_tokens_remaining::numeric(40,28) / input_tokens_limit, -input_tokens_limit, input_tokens_remaining]) FILTER (WHERE input_tokens_limit IS NOT NULL))[3]::int8 AS input_tokens_remaining,
        (-(min(ARRAY[input_tokens_remaining::numeric(40,28) / input_tokens_limit, -input_tokens_limit, input_tokens_remaining]) FILTER (WHERE input_tokens_limit IS NOT NULL))[2])::int8 AS input_tokens_limit,
        (min(ARRAY[output_tokens_remaining::numeric(40,28) / output_tokens_limit, -output_tokens_limit, output_tokens_remaining]) FILTER (WHERE output_tokens_limit IS NOT NULL))[3]::int8 AS output_tokens_remaining,
        (-(min(ARRAY[output_tokens_remaining::numeric(40,28) / output_tokens_limit, -output_tokens_limit, output_tokens_remaining]) FILTER (WHERE output_tokens_limit IS NOT NULL))[2])::int8 AS output_tokens_limit
    FROM rollup_load_minute GROUP BY 1, 2, 3, 4, 5, 6;
DELETE FROM rollup_load_minute;
ALTER TABLE rollup_load_minute DROP CONSTRAINT rollup_load_minute_pkey,
    DROP COLUMN fallback, DROP COLUMN fallback_from, DROP COLUMN calls, DROP COLUMN failed, DROP COLUMN answered,
    DROP COLUMN wasted_nanos, DROP COLUMN unpriced_attempts,
    ADD PRIMARY KEY (project_id, bucket, org, provider, model, service);
INSERT INTO rollup_load_minute SELECT * FROM load_rows;
DROP TABLE pending_load_minute;
CREATE TABLE pending_load_minute (LIKE rollup_load_minute);
ALTER TABLE pending_load_minute ADD COLUMN day date NOT NULL;
ALTER TABLE pending_load_minute SET (autovacuum_vacuum_scale_factor = 0, autovacuum_vacuum_threshold = 5000);
