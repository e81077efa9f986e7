package ingest

import (
	"slices"
	"testing"
)

// TestCopyLayout checks that attemptCols (whose types the exact path's arrays are cast to) has
// the types batch.appendCopy writes, in its order: the encoder and the column list must change
// together.
func TestCopyLayout(t *testing.T) {
	t.Parallel()
	want := []string{"int8", "timestamptz", "int8", "int4", "int4", "attempt_status", "error_class", "bool",
		"bool", "int2", "int4", "int4", "int8", "int8", "int8", "int8", "int8", "int8", "int8", "int8", "int8",
		"text", "text", "text", "text", "jsonb"}
	want = append(append(want, limitTypes()...), "bool")
	var got []string
	for _, c := range attemptCols {
		got = append(got, c.typ)
	}
	if !slices.Equal(got, want) {
		t.Errorf("attemptCols types %v, but appendCopy writes %v", got, want)
	}
}
