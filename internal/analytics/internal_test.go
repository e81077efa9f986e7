package analytics

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ledgerd/ledgerd/money"
)

// TestDayStart checks the first instant of every local day of 2025 to 2027 in zones with awkward
// clocks: the instant falls on that day and the instant before it on the day before, as
// PostgreSQL's (t AT TIME ZONE tz)::date counts days.
func TestDayStart(t *testing.T) {
	t.Parallel()
	for _, name := range []string{
		"UTC",
		"America/New_York",    // DST changes at 02:00
		"Asia/Kolkata",        // +05:30: days begin at 18:30 UTC
		"Australia/Lord_Howe", // DST shifts by 30 minutes
		"America/Havana",      // DST begins at midnight: 00:00 does not exist
		"America/Santiago",    // DST ends at midnight: 23:00 happens twice
		"Asia/Beirut",         // DST begins at midnight
	} {
		tz, err := time.LoadLocation(name)
		if err != nil {
			t.Fatal(err)
		}
		for d := (date{2025, 1, 1}); d.before(date{2028, 1, 1}); d = d.addDays(1) {
			s := d.start(tz)
			if got := dateOf(s, tz); got != d {
				t.Errorf("%s: start of %s is %v, on %s", name, d, s, got)
			}
			if got := dateOf(s.Add(-time.Nanosecond), tz); got != d.addDays(-1) {
				t.Errorf("%s: the instant before the start of %s (%v) is on %s", name, d, s, got)
			}
		}
	}
}

// TestHistogram checks merging histograms with different first buckets and the nearest-rank
// percentiles they give.
func TestHistogram(t *testing.T) {
	t.Parallel()
	var h histogram
	h.add(160, []int64{1, 0, 2}) // bucket 160 ×1, 162 ×2
	h.add(150, []int64{3})       // bucket 150 ×3, before the first
	h.add(170, []int64{0, 0, 4}) // bucket 172 ×4, after the last
	h.add(161, []int64{})        // nothing
	h.add(159, []int64{1, 1, 1}) // buckets 159, 160, 161 overlapping
	// Sorted: ranks 1-3 in bucket 150, 4 in 159, 5-6 in 160, 7 in 161, 8-9 in 162, 10-13 in 172.
	cases := []struct {
		q    int64 // per mille
		want int   // bucket
	}{
		{1, 150},    // rank 1
		{230, 150},  // rank ceil(2.99) = 3
		{250, 159},  // rank ceil(3.25) = 4
		{500, 161},  // rank ceil(6.5) = 7
		{950, 172},  // rank ceil(12.35) = 13
		{1000, 172}, // the last
	}
	if h.total() != 13 || h.lo != 150 || len(h.counts) != 23 {
		t.Fatalf("merged histogram lo %d len %d total %d", h.lo, len(h.counts), h.total())
	}
	for _, c := range cases {
		if got, want := h.quantile(c.q, h.total()), math.Exp2((float64(c.want)-0.5)/16); got != want {
			t.Errorf("quantile %d‰ = %v, want bucket %d (%v)", c.q, got, c.want, want)
		}
	}
	if bucketValue(0) != 1 {
		t.Errorf("bucket 0 reports %v, want 1", bucketValue(0))
	}
	// A histogram that reaches past the merged one on both sides.
	var w histogram
	w.add(5, []int64{1, 1})
	w.add(3, []int64{1, 0, 0, 0, 0, 2})
	if w.lo != 3 || !slices.Equal(w.counts, []int64{1, 0, 1, 1, 0, 2}) {
		t.Errorf("merged across both ends: lo %d counts %v, want lo 3 counts [1 0 1 1 0 2]", w.lo, w.counts)
	}
}

