-- +goose Up
-- hist_quantile(h, q) estimates the q-quantile (0 <= q <= 1) of a latency histogram in ms: the
-- geometric midpoint 2^((i - 0.5) / 16) of the bucket i that holds the observation of nearest rank
-- max(1, ceil(q * n)). Bucket i spans (2^((i-1)/16), 2^(i/16)] ms, so the estimate is within 2.2%
-- of the true value. NULL for an empty histogram or q outside [0, 1]. Dashboards call it on
-- hist_sum(latency_hist).
-- +goose StatementBegin
CREATE FUNCTION hist_quantile(h int8[], q float8) RETURNS float8
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE AS $$
    WITH b AS (
        SELECT i, sum(h[i]) OVER (ORDER BY i) AS cum, sum(h[i]) OVER () AS total
        FROM generate_subscripts(h, 1) AS i
    )
    SELECT power(2::float8, (i - 0.5) / 16) FROM b
    WHERE q >= 0 AND q <= 1 AND total > 0 AND cum >= greatest(1, ceil(q * total))
    ORDER BY i
    LIMIT 1
$$;
-- +goose StatementEnd

-- ledgerd_grafana is the read-only role Grafana's PostgreSQL data source logs in through (as a
-- user made a member of it: CREATE USER grafana IN ROLE ledgerd_grafana PASSWORD '...'). Roles
-- belong to the whole server, not to one database, so this tolerates the role existing already
-- (another ledgerd database on the same server, or a concurrent migration), and a migrating user
-- without CREATEROLE skips creating it (grafana/README.md gives the statements to run by hand).
-- It may read the rollups and the names they refer to, never API keys nor raw attempts.
-- +goose StatementBegin
DO $$
BEGIN
    IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'ledgerd_grafana') THEN
        IF EXISTS (SELECT FROM pg_roles WHERE rolname = current_user AND (rolsuper OR rolcreaterole)) THEN
            BEGIN
                CREATE ROLE ledgerd_grafana NOLOGIN;
            EXCEPTION WHEN duplicate_object OR unique_violation THEN
                NULL; -- created meanwhile by a migration of another database
            END;
        ELSE
            RAISE NOTICE 'role ledgerd_grafana not created: % may not create roles (see grafana/README.md)', current_user;
            RETURN;
        END IF;
    END IF;
    EXECUTE format('GRANT USAGE ON SCHEMA %I TO ledgerd_grafana', current_schema());
    GRANT SELECT ON TABLE projects, series, settings, rollup_hourly, rollup_daily, rollup_cache_hourly
        TO ledgerd_grafana;
END
$$;
-- +goose StatementEnd

-- +goose Down
-- The role stays: other databases on the server may grant it rights. Only this database's grants
-- are revoked.
-- +goose StatementBegin
DO $$
BEGIN
    IF EXISTS (SELECT FROM pg_roles WHERE rolname = 'ledgerd_grafana') THEN
        REVOKE SELECT ON TABLE projects, series, settings, rollup_hourly, rollup_daily, rollup_cache_hourly
            FROM ledgerd_grafana;
        EXECUTE format('REVOKE USAGE ON SCHEMA %I FROM ledgerd_grafana', current_schema());
    END IF;
END
$$;
-- +goose StatementEnd
DROP FUNCTION hist_quantile(int8[], float8);
