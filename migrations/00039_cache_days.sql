-- +goose Up
-- Each local day of rollup_cache_hourly summed per model (service, operation, provider, model,
-- fallback flag; prompt_hash '') and per prompt_hash of it, with what the cache report and the
-- cache incidents need to know when the prefix broke without reading its hours: the first hour,
-- the last hour that read, the first hour after it that wrote (since), the sums of the hours from
-- since on and of the hours that read (rollup.SummarizeCacheDays). With 10,000 tenants a week of
-- cache hours is some 440,000 rows, read on every Cache page and Overview; its days are about a
-- tenth of that.
--
-- rollup_cache_days says how far each day is summed: hours before through. A fold that adds to an
-- hour of a day notes the earliest such hour in cache_days_dirty; a day's summary is used only
-- while no hour before its through is noted, and the hours from through on are read as they are.
CREATE TABLE rollup_cache_daily (
    project_id         bigint NOT NULL,
    bucket             date NOT NULL,
    service            text NOT NULL,
    operation          text NOT NULL,
    provider           text NOT NULL,
    model              text NOT NULL,
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
    single_use         bigint NOT NULL,
    first_hour         timestamptz NOT NULL,
    last_read          timestamptz,
    since              timestamptz,
    since_calls        bigint NOT NULL,
    since_writes       bigint NOT NULL,
    since_cost         bigint NOT NULL,
    since_nocache      bigint NOT NULL,
    since_unpriced     bigint NOT NULL,
    read_calls         bigint NOT NULL,
    read_cost          bigint NOT NULL,
    read_unpriced      bigint NOT NULL,
    PRIMARY KEY (project_id, bucket, service, operation, provider, model, fallback, prompt_hash)
);

CREATE TABLE rollup_cache_days (
    project_id bigint NOT NULL,
    bucket     date NOT NULL,
    through    timestamptz NOT NULL,
    PRIMARY KEY (project_id, bucket)
);

CREATE TABLE cache_days_dirty (
    project_id bigint NOT NULL,
    bucket     date NOT NULL,
    hour       timestamptz NOT NULL,
    PRIMARY KEY (project_id, bucket)
);

-- Every day the cache rollup holds waits for its first summary.
INSERT INTO cache_days_dirty (project_id, bucket, hour)
SELECT project_id, (bucket AT TIME ZONE coalesce((SELECT value FROM settings WHERE key = 'timezone'), 'UTC'))::date,
    min(bucket)
FROM rollup_cache_hourly GROUP BY 1, 2;

-- +goose Down
DROP TABLE cache_days_dirty;
DROP TABLE rollup_cache_days;
DROP TABLE rollup_cache_daily;
