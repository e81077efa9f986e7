package alerts

import "context"

// evalHeadroom is defined with the load rollup it reads.
func evalHeadroom(ctx context.Context, ec evalContext, r *Rule) ([]sample, error) { return nil, nil }
