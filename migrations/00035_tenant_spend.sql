-- +goose Up
-- What each tenant spent, in blocks of 1, 8 and 64 local days (rollup.SpendSpans): the top
-- tenants by spend rank on it. Summing every tenant-day of rollup_daily_tenant took a quarter of a
-- second at 10,000 tenants (its rows split by status and error class too); a month is ten or so
-- blocks a tenant. A block of span n starts on a day whose number since 2000-01-01 is a multiple
-- of n, so the blocks of one span tile the days. Counted from rollup_daily_tenant, which a
-- rebuild recounts from the raw attempts.
CREATE TABLE rollup_tenant_spend (
    project_id bigint NOT NULL,
    span       smallint NOT NULL,
    bucket     date NOT NULL,
    tenant     text NOT NULL,
    cost_nanos bigint NOT NULL,
    PRIMARY KEY (project_id, span, bucket, tenant)
);
INSERT INTO rollup_tenant_spend (project_id, span, bucket, tenant, cost_nanos)
SELECT r.project_id, s.span, r.bucket - (((r.bucket - date '2000-01-01') % s.span + s.span) % s.span), r.tenant, sum(r.cost_nanos)::int8
FROM rollup_daily_tenant r CROSS JOIN unnest('{1,8,64}'::int2[]) AS s(span)
GROUP BY 1, 2, 3, 4 ORDER BY 1, 2, 3, 4;
ANALYZE rollup_tenant_spend;

-- +goose Down
DROP TABLE rollup_tenant_spend;
