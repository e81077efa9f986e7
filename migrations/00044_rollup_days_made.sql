-- +goose Up
-- Each row of rollup_days numbered when it is made: a fold's write of a day already there updates
-- the row and keeps its number, a rebuild (which deletes the daily rollups' rows and the days'
-- rows, then counts them again) makes every row anew. A reader that keeps today's rows of a daily
-- rollup and reads again only those written since (internal/analytics/today.go) cannot see a
-- row deleted: it reads the whole day again when the day's number has changed.
CREATE SEQUENCE rollup_days_made;
ALTER TABLE rollup_days ADD COLUMN made bigint NOT NULL DEFAULT nextval('rollup_days_made');
ALTER SEQUENCE rollup_days_made OWNED BY rollup_days.made;

-- +goose Down
ALTER TABLE rollup_days DROP COLUMN made;
