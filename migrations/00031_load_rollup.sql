-- +goose Up
-- The load rollup (internal/rollup/load.go says what each column holds): per project, UTC minute,
-- org, provider, model and service, the requests, 429s and tokens sent and the lowest rate-limit
-- headroom reported; and per local day and group of every grouping of org, provider, model and
-- service, the day's busiest minute and lowest headroom. An ingest commit appends its deltas to
-- pending_load_minute (with each minute's local day); the fold adds them to rollup_load_minute and
-- raises the peaks they pass.

-- headroom_below tells whether the headroom rem of lim is lower than other_rem of other_lim: the
-- smaller share remaining, or of equal shares the larger limit; a pair without a limit is no
-- headroom and never lower, and any pair is lower than none.
CREATE FUNCTION headroom_below(rem bigint, lim bigint, other_rem bigint, other_lim bigint) RETURNS boolean
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS
    'SELECT lim IS NOT NULL AND (other_lim IS NULL OR (rem::numeric * other_lim, -lim) < (other_rem::numeric * lim, -other_lim))';

CREATE TABLE rollup_load_minute (
    project_id              bigint NOT NULL,
    bucket                  timestamptz NOT NULL,
    org                     text NOT NULL,
    provider                text NOT NULL,
    model                   text NOT NULL,
    service                 text NOT NULL,
    requests                bigint NOT NULL,
    rate_limited            bigint NOT NULL,
    input_tokens            bigint NOT NULL,
    output_tokens           bigint NOT NULL,
    requests_remaining      bigint,
    requests_limit          bigint,
    tokens_remaining        bigint,
    tokens_limit            bigint,
    input_tokens_remaining  bigint,
    input_tokens_limit      bigint,
    output_tokens_remaining bigint,
    output_tokens_limit     bigint,
    PRIMARY KEY (project_id, bucket, org, provider, model, service)
);

CREATE TABLE pending_load_minute (LIKE rollup_load_minute);
ALTER TABLE pending_load_minute ADD COLUMN day date NOT NULL;
ALTER TABLE pending_load_minute SET (autovacuum_vacuum_scale_factor = 0, autovacuum_vacuum_threshold = 5000);

-- keep has a bit per column the group keeps: org 8, provider 4, model 2, service 1; the others are ''.
CREATE TABLE rollup_load_peaks (
    project_id              bigint NOT NULL,
    keep                    smallint NOT NULL,
    day                     date NOT NULL,
    org                     text NOT NULL,
    provider                text NOT NULL,
    model                   text NOT NULL,
    service                 text NOT NULL,
    requests                bigint NOT NULL,
    requests_at             timestamptz NOT NULL,
    rate_limited            bigint NOT NULL,
    input_tokens            bigint NOT NULL,
    input_tokens_at         timestamptz NOT NULL,
    output_tokens           bigint NOT NULL,
    output_tokens_at        timestamptz NOT NULL,
    tokens                  bigint NOT NULL,
    tokens_at               timestamptz NOT NULL,
    requests_remaining      bigint,
    requests_limit          bigint,
    tokens_remaining        bigint,
    tokens_limit            bigint,
    input_tokens_remaining  bigint,
    input_tokens_limit      bigint,
    output_tokens_remaining bigint,
    output_tokens_limit     bigint,
    PRIMARY KEY (project_id, keep, day, org, provider, model, service)
);

-- The minutes and peaks of the attempts already stored (rollup.LoadRebuildSQL as of this version).
INSERT INTO rollup_load_minute (project_id, bucket, org, provider, model, service, requests, rate_limited, input_tokens, output_tokens, requests_remaining, requests_limit, tokens_remaining, tokens_limit, input_tokens_remaining, input_tokens_limit, output_tokens_remaining, output_tokens_limit) SELECT a.project_id, date_trunc('minute', started_at, 'UTC'), coalesce(a.org, ''), s.provider, s.model, s.service, count(*), count(*) FILTER (WHERE http_status = 429 OR error_class = 'rate_limited'), sum8(input_tokens + cache_write_tokens + cache_read_tokens), sum8(output_tokens), (min(ARRAY[ratelimit_remaining_requests::numeric(40,28) / ratelimit_limit_requests, -ratelimit_limit_requests, ratelimit_remaining_requests]) FILTER (WHERE ratelimit_limit_requests IS NOT NULL))[3]::int8 AS requests_remaining, (-(min(ARRAY[ratelimit_remaining_requests::numeric(40,28) / ratelimit_limit_requests, -ratelimit_limit_requests, ratelimit_remaining_requests]) FILTER (WHERE ratelimit_limit_requests IS NOT NULL))[2])::int8 AS requests_limit, (min(ARRAY[ratelimit_remaining_tokens::numeric(40,28) / ratelimit_limit_tokens, -ratelimit_limit_tokens, ratelimit_remaining_tokens]) FILTER (WHERE ratelimit_limit_tokens IS NOT NULL))[3]::int8 AS tokens_remaining, (-(min(ARRAY[ratelimit_remaining_tokens::numeric(40,28) / ratelimit_limit_tokens, -ratelimit_limit_tokens, ratelimit_remaining_tokens]) FILTER (WHERE ratelimit_limit_tokens IS NOT NULL))[2])::int8 AS tokens_limit, (min(ARRAY[ratelimit_remaining_input_tokens::numeric(40,28) / ratelimit_limit_input_tokens, -ratelimit_limit_input_tokens, ratelimit_remaining_input_tokens]) FILTER (WHERE ratelimit_limit_input_tokens IS NOT NULL))[3]::int8 AS input_tokens_remaining, (-(min(ARRAY[ratelimit_remaining_input_tokens::numeric(40,28) / ratelimit_limit_input_tokens, -ratelimit_limit_input_tokens, ratelimit_remaining_input_tokens]) FILTER (WHERE ratelimit_limit_input_tokens IS NOT NULL))[2])::int8 AS input_tokens_limit, (min(ARRAY[ratelimit_remaining_output_tokens::numeric(40,28) / ratelimit_limit_output_tokens, -ratelimit_limit_output_tokens, ratelimit_remaining_output_tokens]) FILTER (WHERE ratelimit_limit_output_tokens IS NOT NULL))[3]::int8 AS output_tokens_remaining, (-(min(ARRAY[ratelimit_remaining_output_tokens::numeric(40,28) / ratelimit_limit_output_tokens, -ratelimit_limit_output_tokens, ratelimit_remaining_output_tokens]) FILTER (WHERE ratelimit_limit_output_tokens IS NOT NULL))[2])::int8 AS output_tokens_limit FROM attempts a JOIN series s ON s.project_id = a.project_id AND s.id = a.series_id GROUP BY 1, 2, 3, 4, 5, 6 ORDER BY 1, 2;
INSERT INTO rollup_load_peaks (project_id, keep, day, org, provider, model, service, requests, requests_at, rate_limited, input_tokens, input_tokens_at, output_tokens, output_tokens_at, tokens, tokens_at, requests_remaining, requests_limit, tokens_remaining, tokens_limit, input_tokens_remaining, input_tokens_limit, output_tokens_remaining, output_tokens_limit) WITH g AS (
		SELECT project_id, bucket, day, (15 - GROUPING(org, provider, model, service))::int2 AS keep, coalesce(org, '') AS org, coalesce(provider, '') AS provider,
			coalesce(model, '') AS model, coalesce(service, '') AS service, sum8(requests) AS requests,
			sum8(rate_limited) AS rate_limited, sum8(input_tokens) AS input_tokens, sum8(output_tokens) AS output_tokens
		FROM (SELECT r.*, (r.bucket AT TIME ZONE coalesce((SELECT value FROM settings WHERE key = 'timezone'), 'UTC'))::date AS day FROM rollup_load_minute r) m GROUP BY project_id, bucket, day, CUBE (org, provider, model, service)
	), p AS (
		SELECT project_id, keep, day, org, provider, model, service, max(ARRAY[requests, -extract(epoch FROM bucket)::int8, rate_limited]) AS r, max(ARRAY[input_tokens, -extract(epoch FROM bucket)::int8]) AS i, max(ARRAY[output_tokens, -extract(epoch FROM bucket)::int8]) AS o, max(ARRAY[input_tokens + output_tokens, -extract(epoch FROM bucket)::int8]) AS t
		FROM g GROUP BY 1, 2, 3, 4, 5, 6, 7
	), hl AS (
		SELECT project_id, (15 - GROUPING(org, provider, model, service))::int2 AS keep, day, coalesce(org, '') AS org, coalesce(provider, '') AS provider,
			coalesce(model, '') AS model, coalesce(service, '') AS service, (min(ARRAY[requests_remaining::numeric(40,28) / requests_limit, -requests_limit, requests_remaining]) FILTER (WHERE requests_limit IS NOT NULL))[3]::int8 AS requests_remaining, (-(min(ARRAY[requests_remaining::numeric(40,28) / requests_limit, -requests_limit, requests_remaining]) FILTER (WHERE requests_limit IS NOT NULL))[2])::int8 AS requests_limit, (min(ARRAY[tokens_remaining::numeric(40,28) / tokens_limit, -tokens_limit, tokens_remaining]) FILTER (WHERE tokens_limit IS NOT NULL))[3]::int8 AS tokens_remaining, (-(min(ARRAY[tokens_remaining::numeric(40,28) / tokens_limit, -tokens_limit, tokens_remaining]) FILTER (WHERE tokens_limit IS NOT NULL))[2])::int8 AS tokens_limit, (min(ARRAY[input_tokens_remaining::numeric(40,28) / input_tokens_limit, -input_tokens_limit, input_tokens_remaining]) FILTER (WHERE input_tokens_limit IS NOT NULL))[3]::int8 AS input_tokens_remaining, (-(min(ARRAY[input_tokens_remaining::numeric(40,28) / input_tokens_limit, -input_tokens_limit, input_tokens_remaining]) FILTER (WHERE input_tokens_limit IS NOT NULL))[2])::int8 AS input_tokens_limit, (min(ARRAY[output_tokens_remaining::numeric(40,28) / output_tokens_limit, -output_tokens_limit, output_tokens_remaining]) FILTER (WHERE output_tokens_limit IS NOT NULL))[3]::int8 AS output_tokens_remaining, (-(min(ARRAY[output_tokens_remaining::numeric(40,28) / output_tokens_limit, -output_tokens_limit, output_tokens_remaining]) FILTER (WHERE output_tokens_limit IS NOT NULL))[2])::int8 AS output_tokens_limit
		FROM (SELECT r.*, (r.bucket AT TIME ZONE coalesce((SELECT value FROM settings WHERE key = 'timezone'), 'UTC'))::date AS day FROM rollup_load_minute r) h GROUP BY project_id, day, CUBE (org, provider, model, service)
	)
	SELECT p.project_id, p.keep, p.day, p.org, p.provider, p.model, p.service, p.r[1], to_timestamp(-(p.r)[2]), p.r[3], p.i[1], to_timestamp(-(p.i)[2]), p.o[1], to_timestamp(-(p.o)[2]), p.t[1], to_timestamp(-(p.t)[2]), hl.requests_remaining, hl.requests_limit, hl.tokens_remaining, hl.tokens_limit, hl.input_tokens_remaining, hl.input_tokens_limit, hl.output_tokens_remaining, hl.output_tokens_limit
	FROM p LEFT JOIN hl USING (project_id, keep, day, org, provider, model, service) ORDER BY 1, 2, 3, 4, 5, 6, 7;
ANALYZE rollup_load_minute, rollup_load_peaks;

-- +goose Down
-- Deltas still pending are lost with their table: the rollup goes with them.
DROP TABLE rollup_load_peaks, pending_load_minute, rollup_load_minute;
DROP FUNCTION headroom_below(bigint, bigint, bigint, bigint);
