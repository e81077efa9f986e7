-- +goose Up
-- Summaries by 5 minutes (the "Last 6 hours" charts) read the last day from a rollup of their own
-- instead of the raw attempts, which took a second or two for six hours of a 10M-record ledger
-- (docs/incidents.md). rollup_minute5 is keyed as rollup_hourly, bucket the UTC 5 minutes, and
-- holds every attempt that started at or after settings 'minutes_from' (rounded up to 5 minutes);
-- Prune moves that forward and deletes the older buckets (rollup.MinuteKeep).
-- internal/rollup/minute.go says how the writer and the fold keep it.
CREATE TABLE rollup_minute5 (LIKE rollup_hourly INCLUDING ALL);
-- Every fold updates the current buckets' rows: room on their pages keeps those updates HOT, as
-- for the other rollups (migration 00006).
ALTER TABLE rollup_minute5 SET (fillfactor = 70);

-- Pending rows now carry the first minute of their 5 minutes of the hour (NULL: the hour only, as
-- the rows pending from before this migration).
ALTER TABLE pending_rollup_hourly ADD COLUMN minute smallint;

-- The rollup starts at the next 5 minutes: it holds the attempts already stored that start from
-- then on (clocks ahead), and the writer keys every new one by its 5 minutes.
INSERT INTO settings (key, value) VALUES ('minutes_from',
    date_bin(interval '5 minutes', now() + interval '5 minutes', TIMESTAMPTZ '2000-01-01 00:00:00+00')::text)
ON CONFLICT (key) DO UPDATE SET value = excluded.value;
INSERT INTO rollup_minute5 (project_id, bucket, series_id, fallback, status, error_class, attempts, requests,
    input_tokens, output_tokens, cache_write_tokens, cache_write_1h_tokens, cache_read_tokens,
    reasoning_tokens, cache_write_calls, cache_read_calls, cost_nanos, nocache_cost_nanos,
    unpriced_attempts, client_cost_nanos, cost_mismatch_attempts, latency_sum_ms, usage_unknown_attempts,
    latency_hist)
SELECT a.project_id, date_bin(interval '5 minutes', started_at, TIMESTAMPTZ '2000-01-01 00:00:00+00'), s.shape_id, fallback, status, error_class, count(*),
    count(*) FILTER (WHERE attempt_no = 1), sum(input_tokens), sum(output_tokens), sum(cache_write_tokens),
    sum(cache_write_1h_tokens), sum(cache_read_tokens), sum(reasoning_tokens),
    count(*) FILTER (WHERE cache_write_tokens > 0), count(*) FILTER (WHERE cache_read_tokens > 0),
    coalesce(sum(cost_nanos), 0), coalesce(sum(nocache_cost_nanos), 0), count(*) FILTER (WHERE cost_nanos IS NULL),
    coalesce(sum(client_cost_nanos), 0),
    count(*) FILTER (WHERE client_cost_nanos IS NOT NULL AND cost_nanos IS NOT NULL
        AND abs(client_cost_nanos - cost_nanos) * 100 > cost_nanos),
    sum(latency_ms), count(*) FILTER (WHERE usage_unknown), hist_agg(latency_bucket(latency_ms))
FROM attempts a JOIN series s ON s.project_id = a.project_id AND s.id = a.series_id
WHERE started_at >= (SELECT value::timestamptz FROM settings WHERE key = 'minutes_from')
GROUP BY 1, 2, 3, 4, 5, 6 ORDER BY 1, 2;

-- +goose Down
DELETE FROM settings WHERE key = 'minutes_from';
ALTER TABLE pending_rollup_hourly DROP COLUMN minute;
DROP TABLE rollup_minute5;
