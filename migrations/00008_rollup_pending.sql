-- +goose Up
-- Pending rollup deltas. An ingest commit no longer updates the rollups: it appends its rollup rows
-- (summed per commit) to these tables, plain inserts with no index and no row to lock, and the
-- roller (ingest.Fold, one per replica, a few times a second) folds everything pending into the
-- rollups at once, many commits' rows in one upsert per table. Each pending table has the columns
-- of the rollup it feeds (a migration that changes a rollup's columns changes its pending table's
-- too; a migration test checks they match); pending_cache holds the cache groups before
-- cache_prefixes sorts them into hash and single-use rows, so it has no single_use.
--
-- rollup_fold_lock is never written: the roller, reprice and rebuild lock it (EXCLUSIVE) to fold
-- one at a time, without blocking the ingest commits that insert into the pending tables.
CREATE TABLE pending_rollup_hourly (LIKE rollup_hourly);
CREATE TABLE pending_rollup_daily (LIKE rollup_daily);
CREATE TABLE pending_rollup_daily_model (LIKE rollup_daily_model);
CREATE TABLE pending_rollup_daily_service (LIKE rollup_daily_service);
CREATE TABLE pending_rollup_daily_tenant (LIKE rollup_daily_tenant);
CREATE TABLE pending_cache (LIKE rollup_cache_hourly);
ALTER TABLE pending_cache DROP COLUMN single_use;
-- Rows live for a fraction of a second: vacuum the dead ones often, so a fold's scan stays short.
ALTER TABLE pending_rollup_hourly SET (autovacuum_vacuum_scale_factor = 0, autovacuum_vacuum_threshold = 5000);
ALTER TABLE pending_rollup_daily SET (autovacuum_vacuum_scale_factor = 0, autovacuum_vacuum_threshold = 5000);
ALTER TABLE pending_rollup_daily_model SET (autovacuum_vacuum_scale_factor = 0, autovacuum_vacuum_threshold = 5000);
ALTER TABLE pending_rollup_daily_service SET (autovacuum_vacuum_scale_factor = 0, autovacuum_vacuum_threshold = 5000);
ALTER TABLE pending_rollup_daily_tenant SET (autovacuum_vacuum_scale_factor = 0, autovacuum_vacuum_threshold = 5000);
ALTER TABLE pending_cache SET (autovacuum_vacuum_scale_factor = 0, autovacuum_vacuum_threshold = 5000);
CREATE TABLE rollup_fold_lock ();

-- +goose Down
-- Deltas still pending are lost with their tables: stop every ledgerd first (each folds what it
-- committed before it exits), or run `ledgerd rollups rebuild` after migrating down.
DROP TABLE rollup_fold_lock, pending_cache, pending_rollup_daily_tenant, pending_rollup_daily_service,
    pending_rollup_daily_model, pending_rollup_daily, pending_rollup_hourly;
