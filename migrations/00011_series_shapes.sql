-- +goose Up
-- Rollups that stay small when the tenants are many. rollup_hourly, rollup_daily and
-- rollup_cache_hourly were keyed by the whole series, tenant included, so a ledger of 10,000
-- tenants each making a few calls a day kept about one rollup row per attempt, and the fold that
-- keeps them had one upsert per record to do. They are now keyed by the series' shape: the series
-- with the same service, operation, provider, model and fallback_from and no tenant (shape_id, a
-- series row of its own with tenant ''). Tenant questions read the narrow daily rollups that keep
-- the tenant (rollup_daily_tenant, and the new rollup_daily_tenant_model by provider and model),
-- or the raw attempts for what no rollup keeps. The pending tables keep the whole series: the fold
-- maps each to its shape, and sums it by tenant into the tenant rollups.
ALTER TABLE series ADD COLUMN shape_id bigint;
INSERT INTO series (project_id, tenant, service, operation, provider, model, fallback_from)
SELECT DISTINCT project_id, '', service, operation, provider, model, fallback_from FROM series WHERE tenant <> ''
ON CONFLICT DO NOTHING;
UPDATE series s SET shape_id = h.id FROM series h
WHERE h.project_id = s.project_id AND h.tenant = '' AND h.service = s.service AND h.operation = s.operation
    AND h.provider = s.provider AND h.model = s.model AND h.fallback_from = s.fallback_from;
ALTER TABLE series ALTER COLUMN shape_id SET NOT NULL;

-- Every new series gets its shape, created when missing; a series without a tenant is its own.
-- +goose StatementBegin
CREATE FUNCTION series_shape() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF NEW.tenant = '' THEN
        NEW.shape_id := NEW.id;
        RETURN NEW;
    END IF;
    INSERT INTO series (project_id, tenant, service, operation, provider, model, fallback_from)
    VALUES (NEW.project_id, '', NEW.service, NEW.operation, NEW.provider, NEW.model, NEW.fallback_from)
    ON CONFLICT DO NOTHING;
    SELECT id INTO STRICT NEW.shape_id FROM series
    WHERE project_id = NEW.project_id AND tenant = '' AND service = NEW.service AND operation = NEW.operation
        AND provider = NEW.provider AND model = NEW.model AND fallback_from = NEW.fallback_from;
    RETURN NEW;
END
$$;
-- +goose StatementEnd
CREATE TRIGGER series_shape BEFORE INSERT ON series FOR EACH ROW EXECUTE FUNCTION series_shape();

-- One tenant's days by provider and model: summed from rollup_daily while it still keeps tenants
-- (as migration 00007 made the other narrow rollups), so it counts what the rollups count.
CREATE TABLE rollup_daily_tenant_model (LIKE rollup_daily_model INCLUDING STORAGE);
ALTER TABLE rollup_daily_tenant_model ADD COLUMN tenant text NOT NULL,
    ADD PRIMARY KEY (project_id, bucket, tenant, provider, model, fallback_from, fallback, status, error_class),
    SET (fillfactor = 70);
INSERT INTO rollup_daily_tenant_model (project_id, bucket, tenant, provider, model, fallback_from, fallback,
    status, error_class, attempts, requests, input_tokens, output_tokens, cache_write_tokens, cache_write_1h_tokens, cache_read_tokens, reasoning_tokens, cache_write_calls, cache_read_calls, cost_nanos, nocache_cost_nanos, unpriced_attempts, client_cost_nanos, cost_mismatch_attempts, latency_sum_ms, latency_hist)
SELECT r.project_id, r.bucket, s.tenant, s.provider, s.model, s.fallback_from, r.fallback, r.status, r.error_class,
    sum(r.attempts), sum(r.requests), sum(r.input_tokens), sum(r.output_tokens), sum(r.cache_write_tokens), sum(r.cache_write_1h_tokens), sum(r.cache_read_tokens), sum(r.reasoning_tokens), sum(r.cache_write_calls), sum(r.cache_read_calls), sum(r.cost_nanos), sum(r.nocache_cost_nanos), sum(r.unpriced_attempts), sum(r.client_cost_nanos), sum(r.cost_mismatch_attempts), sum(r.latency_sum_ms), hist_sum(r.latency_hist)
