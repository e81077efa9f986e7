package ingest_test

import (
	"context"
	"testing"
	"time"

	"github.com/ledgerd/ledgerd/ingest"
	"github.com/ledgerd/ledgerd/schema"
)

// TestRateLimitsStored checks that a record's org and rate limits land in their columns as sent, a
// remaining of 0 as 0 and what was not reported as NULL, and that a record without them stores
// NULLs.
func TestRateLimitsStored(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	w, st, project := newWriter(t, ingest.Options{})
	at := time.Date(2026, 11, 30, 9, 14, 5, 0, time.UTC)
	with := attempt("with", at, 1, schema.StatusError)
	with.Org = "acme-prod"
	with.RateLimits = &schema.RateLimits{
		Requests: schema.RateLimit{Limit: 50, Remaining: 0, Reset: at.Add(55 * time.Second)},
		Tokens:   schema.RateLimit{Limit: 48000, Remaining: 37000},
	}
	without := attempt("without", at, 1, schema.StatusOK)
	if _, err := w.Submit(ctx, project, []schema.Attempt{with, without}); err != nil {
		t.Fatal(err)
	}
	var got []string
	rows, err := st.Pool.Query(ctx, `SELECT concat_ws(' ', attempt_id, coalesce(org, '-'),
			coalesce(ratelimit_limit_requests::text, '-'), coalesce(ratelimit_remaining_requests::text, '-'),
			coalesce(to_char(ratelimit_reset_requests AT TIME ZONE 'UTC', 'HH24:MI:SS'), '-'),
			coalesce(ratelimit_limit_tokens::text, '-'), coalesce(ratelimit_remaining_tokens::text, '-'),
			coalesce(ratelimit_reset_tokens::text, '-'), coalesce(ratelimit_limit_input_tokens::text, '-'),
			coalesce(ratelimit_reset_output_tokens::text, '-'))
		FROM attempts ORDER BY attempt_id`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var s string
		if err := rows.Scan(&s); err != nil {
			t.Fatal(err)
		}
		got = append(got, s)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	want := []string{"with acme-prod 50 0 09:15:00 48000 37000 - - -", "without - - - - - - - - -"}
	if len(got) != 2 || got[0] != want[0] || got[1] != want[1] {
		t.Fatalf("stored\n%q\nwant\n%q", got, want)
	}
}
