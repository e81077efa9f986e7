package migrations_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/ledgerd/ledgerd/internal/dbtest"
	"github.com/ledgerd/ledgerd/migrations"
)

// TestUpDownUp proves every migration reverses cleanly: roll the whole schema back to nothing on a
// migrated database, then apply it again.
func TestUpDownUp(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := dbtest.New(t)
	cur, latest, err := migrations.Versions(ctx, pool)
	if err != nil {
		t.Fatal(err)
	}
	if cur != latest || latest < 1 {
		t.Fatalf("fresh test database at version %d, latest %d", cur, latest)
	}
	downTo(t, pool, 0) // versions need not be consecutive
	var tables int
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM pg_tables WHERE schemaname = 'public' AND tablename <> 'goose_db_version'`).Scan(&tables); err != nil {
		t.Fatal(err)
	}
	if tables != 0 {
		t.Fatalf("%d tables left after rolling back every migration", tables)
	}
	got, err := migrations.Up(ctx, pool)
	if err != nil {
		t.Fatal(err)
	}
	if got != latest {
		t.Fatalf("up again reached %d, want %d", got, latest)
	}
}

// TestCachePrefixesFold checks that migration 5 folds existing cache rollups in place: a
// prompt_hash with one call in its UTC month moves onto its series' empty-hash row as single-use,
// one with more keeps its rows, and cache_prefixes counts both.
func TestCachePrefixesFold(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := dbtest.New(t)
	downTo(t, pool, 4)
	// (bucket, series, hash, calls, cost) of rollup_cache_hourly rows before the migration.
	_, err := pool.Exec(ctx, `INSERT INTO rollup_cache_hourly (project_id, bucket, series_id, fallback, prompt_hash, calls,
			cache_write_calls, cache_read_calls, input_tokens, cache_write_tokens, cache_read_tokens, cost_nanos,
			nocache_cost_nanos, unpriced_attempts)
		SELECT 1, b::timestamptz, s, false, h, n, n, 0, 200 * n, 1000 * n, 0, c, 170000 * n, 0
		FROM (VALUES ('2026-10-05 10:00Z', 1, 'once', 1, 195000), ('2026-10-05 10:00Z', 1, '', 2, 390000),
			('2026-10-05 11:00Z', 2, 'twice', 1, 195000), ('2026-10-06 11:00Z', 2, 'twice', 1, 195000),
			('2026-11-01 00:00Z', 1, 'twice', 1, 195000)) AS v(b, s, h, n, c)`)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := migrations.Up(ctx, pool); err != nil {
		t.Fatal(err)
	}
	var rollups, prefixes []string
	if err := pool.QueryRow(ctx, `SELECT array_agg(concat_ws(' ', to_char(bucket AT TIME ZONE 'UTC', 'MM-DD HH24'), series_id,
			quote_literal(prompt_hash), calls, cost_nanos, single_use) ORDER BY bucket, series_id, prompt_hash)
		FROM rollup_cache_hourly`).Scan(&rollups); err != nil {
		t.Fatal(err)
	}
	if err := pool.QueryRow(ctx, `SELECT array_agg(concat_ws(' ', to_char(month AT TIME ZONE 'UTC', 'MM'), prompt_hash, calls,
			series_id, to_char(bucket AT TIME ZONE 'UTC', 'MM-DD HH24'), cost_nanos) ORDER BY month, prompt_hash)
		FROM cache_prefixes`).Scan(&prefixes); err != nil {
		t.Fatal(err)
	}
	wantRollups := []string{"10-05 10 1 '' 3 585000 1", "10-05 11 2 'twice' 1 195000 0", "10-06 11 2 'twice' 1 195000 0",
		"11-01 00 1 '' 1 195000 1"}
	wantPrefixes := []string{"10 once 1 1 10-05 10 195000", "10 twice 2", "11 twice 1 1 11-01 00 195000"}
	if !slices.Equal(rollups, wantRollups) {
		t.Errorf("rollup_cache_hourly:\n got %q\nwant %q", rollups, wantRollups)
	}
	if !slices.Equal(prefixes, wantPrefixes) {
		t.Errorf("cache_prefixes:\n got %q\nwant %q", prefixes, wantPrefixes)
	}
}

// TestHistMerge checks hist_merge, which adds two latency histograms stored with their own lower
// bounds, where one covers the other, where they overlap on either side, and where they are apart.
func TestHistMerge(t *testing.T) {
	t.Parallel()
	pool := dbtest.New(t)
	cases := []struct{ a, b, want string }{
		{"[3:5]={1,2,3}", "[4:4]={10}", "[3:5]={1,12,3}"},
		{"[4:4]={10}", "[3:5]={1,2,3}", "[3:5]={1,12,3}"},
		{"[3:5]={1,2,3}", "[1:3]={1,1,1}", "{1,1,2,2,3}"}, // PostgreSQL omits a lower bound of 1
		{"[3:5]={1,2,3}", "[5:8]={1,1,1,1}", "[3:8]={1,2,4,1,1,1}"},
		{"[0:1]={1,1}", "[4:5]={2,2}", "[0:5]={1,1,0,0,2,2}"},
		{"[7:8]={5,5}", "[-2:-2]={1}", "[-2:8]={1,0,0,0,0,0,0,0,0,5,5}"},
		{"[3:5]={1,2,3}", "", "[3:5]={1,2,3}"},
		{"[3:5]={1,2,3}", "[2:6]={0,0,5,0,0}", "[2:6]={0,1,7,3,0}"}, // zeros widen it as any bucket does
	}
	for _, c := range cases {
		var got string
		if err := pool.QueryRow(context.Background(), `SELECT hist_merge($1::int8[], nullif($2, '')::int8[])::text`, c.a, c.b).Scan(&got); err != nil {
			t.Fatal(err)
		}
		if got != c.want {
			t.Errorf("hist_merge(%s, %s) = %s, want %s", c.a, c.b, got, c.want)
		}
	}
}

// TestHistSum checks the hist_sum aggregate (strict since migration 10): NULLs are skipped, a lone
// histogram is the sum as it is, and several merge whatever their bounds.
func TestHistSum(t *testing.T) {
	t.Parallel()
	pool := dbtest.New(t)
	cases := []struct {
		hists []string // "" for NULL
		want  string   // "" for NULL
	}{
		{[]string{"[3:4]={1,2}"}, "[3:4]={1,2}"},
		{[]string{"", "[3:4]={1,2}", ""}, "[3:4]={1,2}"},
		{[]string{"[3:4]={1,2}", "", "[4:5]={1,1}", "[0:0]={7}"}, "[0:5]={7,0,0,1,3,1}"},
		{[]string{"", ""}, ""},
		{nil, ""},
	}
	for _, c := range cases {
		var got *string
		if err := pool.QueryRow(context.Background(), `SELECT hist_sum(nullif(h, '')::int8[])::text FROM unnest($1::text[]) AS t(h)`,
			c.hists).Scan(&got); err != nil {
			t.Fatal(err)
		}
		if g := ""; (got == nil) != (c.want == "") || (got != nil && *got != c.want) {
			if got != nil {
				g = *got
			}
			t.Errorf("hist_sum(%q) = %q, want %q", c.hists, g, c.want)
		}
	}
}

// downTo rolls a migrated database back to version v.
func downTo(t *testing.T, pool *pgxpool.Pool, v int64) {
	t.Helper()
	for {
		cur, _, err := migrations.Versions(context.Background(), pool)
		if err != nil {
			t.Fatal(err)
		}
		if cur == v {
			return
		}
		if err := migrations.Down(context.Background(), pool); err != nil {
			t.Fatal(err)
		}
	}
}

// TestNarrowBackfill checks that migration 7 fills the narrow daily rollups from rollup_daily: by
// model, the rows of two tenants' series of one model added up, histograms merged, another model
// apart; by service, all three in one row.
func TestNarrowBackfill(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := dbtest.New(t)
	downTo(t, pool, 6)
	_, err := pool.Exec(ctx, `
		INSERT INTO series (project_id, tenant, service, operation, provider, model, fallback_from) OVERRIDING SYSTEM VALUE
		VALUES (1, 'a', 'chat', 'default', 'anthropic', 'm1', ''), (1, 'b', 'chat', 'default', 'anthropic', 'm1', ''),
			(1, 'a', 'chat', 'default', 'anthropic', 'm2', '');
		INSERT INTO rollup_daily (project_id, bucket, series_id, fallback, status, error_class, attempts, requests,
			input_tokens, output_tokens, cache_write_tokens, cache_write_1h_tokens, cache_read_tokens, reasoning_tokens,
			cache_write_calls, cache_read_calls, cost_nanos, nocache_cost_nanos, unpriced_attempts, client_cost_nanos,
			cost_mismatch_attempts, latency_sum_ms, latency_hist)
		SELECT 1, '2026-11-02', s.id, false, 'ok', 'none', n, n, 10 * n, 0, 0, 0, 0, 0, 0, 0, 100 * n, 100 * n, 0, 0, 0,
			500 * n, h::int8[]
		FROM series s JOIN (VALUES ('a', 'm1', 2, '[3:4]={1,1}'), ('b', 'm1', 3, '[4:6]={1,1,1}'), ('a', 'm2', 5, '{5}'))
			AS v(tenant, model, n, h) ON v.tenant = s.tenant AND v.model = s.model`)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := migrations.Up(ctx, pool); err != nil {
		t.Fatal(err)
	}
	var got []string
	if err := pool.QueryRow(ctx, `SELECT array_agg(concat_ws(' ', bucket, model, attempts, input_tokens, cost_nanos,
			latency_sum_ms, latency_hist::text) ORDER BY model) FROM rollup_daily_model`).Scan(&got); err != nil {
		t.Fatal(err)
	}
	want := []string{"2026-11-02 m1 5 50 500 2500 [3:6]={1,2,1,1}", "2026-11-02 m2 5 50 500 2500 {5}"}
	if !slices.Equal(got, want) {
		t.Errorf("rollup_daily_model:\n got %q\nwant %q", got, want)
	}
	if err := pool.QueryRow(ctx, `SELECT array_agg(concat_ws(' ', bucket, service, operation, attempts, input_tokens, cost_nanos,
			latency_sum_ms, latency_hist::text)) FROM rollup_daily_service`).Scan(&got); err != nil {
		t.Fatal(err)
	}
	want = []string{"2026-11-02 chat default 10 100 1000 5000 {5,0,1,2,1,1}"}
	if !slices.Equal(got, want) {
		t.Errorf("rollup_daily_service:\n got %q\nwant %q", got, want)
	}
}

// TestPendingTablesMatchRollups checks that every pending table has the columns, in order and
// type, of the rollup it feeds (pending_rollup_hourly: rollup_hourly's, the local day and the
// minute; pending_cache: rollup_cache_hourly's but single_use), and rollup_minute5 rollup_hourly's, so a migration that changes a rollup
// cannot forget its pending table.
func TestPendingTablesMatchRollups(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := dbtest.New(t)
	columns := func(table string) []string {
		t.Helper()
		rows, err := pool.Query(ctx, `SELECT attname || ' ' || format_type(atttypid, atttypmod) FROM pg_attribute
			WHERE attrelid = $1::regclass AND attnum > 0 AND NOT attisdropped ORDER BY attnum`, table)
		if err != nil {
			t.Fatal(err)
		}
		cols, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			t.Fatal(err)
		}
		return cols
	}
	for _, c := range []struct {
		pending, rollup, without string
		with                     []string
	}{
		{"pending_rollup_hourly", "rollup_hourly", "", []string{"day date", "minute smallint"}},
		{"pending_cache", "rollup_cache_hourly", "single_use bigint", nil},
		{"pending_load_minute", "rollup_load_minute", "", []string{"day date"}},
		{"rollup_minute5", "rollup_hourly", "", nil}, // not a pending table, but summed from the same rows
	} {
		want := slices.DeleteFunc(columns(c.rollup), func(col string) bool { return col == c.without })
		want = append(want, c.with...)
		if got := columns(c.pending); !slices.Equal(got, want) {
			t.Errorf("%s has columns %v, want %v (those of %s)", c.pending, got, want, c.rollup)
		}
	}
}

// TestOnePendingRollupFold checks that migration 9 folds the deltas pending in the five old tables
// into their rollups before it drops four of them, and that migrating down folds those pending in
// the new layout into all five rollups, the narrow ones through the series' columns.
func TestOnePendingRollupFold(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := dbtest.New(t)
	downTo(t, pool, 8)
	// A series without a tenant is its own shape, so migration 11 leaves its rollup rows in place.
	var series int64
	if err := pool.QueryRow(ctx, `INSERT INTO series (project_id, tenant, service, operation, provider, model, fallback_from)
		VALUES (1, '', 'svc', 'op', 'anthropic', 'm', '') RETURNING id`).Scan(&series); err != nil {
		t.Fatal(err)
	}
	// sums lists every summed column, and values fills each with n.
	sums := `attempts, requests, input_tokens, output_tokens, cache_write_tokens, cache_write_1h_tokens, cache_read_tokens,
		reasoning_tokens, cache_write_calls, cache_read_calls, cost_nanos, nocache_cost_nanos, unpriced_attempts,
		client_cost_nanos, cost_mismatch_attempts, latency_sum_ms, latency_hist`
	values := `n, n, n, n, n, n, n, n, n, n, n, n, n, n, n, n, ARRAY[n]::int8[]`
	for _, q := range []string{
		// The hourly delta twice (they add up) and a rollup row it adds to.
		`INSERT INTO rollup_hourly (project_id, bucket, series_id, fallback, status, error_class, ` + sums + `)
			SELECT 1, '2026-10-05 10:00Z', $1, false, 'ok', 'none', ` + values + ` FROM (VALUES (5)) v(n)`,
		`INSERT INTO pending_rollup_hourly (project_id, bucket, series_id, fallback, status, error_class, ` + sums + `)
			SELECT 1, '2026-10-05 10:00Z', $1, false, 'ok', 'none', ` + values + ` FROM (VALUES (1), (2)) v(n)`,
		`INSERT INTO pending_rollup_daily (project_id, bucket, series_id, fallback, status, error_class, ` + sums + `)
			SELECT 1, '2026-10-05', $1, false, 'ok', 'none', ` + values + ` FROM (VALUES (3)) v(n)`,
		`INSERT INTO pending_rollup_daily_model (project_id, bucket, provider, model, fallback_from, fallback, status, error_class, ` + sums + `)
			SELECT 1, '2026-10-05', 'anthropic', 'm', '', false, 'ok', 'none', ` + values + ` FROM (VALUES (3)) v(n) WHERE $1 > 0`,
		`INSERT INTO pending_rollup_daily_service (project_id, bucket, service, operation, fallback, status, error_class, ` + sums + `)
			SELECT 1, '2026-10-05', 'svc', 'op', false, 'ok', 'none', ` + values + ` FROM (VALUES (3)) v(n) WHERE $1 > 0`,
		`INSERT INTO pending_rollup_daily_tenant (project_id, bucket, tenant, fallback, status, error_class, ` + sums + `)
			SELECT 1, '2026-10-05', '', false, 'ok', 'none', ` + values + ` FROM (VALUES (3)) v(n) WHERE $1 > 0`,
	} {
		if _, err := pool.Exec(ctx, q, series); err != nil {
			t.Fatal(err)
		}
	}
	counts := func() string {
		t.Helper()
		var s string
		if err := pool.QueryRow(ctx, `SELECT concat_ws(' ',
			(SELECT string_agg(attempts || ':' || cost_nanos || ':' || latency_hist::text, ',') FROM rollup_hourly),
			(SELECT string_agg(attempts || ':' || latency_hist::text, ',') FROM rollup_daily),
			(SELECT string_agg(attempts::text, ',') FROM rollup_daily_model),
			(SELECT string_agg(attempts::text, ',') FROM rollup_daily_service),
			(SELECT string_agg(attempts::text, ',') FROM rollup_daily_tenant),
			(SELECT count(*) FROM pending_rollup_hourly))`).Scan(&s); err != nil {
			t.Fatal(err)
		}
		return s
	}
	if _, err := migrations.Up(ctx, pool); err != nil {
		t.Fatal(err)
	}
	if got, want := counts(), "8:8:{8} 3:{3} 3 3 3 0"; got != want {
		t.Errorf("after migration 9: %s, want %s", got, want)
	}
	// Two hours of one local day, pending in the new layout, then migration 9 undone.
	if _, err := pool.Exec(ctx, `INSERT INTO pending_rollup_hourly (project_id, bucket, series_id, fallback, status, error_class, day, `+sums+`)
		SELECT 1, b::timestamptz, $1, false, 'ok', 'none', '2026-10-05', `+values+`
		FROM (VALUES ('2026-10-05 10:00Z', 1), ('2026-10-05 11:00Z', 1)) v(b, n)`, series); err != nil {
		t.Fatal(err)
	}
	downTo(t, pool, 8)
	if got, want := counts(), "9:9:{9},1:1:{1} 5:{5} 5 5 5 0"; got != want {
		t.Errorf("after undoing migration 9: %s, want %s", got, want)
	}
}

// TestSeriesShapes checks that migration 11 sums the rollups of series with tenants onto their
// shapes (the same series without a tenant, created where missing), keeps the tenant detail in
// rollup_daily_tenant_model, moves cache_prefixes' single-use calls to their shapes, and gives
// every series inserted afterwards its shape.
func TestSeriesShapes(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := dbtest.New(t)
	downTo(t, pool, 10)
	var t1, t2 int64 // two tenants' series of one shape, which has no series row yet
	if err := pool.QueryRow(ctx, `WITH s AS (INSERT INTO series (project_id, tenant, service, operation, provider, model, fallback_from)
		VALUES (1, 't1', 'svc', 'op', 'anthropic', 'm', ''), (1, 't2', 'svc', 'op', 'anthropic', 'm', '') RETURNING id, tenant)
		SELECT (SELECT id FROM s WHERE tenant = 't1'), (SELECT id FROM s WHERE tenant = 't2')`).Scan(&t1, &t2); err != nil {
		t.Fatal(err)
	}
	sums := `attempts, requests, input_tokens, output_tokens, cache_write_tokens, cache_write_1h_tokens, cache_read_tokens,
		reasoning_tokens, cache_write_calls, cache_read_calls, cost_nanos, nocache_cost_nanos, unpriced_attempts,
		client_cost_nanos, cost_mismatch_attempts, latency_sum_ms, latency_hist`
	values := `n, n, n, n, n, n, n, n, n, n, n, n, n, n, n, n, ARRAY[n]::int8[]`
	for _, q := range []string{
		`INSERT INTO rollup_hourly (project_id, bucket, series_id, fallback, status, error_class, ` + sums + `)
			SELECT 1, '2026-10-05 10:00Z', s, false, 'ok', 'none', ` + values + ` FROM (VALUES ($1::int8, 2), ($2, 3)) v(s, n)`,
		`INSERT INTO rollup_daily (project_id, bucket, series_id, fallback, status, error_class, ` + sums + `)
			SELECT 1, '2026-10-05', s, false, 'ok', 'none', ` + values + ` FROM (VALUES ($1::int8, 2), ($2, 3)) v(s, n)`,
		`INSERT INTO rollup_cache_hourly (project_id, bucket, series_id, fallback, prompt_hash, calls, cache_write_calls,
			cache_read_calls, input_tokens, cache_write_tokens, cache_read_tokens, cost_nanos, nocache_cost_nanos,
			unpriced_attempts, single_use)
			SELECT 1, '2026-10-05 10:00Z', s, false, '', n, n, 0, n, n, 0, n, n, 0, 1 FROM (VALUES ($1::int8, 1), ($2, 1)) v(s, n)`,
		`INSERT INTO cache_prefixes (project_id, month, prompt_hash, calls, series_id, fallback, bucket, cost_nanos)
			VALUES (1, '2026-10-01Z', 'once', 1, $1, false, '2026-10-05 10:00Z', 7), (1, '2026-10-01Z', 'twice', 2, NULL, NULL, NULL, NULL)
			RETURNING $2::int8`,
	} {
		if _, err := pool.Exec(ctx, q, t1, t2); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := migrations.Up(ctx, pool); err != nil {
		t.Fatal(err)
	}
	var shape int64
	if err := pool.QueryRow(ctx, `SELECT id FROM series WHERE tenant = '' AND service = 'svc'`).Scan(&shape); err != nil {
		t.Fatal(err)
	}
	var got string
	if err := pool.QueryRow(ctx, `SELECT concat_ws(' ',
		(SELECT string_agg(series_id || ':' || attempts || ':' || latency_hist::text, ',') FROM rollup_hourly),
		(SELECT string_agg(series_id || ':' || attempts, ',') FROM rollup_daily),
		(SELECT string_agg(series_id || ':' || calls || ':' || single_use, ',') FROM rollup_cache_hourly),
		(SELECT string_agg(prompt_hash || ':' || coalesce(series_id::text, '-'), ',' ORDER BY prompt_hash) FROM cache_prefixes),
		(SELECT string_agg(tenant || ':' || model || ':' || attempts, ',' ORDER BY tenant) FROM rollup_daily_tenant_model),
		(SELECT string_agg(tenant || ':' || (shape_id = $1)::text, ',' ORDER BY tenant) FROM series))`, shape).Scan(&got); err != nil {
		t.Fatal(err)
	}
	want := fmt.Sprintf("%[1]d:5:{5} %[1]d:5 %[1]d:2:2 once:%[1]d,twice:- t1:m:2,t2:m:3 :true,t1:true,t2:true", shape)
	if got != want {
		t.Errorf("after migration 11:\n got %s\nwant %s", got, want)
	}
	// A new tenant of a new shape: the trigger creates the shape and links it.
	if _, err := pool.Exec(ctx, `INSERT INTO series (project_id, tenant, service, operation, provider, model, fallback_from)
		VALUES (1, 't3', 'other', 'op', 'openai', 'gpt', '')`); err != nil {
		t.Fatal(err)
	}
	var linked bool
	var series int
	if err := pool.QueryRow(ctx, `SELECT count(*), bool_and(s.shape_id = h.id) FROM series s
		JOIN series h ON h.tenant = '' AND h.service = s.service AND h.model = s.model`).Scan(&series, &linked); err != nil || !linked || series != 5 {
		t.Errorf("%d series, every one linked to its shape: %v (%v), want 5 linked", series, linked, err)
	}
}

// TestLatencyBucketInlined checks that the planner inlines latency_bucket (migration 43): a call
// of the function would cost every attempt a raw read buckets 1.6 us. It also checks the values
// at the edges, NULL among them, which the inlined body must give as the strict function did.
func TestLatencyBucketInlined(t *testing.T) {
	t.Parallel()
	pool := dbtest.New(t)
	ctx := context.Background()
	rows, err := pool.Query(ctx, `EXPLAIN (VERBOSE, COSTS OFF) SELECT latency_bucket(ms) FROM unnest('{1,2}'::int4[]) AS t(ms)`)
	if err != nil {
		t.Fatal(err)
	}
	plan, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	if text := strings.Join(plan, "\n"); strings.Contains(text, "latency_bucket") || !strings.Contains(text, "CASE") {
		t.Errorf("latency_bucket is not inlined:\n%s", text)
	}
	for _, c := range []struct{ ms, want string }{
		{"NULL", "NULL"}, {"-5", "0"}, {"0", "0"}, {"1", "0"}, {"2", "16"}, {"1000", "160"},
	} {
		var got string
		if err := pool.QueryRow(ctx, `SELECT coalesce(latency_bucket(nullif($1, 'NULL')::int4)::text, 'NULL')`, c.ms).Scan(&got); err != nil {
			t.Fatal(err)
		}
		if got != c.want {
			t.Errorf("latency_bucket(%s) = %s, want %s", c.ms, got, c.want)
		}
	}
}