// FuzzQuery feeds arbitrary query strings to the parameter decoders of every endpoint: they never
// panic, and every refusal is a ParamError naming a parameter.
func FuzzQuery(f *testing.F) {
	for _, s := range []string{
		"from=2026-10-05&to=2026-10-06&group_by=day,model",
		"from=2026-10-05T10:00:00Z&to=2026-10-05T12:30:00%2B02:00&service=chat",
		"group_by=hour&from=2026-10-01",
		"month=2026-10&service=x",
		"min_calls=25&model=gpt-4o",
		"group_by=,,&min_calls=-1&month=9999-99",
	} {
		f.Add(s)
	}
	tz := time.FixedZone("test", 5*3600+1800)
	f.Fuzz(func(t *testing.T, raw string) {
		q, err := url.ParseQuery(raw)
		if err != nil {
			return
		}
		all := append(append([]string{"month"}, summaryParams...), "min_calls")
		var bad paramErrors
		p := bad.queryParams(q, all)
		bad.parseFilter(p, tz)
		err = bad.err()
		checkParamError(t, err)
		_, err = parseGroupBy(p["group_by"])
		checkParamError(t, err)
		_, err = parseMinCalls(p["min_calls"])
		checkParamError(t, err)
		if v, ok := p["month"]; ok {
			_, err = parseMonth(v)
			checkParamError(t, err)
		}
	})
}

func checkParamError(t *testing.T, err error) {
	t.Helper()
	var pe *ParamError
	if err != nil && (!errors.As(err, &pe) || pe.Param == "" || pe.Reason == "") {
		t.Fatalf("error %v is not a ParamError naming a parameter", err)
	}
}

// TestHistogramAddText reads int8[] values as PostgreSQL writes them in text, as the summary
// receives latency histograms, and refuses any other shape.
func TestHistogramAddText(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name   string
		in     []string
		lo     int
		counts []int64
		err    bool
	}{
		{"one", []string{"[37:39]={1,0,2}"}, 37, []int64{1, 0, 2}, false},
		{"merged below and above", []string{"[37:39]={1,0,2}", "[35:35]={5}", "[40:41]={1,1}"}, 35, []int64{5, 0, 1, 0, 2, 1, 1}, false},
		{"lower bound 1 unwritten", []string{"{4,5}"}, 1, []int64{4, 5}, false},
		{"negative bound", []string{"[-2:-2]={4}"}, -2, []int64{4}, false},
		{"large count", []string{"[0:0]={123456789012345678}"}, 0, []int64{123456789012345678}, false},
		{"empty array", []string{"{}"}, 0, nil, false},
		{"null element", []string{"{1,NULL}"}, 0, nil, true},
		{"trailing comma", []string{"{1,}"}, 0, nil, true},
		{"negative count", []string{"{-1}"}, 0, nil, true},
		{"two dimensions", []string{"{{1},{2}}"}, 0, nil, true},
		{"no braces", []string{"1,2"}, 0, nil, true},
		{"bad bound", []string{"[x:3]={1}"}, 0, nil, true},
		{"cut", []string{"[3:4]="}, 0, nil, true},
		{"too many digits", []string{"{1234567890123456789}"}, 0, nil, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			var (
				h   histogram
				buf []int64
				err error
			)
			for _, s := range c.in {
				if buf, err = h.addText([]byte(s), buf); err != nil {
					break
				}
			}
			if c.err {
				if !errors.Is(err, errHistFormat) {
					t.Fatalf("err %v, want errHistFormat", err)
				}
				return
			}
			if err != nil || h.lo != c.lo && len(c.counts) > 0 || !slices.Equal(h.counts, c.counts) {
				t.Fatalf("got lo %d counts %v err %v, want lo %d counts %v", h.lo, h.counts, err, c.lo, c.counts)
			}
		})
	}
}

