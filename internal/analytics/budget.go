package analytics

import (
	"context"
	"fmt"

	"github.com/ledgerd/ledgerd/internal/store"
	"github.com/ledgerd/ledgerd/money"
)

// SetBudget sets the monthly budget of the named project, which Projection measures spend against,
// or removes it when budget is nil. The budget must be positive.
func SetBudget(ctx context.Context, st *store.Store, project string, budget *money.Nanos) error {
	if budget != nil && *budget <= 0 {
		return fmt.Errorf("budget of project %q must be positive, got $%s", project, budget)
	}
	return st.SetBudget(ctx, project, budget)
}
