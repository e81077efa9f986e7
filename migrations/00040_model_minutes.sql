-- +goose Up
-- The load rollup's minutes per provider, model, fallback flag and the model a fallback stood in
-- for: the counts the incidents read minute by minute (rollup.ModelMinuteSums). rollup_load_minute
-- keeps each minute per org and service too, some 900 rows a minute with 10,000 tenants and 50
-- services, which the incidents added up to a couple of dozen: the last two and a half hours of
-- every model took 0.25-0.38 s, for 138,733 rows.
CREATE TABLE rollup_model_minute (
    project_id        bigint NOT NULL,
    bucket            timestamptz NOT NULL,
    provider          text NOT NULL,
    model             text NOT NULL,
    fallback          boolean NOT NULL,
    fallback_from     text NOT NULL,
    requests          bigint NOT NULL,
    calls             bigint NOT NULL,
    failed            bigint NOT NULL,
    answered          bigint NOT NULL,
    wasted_nanos      bigint NOT NULL,
    unpriced_attempts bigint NOT NULL,
    PRIMARY KEY (project_id, bucket, provider, model, fallback, fallback_from)
) WITH (fillfactor = 90);

INSERT INTO rollup_model_minute
SELECT project_id, bucket, provider, model, fallback, fallback_from, sum(requests)::int8, sum(calls)::int8,
    sum(failed)::int8, sum(answered)::int8, sum(wasted_nanos)::int8, sum(unpriced_attempts)::int8
FROM rollup_load_minute GROUP BY 1, 2, 3, 4, 5, 6 ORDER BY 1, 2, 3, 4, 5, 6;
ANALYZE rollup_model_minute;

-- +goose Down
DROP TABLE rollup_model_minute;
