package analytics

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/ledgerd/ledgerd/internal/rollup"
	"github.com/ledgerd/ledgerd/money"
	"github.com/ledgerd/ledgerd/pricing"
)

// UnpricedModel is a model the ledger has attempts of that carry no cost.
type UnpricedModel struct {
	Provider string `json:"provider"`
	Model    string `json:"model"`
	// Attempts counts the model's unpriced attempts, all time.
	Attempts int64 `json:"attempts"`
	// FirstSeen and LastSeen are the first and last local days (in the ledger's timezone) with an
	// unpriced attempt, as YYYY-MM-DD: the --from and (the day before) --to of the reprice that
	// would price them.
	FirstSeen string `json:"first_seen"`
	LastSeen  string `json:"last_seen"`
	// InCatalog says the catalog in force now knows the model (by id or alias): once the servers
	// and `ledgerd reprice` use it, new attempts are priced and old ones can be repriced. Attempts
	// may still be unpriced for a reason a catalog entry does not cure: a batch attempt on a price
	// without a batch discount, or one made before the model's first price.
	InCatalog bool `json:"in_catalog"`
	// Nearest lists up to three catalog names close to Model when it is not in the catalog.
	Nearest []string `json:"nearest,omitempty"`
}

// Querier runs a query: a pool, or one connection of it.
type Querier interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
}

// UnpricedModels is Unpriced with the Service's catalog, read where the Service reads.
func (s *Service) UnpricedModels(ctx context.Context, projectID int64) ([]UnpricedModel, error) {
	conn, err := s.reads.Acquire(ctx)
	if err != nil {
		return nil, fmt.Errorf("list unpriced models: %w", err)
	}
	defer conn.Release()
	return Unpriced(ctx, conn, s.catalog, projectID)
}

// unpricedSQL sums the unpriced attempts of project $1 per recorded provider and model from the
// daily rollups, most unpriced first. Attempts whose usage is unknown are not a missing price, so
// they are left out.
const unpricedSQL = `SELECT s.provider, s.model, sum(r.unpriced_attempts - r.usage_unknown_attempts)::int8, min(r.bucket), max(r.bucket)
FROM rollup_daily r JOIN series s ON s.project_id = r.project_id AND s.id = r.series_id
WHERE r.project_id = $1 AND r.unpriced_attempts > r.usage_unknown_attempts
GROUP BY s.provider, s.model
ORDER BY 3 DESC, 1, 2`

// Unpriced lists the models of a project that have unpriced attempts, all time, read from the
// daily rollups (never the raw table), with whether cat now knows each one. The dashboard's Prices
// page and GET /v1/prices both use it.
func Unpriced(ctx context.Context, db Querier, cat *pricing.Catalog, projectID int64) ([]UnpricedModel, error) {
	rows, err := db.Query(ctx, unpricedSQL, projectID)
	if err != nil {
		return nil, fmt.Errorf("list unpriced models: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (UnpricedModel, error) {
		var m UnpricedModel
		var first, last time.Time
		if err := row.Scan(&m.Provider, &m.Model, &m.Attempts, &first, &last); err != nil {
			return m, err
		}
		m.FirstSeen, m.LastSeen = first.Format(time.DateOnly), last.Format(time.DateOnly)
		if _, m.InCatalog = cat.Lookup(m.Provider, m.Model); !m.InCatalog {
			m.Nearest = cat.SuggestFor(m.Provider, m.Model, 3)
		}
		return m, nil
	})
	if err != nil {
		return nil, fmt.Errorf("list unpriced models: %w", err)
	}
	if out == nil {
		out = []UnpricedModel{}
	}
	return out, nil
}