// TestPlanFor checks which rollup a summary reads whole days from: the first narrow one that keeps
// every series column its grouping and filter name, else rollup_daily.
func TestPlanFor(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		dims  []string
		f     Filter
		table string
	}{
		{nil, Filter{}, "rollup_daily_model"},
		{[]string{ByDay, ByModel}, Filter{Model: "m", Provider: "p"}, "rollup_daily_model"},
		{[]string{ByHour, ByProvider}, Filter{}, "rollup_daily_model"},
		{[]string{ByService}, Filter{}, "rollup_daily_service"},
		{[]string{ByDay, ByOperation}, Filter{Service: "s"}, "rollup_daily_service"},
		{nil, Filter{Operation: "o"}, "rollup_daily_service"},
		{[]string{ByDay, ByTenant}, Filter{}, "rollup_daily_tenant"},
		{[]string{ByDay, ByTenant}, Filter{Service: "s"}, "attempts"},
		{[]string{ByModel}, Filter{Service: "s"}, "rollup_daily"},
		{[]string{ByService}, Filter{Model: "m"}, "rollup_daily"},
		{[]string{ByModel}, Filter{Tenant: "t"}, "rollup_daily_tenant_model"},
		{[]string{ByDay, ByTenant, ByProvider}, Filter{}, "rollup_daily_tenant_model"},
		{[]string{ByService}, Filter{Tenant: "t"}, "attempts"},
		{nil, Filter{Tenant: "t"}, "rollup_daily_tenant"},
	} {
		g, err := parseGrouping(c.dims)
		if err != nil {
			t.Fatal(err)
		}
		p := planFor(g, c.f)
		series := p.seriesAlias()
		table, wantSeries := "rollup_daily", "s"
		for _, n := range []string{"rollup_daily_model", "rollup_daily_service", "rollup_daily_tenant", "rollup_daily_tenant_model"} {
			if strings.Contains(p.sums, "FROM "+n+" ") {
				table, wantSeries = n, "r"
			}
		}
		if p.raw {
			table, wantSeries = "attempts", "r"
		}
		if table != c.table || series != wantSeries {
			t.Errorf("%v %+v: reads %s (series columns from %s), want %s", c.dims, c.f, table, series, c.table)
		}
	}
}

// TestTop checks which groups Summary.Top keeps: the costliest first, an all-unpriced group as
// costing nothing, ties in their key order, and how many there were.
func TestTop(t *testing.T) {
	t.Parallel()
	nanos := func(v int64) *money.Nanos { n := money.Nanos(v); return &n }
	group := func(tenant string, cost *money.Nanos) Group {
		return Group{Key: Key{Tenant: &tenant}, Stats: Stats{CostUSD: cost}}
	}
	for _, c := range []struct {
		name   string
		groups []Group
		n      int
		want   []string
	}{
		{"costliest first", []Group{group("a", nanos(1)), group("b", nanos(3)), group("c", nanos(2))}, 2, []string{"b", "c"}},
		{"unpriced last, ties in key order", []Group{group("a", nil), group("b", nanos(5)), group("c", nanos(5))}, 3, []string{"b", "c", "a"}},
		{"fewer than n", []Group{group("a", nanos(1))}, 20, []string{"a"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := Summary{Groups: c.groups}
			s.Top(c.n)
			var got []string
			for _, g := range s.Groups {
				got = append(got, *g.Key.Tenant)
			}
			if !slices.Equal(got, c.want) || s.GroupsTotal == nil || *s.GroupsTotal != len(c.groups) {
				t.Errorf("kept %v of %v, want %v of %d", got, s.GroupsTotal, c.want, len(c.groups))
			}
		})
	}
}

