-- +goose Up
-- Narrow daily rollups: rollup_daily summed over every series column but a few. rollup_daily_model
-- keeps provider, model and fallback_from; rollup_daily_service keeps service and operation;
-- rollup_daily_tenant keeps tenant. A month's chart by day and model (or service, or tenant) reads
-- about a tenth of the rows and histograms of rollup_daily from one of them. The summary reads one whenever its question needs no other series
-- column. They are kept in the same transactions as rollup_daily (writer, reprice, rebuild), from
-- the list ingest.DailyBy.
CREATE TABLE rollup_daily_model (
    project_id             bigint NOT NULL,
    bucket                 date NOT NULL,
    provider               text NOT NULL,
    model                  text NOT NULL,
    fallback_from          text NOT NULL,
    fallback               boolean NOT NULL,
    status                 attempt_status NOT NULL,
    error_class            error_class NOT NULL,
    attempts               bigint NOT NULL,
    requests               bigint NOT NULL,
    input_tokens           bigint NOT NULL,
    output_tokens          bigint NOT NULL,
    cache_write_tokens     bigint NOT NULL,
    cache_write_1h_tokens  bigint NOT NULL,
    cache_read_tokens      bigint NOT NULL,
    reasoning_tokens       bigint NOT NULL,
    cache_write_calls      bigint NOT NULL,
    cache_read_calls       bigint NOT NULL,
    cost_nanos             bigint NOT NULL,
    nocache_cost_nanos     bigint NOT NULL,
    unpriced_attempts      bigint NOT NULL,
    client_cost_nanos      bigint NOT NULL,
    cost_mismatch_attempts bigint NOT NULL,
    latency_sum_ms         bigint NOT NULL,
    latency_hist           bigint[] NOT NULL,
    PRIMARY KEY (project_id, bucket, provider, model, fallback_from, fallback, status, error_class)
) WITH (fillfactor = 70);

CREATE TABLE rollup_daily_service (LIKE rollup_daily_model INCLUDING STORAGE);
ALTER TABLE rollup_daily_service DROP COLUMN provider, DROP COLUMN model, DROP COLUMN fallback_from,
    ADD COLUMN service text NOT NULL, ADD COLUMN operation text NOT NULL,
    ADD PRIMARY KEY (project_id, bucket, service, operation, fallback, status, error_class),
    SET (fillfactor = 70);

CREATE TABLE rollup_daily_tenant (LIKE rollup_daily_model INCLUDING STORAGE);
ALTER TABLE rollup_daily_tenant DROP COLUMN provider, DROP COLUMN model, DROP COLUMN fallback_from,
    ADD COLUMN tenant text NOT NULL,
    ADD PRIMARY KEY (project_id, bucket, tenant, fallback, status, error_class),
    SET (fillfactor = 70);

INSERT INTO rollup_daily_model
SELECT r.project_id, r.bucket, s.provider, s.model, s.fallback_from, r.fallback, r.status, r.error_class,
    sum(r.attempts), sum(r.requests), sum(r.input_tokens), sum(r.output_tokens), sum(r.cache_write_tokens),
    sum(r.cache_write_1h_tokens), sum(r.cache_read_tokens), sum(r.reasoning_tokens), sum(r.cache_write_calls),
    sum(r.cache_read_calls), sum(r.cost_nanos), sum(r.nocache_cost_nanos), sum(r.unpriced_attempts),
    sum(r.client_cost_nanos), sum(r.cost_mismatch_attempts), sum(r.latency_sum_ms), hist_sum(r.latency_hist)
FROM rollup_daily r JOIN series s ON s.project_id = r.project_id AND s.id = r.series_id
GROUP BY 1, 2, 3, 4, 5, 6, 7, 8
ORDER BY 1, 2, 3, 4, 5, 6, 7, 8;

INSERT INTO rollup_daily_service (project_id, bucket, service, operation, fallback, status, error_class,
    attempts, requests, input_tokens, output_tokens, cache_write_tokens, cache_write_1h_tokens,
    cache_read_tokens, reasoning_tokens, cache_write_calls, cache_read_calls, cost_nanos,
    nocache_cost_nanos, unpriced_attempts, client_cost_nanos, cost_mismatch_attempts, latency_sum_ms,
    latency_hist)
SELECT r.project_id, r.bucket, s.service, s.operation, r.fallback, r.status, r.error_class,
    sum(r.attempts), sum(r.requests), sum(r.input_tokens), sum(r.output_tokens), sum(r.cache_write_tokens),
    sum(r.cache_write_1h_tokens), sum(r.cache_read_tokens), sum(r.reasoning_tokens), sum(r.cache_write_calls),
    sum(r.cache_read_calls), sum(r.cost_nanos), sum(r.nocache_cost_nanos), sum(r.unpriced_attempts),
    sum(r.client_cost_nanos), sum(r.cost_mismatch_attempts), sum(r.latency_sum_ms), hist_sum(r.latency_hist)
FROM rollup_daily r JOIN series s ON s.project_id = r.project_id AND s.id = r.series_id
GROUP BY 1, 2, 3, 4, 5, 6, 7
ORDER BY 1, 2, 3, 4, 5, 6, 7;

INSERT INTO rollup_daily_tenant (project_id, bucket, tenant, fallback, status, error_class,
    attempts, requests, input_tokens, output_tokens, cache_write_tokens, cache_write_1h_tokens,
    cache_read_tokens, reasoning_tokens, cache_write_calls, cache_read_calls, cost_nanos,
    nocache_cost_nanos, unpriced_attempts, client_cost_nanos, cost_mismatch_attempts, latency_sum_ms,
    latency_hist)
SELECT r.project_id, r.bucket, s.tenant, r.fallback, r.status, r.error_class,
    sum(r.attempts), sum(r.requests), sum(r.input_tokens), sum(r.output_tokens), sum(r.cache_write_tokens),
    sum(r.cache_write_1h_tokens), sum(r.cache_read_tokens), sum(r.reasoning_tokens), sum(r.cache_write_calls),
    sum(r.cache_read_calls), sum(r.cost_nanos), sum(r.nocache_cost_nanos), sum(r.unpriced_attempts),
    sum(r.client_cost_nanos), sum(r.cost_mismatch_attempts), sum(r.latency_sum_ms), hist_sum(r.latency_hist)
FROM rollup_daily r JOIN series s ON s.project_id = r.project_id AND s.id = r.series_id
GROUP BY 1, 2, 3, 4, 5, 6
ORDER BY 1, 2, 3, 4, 5, 6;

ANALYZE rollup_daily_model, rollup_daily_service, rollup_daily_tenant;

-- +goose Down
DROP TABLE rollup_daily_tenant;
DROP TABLE rollup_daily_service;
DROP TABLE rollup_daily_model;
