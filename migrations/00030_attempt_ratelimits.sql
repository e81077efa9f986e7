-- +goose Up
-- The organization an attempt was billed to and the rate limits its provider's answer reported
-- (schema.RateLimits): per limit, the limit, what remained of it, and when it is next whole. NULL
-- where the record did not say. Adding nullable columns without a default rewrites nothing.
ALTER TABLE attempts
    ADD COLUMN org                               text,
    ADD COLUMN ratelimit_limit_requests          bigint,
    ADD COLUMN ratelimit_remaining_requests      bigint,
    ADD COLUMN ratelimit_reset_requests          timestamptz,
    ADD COLUMN ratelimit_limit_tokens            bigint,
    ADD COLUMN ratelimit_remaining_tokens        bigint,
    ADD COLUMN ratelimit_reset_tokens            timestamptz,
    ADD COLUMN ratelimit_limit_input_tokens      bigint,
    ADD COLUMN ratelimit_remaining_input_tokens  bigint,
    ADD COLUMN ratelimit_reset_input_tokens      timestamptz,
    ADD COLUMN ratelimit_limit_output_tokens     bigint,
    ADD COLUMN ratelimit_remaining_output_tokens bigint,
    ADD COLUMN ratelimit_reset_output_tokens     timestamptz;

-- +goose Down
ALTER TABLE attempts
    DROP COLUMN org,
    DROP COLUMN ratelimit_limit_requests,
    DROP COLUMN ratelimit_remaining_requests,
    DROP COLUMN ratelimit_reset_requests,
    DROP COLUMN ratelimit_limit_tokens,
    DROP COLUMN ratelimit_remaining_tokens,
    DROP COLUMN ratelimit_reset_tokens,
    DROP COLUMN ratelimit_limit_input_tokens,
    DROP COLUMN ratelimit_remaining_input_tokens,
    DROP COLUMN ratelimit_reset_input_tokens,
    DROP COLUMN ratelimit_limit_output_tokens,
    DROP COLUMN ratelimit_remaining_output_tokens,
    DROP COLUMN ratelimit_reset_output_tokens;