// TestRangeOf checks the effective range and plan of summaries around the 8 days rollup_hourly
// keeps its hours (rollup.HourlyKeep): questions by model keep their hours however old; questions
// by shape or tenant reaching further back start at local midnight, and end at one when they end
// that far back too (both ends where days do not begin on whole UTC hours); grouped by hour they
// read the raw attempts.
func TestRangeOf(t *testing.T) {
	t.Parallel()
	ny, err := time.LoadLocation("America/New_York")
	if err != nil {
		t.Fatal(err)
	}
	india, err := time.LoadLocation("Asia/Kolkata")
	if err != nil {
		t.Fatal(err)
	}
	// November 20; New York's midnights are at 05:00 UTC (daylight saving time ended on the 1st),
	// India's at 18:30 the day before.
	now := time.Date(2026, 11, 20, 15, 30, 0, 0, time.UTC)
	utc := func(d, h, m int) time.Time { return time.Date(2026, 11, d, h, m, 0, 0, time.UTC) }
	for _, c := range []struct {
		name     string
		tz       *time.Location
		dims     []string
		f        Filter
		from, to time.Time
		// wantFrom, wantTo are the range answered; raw whether the raw attempts answer it.
		wantFrom, wantTo time.Time
		raw              bool
	}{
		{"recent, by service: hours kept", ny, []string{ByService}, Filter{}, utc(15, 9, 0), utc(20, 15, 0), utc(15, 9, 0), utc(20, 15, 0), false},
		{"old, by model: hours kept by model", ny, []string{ByModel}, Filter{}, utc(2, 9, 0), utc(20, 15, 0), utc(2, 9, 0), utc(20, 15, 0), false},
		{"old, by service: from midnight", ny, []string{ByService}, Filter{}, utc(2, 9, 0), utc(20, 15, 0), utc(2, 5, 0), utc(20, 15, 0), false},
		{"old, by tenant: from midnight", ny, []string{ByTenant}, Filter{}, utc(2, 9, 0), utc(20, 15, 0), utc(2, 5, 0), utc(20, 15, 0), false},
		{"old, a model of a service: from midnight", ny, []string{ByModel}, Filter{Service: "s"}, utc(2, 9, 0), utc(20, 15, 0), utc(2, 5, 0), utc(20, 15, 0), false},
		{"old at both ends: midnight to midnight", ny, []string{ByService}, Filter{}, utc(2, 9, 0), utc(5, 9, 0), utc(2, 5, 0), utc(6, 5, 0), false},
		{"old, days at half hours: both ends at midnight", india, []string{ByTenant}, Filter{}, utc(2, 9, 0), utc(20, 15, 0), utc(1, 18, 30), utc(20, 18, 30), false},
		{"old, by hour and service: raw", ny, []string{ByHour, ByService}, Filter{}, utc(2, 9, 0), utc(3, 9, 0), utc(2, 9, 0), utc(3, 9, 0), true},
		{"old, by hour and model: hours kept by model", ny, []string{ByHour, ByModel}, Filter{}, utc(2, 9, 0), utc(3, 9, 0), utc(2, 9, 0), utc(3, 9, 0), false},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := &Service{tz: c.tz, now: func() time.Time { return now }}
			g, err := parseGrouping(c.dims)
			if err != nil {
				t.Fatal(err)
			}
			c.f.From, c.f.To = c.from, c.to
			p, from, to, err := s.rangeOf(g, c.f, planFor(g, c.f))
			if err != nil {
				t.Fatal(err)
			}
			if !from.Equal(c.wantFrom) || !to.Equal(c.wantTo) || p.raw != c.raw {
				t.Errorf("answered [%v, %v) raw %v, want [%v, %v) raw %v", from, to, p.raw, c.wantFrom, c.wantTo, c.raw)
			}
		})
	}
}

