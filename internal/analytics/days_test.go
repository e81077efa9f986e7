package analytics_test

import (
	"context"
	"reflect"
	"testing"
	"time"

	"github.com/ledgerd/ledgerd/internal/analytics"
)

func mustZone(t testing.TB, name string) *time.Location {
	t.Helper()
	tz, err := time.LoadLocation(name)
	if err != nil {
		t.Fatal(err)
	}
	return tz
}

// counts is attempts per group key (day or hour) of a summary.
func counts(s analytics.Summary) map[string]int64 {
	out := map[string]int64{}
	for _, g := range s.Groups {
		k := g.Key.Day
		if g.Key.Hour != nil {
			k = g.Key.Hour.UTC().Format(time.RFC3339)
		}
		out[k] = g.Attempts
	}
	return out
}

// TestDaysInTimezone checks that days are local days of the stored timezone, across the end of
// daylight saving time (1 November 2026 in New York lasts 25 hours), whether they come from daily
// rollups or from the hourly rows at the edges of a range.
func TestDaysInTimezone(t *testing.T) {
	t.Parallel()
	ny := mustZone(t, "America/New_York")
	l := newLedger(t, ny)
	p := l.project("acme")
	utc := func(d, h, m int) time.Time { return time.Date(2026, 10, d, h, m, 0, 0, time.UTC) }
	l.add(p,
		newRec(utc(31, 3, 30), "sonnet").done(), // 30 Oct 23:30 EDT
		newRec(utc(31, 4, 30), "sonnet").done(), // 31 Oct 00:30 EDT
		newRec(utc(32, 4, 30), "sonnet").done(), // 1 Nov 00:30 EDT
		newRec(utc(33, 4, 30), "sonnet").done(), // 1 Nov 23:30 EST, the 25th hour of the day
		newRec(utc(33, 5, 30), "sonnet").done(), // 2 Nov 00:30 EST
		newRec(utc(33, 5, 45), "haiku").done(),  // 2 Nov 00:45 EST
		newRec(utc(34, 15, 0), "sonnet").done(), // 3 Nov 10:00 EST
	)
	s := l.service(utc(40, 0, 0))
	local := func(m time.Month, d, h int) time.Time { return time.Date(2026, m, d, h, 0, 0, 0, ny) }
	cases := []struct {
		name     string
		from, to time.Time
		groupBy  string
		want     map[string]int64
	}{
		// Whole local days, all from the daily rollups.
		{"whole days", local(10, 30, 0), local(11, 3, 0), "day",
			map[string]int64{"2026-10-30": 1, "2026-10-31": 1, "2026-11-01": 2, "2026-11-02": 2}},
		// Edges from hourly rows: 30 Oct from 22:00 EDT and 2 Nov up to 00:40 EST (rounded up to
		// 01:00), counted into their local days.
		{"edges", local(10, 30, 22), local(11, 2, 0).Add(40 * time.Minute), "day",
			map[string]int64{"2026-10-30": 1, "2026-10-31": 1, "2026-11-01": 2, "2026-11-02": 2}},
		// The range ends at 2 Nov 00:00 EST: the record of 00:30 is outside.
		{"exclusive end", local(10, 31, 0), local(11, 2, 0), "day",
			map[string]int64{"2026-10-31": 1, "2026-11-01": 2}},
		// Hours are UTC hours, from the hourly rollups only.
		{"hours", local(10, 31, 0), local(11, 2, 1), "hour",
			map[string]int64{"2026-10-31T04:00:00Z": 1, "2026-11-01T04:00:00Z": 1, "2026-11-02T04:00:00Z": 1, "2026-11-02T05:00:00Z": 2}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			got, err := s.Summary(context.Background(), analytics.Filter{ProjectID: p, From: c.from, To: c.to}, c.groupBy)
			if err != nil {
				t.Fatal(err)
			}
			if g := counts(got); !reflect.DeepEqual(g, c.want) {
				t.Errorf("attempts per %s %v, want %v", c.groupBy, g, c.want)
			}
		})
	}
}

// TestDaysOffHour checks a timezone whose days begin at half past a UTC hour (India, +05:30):
// a range of whole local days is answered exactly from the daily rollups, and any other range
// from hourly rows, rounded to whole UTC hours, each hour counted in the day it begins in.
func TestDaysOffHour(t *testing.T) {
	t.Parallel()
	in := mustZone(t, "Asia/Kolkata")
	l := newLedger(t, in)
	p := l.project("acme")
	l.add(p,
		newRec(time.Date(2026, 10, 5, 18, 15, 0, 0, time.UTC), "sonnet").done(), // 5 Oct 23:45 IST
		newRec(time.Date(2026, 10, 5, 18, 45, 0, 0, time.UTC), "sonnet").done(), // 6 Oct 00:15 IST
		newRec(time.Date(2026, 10, 6, 12, 0, 0, 0, time.UTC), "sonnet").done(),  // 6 Oct 17:30 IST
	)
	s := l.service(time.Date(2026, 10, 10, 0, 0, 0, 0, time.UTC))
	local := func(d, h int) time.Time { return time.Date(2026, 10, d, h, 0, 0, 0, in) }
	cases := []struct {
		name             string
		from, to         time.Time
		want             map[string]int64
		wantFrom, wantTo time.Time
	}{
		// Whole local days: exact, the range kept as asked.
		{"whole days", local(5, 0), local(7, 0), map[string]int64{"2026-10-05": 1, "2026-10-06": 2},
			local(5, 0), local(7, 0)},
		// Not whole days: rounded to UTC hours; the hour 18:00-19:00 UTC begins on 5 Oct (23:30 IST)
		// and holds both records around midnight.
		{"hours", local(5, 12), local(7, 0), map[string]int64{"2026-10-05": 2, "2026-10-06": 1},
			time.Date(2026, 10, 5, 6, 0, 0, 0, time.UTC), time.Date(2026, 10, 6, 19, 0, 0, 0, time.UTC)},
	}
	for _, c := range cases {
		got, err := s.Summary(context.Background(), analytics.Filter{ProjectID: p, From: c.from, To: c.to}, "day")
		if err != nil {
			t.Fatal(err)
		}
		if g := counts(got); !reflect.DeepEqual(g, c.want) {
			t.Errorf("%s: attempts per day %v, want %v", c.name, g, c.want)
		}
		if !got.From.Equal(c.wantFrom) || !got.To.Equal(c.wantTo) {
			t.Errorf("%s: range [%v, %v), want [%v, %v)", c.name, got.From, got.To, c.wantFrom, c.wantTo)
		}
	}
}
