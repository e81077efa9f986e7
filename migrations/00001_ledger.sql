-- +goose Up
-- Projects and their API keys. Small tables: on Citus they become reference tables.
CREATE TABLE projects (
    id                   bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    name                 text NOT NULL UNIQUE,
    monthly_budget_nanos bigint,
    created_at           timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE api_keys (
    project_id bigint NOT NULL REFERENCES projects (id),
    id         bigint GENERATED ALWAYS AS IDENTITY,
    prefix     text NOT NULL,
    hash       bytea NOT NULL UNIQUE,
    created_at timestamptz NOT NULL DEFAULT now(),
    revoked_at timestamptz,
    PRIMARY KEY (project_id, id)
);

-- Settings the stored data depends on, such as the timezone daily rollups are counted in.
CREATE TABLE settings (
    key   text PRIMARY KEY,
    value text NOT NULL
);

CREATE TYPE attempt_status AS ENUM ('ok', 'error', 'cancelled');
CREATE TYPE error_class AS ENUM (
    'none', 'bad_request', 'auth_error', 'permission_error', 'not_found', 'request_too_large',
    'rate_limited', 'quota_exhausted', 'timeout', 'connection_error', 'server_error', 'overloaded',
    'cancelled', 'unknown');

-- A series names what an attempt belongs to. Rows and rollups carry its id instead of repeating
-- six strings. fallback_from is '' unless the attempt stood in for another model.
CREATE TABLE series (
    project_id    bigint NOT NULL,
    id            bigint GENERATED ALWAYS AS IDENTITY,
    tenant        text NOT NULL,
    service       text NOT NULL,
    operation     text NOT NULL,
    provider      text NOT NULL,
    model         text NOT NULL,
    fallback_from text NOT NULL,
    PRIMARY KEY (project_id, id),
    UNIQUE (project_id, tenant, service, operation, provider, model, fallback_from)
);

-- Every price version the catalog has ever applied, so a stored cost names the price behind it.
CREATE TABLE price_versions (
    id             int GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    key            text NOT NULL UNIQUE,
    provider       text NOT NULL,
    model          text NOT NULL,
    effective_from timestamptz NOT NULL,
    first_seen     timestamptz NOT NULL DEFAULT now()
);

-- One row per provider attempt, partitioned by month of started_at (partitions are created ahead by
-- ledgerd and dropped for retention). A record is identified by (project_id, attempt_id,
-- started_at): a redelivery of the same record is skipped. Money is integer nano-dollars;
-- cost_nanos is NULL when the model has no price.
CREATE TABLE attempts (
    project_id          bigint NOT NULL,
    started_at          timestamptz NOT NULL,
    series_id           bigint NOT NULL,
    attempt_no          int NOT NULL,
    latency_ms          int NOT NULL,
    status              attempt_status NOT NULL,
    error_class         error_class NOT NULL,
    fallback            boolean NOT NULL,
    batch               boolean NOT NULL,
    http_status         smallint,
    retry_after_ms      int,
    price_id            int,
    input_tokens        bigint NOT NULL,
    output_tokens       bigint NOT NULL,
    cache_write_tokens  bigint NOT NULL,
    cache_write_1h_tokens bigint NOT NULL,
    cache_read_tokens   bigint NOT NULL,
    reasoning_tokens    bigint NOT NULL,
    cost_nanos          bigint,
    nocache_cost_nanos  bigint,
    client_cost_nanos   bigint,
    received_at         timestamptz NOT NULL DEFAULT now(),
    attempt_id          text NOT NULL,
    request_id          text NOT NULL,
    prompt_hash         text,
    provider_request_id text,
    metadata            jsonb
) PARTITION BY RANGE (started_at);

CREATE UNIQUE INDEX attempts_identity ON attempts (project_id, attempt_id, started_at);
CREATE INDEX attempts_project_time ON attempts (project_id, started_at);

-- Latency histograms are int8 arrays indexed by log bucket (Prometheus native-histogram schema 4:
-- 16 buckets per doubling, bucket i holds latencies in (2^((i-1)/16), 2^(i/16)] ms, bucket 0 holds
-- 0 to 1 ms). Arrays keep their own lower bound, so a histogram stores only the buckets it spans.
-- +goose StatementBegin
CREATE FUNCTION latency_bucket(ms int) RETURNS int
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE AS $$
    SELECT CASE WHEN ms <= 1 THEN 0 ELSE ceil(16 * ln(ms::float8) / ln(2::float8) - 1e-9)::int END
$$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE FUNCTION hist_merge(a int8[], b int8[]) RETURNS int8[]
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE AS $$
DECLARE
    lo int;
    hi int;
    r int8[];
BEGIN
    IF a IS NULL THEN RETURN b; END IF;
    IF b IS NULL THEN RETURN a; END IF;
    lo := least(array_lower(a, 1), array_lower(b, 1));
    hi := greatest(array_upper(a, 1), array_upper(b, 1));
    r := array_fill(0::int8, ARRAY[hi - lo + 1], ARRAY[lo]);
    FOR i IN array_lower(a, 1) .. array_upper(a, 1) LOOP
        r[i] := r[i] + a[i];
    END LOOP;
    FOR i IN array_lower(b, 1) .. array_upper(b, 1) LOOP
        r[i] := r[i] + b[i];
    END LOOP;
    RETURN r;
END
$$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE FUNCTION hist_add(h int8[], bucket int) RETURNS int8[]
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE AS $$
BEGIN
    IF bucket IS NULL THEN RETURN h; END IF;
    IF h IS NULL THEN
        RETURN array_fill(1::int8, ARRAY[1], ARRAY[bucket]);
    END IF;
    IF bucket < array_lower(h, 1) OR bucket > array_upper(h, 1) THEN
        h := hist_merge(h, array_fill(0::int8, ARRAY[1], ARRAY[bucket]));
    END IF;
    h[bucket] := h[bucket] + 1;
    RETURN h;
END
$$;
-- +goose StatementEnd

-- hist_agg(bucket) builds a histogram from bucket numbers; hist_sum(hist) merges histograms.
CREATE AGGREGATE hist_agg(int) (SFUNC = hist_add, STYPE = int8[]);
CREATE AGGREGATE hist_sum(int8[]) (SFUNC = hist_merge, STYPE = int8[], COMBINEFUNC = hist_merge, PARALLEL = SAFE);

-- Rollups, maintained in the same transaction that inserts the attempts they count, from the rows
-- actually inserted: a duplicate never changes them. bucket is the UTC hour for rollup_hourly and
-- the local date (settings.timezone) for rollup_daily. cost_nanos sums priced attempts only;
-- unpriced_attempts counts the others. requests counts attempts with attempt_no = 1.
CREATE TABLE rollup_hourly (
    project_id            bigint NOT NULL,
    bucket                timestamptz NOT NULL,
    series_id             bigint NOT NULL,
    fallback              boolean NOT NULL,
    status                attempt_status NOT NULL,
    error_class           error_class NOT NULL,
    attempts              bigint NOT NULL,
    requests              bigint NOT NULL,
    input_tokens          bigint NOT NULL,
    output_tokens         bigint NOT NULL,
    cache_write_tokens    bigint NOT NULL,
    cache_write_1h_tokens bigint NOT NULL,
    cache_read_tokens     bigint NOT NULL,
    reasoning_tokens      bigint NOT NULL,
    cache_write_calls     bigint NOT NULL,
    cache_read_calls      bigint NOT NULL,
    cost_nanos            bigint NOT NULL,
    nocache_cost_nanos    bigint NOT NULL,
    unpriced_attempts     bigint NOT NULL,
    client_cost_nanos     bigint NOT NULL,
    cost_mismatch_attempts bigint NOT NULL,
    latency_sum_ms        bigint NOT NULL,
    latency_hist          int8[] NOT NULL,
    PRIMARY KEY (project_id, bucket, series_id, fallback, status, error_class)
);

CREATE TABLE rollup_daily (LIKE rollup_hourly INCLUDING ALL);
ALTER TABLE rollup_daily ALTER COLUMN bucket TYPE date;

-- Cache activity per prefix: only attempts that wrote or read the cache or named a prompt_hash.
CREATE TABLE rollup_cache_hourly (
    project_id         bigint NOT NULL,
    bucket             timestamptz NOT NULL,
    series_id          bigint NOT NULL,
    fallback           boolean NOT NULL,
    prompt_hash        text NOT NULL,
    calls              bigint NOT NULL,
    cache_write_calls  bigint NOT NULL,
    cache_read_calls   bigint NOT NULL,
    input_tokens       bigint NOT NULL,
    cache_write_tokens bigint NOT NULL,
    cache_read_tokens  bigint NOT NULL,
    cost_nanos         bigint NOT NULL,
    nocache_cost_nanos bigint NOT NULL,
    unpriced_attempts  bigint NOT NULL,
    PRIMARY KEY (project_id, bucket, series_id, fallback, prompt_hash)
);

-- +goose Down
DROP TABLE rollup_cache_hourly;
DROP TABLE rollup_daily;
DROP TABLE rollup_hourly;
DROP AGGREGATE hist_sum(int8[]);
DROP AGGREGATE hist_agg(int);
DROP FUNCTION hist_add(int8[], int);
DROP FUNCTION hist_merge(int8[], int8[]);
DROP FUNCTION latency_bucket(int);
DROP TABLE attempts;
DROP TABLE price_versions;
DROP TABLE series;
DROP TYPE error_class;
DROP TYPE attempt_status;
DROP TABLE settings;
DROP TABLE api_keys;
DROP TABLE projects;