FROM rollup_daily r JOIN series s ON s.project_id = r.project_id AND s.id = r.series_id
GROUP BY 1, 2, 3, 4, 5, 6, 7, 8, 9 ORDER BY 1, 2, 3, 4, 5, 6, 7, 8, 9;

-- The rollups' rows summed onto the shapes (a row whose series is unknown keeps its id). Folds
-- wait: stop the ledgerds of the previous version before migrating.
LOCK TABLE rollup_fold_lock IN EXCLUSIVE MODE;
CREATE TEMP TABLE regrouped ON COMMIT DROP AS
SELECT r.project_id, r.bucket, coalesce(s.shape_id, r.series_id) AS series_id, r.fallback, r.status, r.error_class,
    sum(r.attempts)::int8 AS attempts, sum(r.requests)::int8 AS requests, sum(r.input_tokens)::int8 AS input_tokens,
    sum(r.output_tokens)::int8 AS output_tokens, sum(r.cache_write_tokens)::int8 AS cache_write_tokens,
    sum(r.cache_write_1h_tokens)::int8 AS cache_write_1h_tokens, sum(r.cache_read_tokens)::int8 AS cache_read_tokens,
    sum(r.reasoning_tokens)::int8 AS reasoning_tokens, sum(r.cache_write_calls)::int8 AS cache_write_calls, sum(r.cache_read_calls)::int8 AS cache_read_calls,
    sum(r.cost_nanos)::int8 AS cost_nanos, sum(r.nocache_cost_nanos)::int8 AS nocache_cost_nanos, sum(r.unpriced_attempts)::int8 AS unpriced_attempts,
    sum(r.client_cost_nanos)::int8 AS client_cost_nanos, sum(r.cost_mismatch_attempts)::int8 AS cost_mismatch_attempts,
    sum(r.latency_sum_ms)::int8 AS latency_sum_ms, hist_sum(r.latency_hist) AS latency_hist
FROM rollup_hourly r LEFT JOIN series s ON s.project_id = r.project_id AND s.id = r.series_id
GROUP BY 1, 2, 3, 4, 5, 6;
TRUNCATE rollup_hourly;
INSERT INTO rollup_hourly (project_id, bucket, series_id, fallback, status, error_class,
    attempts, requests, input_tokens, output_tokens, cache_write_tokens, cache_write_1h_tokens,
    cache_read_tokens, reasoning_tokens, cache_write_calls, cache_read_calls, cost_nanos,
    nocache_cost_nanos, unpriced_attempts, client_cost_nanos, cost_mismatch_attempts,
    latency_sum_ms, latency_hist)
SELECT * FROM regrouped ORDER BY 1, 2, 3, 4, 5, 6;
DROP TABLE regrouped;

CREATE TEMP TABLE regrouped ON COMMIT DROP AS
SELECT r.project_id, r.bucket, coalesce(s.shape_id, r.series_id) AS series_id, r.fallback, r.status, r.error_class,
    sum(r.attempts)::int8 AS attempts, sum(r.requests)::int8 AS requests, sum(r.input_tokens)::int8 AS input_tokens,
    sum(r.output_tokens)::int8 AS output_tokens, sum(r.cache_write_tokens)::int8 AS cache_write_tokens,
    sum(r.cache_write_1h_tokens)::int8 AS cache_write_1h_tokens, sum(r.cache_read_tokens)::int8 AS cache_read_tokens,
    sum(r.reasoning_tokens)::int8 AS reasoning_tokens, sum(r.cache_write_calls)::int8 AS cache_write_calls, sum(r.cache_read_calls)::int8 AS cache_read_calls,
    sum(r.cost_nanos)::int8 AS cost_nanos, sum(r.nocache_cost_nanos)::int8 AS nocache_cost_nanos, sum(r.unpriced_attempts)::int8 AS unpriced_attempts,
    sum(r.client_cost_nanos)::int8 AS client_cost_nanos, sum(r.cost_mismatch_attempts)::int8 AS cost_mismatch_attempts,
    sum(r.latency_sum_ms)::int8 AS latency_sum_ms, hist_sum(r.latency_hist) AS latency_hist
