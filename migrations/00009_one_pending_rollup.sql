-- +goose Up
-- One pending table for the rollups instead of five. An ingest commit now writes one row per UTC
-- hour, local day and series key to pending_rollup_hourly (day is the local date of the attempts
-- it sums, in the timezone of daily rollups), and the fold sums those rows into rollup_hourly,
-- rollup_daily and the narrow daily rollups alike: a commit inserts about a third of the pending
-- rows it did, and a fold deletes and sums a third. An hour can hold two local days (a timezone
-- with a half-hour offset), hence day in the row, not derived from the hour.
--
-- The deltas pending in the old layout are folded here first. Stop the ledgerds of the previous
-- version before migrating: their commits would fail on the new layout (answered with 503, so the
-- records are sent again, not lost).
LOCK TABLE rollup_fold_lock IN EXCLUSIVE MODE;
LOCK TABLE pending_rollup_hourly, pending_rollup_daily, pending_rollup_daily_model, pending_rollup_daily_service,
    pending_rollup_daily_tenant IN ACCESS EXCLUSIVE MODE;
INSERT INTO rollup_hourly AS r (project_id, bucket, series_id, fallback, status, error_class,
        attempts, requests, input_tokens, output_tokens, cache_write_tokens, cache_write_1h_tokens,
        cache_read_tokens, reasoning_tokens, cache_write_calls, cache_read_calls, cost_nanos,
        nocache_cost_nanos, unpriced_attempts, client_cost_nanos, cost_mismatch_attempts,
        latency_sum_ms, latency_hist)
SELECT
    project_id, bucket, series_id, fallback, status, error_class, sum8(attempts), sum8(requests),
    sum8(input_tokens), sum8(output_tokens), sum8(cache_write_tokens), sum8(cache_write_1h_tokens),
    sum8(cache_read_tokens), sum8(reasoning_tokens), sum8(cache_write_calls),
    sum8(cache_read_calls), sum8(cost_nanos), sum8(nocache_cost_nanos), sum8(unpriced_attempts),
    sum8(client_cost_nanos), sum8(cost_mismatch_attempts), sum8(latency_sum_ms),
    hist_sum(latency_hist)
FROM pending_rollup_hourly GROUP BY 1, 2, 3, 4, 5, 6 ORDER BY 1, 2, 3, 4, 5, 6
ON CONFLICT (project_id, bucket, series_id, fallback, status, error_class) DO UPDATE SET
    attempts = r.attempts + excluded.attempts, requests = r.requests + excluded.requests,
    input_tokens = r.input_tokens + excluded.input_tokens,
    output_tokens = r.output_tokens + excluded.output_tokens,
    cache_write_tokens = r.cache_write_tokens + excluded.cache_write_tokens,
    cache_write_1h_tokens = r.cache_write_1h_tokens + excluded.cache_write_1h_tokens,
    cache_read_tokens = r.cache_read_tokens + excluded.cache_read_tokens,
    reasoning_tokens = r.reasoning_tokens + excluded.reasoning_tokens,
    cache_write_calls = r.cache_write_calls + excluded.cache_write_calls,
    cache_read_calls = r.cache_read_calls + excluded.cache_read_calls,
    cost_nanos = r.cost_nanos + excluded.cost_nanos,
    nocache_cost_nanos = r.nocache_cost_nanos + excluded.nocache_cost_nanos,
    unpriced_attempts = r.unpriced_attempts + excluded.unpriced_attempts,
    client_cost_nanos = r.client_cost_nanos + excluded.client_cost_nanos,
    cost_mismatch_attempts = r.cost_mismatch_attempts + excluded.cost_mismatch_attempts,
    latency_sum_ms = r.latency_sum_ms + excluded.latency_sum_ms,
    latency_hist = hist_merge(r.latency_hist, excluded.latency_hist);

INSERT INTO rollup_daily AS r (project_id, bucket, series_id, fallback, status, error_class,
        attempts, requests, input_tokens, output_tokens, cache_write_tokens, cache_write_1h_tokens,
        cache_read_tokens, reasoning_tokens, cache_write_calls, cache_read_calls, cost_nanos,
        nocache_cost_nanos, unpriced_attempts, client_cost_nanos, cost_mismatch_attempts,
        latency_sum_ms, latency_hist)
