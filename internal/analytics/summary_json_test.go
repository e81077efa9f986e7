package analytics

import (
	"encoding/json"
	"fmt"
	"math"
	"reflect"
	"testing"
	"time"

	"github.com/ledgerd/ledgerd/money"
)

// TestSummaryJSON checks that the summary written by hand is byte for byte what encoding/json's
// Encoder writes, for every field of Summary, Group, Key and Stats (a field added to one of them
// and not to appendJSON fails "every field"), for each dimension of a key alone, and for the
// strings, numbers and empty values that need care.
func TestSummaryJSON(t *testing.T) {
	ny, err := time.LoadLocation("America/New_York")
	if err != nil {
		t.Fatal(err)
	}
	at := time.Date(2026, 11, 4, 15, 0, 0, 0, ny)
	var filled Summary
	fill(t, reflect.ValueOf(&filled).Elem())
	str := func(s string) *string { return &s }
	ratio := func(f float64) *float64 { return &f }
	nanos := func(n money.Nanos) *money.Nanos { return &n }
	yes, no := true, false
	keys := []Key{{Day: "2026-11-04"}, {Hour: &at}, {Minute: &at}, {Service: str("chat")}, {Operation: str("")},
		{Tenant: str("t-1")}, {Provider: str("openai")}, {Model: str("gpt-4o")}, {Fallback: &yes}, {Fallback: &no},
		{FallbackFrom: str("")}, {Day: "2026-11-04", Model: str("m"), Fallback: &no}}
	keyed := Summary{GroupBy: []string{ByDay, ByModel}}
	for _, k := range keys {
		keyed.Groups = append(keyed.Groups, Group{Key: k})
	}
	total := 10_000
	cases := []struct {
		name string
		s    Summary
	}{
		{"zero", Summary{}},
		{"empty", Summary{From: at, To: at.Add(time.Hour), Timezone: "America/New_York", GroupBy: []string{}, Groups: []Group{},
			Total: Stats{Errors: map[string]int64{}, CallsByAttempts: []AttemptCount{}}}},
		{"every field", filled},
		{"each key", keyed},
		{"strings to escape", Summary{Timezone: `"tz"`, GroupBy: []string{"<b>"}, Total: Stats{Errors: map[string]int64{
			"quota\u2028": 1, `"`: 2, "\xff": 3, "AT&T": 4}},
			Groups: []Group{{Key: Key{Tenant: str("café \"x\"\n"), Service: str("a>b")}}}}},
		{"numbers", Summary{GroupsTotal: &total, Groups: []Group{
			{Stats: Stats{Attempts: math.MaxInt64, Requests: math.MinInt64, AttemptsPerCall: ratio(1.0 / 3), CostUSD: nanos(0),
				CacheSavingsUSD: nanos(math.MinInt64), WastedUSD: nanos(math.MaxInt64), MaxAttempts: -1}},
			{Stats: Stats{ErrorRate: ratio(1e-7), RateLimitedShare: ratio(1e21), FallbackShare: ratio(0),
				CacheHitRatio: ratio(-2.5e-8), LatencyMS: &Latency{P50: 0, P95: 1e-6, P99: 123456789e20, Mean: 2.2}}},
		}}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			want, err := json.Marshal(c.s)
			if err != nil {
				t.Fatal(err)
			}
			want = append(want, '\n')
			if got := c.s.appendJSON(nil); string(got) != string(want) {
				t.Errorf("appendJSON:\n%s\nencoding/json:\n%s", got, want)
			}
		})
	}
}

// BenchmarkSummaryJSON writes a month by tenant of 10,000 groups, the size of the answer at
// 10,000 tenants, with encoding/json and by hand (appendJSON), in one run:
//
//	go test -run '^$' -bench SummaryJSON ./internal/analytics/
func BenchmarkSummaryJSON(b *testing.B) {
	at := time.Date(2026, 11, 4, 15, 0, 0, 0, time.UTC)
	s := Summary{From: at.AddDate(0, 0, -30), To: at, Timezone: "UTC", GroupBy: []string{ByTenant}, Groups: make([]Group, 10_000)}
	for i := range s.Groups {
		tenant := fmt.Sprintf("tenant-%05d", i)
		cost, savings, wasted := money.Nanos(1_234_567*i), money.Nanos(34_567*i), money.Nanos(1_000*i)
		perCall, hit, errRate, share := 1+float64(i%7)/10, float64(i%97)/97, float64(i%13)/1000, float64(i%5)/100
		st := Stats{Attempts: int64(30 + i%50), Requests: int64(28 + i%50), AttemptsPerCall: &perCall, Succeeded: int64(27 + i%50),
			CostUSD: &cost, InputTokens: int64(i * 4_000), OutputTokens: int64(i * 700), CacheWriteTokens: int64(i * 90),
			CacheReadTokens: int64(i * 2_000), CacheHitRatio: &hit, CacheSavingsUSD: &savings, ErrorRate: &errRate,
			Errors: map[string]int64{}, RateLimitedShare: &share, FallbackShare: &share, WastedUSD: &wasted,
			LatencyMS: &Latency{P50: 812.5, P95: 2_310.25, P99: 4_120.75, Mean: 1_002.3}}
		if i%3 == 0 {
			st.Errors["server_error"], st.Errors["rate_limited"] = 2, 1
		}
		s.Groups[i] = Group{Key: Key{Tenant: &tenant}, Stats: st}
	}
	b.Run("encoding-json", func(b *testing.B) {
		for b.Loop() {
			if _, err := json.Marshal(s); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("append", func(b *testing.B) {
		for b.Loop() {
			s.encode()
		}
	})
}