// TestCandidates checks the windows read minute by minute: each candidate hour of a model with the
// hours beside it, merged per model and never across models, and a fallback's answers counted for
// the model they stood in for.
func TestCandidates(t *testing.T) {
	t.Parallel()
	p := DefaultIncidentParams
	base := time.Date(2026, 10, 5, 0, 0, 0, 0, time.UTC)
	hour := func(h int) time.Time { return base.Add(time.Duration(h) * time.Hour) }
	// group is an hour of a model's traffic: attempts, calls, failed attempts and answers, its own
	// or (fallbackFrom set) a fallback's.
	group := func(h int, model, fallbackFrom string, attempts, calls, failed, ok int64) modelHour {
		return modelHour{hour: hour(h).Unix(), model: model, fallbackFrom: fallbackFrom, fallback: fallbackFrom != "",
			attempts: attempts, calls: calls, failed: failed, okay: ok}
	}
	// steady is 100 calls an hour of model in hours [from, to), one failing.
	steady := func(model string, from, to int) []modelHour {
		var out []modelHour
		for h := from; h < to; h++ {
			out = append(out, group(h, model, "", 100, 100, 1, 99))
		}
		return out
	}
	for _, c := range []struct {
		name  string
		hours []modelHour
		want  []window
	}{
		{"quiet", steady("sonnet", 0, 24), nil},
		{"an outage of one model reads that model only",
			append(append(steady("sonnet", 0, 24), steady("haiku", 0, 24)...), group(10, "sonnet", "", 100, 100, 40, 60)),
			[]window{{"sonnet", hour(9), hour(12)}}},
		{"candidate hours of one model merge, of two models do not",
			append(append(steady("sonnet", 0, 24), steady("haiku", 0, 24)...),
				group(10, "sonnet", "", 100, 100, 40, 60), group(12, "sonnet", "", 100, 100, 40, 60),
				group(11, "haiku", "", 300, 100, 0, 100)),
			[]window{{"haiku", hour(10), hour(13)}, {"sonnet", hour(9), hour(14)}}},
		{"fallback answers count for the model they stood in for",
			append(append(steady("sonnet", 0, 24), steady("gpt-4o", 0, 24)...), group(15, "gpt-4o", "sonnet", 5, 5, 0, 5)),
			[]window{{"sonnet", hour(14), hour(17)}}},
		{"the answers of two fallbacks add up",
			append(steady("sonnet", 0, 24), group(15, "gpt-4o", "sonnet", 3, 3, 0, 3), group(15, "gemini", "sonnet", 2, 2, 0, 2)),
			[]window{{"sonnet", hour(14), hour(17)}}},
		{"too few fallback answers",
			append(steady("sonnet", 0, 24), group(15, "gpt-4o", "sonnet", 4, 4, 0, 4)), nil},
		{"a fallback for no model named",
			append(steady("sonnet", 0, 24), modelHour{hour: hour(15).Unix(), model: "gpt-4o", fallback: true, attempts: 9, calls: 9, okay: 9}), nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, _ := candidates(c.hours, p)
			if !slices.Equal(got, c.want) {
				t.Errorf("candidates = %v, want %v", got, c.want)
			}
		})
	}
}

// TestSpans checks the merging of windows into the spans the minute read scans.
func TestSpans(t *testing.T) {
	t.Parallel()
	at := func(h int) time.Time { return time.Date(2026, 10, 5, h, 0, 0, 0, time.UTC) }
	for _, c := range []struct {
		name           string
		los, his       []int
		wantLo, wantHi []int
		wantSpan       []int64
	}{
		{"none", nil, nil, nil, nil, []int64{}},
		{"one", []int{1}, []int{3}, []int{1}, []int{3}, []int64{1}},
		{"apart, out of order", []int{5, 1}, []int{7, 3}, []int{1, 5}, []int{3, 7}, []int64{2, 1}},
		{"touching", []int{1, 3}, []int{3, 5}, []int{1}, []int{5}, []int64{1, 1}},
		{"overlapping", []int{1, 2}, []int{4, 6}, []int{1}, []int{6}, []int64{1, 1}},
		{"inside another", []int{1, 2}, []int{6, 4}, []int{1}, []int{6}, []int64{1, 1}},
		{"two spans of two", []int{8, 1, 9, 2}, []int{10, 3, 11, 4}, []int{1, 8}, []int{4, 11}, []int64{2, 1, 2, 1}},
	} {
		t.Run(c.name, func(t *testing.T) {
			times := func(hs []int) []time.Time {
				var out []time.Time
				for _, h := range hs {
					out = append(out, at(h))
				}
				return out
			}
			lo, hi, span := spans(times(c.los), times(c.his))
			if !slices.Equal(lo, times(c.wantLo)) || !slices.Equal(hi, times(c.wantHi)) || !slices.Equal(span, c.wantSpan) {
				t.Errorf("spans = %v %v %v, want %v %v %v", lo, hi, span, times(c.wantLo), times(c.wantHi), c.wantSpan)
			}
		})
	}
}