// Mismatch is the client-vs-ledgerd cost comparison of one service and model: among the attempts
// that carry both a client cost (the record's cost_usd) and a ledgerd cost, those whose costs
// differ by more than 1% of ledgerd's.
type Mismatch struct {
	Service  string `json:"service"`
	Provider string `json:"provider"`
	Model    string `json:"model"`
	// Compared counts the attempts that carry both costs; Attempts those that differ.
	Compared int64 `json:"compared_attempts"`
	Attempts int64 `json:"mismatched_attempts"`
	// ClientCost and LedgerCost sum the two costs of the differing attempts; Difference is
	// ClientCost - LedgerCost (positive: the client reports more than ledgerd computes), and
	// AbsDifference sums each attempt's |client - ledgerd|, so errors both ways do not cancel.
	ClientCost    money.Nanos `json:"client_cost_usd"`
	LedgerCost    money.Nanos `json:"ledger_cost_usd"`
	Difference    money.Nanos `json:"difference_usd"`
	AbsDifference money.Nanos `json:"abs_difference_usd"`
	// Example is one differing attempt's id (the greatest), to look up in the client's logs.
	Example string `json:"example_attempt_id"`
}

// MaxMismatchRange is the longest range Mismatches reads: it reads raw attempts.
const MaxMismatchRange = 31 * 24 * time.Hour

// MismatchWhere is the condition under which an attempt's client cost disagrees with ledgerd's:
// by more than 1% of ledgerd's cost. It is the condition the rollups count in
// cost_mismatch_attempts (rollup.Sums), so the two always agree.
const MismatchWhere = rollup.MismatchWhere

// mismatchSQL compares the costs of project $1's raw attempts started in [$2, $3) per service and
// model, reading the range through attempts_project_time.
const mismatchSQL = `SELECT s.service, s.provider, s.model, count(*)::int8,
	count(*) FILTER (WHERE ` + MismatchWhere + `)::int8,
	coalesce(sum(a.client_cost_nanos) FILTER (WHERE ` + MismatchWhere + `), 0)::int8,
	coalesce(sum(a.cost_nanos) FILTER (WHERE ` + MismatchWhere + `), 0)::int8,
	coalesce(sum(abs(a.client_cost_nanos - a.cost_nanos)) FILTER (WHERE ` + MismatchWhere + `), 0)::int8,
	max(a.attempt_id) FILTER (WHERE ` + MismatchWhere + `)
FROM attempts a JOIN series s ON s.project_id = a.project_id AND s.id = a.series_id
WHERE a.project_id = $1 AND a.started_at >= $2 AND a.started_at < $3
	AND a.client_cost_nanos IS NOT NULL AND a.cost_nanos IS NOT NULL
GROUP BY s.service, s.provider, s.model
HAVING count(*) FILTER (WHERE ` + MismatchWhere + `) > 0`

// Mismatches lists, per service and model, the attempts of a project started in [from, to) whose
// client-reported cost differs from ledgerd's by more than 1%, largest AbsDifference first.
// The range may span at most MaxMismatchRange.
func Mismatches(ctx context.Context, db Querier, projectID int64, from, to time.Time) ([]Mismatch, error) {
	if !from.Before(to) {
		return nil, &RangeError{"to must be after from"}
	}
	if to.Sub(from) > MaxMismatchRange {
		return nil, &RangeError{fmt.Sprintf("the range may span at most %d days", int(MaxMismatchRange/(24*time.Hour)))}
	}
	rows, err := db.Query(ctx, mismatchSQL, projectID, from, to)
	if err != nil {
		return nil, fmt.Errorf("compare client costs: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (Mismatch, error) {
		var m Mismatch
		err := row.Scan(&m.Service, &m.Provider, &m.Model, &m.Compared, &m.Attempts, &m.ClientCost, &m.LedgerCost, &m.AbsDifference, &m.Example)
		m.Difference = m.ClientCost - m.LedgerCost
		return m, err
	})
	if err != nil {
		return nil, fmt.Errorf("compare client costs: %w", err)
	}
	slices.SortFunc(out, func(a, b Mismatch) int {
		if a.AbsDifference != b.AbsDifference {
			return cmp.Compare(b.AbsDifference, a.AbsDifference)
		}
		return strings.Compare(a.Service+"\x00"+a.Provider+"\x00"+a.Model, b.Service+"\x00"+b.Provider+"\x00"+b.Model)
	})
	if out == nil {
		out = []Mismatch{}
	}
	return out, nil
}

// RangeError reports a time range Mismatches cannot read; the HTTP layer answers it with 400.
type RangeError struct{ Reason string }

// Error names the range problem.
func (e *RangeError) Error() string { return "range: " + e.Reason }
