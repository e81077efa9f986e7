package analytics

import (
	"reflect"
	"testing"
	"time"

	"github.com/ledgerd/ledgerd/money"
)

// fill sets every exported field of the struct v to a value of its own, none the zero value, and
// those of the structs it holds or embeds; it fails the test on a field of a type it does not
// know, so that a new field is taught to the hand-written JSON as well as to fill.
func fill(t *testing.T, v reflect.Value) {
	t.Helper()
	for i := range v.NumField() {
		f, sf := v.Field(i), v.Type().Field(i)
		if !sf.IsExported() {
			continue
		}
		n := int64(i + 1)
		if f.Kind() == reflect.Struct && f.Type() != reflect.TypeFor[time.Time]() {
			fill(t, f)
			continue
		}
		switch p := f.Addr().Interface().(type) {
		case *string:
			*p = sf.Name
		case *bool:
			*p = true
		case *int64:
			*p = n * 1_000_003
		case *int:
			*p = int(n) * 7
		case *time.Time:
			*p = time.Date(2026, 10, int(n), 1, 2, 3, 4, time.FixedZone("Y", 3*3600))
		case **string:
			s := "hash-" + sf.Name
			*p = &s
		case **bool:
			no := false
			*p = &no
		case **int:
			m := int(n) * 11
			*p = &m
		case **float64:
			x := float64(n) / 7
			*p = &x
		case **money.Nanos:
			m := money.Nanos(-n * 123_456_789)
			*p = &m
		case **time.Time:
			at := time.Date(2026, 11, int(n), 5, 6, 7, 8, time.FixedZone("X", -5*3600))
			*p = &at
		case *[]string:
			*p = []string{sf.Name, "day"}
		case *map[string]int64:
			*p = map[string]int64{"server_error": n, "rate_limited": 2 * n, "a<b": 3 * n}
		case **Latency:
			*p = &Latency{P50: float64(n) / 3, P95: float64(n) / 5, P99: float64(n) / 9, Mean: float64(n) / 11}
		case *[]Group:
			var g Group
			fill(t, reflect.ValueOf(&g).Elem())
			*p = []Group{g, {}}
		case *[]AttemptCount:
			*p = []AttemptCount{{Attempts: 1, Calls: n}, {Attempts: 12, Calls: 2 * n}}
		default:
			t.Fatalf("%s.%s: a field of type %s; teach fill and the hand-written JSON it", v.Type(), sf.Name, sf.Type)
		}
	}
}
