package ingest

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/ledgerd/ledgerd/internal/dbtest"
	"github.com/ledgerd/ledgerd/money"
	"github.com/ledgerd/ledgerd/schema"
	"github.com/ledgerd/ledgerd/store"
	"github.com/ledgerd/ledgerd/synth"
)

func flat(a *schema.Attempt) Costing {
	total := int64(a.InputTokens + a.OutputTokens)
	return Costing{Cost: money.Nanos(total), NoCache: money.Nanos(total), Priced: true,
		Version: store.PriceVersion{Key: "t/" + a.Model, Provider: a.Provider, Model: a.Model, EffectiveFrom: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}}
}

func variants() map[string]string {
	full := insertSQL
	i := strings.Index(full, "), hourly AS (")
	j := strings.Index(full, "), daily AS (")
	k := strings.Index(full, "), cache AS (")
	l := strings.LastIndex(full, ")\n\tSELECT project_id")
	head := full[:i]
	hourly := full[i:j]
	daily := full[j:k]
	cache := full[k:l]
	tail := full[l:]
	nohist := func(s string) string {
		s = strings.Replace(s, ", latency_hist)", ")", 1)
		s = strings.Replace(s, ", "+LatencyHistExpr, "", 1)
		s = strings.Replace(s, ",\n\t\t\tlatency_hist = hist_merge(r.latency_hist, excluded.latency_hist)", "", 1)
		return s
	}
	return map[string]string{
		"1 attempts only":        head + tail,
		"2 +hourly":              head + hourly + tail,
		"3 +hourly nohist":       head + nohist(hourly) + tail,
		"4 +hourly+daily":        head + hourly + daily + tail,
		"5 +hourly+daily nohist": head + nohist(hourly) + nohist(daily) + tail,
		"6 full":                 full,
		"7 full nohist":          head + nohist(hourly) + nohist(daily) + cache + tail,
	}
}

func cpu(pid int) time.Duration {
	b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	f := strings.Fields(string(b[strings.LastIndex(string(b), ")")+2:]))
	u, _ := strconv.ParseInt(f[11], 10, 64)
	s, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(u+s) * 10 * time.Millisecond
}

func TestZZExplain(t *testing.T) {
	ctx := context.Background()
	pool := dbtest.New(t)
	pool.Exec(ctx, "ALTER TABLE rollup_hourly ALTER latency_hist DROP NOT NULL")
	pool.Exec(ctx, "ALTER TABLE rollup_daily ALTER latency_hist DROP NOT NULL")
	st := store.New(pool)
	p, _ := st.EnsureProject(ctx, "x")
	n, _ := strconv.Atoi(os.Getenv("N"))
	days, _ := strconv.Atoi(os.Getenv("DAYS"))
	now := time.Now()
	seed := int64(0)
	vs := variants()
	for _, name := range []string{"0 copy", "1 attempts only", "2 +hourly", "3 +hourly nohist", "4 +hourly+daily", "5 +hourly+daily nohist", "6 full", "7 full nohist"} {
		best := time.Hour
		for round := 0; round < 8; round++ {
			seed++
			g := synth.New(synth.Options{Seed: seed, Start: now.Add(-time.Duration(days) * time.Hour), End: now})
			var rows []*row
			var times []time.Time
			var keys []store.SeriesKey
			var prices []store.PriceVersion
			for len(rows) < n {
				for _, a := range g.Next() {
					if a.Operation == "" {
						a.Operation = "default"
					}
					r := &row{a: a}
					r.a.StartedAt = r.a.StartedAt.UTC().Truncate(time.Microsecond)
					r.series = store.SeriesKey{ProjectID: p.ID, Tenant: a.Tenant, Service: a.Service, Operation: a.Operation, Provider: a.Provider, Model: a.Model, FallbackFrom: a.FallbackFrom}
					r.cost = flat(&r.a)
					r.key = identity{p.ID, a.AttemptID, r.a.StartedAt.UnixMicro()}
					rows = append(rows, r)
					times = append(times, r.a.StartedAt)
					keys = append(keys, r.series)
					prices = append(prices, r.cost.Version)
				}
			}
			st.EnsurePartitions(ctx, times...)
			sids, _ := st.SeriesIDs(ctx, keys)
			pids, _ := st.PriceIDs(ctx, prices)
			args, _ := columns(rows, sids, pids)
			args = append(args, "UTC")
			sql := vs[name]
			if !strings.Contains(sql, "$27") {
				args = args[:26]
			}
			if name == "0 copy" {
				conn, _ := pool.Acquire(ctx)
				var pid int
				conn.QueryRow(ctx, "SELECT pg_backend_pid()").Scan(&pid)
				cols := []string{}
				for _, c := range attemptCols {
					cols = append(cols, c.col)
				}
				data := make([][]any, len(rows))
				for i := range rows {
					data[i] = make([]any, len(args))
					for j, a := range args {
						switch v := a.(type) {
						case []int64:
							data[i][j] = v[i]
						case []int32:
							data[i][j] = v[i]
						case []*int32:
							data[i][j] = v[i]
						case []*int16:
							data[i][j] = v[i]
						case []*int64:
							data[i][j] = v[i]
						case []string:
							data[i][j] = v[i]
						case []*string:
							data[i][j] = v[i]
						case []bool:
							data[i][j] = v[i]
						case []time.Time:
							data[i][j] = v[i]
						default:
							t.Fatalf("%T", a)
						}
					}
				}
				c0 := cpu(pid)
				w0 := time.Now()
				if _, err := conn.CopyFrom(ctx, pgx.Identifier{"attempts"}, cols, pgx.CopyFromRows(data)); err != nil {
					t.Fatal(err)
				}
				d := cpu(pid) - c0
				_ = w0
				conn.Release()
				if d < best && round > 0 {
					best = d
				}
				continue
			}
			conn, _ := pool.Acquire(ctx)
			var pid int
			conn.QueryRow(ctx, "SELECT pg_backend_pid()").Scan(&pid)
			c0 := cpu(pid)
			_, err := conn.Exec(ctx, sql, args...)
			if err != nil {
				t.Fatal(name, err)
			}
			d := cpu(pid) - c0
			conn.Release()
			if d < best && round > 0 {
				best = d
			}
		}
		fmt.Printf("%-25s %d rows best cpu %8s  %6.0f rows/cpu-s\n", name, n, best.Round(time.Millisecond), float64(n)/best.Seconds())
	}
}
