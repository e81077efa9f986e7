package store

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/ledgerd/ledgerd/money"
)

// ProjectBudget is a project with its monthly budget (nil: none).
type ProjectBudget struct {
	Project
	Budget *money.Nanos
}

// Projects lists every project with its budget, by id.
func (s *Store) Projects(ctx context.Context) ([]ProjectBudget, error) {
	rows, err := s.Pool.Query(ctx, `SELECT id, name, monthly_budget_nanos FROM projects ORDER BY id`)
	if err != nil {
		return nil, fmt.Errorf("list projects: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (ProjectBudget, error) {
		var p ProjectBudget
		var budget *int64
		err := row.Scan(&p.ID, &p.Name, &budget)
		p.Budget = nanos(budget)
		return p, err
	})
	if err != nil {
		return nil, fmt.Errorf("list projects: %w", err)
	}
	return out, nil
}

// ProjectNames returns the names of the projects ids names; unknown ids are left out.
func (s *Store) ProjectNames(ctx context.Context, ids []int64) (map[int64]string, error) {
	rows, err := s.Pool.Query(ctx, `SELECT id, name FROM projects WHERE id = ANY($1)`, ids)
	if err != nil {
		return nil, fmt.Errorf("name projects: %w", err)
	}
	out := map[int64]string{}
	var (
		id   int64
		name string
	)
	if _, err := pgx.ForEachRow(rows, []any{&id, &name}, func() error { out[id] = name; return nil }); err != nil {
		return nil, fmt.Errorf("name projects: %w", err)
	}
	return out, nil
}

// Budget returns the monthly budget of a project (nil: none), or ErrNotFound.
func (s *Store) Budget(ctx context.Context, projectID int64) (*money.Nanos, error) {
	var budget *int64
	err := s.Pool.QueryRow(ctx, `SELECT monthly_budget_nanos FROM projects WHERE id = $1`, projectID).Scan(&budget)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, fmt.Errorf("project %d: %w", projectID, ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("read budget: %w", err)
	}
	return nanos(budget), nil
}

// SetBudget sets the monthly budget of the named project, or removes it when budget is nil.
// It returns ErrNotFound when there is no such project.
func (s *Store) SetBudget(ctx context.Context, project string, budget *money.Nanos) error {
	var v *int64
	if budget != nil {
		n := int64(*budget)
		v = &n
	}
	tag, err := s.Pool.Exec(ctx, `UPDATE projects SET monthly_budget_nanos = $2 WHERE name = $1`, project, v)
	if err != nil {
		return fmt.Errorf("set budget of project %q: %w", project, err)
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("project %q: %w", project, ErrNotFound)
	}
	return nil
}

func nanos(v *int64) *money.Nanos {
	if v == nil {
		return nil
	}
	n := money.Nanos(*v)
	return &n
}
