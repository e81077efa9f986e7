-- +goose Up
-- sum8(bigint) adds bigints into a bigint. The built-in sum(bigint) returns numeric: it keeps a
-- 128-bit state per group and turns every result into a numeric, which made the analytics
-- queries (thousands of groups, a dozen sums each) several times slower. sum8 keeps a plain
-- bigint and raises an error on overflow (int8pl) instead of widening; rollup sums never come near
-- 9.2e18. NULL over no rows, like sum.
CREATE AGGREGATE sum8(bigint) (SFUNC = int8pl, STYPE = bigint, COMBINEFUNC = int8pl, PARALLEL = SAFE);

-- +goose Down
DROP AGGREGATE sum8(bigint);
