-- +goose Up
-- A row per project and local day of rollup_daily, written again by every statement that changes
-- the day's rows there: a fold, a reprice, a rebuild (internal/rollup/days.go). A reader that
-- keeps a day's sums between reads (the cache report's models: a week of rollup_daily is some
-- 100,000 rows at 10,000 tenants) tells by the row's xmin whether they still hold, and reads
-- again only the days that changed: today, while calls come in.
CREATE TABLE rollup_days (
    project_id bigint NOT NULL,
    bucket     date NOT NULL,
    writes     bigint NOT NULL DEFAULT 1,
    PRIMARY KEY (project_id, bucket)
);

INSERT INTO rollup_days (project_id, bucket)
SELECT DISTINCT project_id, bucket FROM rollup_daily ORDER BY 1, 2;

-- +goose Down
DROP TABLE rollup_days;
