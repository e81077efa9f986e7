-- +goose Up
-- Hourly detail that stays small. rollup_hourly keeps each hour per series shape, about 0.65 rows
-- an attempt on a ledger of many services and models: it now keeps only the recent days
-- (rollup.HourlyKeep; the writer prunes older hours, and records in settings 'hourly_pruned_before'
-- the hour before which it holds nothing). The hours are kept for good per provider and model in
-- rollup_hourly_model, a few dozen rows an hour: what the incidents over a month, the spend by
-- hour and the edges of a model question read.
CREATE TABLE rollup_hourly_model (LIKE rollup_daily_model INCLUDING STORAGE);
ALTER TABLE rollup_hourly_model ALTER COLUMN bucket TYPE timestamptz,
    ADD PRIMARY KEY (project_id, bucket, provider, model, fallback_from, fallback, status, error_class),
    SET (fillfactor = 70);

-- Counted from rollup_hourly (still whole): folds wait, as the rows must match the pending ones
-- they will add to. Stop the ledgerds of the previous version before migrating: their folds would
-- add to rollup_hourly and not to rollup_hourly_model.
LOCK TABLE rollup_fold_lock IN EXCLUSIVE MODE;
INSERT INTO rollup_hourly_model (project_id, bucket, provider, model, fallback_from, fallback, status, error_class,
    attempts, requests, input_tokens, output_tokens, cache_write_tokens, cache_write_1h_tokens, cache_read_tokens,
    reasoning_tokens, cache_write_calls, cache_read_calls, cost_nanos, nocache_cost_nanos, unpriced_attempts,
    client_cost_nanos, cost_mismatch_attempts, usage_unknown_attempts, latency_sum_ms, latency_hist)
SELECT r.project_id, r.bucket, s.provider, s.model, s.fallback_from, r.fallback, r.status, r.error_class,
    sum(r.attempts), sum(r.requests), sum(r.input_tokens), sum(r.output_tokens), sum(r.cache_write_tokens),
    sum(r.cache_write_1h_tokens), sum(r.cache_read_tokens), sum(r.reasoning_tokens), sum(r.cache_write_calls),
    sum(r.cache_read_calls), sum(r.cost_nanos), sum(r.nocache_cost_nanos), sum(r.unpriced_attempts),
    sum(r.client_cost_nanos), sum(r.cost_mismatch_attempts), sum(r.usage_unknown_attempts), sum(r.latency_sum_ms),
    hist_sum(r.latency_hist)
FROM rollup_hourly r JOIN series s ON s.project_id = r.project_id AND s.id = r.series_id
GROUP BY 1, 2, 3, 4, 5, 6, 7, 8
ORDER BY 1, 2, 3, 4, 5, 6, 7, 8;
ANALYZE rollup_hourly_model;

-- +goose Down
-- Hours rollup_hourly no longer keeps stay lost: `ledgerd rollups rebuild` recounts them from the
-- raw attempts still stored.
DELETE FROM settings WHERE key = 'hourly_pruned_before';
DROP TABLE rollup_hourly_model;
