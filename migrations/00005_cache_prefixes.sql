-- +goose Up
-- A prompt_hash used by a single call in its month no longer gets a rollup_cache_hourly row of its
-- own. A broken cache (a new hash on every call) made one such row per call, and the cache report
-- read tens of thousands of them a week. Those calls are now counted on their series' '' row, with
-- single_use counting them, and cache_prefixes knows every hash of a month: when a hash's second
-- call arrives, its first is moved from the '' row onto the hash's own row. So a hash has a row of
-- its own exactly when it has two or more calls in its UTC month, whatever order the calls come in.
--
-- cache_prefixes: the calls of each prompt_hash per UTC month (month is the month's first instant),
-- across the project's series, and, while calls = 1, that call's series, hour and cache sums (what a
-- move takes off the '' row). Once calls >= 2 those columns mean nothing: the writer leaves them
-- as they were, a rebuild clears them.
CREATE TABLE cache_prefixes (
    project_id         bigint NOT NULL,
    month              timestamptz NOT NULL,
    prompt_hash        text NOT NULL,
    calls              bigint NOT NULL,
    series_id          bigint,
    fallback           boolean,
    bucket             timestamptz,
    cache_write_calls  bigint,
    cache_read_calls   bigint,
    input_tokens       bigint,
    cache_write_tokens bigint,
    cache_read_tokens  bigint,
    cost_nanos         bigint,
    nocache_cost_nanos bigint,
    unpriced_attempts  bigint,
    PRIMARY KEY (project_id, month, prompt_hash)
);

-- single_use: the calls of a '' row that carried a prompt_hash used once in its month. A row whose
-- single-use calls all moved to their hashes' rows stays, with zeros.
ALTER TABLE rollup_cache_hourly ADD COLUMN single_use bigint NOT NULL DEFAULT 0;

-- Existing rollups are folded in place (their raw attempts may be gone).
INSERT INTO cache_prefixes
SELECT project_id, date_trunc('month', bucket, 'UTC'), prompt_hash, sum(calls),
    CASE WHEN sum(calls) = 1 THEN min(series_id) END,
    CASE WHEN sum(calls) = 1 THEN bool_or(fallback) END,
    CASE WHEN sum(calls) = 1 THEN min(bucket) END,
    CASE WHEN sum(calls) = 1 THEN sum(cache_write_calls) END,
    CASE WHEN sum(calls) = 1 THEN sum(cache_read_calls) END,
    CASE WHEN sum(calls) = 1 THEN sum(input_tokens) END,
    CASE WHEN sum(calls) = 1 THEN sum(cache_write_tokens) END,
    CASE WHEN sum(calls) = 1 THEN sum(cache_read_tokens) END,
    CASE WHEN sum(calls) = 1 THEN sum(cost_nanos) END,
    CASE WHEN sum(calls) = 1 THEN sum(nocache_cost_nanos) END,
    CASE WHEN sum(calls) = 1 THEN sum(unpriced_attempts) END
FROM rollup_cache_hourly
WHERE prompt_hash <> ''
GROUP BY 1, 2, 3;

INSERT INTO rollup_cache_hourly AS r (project_id, bucket, series_id, fallback, prompt_hash, calls,
    cache_write_calls, cache_read_calls, input_tokens, cache_write_tokens, cache_read_tokens,
    cost_nanos, nocache_cost_nanos, unpriced_attempts, single_use)
SELECT project_id, bucket, series_id, fallback, '', sum(calls), sum(cache_write_calls), sum(cache_read_calls),
    sum(input_tokens), sum(cache_write_tokens), sum(cache_read_tokens), sum(cost_nanos),
    sum(nocache_cost_nanos), sum(unpriced_attempts), count(*)
FROM cache_prefixes WHERE calls = 1
GROUP BY 1, 2, 3, 4
ON CONFLICT (project_id, bucket, series_id, fallback, prompt_hash) DO UPDATE SET
    calls = r.calls + excluded.calls, cache_write_calls = r.cache_write_calls + excluded.cache_write_calls,
    cache_read_calls = r.cache_read_calls + excluded.cache_read_calls,
    input_tokens = r.input_tokens + excluded.input_tokens,
    cache_write_tokens = r.cache_write_tokens + excluded.cache_write_tokens,
    cache_read_tokens = r.cache_read_tokens + excluded.cache_read_tokens,
    cost_nanos = r.cost_nanos + excluded.cost_nanos,
    nocache_cost_nanos = r.nocache_cost_nanos + excluded.nocache_cost_nanos,
    unpriced_attempts = r.unpriced_attempts + excluded.unpriced_attempts,
    single_use = r.single_use + excluded.single_use;

DELETE FROM rollup_cache_hourly r USING cache_prefixes p
WHERE p.calls = 1 AND r.project_id = p.project_id AND r.bucket = p.bucket AND r.series_id = p.series_id
    AND r.fallback = p.fallback AND r.prompt_hash = p.prompt_hash;

-- +goose Down
-- Single-use hashes stay counted on the '' rows; `ledgerd rollups rebuild` gives them rows of
-- their own again where their raw attempts are kept.
ALTER TABLE rollup_cache_hourly DROP COLUMN single_use;
DROP TABLE cache_prefixes;