SELECT
    project_id, bucket, series_id, fallback, status, error_class, sum8(attempts), sum8(requests),
    sum8(input_tokens), sum8(output_tokens), sum8(cache_write_tokens), sum8(cache_write_1h_tokens),
    sum8(cache_read_tokens), sum8(reasoning_tokens), sum8(cache_write_calls),
    sum8(cache_read_calls), sum8(cost_nanos), sum8(nocache_cost_nanos), sum8(unpriced_attempts),
    sum8(client_cost_nanos), sum8(cost_mismatch_attempts), sum8(latency_sum_ms),
    hist_sum(latency_hist)
FROM pending_rollup_daily GROUP BY 1, 2, 3, 4, 5, 6 ORDER BY 1, 2, 3, 4, 5, 6
ON CONFLICT (project_id, bucket, series_id, fallback, status, error_class) DO UPDATE SET
    attempts = r.attempts + excluded.attempts, requests = r.requests + excluded.requests,
    input_tokens = r.input_tokens + excluded.input_tokens,
    output_tokens = r.output_tokens + excluded.output_tokens,
    cache_write_tokens = r.cache_write_tokens + excluded.cache_write_tokens,
    cache_write_1h_tokens = r.cache_write_1h_tokens + excluded.cache_write_1h_tokens,
    cache_read_tokens = r.cache_read_tokens + excluded.cache_read_tokens,
    reasoning_tokens = r.reasoning_tokens + excluded.reasoning_tokens,
    cache_write_calls = r.cache_write_calls + excluded.cache_write_calls,
    cache_read_calls = r.cache_read_calls + excluded.cache_read_calls,
    cost_nanos = r.cost_nanos + excluded.cost_nanos,
    nocache_cost_nanos = r.nocache_cost_nanos + excluded.nocache_cost_nanos,
    unpriced_attempts = r.unpriced_attempts + excluded.unpriced_attempts,
    client_cost_nanos = r.client_cost_nanos + excluded.client_cost_nanos,
    cost_mismatch_attempts = r.cost_mismatch_attempts + excluded.cost_mismatch_attempts,
    latency_sum_ms = r.latency_sum_ms + excluded.latency_sum_ms,
    latency_hist = hist_merge(r.latency_hist, excluded.latency_hist);

INSERT INTO rollup_daily_model AS r (project_id, bucket, provider, model, fallback_from, fallback, status, error_class,
        attempts, requests, input_tokens, output_tokens, cache_write_tokens, cache_write_1h_tokens,
        cache_read_tokens, reasoning_tokens, cache_write_calls, cache_read_calls, cost_nanos,
        nocache_cost_nanos, unpriced_attempts, client_cost_nanos, cost_mismatch_attempts,
        latency_sum_ms, latency_hist)
SELECT
    project_id, bucket, provider, model, fallback_from, fallback, status, error_class,
    sum8(attempts), sum8(requests), sum8(input_tokens), sum8(output_tokens),
    sum8(cache_write_tokens), sum8(cache_write_1h_tokens), sum8(cache_read_tokens),
    sum8(reasoning_tokens), sum8(cache_write_calls), sum8(cache_read_calls), sum8(cost_nanos),
    sum8(nocache_cost_nanos), sum8(unpriced_attempts), sum8(client_cost_nanos),
    sum8(cost_mismatch_attempts), sum8(latency_sum_ms), hist_sum(latency_hist)
FROM pending_rollup_daily_model GROUP BY 1, 2, 3, 4, 5, 6, 7, 8 ORDER BY 1, 2, 3, 4, 5, 6, 7, 8
ON CONFLICT (project_id, bucket, provider, model, fallback_from, fallback, status, error_class) DO UPDATE SET
    attempts = r.attempts + excluded.attempts, requests = r.requests + excluded.requests,
    input_tokens = r.input_tokens + excluded.input_tokens,
    output_tokens = r.output_tokens + excluded.output_tokens,
    cache_write_tokens = r.cache_write_tokens + excluded.cache_write_tokens,
    cache_write_1h_tokens = r.cache_write_1h_tokens + excluded.cache_write_1h_tokens,
    cache_read_tokens = r.cache_read_tokens + excluded.cache_read_tokens,
    reasoning_tokens = r.reasoning_tokens + excluded.reasoning_tokens,
    cache_write_calls = r.cache_write_calls + excluded.cache_write_calls,
    cache_read_calls = r.cache_read_calls + excluded.cache_read_calls,
    cost_nanos = r.cost_nanos + excluded.cost_nanos,
    nocache_cost_nanos = r.nocache_cost_nanos + excluded.nocache_cost_nanos,
    unpriced_attempts = r.unpriced_attempts + excluded.unpriced_attempts,
    client_cost_nanos = r.client_cost_nanos + excluded.client_cost_nanos,
    cost_mismatch_attempts = r.cost_mismatch_attempts + excluded.cost_mismatch_attempts,
    latency_sum_ms = r.latency_sum_ms + excluded.latency_sum_ms,
    latency_hist = hist_merge(r.latency_hist, excluded.latency_hist);