// TestHoursIn checks the hours the model and spend incidents each take of the hours read once: as
// the statement's bucket >= from AND bucket < to would, to the instant.
func TestHoursIn(t *testing.T) {
	t.Parallel()
	at := func(h int) time.Time { return time.Date(2026, 10, 5, h, 0, 0, 0, time.UTC) }
	var hours []modelHour
	for h := 8; h <= 12; h++ {
		hours = append(hours, modelHour{hour: at(h).Unix(), model: "sonnet"})
	}
	for _, c := range []struct {
		name     string
		from, to time.Time
		want     []int
	}{
		{"whole hours: from in, to out", at(9), at(11), []int{9, 10}},
		{"to inside an hour takes it", at(9), at(11).Add(500 * time.Millisecond), []int{9, 10, 11}},
		{"from inside an hour leaves it", at(9).Add(time.Second), at(12), []int{10, 11}},
		{"past every hour", at(13), at(14), nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			var got []int
			for _, h := range hoursIn(hours, c.from, c.to) {
				got = append(got, time.Unix(h.hour, 0).UTC().Hour())
			}
			if !slices.Equal(got, c.want) {
				t.Errorf("hoursIn = %v, want %v", got, c.want)
			}
		})
	}
}

// TestKeptDays checks the days' summaries kept between reads: a day is found only as of the
// version it was kept at, and once more than maxKeptRows rows are kept the least recently used
// days go first, never the one just kept.
func TestKeptDays(t *testing.T) {
	t.Parallel()
	var k keptDays[dayRow]
	third := maxKeptRows / 3
	v1, v2 := dayVersion{through: 1, xmin: 10}, dayVersion{through: 1, xmin: 11}
	a, b, c, d := date{2026, 10, 1}, date{2026, 10, 2}, date{2026, 10, 3}, date{2026, 10, 4}
	has := func(step string, want map[date]bool) {
		t.Helper()
		for _, day := range []date{a, b, c, d} {
			if _, ok := k.days[keptDay{1, day}]; ok != want[day] {
				t.Errorf("%s: day %s kept %v, want %v", step, day, ok, want[day])
			}
		}
	}
	k.put(1, a, v1, make([]dayRow, third))
	k.put(1, b, v1, make([]dayRow, third))
	k.put(1, c, v1, nil)
	if _, ok := k.get(1, a, v2); ok {
		t.Error("day a found as of another version")
	}
	if _, ok := k.get(2, a, v1); ok {
		t.Error("day a found for another project")
	}
	if rows, ok := k.get(1, c, v1); !ok || rows != nil {
		t.Errorf("day c, kept without rows: %v %v", rows, ok)
	}
	if rows, ok := k.get(1, a, v1); !ok || len(rows) != third {
		t.Errorf("day a: %d rows, found %v", len(rows), ok)
	}
	has("three days", map[date]bool{a: true, b: true, c: true})
	// b was used least recently: it goes to make room.
	k.put(1, d, v1, make([]dayRow, 2*third))
	has("a fourth", map[date]bool{a: true, c: true, d: true})
	// a day larger than the bound is kept alone.
	k.put(1, b, v2, make([]dayRow, maxKeptRows+1))
	has("a large day", map[date]bool{b: true})
	if k.rows != maxKeptRows+1 {
		t.Errorf("%d rows kept, want %d", k.rows, maxKeptRows+1)
	}
	// kept again as of a new version, a day replaces its rows.
	k.put(1, b, v1, make([]dayRow, 5))
	if rows, ok := k.get(1, b, v1); !ok || len(rows) != 5 || k.rows != 5 {
		t.Errorf("day b again: %d rows, found %v, %d kept", len(rows), ok, k.rows)
	}
}

