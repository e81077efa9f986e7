package analytics

import (
	"context"
	"fmt"
	"slices"

	"github.com/jackc/pgx/v5"
)

// Calls by attempts. A summary asked WithAttempts gives, per group, how many logical calls took 1,
// 2, 3, ... attempts and the most any took. Attempts carry their number within their call
// (attempt_no, from 1), so the calls that took exactly k attempts are the attempts numbered k less
// those numbered k+1: counting attempts per number needs no grouping by call. The rollups keep no
// attempt numbers, so this reads the raw attempts of the range.

// AttemptCount is how many logical calls took Attempts attempts.
type AttemptCount struct {
	Attempts int   `json:"attempts"`
	Calls    int64 `json:"calls"`
}

// attemptsSQL counts the raw attempts of [@raw_from, @raw_to) per group (%[1]s: the group's
// columns, each followed by a comma, read from s and from r's day, hour and minute), fallback flag
// and attempt number.
const attemptsSQL = `SELECT %[1]s r.fallback, r.attempt_no, count(*)
	FROM (SELECT series_id, fallback, attempt_no, (started_at AT TIME ZONE @tz)::date AS day,
			date_trunc('hour', started_at, 'UTC') AS hour,
			date_bin(@step::interval, started_at, TIMESTAMPTZ '2000-01-01 00:00:00+00') AS minute
		FROM attempts WHERE project_id = @project AND started_at >= @raw_from AND started_at < @raw_to) r
	JOIN series s ON s.project_id = @project AND s.id = r.series_id
	WHERE ` + seriesFilter + `
	GROUP BY %[1]s r.fallback, r.attempt_no`

// attemptNumbers counts each group's attempts by their number, with attemptsSQL.
func (s *Service) attemptNumbers(ctx context.Context, g grouping, args pgx.NamedArgs) (map[gkey]map[int]int64, error) {
	keyDst, keyOf := g.scanTargets()
	var (
		fallback bool
		no       int
		n        int64
	)
	out := map[gkey]map[int]int64{}
	err := s.read(ctx, fmt.Sprintf(attemptsSQL, g.columns("s")), args, append(keyDst, &fallback, &no, &n), func() error {
		k := keyOf(fallback)
		if out[k] == nil {
			out[k] = map[int]int64{}
		}
		out[k][no] += n
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("summary attempts: %w", err)
	}
	return out, nil
}

// callsByAttempts turns attempts counted by number into calls counted by their number of
// attempts, and the most attempts any call took. A call's attempts missing from the range (it
// began before it) make the count of the numbers above its first one larger; the difference is
// never taken below zero.
func callsByAttempts(byNo map[int]int64) ([]AttemptCount, int) {
	most := 0
	for no, n := range byNo {
		if n > 0 && no > most {
			most = no
		}
	}
	out := []AttemptCount{}
	for k := 1; k <= most; k++ {
		if c := byNo[k] - byNo[k+1]; c > 0 {
			out = append(out, AttemptCount{Attempts: k, Calls: c})
		}
	}
	return out, most
}

// RetryBudget is the number of attempts within which 90% of the retried calls (those that took
// two or more) ended: what one retry layer allows, as the calls show it; 0 when no call was
// retried.
func RetryBudget(counts []AttemptCount) int {
	var retried, seen int64
	for _, c := range counts {
		if c.Attempts >= 2 {
			retried += c.Calls
		}
	}
	if retried == 0 {
		return 0
	}
	sorted := slices.Clone(counts)
	slices.SortFunc(sorted, func(a, b AttemptCount) int { return a.Attempts - b.Attempts })
	for _, c := range sorted {
		if c.Attempts < 2 {
			continue
		}
		seen += c.Calls
		if seen*10 >= retried*9 {
			return c.Attempts
		}
	}
	return sorted[len(sorted)-1].Attempts
}

// Multiplied tells whether calls took more attempts than a single retry layer allows: the most
// attempts of a call is at least twice the budget most retried calls stop within (RetryBudget),
// the mark of retry layers that do not know of each other (4 gateway attempts over an SDK that
// retries twice make up to 12 requests a call).
func Multiplied(counts []AttemptCount, most int) bool {
	b := RetryBudget(counts)
	return b >= 2 && most >= 2*b
}