INSERT INTO rollup_daily_service AS r (project_id, bucket, service, operation, fallback, status, error_class,
        attempts, requests, input_tokens, output_tokens, cache_write_tokens, cache_write_1h_tokens,
        cache_read_tokens, reasoning_tokens, cache_write_calls, cache_read_calls, cost_nanos,
        nocache_cost_nanos, unpriced_attempts, client_cost_nanos, cost_mismatch_attempts,
        latency_sum_ms, latency_hist)
SELECT
    project_id, bucket, service, operation, fallback, status, error_class, sum8(attempts),
    sum8(requests), sum8(input_tokens), sum8(output_tokens), sum8(cache_write_tokens),
    sum8(cache_write_1h_tokens), sum8(cache_read_tokens), sum8(reasoning_tokens),
    sum8(cache_write_calls), sum8(cache_read_calls), sum8(cost_nanos), sum8(nocache_cost_nanos),
    sum8(unpriced_attempts), sum8(client_cost_nanos), sum8(cost_mismatch_attempts),
    sum8(latency_sum_ms), hist_sum(latency_hist)
FROM pending_rollup_daily_service GROUP BY 1, 2, 3, 4, 5, 6, 7 ORDER BY 1, 2, 3, 4, 5, 6, 7
ON CONFLICT (project_id, bucket, service, operation, fallback, status, error_class) DO UPDATE SET
    attempts = r.attempts + excluded.attempts, requests = r.requests + excluded.requests,
    input_tokens = r.input_tokens + excluded.input_tokens,
    output_tokens = r.output_tokens + excluded.output_tokens,
    cache_write_tokens = r.cache_write_tokens + excluded.cache_write_tokens,
    cache_write_1h_tokens = r.cache_write_1h_tokens + excluded.cache_write_1h_tokens,
    cache_read_tokens = r.cache_read_tokens + excluded.cache_read_tokens,
    reasoning_tokens = r.reasoning_tokens + excluded.reasoning_tokens,
    cache_write_calls = r.cache_write_calls + excluded.cache_write_calls,
    cache_read_calls = r.cache_read_calls + excluded.cache_read_calls,
    cost_nanos = r.cost_nanos + excluded.cost_nanos,
    nocache_cost_nanos = r.nocache_cost_nanos + excluded.nocache_cost_nanos,
    unpriced_attempts = r.unpriced_attempts + excluded.unpriced_attempts,
    client_cost_nanos = r.client_cost_nanos + excluded.client_cost_nanos,
    cost_mismatch_attempts = r.cost_mismatch_attempts + excluded.cost_mismatch_attempts,
    latency_sum_ms = r.latency_sum_ms + excluded.latency_sum_ms,
    latency_hist = hist_merge(r.latency_hist, excluded.latency_hist);

INSERT INTO rollup_daily_tenant AS r (project_id, bucket, tenant, fallback, status, error_class,
        attempts, requests, input_tokens, output_tokens, cache_write_tokens, cache_write_1h_tokens,
        cache_read_tokens, reasoning_tokens, cache_write_calls, cache_read_calls, cost_nanos,
        nocache_cost_nanos, unpriced_attempts, client_cost_nanos, cost_mismatch_attempts,
        latency_sum_ms, latency_hist)
SELECT
    project_id, bucket, tenant, fallback, status, error_class, sum8(attempts), sum8(requests),
    sum8(input_tokens), sum8(output_tokens), sum8(cache_write_tokens), sum8(cache_write_1h_tokens),
    sum8(cache_read_tokens), sum8(reasoning_tokens), sum8(cache_write_calls),
    sum8(cache_read_calls), sum8(cost_nanos), sum8(nocache_cost_nanos), sum8(unpriced_attempts),
    sum8(client_cost_nanos), sum8(cost_mismatch_attempts), sum8(latency_sum_ms),
    hist_sum(latency_hist)
