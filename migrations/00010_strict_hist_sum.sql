-- +goose Up
-- hist_sum merges with a strict function. With a strict transition function and no initial state,
-- PostgreSQL takes a group's first histogram as the state without calling the function, so a group
-- of one costs nothing: most groups, when a fold sums a backfill's pending rows per hour.
--
-- The PL/pgSQL merge becomes hist_merge_strict (its body unchanged; its NULL checks no longer
-- run), and hist_merge, which callers use with NULLs, a SQL wrapper the planner inlines. The
-- aggregate follows its transition function by OID through the rename; it is declared again so
-- that the definition says so. The results are the same, as hist_merge already ignored NULLs.
ALTER FUNCTION hist_merge(int8[], int8[]) RENAME TO hist_merge_strict;
ALTER FUNCTION hist_merge_strict(int8[], int8[]) STRICT;
CREATE FUNCTION hist_merge(a int8[], b int8[]) RETURNS int8[]
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS 'SELECT coalesce(hist_merge_strict(a, b), a, b)';
CREATE OR REPLACE AGGREGATE hist_sum(int8[]) (SFUNC = hist_merge_strict, STYPE = int8[],
    COMBINEFUNC = hist_merge_strict, PARALLEL = SAFE);

-- +goose Down
DROP FUNCTION hist_merge(int8[], int8[]);
ALTER FUNCTION hist_merge_strict(int8[], int8[]) CALLED ON NULL INPUT;
ALTER FUNCTION hist_merge_strict(int8[], int8[]) RENAME TO hist_merge;
CREATE OR REPLACE AGGREGATE hist_sum(int8[]) (SFUNC = hist_merge, STYPE = int8[], COMBINEFUNC = hist_merge,
    PARALLEL = SAFE);