// TestKeptSpans checks the spans kept between reads: a span is found only as of the versions of
// its days it was kept at, once more than maxKept groups are kept the least recently used
// spans go first, never the one just kept, and a span larger than the bound is not kept.
func TestKeptSpans(t *testing.T) {
	t.Parallel()
	var ks keptReads[spanKey, string]
	third := maxKept / 3
	a, b, c, d := spanKey{project: 1, query: "a"}, spanKey{project: 1, query: "b"}, spanKey{project: 1, query: "c"}, spanKey{project: 1, query: "d"}
	v1, v2 := []int64{10, 11}, []int64{10, 12}
	has := func(step string, want map[string]bool) {
		t.Helper()
		for _, k := range []spanKey{a, b, c, d} {
			if _, ok := ks.reads[k]; ok != want[k.query] {
				t.Errorf("%s: span %s kept %v, want %v", step, k.query, ok, want[k.query])
			}
		}
	}
	ks.put(a, v1, "a", third)
	ks.put(b, v1, "b", third)
	ks.put(c, v1, "c", 0)
	if _, ok := ks.get(a, v2); ok {
		t.Error("span a found as of other versions")
	}
	if _, ok := ks.get(a, v1[:1]); ok {
		t.Error("span a found as of fewer days")
	}
	if v, ok := ks.get(a, v1); !ok || v != "a" {
		t.Errorf("span a: %q, found %v", v, ok)
	}
	has("three spans", map[string]bool{"a": true, "b": true, "c": true})
	// b was used least recently: it goes to make room.
	ks.put(d, v1, "d", 2*third)
	has("a fourth", map[string]bool{"a": true, "c": true, "d": true})
	// a span larger than the bound is not kept, and drops nothing.
	ks.put(b, v1, "b", maxKept+1)
	has("a large span", map[string]bool{"a": true, "c": true, "d": true})
	// kept again as of new versions, a span replaces its value.
	ks.put(a, v2, "a2", 5)
	if v, ok := ks.get(a, v2); !ok || v != "a2" || ks.size != 5+2*third {
		t.Errorf("span a again: %q, found %v, %d groups kept", v, ok, ks.size)
	}
}

// TestJoinSpans checks that one joined span stands for the spans it joins wherever they stand
// among a prefix's spans: for every sequence of up to five hours that read, write, do both or
// neither, and every run of them joined, the state after the spans (stateOf) and the breaks of the
// hours after them (cacheBreaks) are those of the spans as they were.
func TestJoinSpans(t *testing.T) {
	t.Parallel()
	kinds := []cacheSums{{calls: 3, writes: 0, reads: 2}, {calls: 5, writes: 4}, {calls: 7}, {calls: 11, writes: 1, reads: 1}}
	state := func(st cacheState) string {
		at := func(p *time.Time) string {
			if p == nil {
				return "nil"
			}
			return p.Format(time.TimeOnly)
		}
		return fmt.Sprintf("read %s since %s %+v %+v", at(st.lastRead), at(st.since), st.fromSince, st.reading)
	}
	p := IncidentParams{CacheMinCalls: 1}
	t0 := time.Date(2026, 10, 5, 0, 0, 0, 0, time.UTC)
	var checked int
	for n := 1; n <= 5; n++ {
		for code := 0; code < 1<<(2*n); code++ {
			spans := make([]cacheSpan, n)
			for i := range spans {
				h := cacheHour{at: t0.Add(time.Duration(i) * time.Hour), cacheSums: kinds[code>>(2*i)&3]}
				h.cost, h.nocache = 10*h.calls+int64(i), 8*h.calls
				spans[i] = spanOf(h)
			}
			for i := 0; i < n; i++ {
				for j := i + 1; j <= n; j++ {
					joined := slices.Concat(spans[:i], []cacheSpan{joinSpans(spans[i:j])})
					if got, want := state(stateOf(slices.Concat(joined, spans[j:]))), state(stateOf(spans)); got != want {
						t.Errorf("%v joined [%d, %d): state %s, want %s", spans, i, j, got, want)
					}
					got, _ := json.Marshal(cacheBreaks(joined, spans[j:], p))
					want, _ := json.Marshal(cacheBreaks(spans[:j], spans[j:], p))
					if string(got) != string(want) {
						t.Errorf("%v joined [%d, %d): breaks after %s, want %s", spans, i, j, got, want)
					}
					checked++
				}
			}
		}
	}
	if checked < 10_000 {
		t.Fatalf("%d cases checked", checked)
	}
}