FROM pending_rollup_daily_tenant GROUP BY 1, 2, 3, 4, 5, 6 ORDER BY 1, 2, 3, 4, 5, 6
ON CONFLICT (project_id, bucket, tenant, fallback, status, error_class) DO UPDATE SET
    attempts = r.attempts + excluded.attempts, requests = r.requests + excluded.requests,
    input_tokens = r.input_tokens + excluded.input_tokens,
    output_tokens = r.output_tokens + excluded.output_tokens,
    cache_write_tokens = r.cache_write_tokens + excluded.cache_write_tokens,
    cache_write_1h_tokens = r.cache_write_1h_tokens + excluded.cache_write_1h_tokens,
    cache_read_tokens = r.cache_read_tokens + excluded.cache_read_tokens,
    reasoning_tokens = r.reasoning_tokens + excluded.reasoning_tokens,
    cache_write_calls = r.cache_write_calls + excluded.cache_write_calls,
    cache_read_calls = r.cache_read_calls + excluded.cache_read_calls,
    cost_nanos = r.cost_nanos + excluded.cost_nanos,
    nocache_cost_nanos = r.nocache_cost_nanos + excluded.nocache_cost_nanos,
    unpriced_attempts = r.unpriced_attempts + excluded.unpriced_attempts,
    client_cost_nanos = r.client_cost_nanos + excluded.client_cost_nanos,
    cost_mismatch_attempts = r.cost_mismatch_attempts + excluded.cost_mismatch_attempts,
    latency_sum_ms = r.latency_sum_ms + excluded.latency_sum_ms,
    latency_hist = hist_merge(r.latency_hist, excluded.latency_hist);

DROP TABLE pending_rollup_daily, pending_rollup_daily_model, pending_rollup_daily_service, pending_rollup_daily_tenant;
DELETE FROM pending_rollup_hourly;
ALTER TABLE pending_rollup_hourly ADD COLUMN day date NOT NULL;

-- +goose Down
LOCK TABLE rollup_fold_lock IN EXCLUSIVE MODE;
LOCK TABLE pending_rollup_hourly IN ACCESS EXCLUSIVE MODE;
INSERT INTO rollup_hourly AS r (project_id, bucket, series_id, fallback, status, error_class,
        attempts, requests, input_tokens, output_tokens, cache_write_tokens, cache_write_1h_tokens,
        cache_read_tokens, reasoning_tokens, cache_write_calls, cache_read_calls, cost_nanos,
        nocache_cost_nanos, unpriced_attempts, client_cost_nanos, cost_mismatch_attempts,
        latency_sum_ms, latency_hist)
SELECT
    project_id, bucket, series_id, fallback, status, error_class, sum8(attempts), sum8(requests),
    sum8(input_tokens), sum8(output_tokens), sum8(cache_write_tokens), sum8(cache_write_1h_tokens),
    sum8(cache_read_tokens), sum8(reasoning_tokens), sum8(cache_write_calls),
    sum8(cache_read_calls), sum8(cost_nanos), sum8(nocache_cost_nanos), sum8(unpriced_attempts),
    sum8(client_cost_nanos), sum8(cost_mismatch_attempts), sum8(latency_sum_ms),
    hist_sum(latency_hist)
FROM pending_rollup_hourly GROUP BY 1, 2, 3, 4, 5, 6 ORDER BY 1, 2, 3, 4, 5, 6
ON CONFLICT (project_id, bucket, series_id, fallback, status, error_class) DO UPDATE SET
    attempts = r.attempts + excluded.attempts, requests = r.requests + excluded.requests,
    input_tokens = r.input_tokens + excluded.input_tokens,
    output_tokens = r.output_tokens + excluded.output_tokens,
    cache_write_tokens = r.cache_write_tokens + excluded.cache_write_tokens,
    cache_write_1h_tokens = r.cache_write_1h_tokens + excluded.cache_write_1h_tokens,
    cache_read_tokens = r.cache_read_tokens + excluded.cache_read_tokens,
    reasoning_tokens = r.reasoning_tokens + excluded.reasoning_tokens,
    cache_write_calls = r.cache_write_calls + excluded.cache_write_calls,
    cache_read_calls = r.cache_read_calls + excluded.cache_read_calls,
    cost_nanos = r.cost_nanos + excluded.cost_nanos,
    nocache_cost_nanos = r.nocache_cost_nanos + excluded.nocache_cost_nanos,
    unpriced_attempts = r.unpriced_attempts + excluded.unpriced_attempts,
    client_cost_nanos = r.client_cost_nanos + excluded.client_cost_nanos,
    cost_mismatch_attempts = r.cost_mismatch_attempts + excluded.cost_mismatch_attempts,
    latency_sum_ms = r.latency_sum_ms + excluded.latency_sum_ms,
    latency_hist = hist_merge(r.latency_hist, excluded.latency_hist);

