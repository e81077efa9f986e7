package analytics

import (
	"encoding/json"
	"math"
	"reflect"
	"testing"
	"time"

	"github.com/ledgerd/ledgerd/money"
)

// TestCacheAnswerJSON checks that the cache answer written by hand is byte for byte what
// encoding/json's Encoder writes, for every field of CacheRow (a field added to it and not to
// appendJSON fails "every field") and for the strings, numbers and times that need care.
func TestCacheAnswerJSON(t *testing.T) {
	ny, err := time.LoadLocation("America/New_York")
	if err != nil {
		t.Fatal(err)
	}
	at := time.Date(2026, 11, 4, 15, 0, 0, 0, ny)
	ptr := func(n money.Nanos) *money.Nanos { return &n }
	ratio := func(f float64) *float64 { return &f }
	str := func(s string) *string { return &s }
	cases := []struct {
		name string
		a    CacheAnswer
	}{
		{"no rows", CacheAnswer{From: at, To: at.Add(time.Hour), MinCalls: 10}},
		{"empty rows", CacheAnswer{From: at.UTC(), To: at, Rows: []CacheRow{}}},
		{"every field", CacheAnswer{From: at, To: at, MinCalls: 3, BrokenCaches: 1, Rows: []CacheRow{filledRow(t), {}}}},
		{"names to escape", CacheAnswer{Rows: []CacheRow{
			{Service: `say "hi"`, Operation: `back\slash`, Provider: "<script", Model: "tab\there\nnew"},
			{Service: "a>b", Operation: "AT&T", PromptHash: str(`"`)},
			{Service: "café", Operation: "line\u2028sep\u2029", Provider: "bad\xffutf8", Model: "\x00\x1f\x7f",
				PromptHash: str(""), Explanation: "It cost $0.25 — more."},
		}}},
		{"numbers", CacheAnswer{MinCalls: -1, BrokenCaches: math.MaxInt32, Rows: []CacheRow{
			{HitRatio: ratio(0), CostUSD: ptr(0), NoCacheCostUSD: ptr(-1), SavingsUSD: ptr(math.MinInt64), Calls: math.MaxInt64},
			{HitRatio: ratio(1), CostUSD: ptr(math.MaxInt64), ExtraCostUSD: ptr(-123_456_789_012)},
			{HitRatio: ratio(0.1984126984126984)},
			{HitRatio: ratio(1e-7)},
			{HitRatio: ratio(1.5e-10)},
			{HitRatio: ratio(1e-6)},
			{HitRatio: ratio(-2.5e-8)},
			{HitRatio: ratio(1e21)},
			{HitRatio: ratio(123456789e20)},
		}}},
		{"times", CacheAnswer{From: time.Date(2026, 3, 8, 1, 59, 59, 999_999_999, ny), To: time.Date(1, 1, 1, 0, 0, 0, 0, time.UTC),
			Rows: []CacheRow{{BrokenSince: &at}, {BrokenSince: new(time.Time)}}}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			want, err := json.Marshal(c.a)
			if err != nil {
				t.Fatal(err)
			}
			want = append(want, '\n')
			if got := c.a.appendJSON(nil); string(got) != string(want) {
				t.Errorf("appendJSON:\n%s\nencoding/json:\n%s", got, want)
			}
		})
	}
}

// filledRow is a CacheRow with every exported field set to a value of its own (fill).
func filledRow(t *testing.T) CacheRow {
	var r CacheRow
	fill(t, reflect.ValueOf(&r).Elem())
	return r
}

// BenchmarkCacheAnswerJSON writes a cache answer of 9,500 rows, the size of the report at 10,000
// tenants, half of them broken with their explanation, with encoding/json and by hand
// (appendJSON), in one run:
//
//	go test -run '^$' -bench CacheAnswerJSON ./internal/analytics/
func BenchmarkCacheAnswerJSON(b *testing.B) {
	at := time.Date(2026, 11, 4, 15, 0, 0, 0, time.UTC)
	a := CacheAnswer{From: at.AddDate(0, 0, -7), To: at, MinCalls: DefaultMinCalls, Rows: make([]CacheRow, 9_500)}
	for i := range a.Rows {
		cost, nocache := money.Nanos(1_234_567*i), money.Nanos(1_200_000*i)
		savings, ratio := nocache-cost, float64(i%97)/97
		r := CacheRow{Service: "service-" + string(rune('a'+i%26)), Operation: "answer", Provider: "anthropic",
			Model: "claude-sonnet-4-5", Calls: int64(i * 31), CacheWriteCalls: int64(i * 7), CacheReadCalls: int64(i * 3),
			InputTokens: int64(i * 4_000), CacheWriteTokens: int64(i * 9_000), CacheReadTokens: int64(i * 2_000),
			HitRatio: &ratio, CostUSD: &cost, NoCacheCostUSD: &nocache, SavingsUSD: &savings}
		if i%2 == 0 {
			hash := "sys-prompt-v" + string(rune('0'+i%10))
			r.PromptHash, r.PromptHashes = &hash, 1
		}
		if i%2 == 1 {
			since, extra := at.Add(-time.Duration(i)*time.Minute), money.Nanos(34_567*i)
			r.Broken, r.BrokenSince, r.ExtraCostUSD = true, &since, &extra
			r.Explanation = explain(&r)
		}
		a.Rows[i] = r
	}
	b.Run("encoding-json", func(b *testing.B) {
		for b.Loop() {
			if _, err := json.Marshal(a); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("append", func(b *testing.B) {
		for b.Loop() {
			a.encode()
		}
	})
}
