package analytics

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/ledgerd/ledgerd/internal/dbtest"
)

// TestRawRow reads values as sent by a real server: each type's edge values, NULLs, and the
// rows it refuses (columns not as named, or sent as text).
func TestRawRow(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, dbtest.BaseURL())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(ctx) })
	const sql = `SELECT v.* FROM (VALUES
		('a'::text, '-9223372036854775808'::int8, true, '2026-11-04 15:00:00.000001+00'::timestamptz),
		('', 9223372036854775807, false, '1999-12-31 23:59:59+00'),
		('ü', NULL, NULL, NULL)) v(name, n, b, at)`
	type want struct {
		name string
		n    int64
		b    bool
		at   *time.Time
	}
	at := func(s string) *time.Time {
		t, err := time.Parse(time.RFC3339Nano, s)
		if err != nil {
			panic(err)
		}
		return &t
	}
	tests := []struct {
		what    string
		cols    []string
		mode    pgx.QueryExecMode
		want    []want
		wantErr string
	}{
		{"binary", []string{"name", "n", "b", "at"}, pgx.QueryExecModeCacheDescribe, []want{
			{"a", -9223372036854775808, true, at("2026-11-04T15:00:00.000001Z")},
			{"", 9223372036854775807, false, at("1999-12-31T23:59:59Z")},
			{"ü", 0, false, nil},
		}, ""},
		{"misnamed", []string{"name", "n", "at", "b"}, pgx.QueryExecModeCacheDescribe, nil, "column 2 is b, want at"},
		{"too few columns", []string{"name", "n", "b"}, pgx.QueryExecModeCacheDescribe, nil, "4 columns, want 3"},
		{"as text", []string{"name", "n", "b", "at"}, pgx.QueryExecModeSimpleProtocol, nil, "format 0, want binary"},
	}
	for _, tt := range tests {
		t.Run(tt.what, func(t *testing.T) {
			rows, err := conn.Query(ctx, sql, tt.mode)
			if err != nil {
				t.Fatal(err)
			}
			row := rawRow{cols: tt.cols}
			var got []want
			_, err = pgx.ForEachRow(rows, []any{&row}, func() error {
				w := want{string(row.text(0)), row.int8(1), row.bool(2), row.time(3)}
				got = append(got, w)
				return row.err
			})
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("error %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != len(tt.want) {
				t.Fatalf("%d rows, want %d", len(got), len(tt.want))
			}
			for i, w := range tt.want {
				g := got[i]
				if g.name != w.name || g.n != w.n || g.b != w.b || (g.at == nil) != (w.at == nil) || (g.at != nil && !g.at.Equal(*w.at)) {
					t.Errorf("row %d: %+v, want %+v", i, g, w)
				}
			}
		})
	}
}

// TestRawRowLength checks that values of the wrong length read as NULL and the first is noted,
// also when a second follows.
func TestRawRowLength(t *testing.T) {
	t.Parallel()
	row := rawRow{cols: []string{"n", "at", "b"}, vals: [][]byte{{1, 2}, {3}, {1, 1}}}
	if n, at, b := row.int8(row.col("n")), row.time(row.col("at")), row.bool(row.col("b")); n != 0 || at != nil || b {
		t.Errorf("%d, %v, %v: want the zero values", n, at, b)
	}
	if row.err == nil || row.err.Error() != "column n: 2 bytes, want 8" {
		t.Errorf("error %v, want the first value's", row.err)
	}
}
