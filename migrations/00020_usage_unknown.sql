-- +goose Up
-- Attempts whose provider answer carried no usage (an OpenAI chat stream sent without
-- stream_options.include_usage): the record says usage_unknown, its cost is NULL (never $0), and
-- the rollups count them in usage_unknown_attempts (rollup.Sums), appended after the other sums.
-- A column with a constant default is added without rewriting the table (PostgreSQL 11+).
ALTER TABLE attempts ADD COLUMN usage_unknown boolean NOT NULL DEFAULT false;
ALTER TABLE rollup_hourly ADD COLUMN usage_unknown_attempts bigint NOT NULL DEFAULT 0;
ALTER TABLE rollup_daily ADD COLUMN usage_unknown_attempts bigint NOT NULL DEFAULT 0;
ALTER TABLE rollup_daily_model ADD COLUMN usage_unknown_attempts bigint NOT NULL DEFAULT 0;
ALTER TABLE rollup_daily_service ADD COLUMN usage_unknown_attempts bigint NOT NULL DEFAULT 0;
ALTER TABLE rollup_daily_tenant ADD COLUMN usage_unknown_attempts bigint NOT NULL DEFAULT 0;
ALTER TABLE rollup_daily_tenant_model ADD COLUMN usage_unknown_attempts bigint NOT NULL DEFAULT 0;
-- pending_rollup_hourly keeps rollup_hourly's columns, in order, then the local day: day moves
-- after the new column (the table holds a quarter second of deltas, so the copy is small).
LOCK TABLE pending_rollup_hourly IN ACCESS EXCLUSIVE MODE;
ALTER TABLE pending_rollup_hourly ADD COLUMN usage_unknown_attempts bigint NOT NULL DEFAULT 0, ADD COLUMN day_moved date;
UPDATE pending_rollup_hourly SET day_moved = day;
ALTER TABLE pending_rollup_hourly DROP COLUMN day;
ALTER TABLE pending_rollup_hourly RENAME COLUMN day_moved TO day;
ALTER TABLE pending_rollup_hourly ALTER COLUMN day SET NOT NULL;

-- +goose Down
ALTER TABLE pending_rollup_hourly DROP COLUMN usage_unknown_attempts;
ALTER TABLE rollup_daily_tenant_model DROP COLUMN usage_unknown_attempts;
ALTER TABLE rollup_daily_tenant DROP COLUMN usage_unknown_attempts;
ALTER TABLE rollup_daily_service DROP COLUMN usage_unknown_attempts;
ALTER TABLE rollup_daily_model DROP COLUMN usage_unknown_attempts;
ALTER TABLE rollup_daily DROP COLUMN usage_unknown_attempts;
ALTER TABLE rollup_hourly DROP COLUMN usage_unknown_attempts;
ALTER TABLE attempts DROP COLUMN usage_unknown;