FROM rollup_daily r LEFT JOIN series s ON s.project_id = r.project_id AND s.id = r.series_id
GROUP BY 1, 2, 3, 4, 5, 6;
TRUNCATE rollup_daily;
INSERT INTO rollup_daily (project_id, bucket, series_id, fallback, status, error_class,
    attempts, requests, input_tokens, output_tokens, cache_write_tokens, cache_write_1h_tokens,
    cache_read_tokens, reasoning_tokens, cache_write_calls, cache_read_calls, cost_nanos,
    nocache_cost_nanos, unpriced_attempts, client_cost_nanos, cost_mismatch_attempts,
    latency_sum_ms, latency_hist)
SELECT * FROM regrouped ORDER BY 1, 2, 3, 4, 5, 6;
DROP TABLE regrouped;

CREATE TEMP TABLE regrouped ON COMMIT DROP AS
SELECT r.project_id, r.bucket, coalesce(s.shape_id, r.series_id) AS series_id, r.fallback, r.prompt_hash,
    sum(r.calls)::int8 AS calls, sum(r.cache_write_calls)::int8 AS cache_write_calls, sum(r.cache_read_calls)::int8 AS cache_read_calls,
    sum(r.input_tokens)::int8 AS input_tokens, sum(r.cache_write_tokens)::int8 AS cache_write_tokens, sum(r.cache_read_tokens)::int8 AS cache_read_tokens,
    sum(r.cost_nanos)::int8 AS cost_nanos, sum(r.nocache_cost_nanos)::int8 AS nocache_cost_nanos, sum(r.unpriced_attempts)::int8 AS unpriced_attempts,
    sum(r.single_use)::int8 AS single_use
FROM rollup_cache_hourly r LEFT JOIN series s ON s.project_id = r.project_id AND s.id = r.series_id
GROUP BY 1, 2, 3, 4, 5;
TRUNCATE rollup_cache_hourly;
INSERT INTO rollup_cache_hourly (project_id, bucket, series_id, fallback, prompt_hash,
    calls, cache_write_calls, cache_read_calls, input_tokens, cache_write_tokens,
    cache_read_tokens, cost_nanos, nocache_cost_nanos, unpriced_attempts, single_use)
SELECT * FROM regrouped ORDER BY 1, 2, 3, 4, 5;
DROP TABLE regrouped;

UPDATE cache_prefixes p SET series_id = s.shape_id FROM series s
WHERE s.project_id = p.project_id AND s.id = p.series_id AND s.shape_id <> p.series_id;

CREATE INDEX rollup_daily_tenant_model_tenant ON rollup_daily_tenant_model (project_id, tenant, bucket);
CREATE INDEX rollup_daily_tenant_tenant ON rollup_daily_tenant (project_id, tenant, bucket);
ANALYZE series, rollup_hourly, rollup_daily, rollup_cache_hourly, rollup_daily_tenant_model;

-- +goose Down
-- The rollups stay keyed by shape: their totals are right, their tenant detail is gone. Run
-- `ledgerd rollups rebuild` after migrating down to count them by series again.
DROP INDEX rollup_daily_tenant_tenant;
DROP TABLE rollup_daily_tenant_model;
DROP TRIGGER series_shape ON series;
DROP FUNCTION series_shape();
ALTER TABLE series DROP COLUMN shape_id;
