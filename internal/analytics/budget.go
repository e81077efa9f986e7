package analytics

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/ledgerd/ledgerd/internal/store"
	"github.com/ledgerd/ledgerd/money"
)

const setBudgetSQL = `UPDATE projects SET monthly_budget_nanos = $2 WHERE name = $1`

// SetBudget sets the monthly budget of the named project, which Projection measures spend against,
// or removes it when budget is nil. The budget must be positive.
func SetBudget(ctx context.Context, pool *pgxpool.Pool, project string, budget *money.Nanos) error {
	if budget != nil && *budget <= 0 {
		return fmt.Errorf("budget of project %q must be positive, got $%s", project, budget)
	}
	var nanos *int64
	if budget != nil {
		v := int64(*budget)
		nanos = &v
	}
	tag, err := pool.Exec(ctx, setBudgetSQL, project, nanos)
	if err != nil {
		return fmt.Errorf("set budget of project %q: %w", project, err)
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("project %q: %w", project, store.ErrNotFound)
	}
	return nil
}
