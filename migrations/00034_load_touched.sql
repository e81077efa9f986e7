-- +goose Up
-- The minutes a fold's chunks touched in rollup_load_minute, whose peaks the fold raises once,
-- after its last chunk (rollup.RaisePeaks), rather than in every chunk: a backfill's chunks
-- touch the same minutes over and over. A fold that stops before its end leaves them for the next.
CREATE TABLE pending_load_touched (
    project_id bigint NOT NULL,
    bucket     timestamptz NOT NULL,
    day        date NOT NULL,
    PRIMARY KEY (project_id, bucket)
);
ALTER TABLE pending_load_touched SET (autovacuum_vacuum_scale_factor = 0, autovacuum_vacuum_threshold = 5000);

-- +goose Down
-- Peaks of minutes still listed stay unraised: `ledgerd rollups rebuild` recounts them.
DROP TABLE pending_load_touched;