INSERT INTO rollup_daily AS r (project_id, bucket, series_id, fallback, status, error_class,
        attempts, requests, input_tokens, output_tokens, cache_write_tokens, cache_write_1h_tokens,
        cache_read_tokens, reasoning_tokens, cache_write_calls, cache_read_calls, cost_nanos,
        nocache_cost_nanos, unpriced_attempts, client_cost_nanos, cost_mismatch_attempts,
        latency_sum_ms, latency_hist)
SELECT
    project_id, day, series_id, fallback, status, error_class, sum8(attempts), sum8(requests),
    sum8(input_tokens), sum8(output_tokens), sum8(cache_write_tokens), sum8(cache_write_1h_tokens),
    sum8(cache_read_tokens), sum8(reasoning_tokens), sum8(cache_write_calls),
    sum8(cache_read_calls), sum8(cost_nanos), sum8(nocache_cost_nanos), sum8(unpriced_attempts),
    sum8(client_cost_nanos), sum8(cost_mismatch_attempts), sum8(latency_sum_ms),
    hist_sum(latency_hist)
FROM pending_rollup_hourly GROUP BY 1, 2, 3, 4, 5, 6 ORDER BY 1, 2, 3, 4, 5, 6
ON CONFLICT (project_id, bucket, series_id, fallback, status, error_class) DO UPDATE SET
    attempts = r.attempts + excluded.attempts, requests = r.requests + excluded.requests,
    input_tokens = r.input_tokens + excluded.input_tokens,
    output_tokens = r.output_tokens + excluded.output_tokens,
    cache_write_tokens = r.cache_write_tokens + excluded.cache_write_tokens,
    cache_write_1h_tokens = r.cache_write_1h_tokens + excluded.cache_write_1h_tokens,
    cache_read_tokens = r.cache_read_tokens + excluded.cache_read_tokens,
    reasoning_tokens = r.reasoning_tokens + excluded.reasoning_tokens,
    cache_write_calls = r.cache_write_calls + excluded.cache_write_calls,
    cache_read_calls = r.cache_read_calls + excluded.cache_read_calls,
    cost_nanos = r.cost_nanos + excluded.cost_nanos,
    nocache_cost_nanos = r.nocache_cost_nanos + excluded.nocache_cost_nanos,
    unpriced_attempts = r.unpriced_attempts + excluded.unpriced_attempts,
    client_cost_nanos = r.client_cost_nanos + excluded.client_cost_nanos,
    cost_mismatch_attempts = r.cost_mismatch_attempts + excluded.cost_mismatch_attempts,
    latency_sum_ms = r.latency_sum_ms + excluded.latency_sum_ms,
    latency_hist = hist_merge(r.latency_hist, excluded.latency_hist);

INSERT INTO rollup_daily_model AS r (project_id, bucket, provider, model, fallback_from, fallback, status, error_class,
        attempts, requests, input_tokens, output_tokens, cache_write_tokens, cache_write_1h_tokens,
        cache_read_tokens, reasoning_tokens, cache_write_calls, cache_read_calls, cost_nanos,
        nocache_cost_nanos, unpriced_attempts, client_cost_nanos, cost_mismatch_attempts,
        latency_sum_ms, latency_hist)
SELECT
    p.project_id, p.day, s.provider, s.model, s.fallback_from, p.fallback, p.status, p.error_class,
    sum8(attempts), sum8(requests), sum8(input_tokens), sum8(output_tokens),
    sum8(cache_write_tokens), sum8(cache_write_1h_tokens), sum8(cache_read_tokens),
    sum8(reasoning_tokens), sum8(cache_write_calls), sum8(cache_read_calls), sum8(cost_nanos),
    sum8(nocache_cost_nanos), sum8(unpriced_attempts), sum8(client_cost_nanos),
    sum8(cost_mismatch_attempts), sum8(latency_sum_ms), hist_sum(latency_hist)
FROM pending_rollup_hourly p JOIN series s ON s.project_id = p.project_id AND s.id = p.series_id GROUP BY 1, 2, 3, 4, 5, 6, 7, 8 ORDER BY 1, 2, 3, 4, 5, 6, 7, 8
ON CONFLICT (project_id, bucket, provider, model, fallback_from, fallback, status, error_class) DO UPDATE SET
    attempts = r.attempts + excluded.attempts, requests = r.requests + excluded.requests,
    input_tokens = r.input_tokens + excluded.input_tokens,
    output_tokens = r.output_tokens + excluded.output_tokens,
    cache_write_tokens = r.cache_write_tokens + excluded.cache_write_tokens,
    cache_write_1h_tokens = r.cache_write_1h_tokens + excluded.cache_write_1h_tokens,
    cache_read_tokens = r.cache_read_tokens + excluded.cache_read_tokens,
    reasoning_tokens = r.reasoning_tokens + excluded.reasoning_tokens,
    cache_write_calls = r.cache_write_calls + excluded.cache_write_calls,
    cache_read_calls = r.cache_read_calls + excluded.cache_read_calls,
    cost_nanos = r.cost_nanos + excluded.cost_nanos,
    nocache_cost_nanos = r.nocache_cost_nanos + excluded.nocache_cost_nanos,
    unpriced_attempts = r.unpriced_attempts + excluded.unpriced_attempts,
    client_cost_nanos = r.client_cost_nanos + excluded.client_cost_nanos,
    cost_mismatch_attempts = r.cost_mismatch_attempts + excluded.cost_mismatch_attempts,
    latency_sum_ms = r.latency_sum_ms + excluded.latency_sum_ms,
    latency_hist = hist_merge(r.latency_hist, excluded.latency_hist);

INSERT INTO rollup_daily_service AS r (project_id, bucket, service, operation, fallback, status, error_class,
        attempts, requests, input_tokens, output_tokens, cache_write_tokens, cache_write_1h_tokens,
        cache_read_tokens, reasoning_tokens, cache_write_calls, cache_read_calls, cost_nanos,
        nocache_cost_nanos, unpriced_attempts, client_cost_nanos, cost_mismatch_attempts,
        latency_sum_ms, latency_hist)
SELECT
    p.project_id, p.day, s.service, s.operation, p.fallback, p.status, p.error_class,
    sum8(attempts), sum8(requests), sum8(input_tokens), sum8(output_tokens),
    sum8(cache_write_tokens), sum8(cache_write_1h_tokens), sum8(cache_read_tokens),
    sum8(reasoning_tokens), sum8(cache_write_calls), sum8(cache_read_calls), sum8(cost_nanos),
    sum8(nocache_cost_nanos), sum8(unpriced_attempts), sum8(client_cost_nanos),
    sum8(cost_mismatch_attempts), sum8(latency_sum_ms), hist_sum(latency_hist)
FROM pending_rollup_hourly p JOIN series s ON s.project_id = p.project_id AND s.id = p.series_id GROUP BY 1, 2, 3, 4, 5, 6, 7 ORDER BY 1, 2, 3, 4, 5, 6, 7
ON CONFLICT (project_id, bucket, service, operation, fallback, status, error_class) DO UPDATE SET
    attempts = r.attempts + excluded.attempts, requests = r.requests + excluded.requests,
    input_tokens = r.input_tokens + excluded.input_tokens,
    output_tokens = r.output_tokens + excluded.output_tokens,
    cache_write_tokens = r.cache_write_tokens + excluded.cache_write_tokens,
    cache_write_1h_tokens = r.cache_write_1h_tokens + excluded.cache_write_1h_tokens,
    cache_read_tokens = r.cache_read_tokens + excluded.cache_read_tokens,
    reasoning_tokens = r.reasoning_tokens + excluded.reasoning_tokens,
    cache_write_calls = r.cache_write_calls + excluded.cache_write_calls,
    cache_read_calls = r.cache_read_calls + excluded.cache_read_calls,
    cost_nanos = r.cost_nanos + excluded.cost_nanos,
    nocache_cost_nanos = r.nocache_cost_nanos + excluded.nocache_cost_nanos,
    unpriced_attempts = r.unpriced_attempts + excluded.unpriced_attempts,
    client_cost_nanos = r.client_cost_nanos + excluded.client_cost_nanos,
    cost_mismatch_attempts = r.cost_mismatch_attempts + excluded.cost_mismatch_attempts,
    latency_sum_ms = r.latency_sum_ms + excluded.latency_sum_ms,
    latency_hist = hist_merge(r.latency_hist, excluded.latency_hist);

INSERT INTO rollup_daily_tenant AS r (project_id, bucket, tenant, fallback, status, error_class,
        attempts, requests, input_tokens, output_tokens, cache_write_tokens, cache_write_1h_tokens,
        cache_read_tokens, reasoning_tokens, cache_write_calls, cache_read_calls, cost_nanos,
        nocache_cost_nanos, unpriced_attempts, client_cost_nanos, cost_mismatch_attempts,
        latency_sum_ms, latency_hist)
SELECT
    p.project_id, p.day, s.tenant, p.fallback, p.status, p.error_class, sum8(attempts),
    sum8(requests), sum8(input_tokens), sum8(output_tokens), sum8(cache_write_tokens),
    sum8(cache_write_1h_tokens), sum8(cache_read_tokens), sum8(reasoning_tokens),
    sum8(cache_write_calls), sum8(cache_read_calls), sum8(cost_nanos), sum8(nocache_cost_nanos),
    sum8(unpriced_attempts), sum8(client_cost_nanos), sum8(cost_mismatch_attempts),
    sum8(latency_sum_ms), hist_sum(latency_hist)
FROM pending_rollup_hourly p JOIN series s ON s.project_id = p.project_id AND s.id = p.series_id GROUP BY 1, 2, 3, 4, 5, 6 ORDER BY 1, 2, 3, 4, 5, 6
ON CONFLICT (project_id, bucket, tenant, fallback, status, error_class) DO UPDATE SET
    attempts = r.attempts + excluded.attempts, requests = r.requests + excluded.requests,
    input_tokens = r.input_tokens + excluded.input_tokens,
    output_tokens = r.output_tokens + excluded.output_tokens,
    cache_write_tokens = r.cache_write_tokens + excluded.cache_write_tokens,
    cache_write_1h_tokens = r.cache_write_1h_tokens + excluded.cache_write_1h_tokens,
    cache_read_tokens = r.cache_read_tokens + excluded.cache_read_tokens,
    reasoning_tokens = r.reasoning_tokens + excluded.reasoning_tokens,
    cache_write_calls = r.cache_write_calls + excluded.cache_write_calls,
    cache_read_calls = r.cache_read_calls + excluded.cache_read_calls,
    cost_nanos = r.cost_nanos + excluded.cost_nanos,
    nocache_cost_nanos = r.nocache_cost_nanos + excluded.nocache_cost_nanos,
    unpriced_attempts = r.unpriced_attempts + excluded.unpriced_attempts,
    client_cost_nanos = r.client_cost_nanos + excluded.client_cost_nanos,
    cost_mismatch_attempts = r.cost_mismatch_attempts + excluded.cost_mismatch_attempts,
    latency_sum_ms = r.latency_sum_ms + excluded.latency_sum_ms,
    latency_hist = hist_merge(r.latency_hist, excluded.latency_hist);

DELETE FROM pending_rollup_hourly;
ALTER TABLE pending_rollup_hourly DROP COLUMN day;
CREATE TABLE pending_rollup_daily (LIKE rollup_daily);
CREATE TABLE pending_rollup_daily_model (LIKE rollup_daily_model);
CREATE TABLE pending_rollup_daily_service (LIKE rollup_daily_service);
CREATE TABLE pending_rollup_daily_tenant (LIKE rollup_daily_tenant);
ALTER TABLE pending_rollup_daily SET (autovacuum_vacuum_scale_factor = 0, autovacuum_vacuum_threshold = 5000);
ALTER TABLE pending_rollup_daily_model SET (autovacuum_vacuum_scale_factor = 0, autovacuum_vacuum_threshold = 5000);
ALTER TABLE pending_rollup_daily_service SET (autovacuum_vacuum_scale_factor = 0, autovacuum_vacuum_threshold = 5000);
ALTER TABLE pending_rollup_daily_tenant SET (autovacuum_vacuum_scale_factor = 0, autovacuum_vacuum_threshold = 5000);
