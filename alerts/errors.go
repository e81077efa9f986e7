package alerts

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/ledgerd/ledgerd/internal/numfmt"
)

// errorsSQL counts the attempts of the classes $4 started in [$2, $3), per series, org and class,
// with the first and last start. It reads the raw attempts: the window is at most an hour (the
// rule's limit), and the first and last times are in no rollup.
const errorsSQL = `
SELECT s.service, s.operation, s.model, s.provider, s.tenant, coalesce(a.org, ''), a.error_class::text,
	count(*)::int8, min(a.started_at), max(a.started_at)
FROM attempts a JOIN series s ON s.project_id = a.project_id AND s.id = a.series_id
WHERE a.project_id = $1 AND a.started_at >= $2 AND a.started_at < $3 AND a.error_class = ANY($4::error_class[])
GROUP BY 1, 2, 3, 4, 5, 6, 7`

type errorsGroup struct {
	labels      map[string]string
	count       int64
	first, last time.Time
	byClass     map[string]int64
}

// evalErrors finds the scopes whose attempts failed with one of the rule's classes at least
// MinCount times in the window.
func evalErrors(ctx context.Context, ec evalContext, r *Rule) ([]sample, error) {
	rows, err := ec.pool.Query(ctx, errorsSQL, ec.project.ID, ec.now.Add(-r.Window), ec.now, r.Classes)
	if err != nil {
		return nil, fmt.Errorf("count errors: %w", err)
	}
	groups := map[string]*errorsGroup{}
	var order []string
	var f seriesFields
	var n int64
	var first, last time.Time
	_, err = pgx.ForEachRow(rows, []any{&f.service, &f.operation, &f.model, &f.provider, &f.tenant, &f.org, &f.errorClass,
		&n, &first, &last}, func() error {
		key, labels := groupOf(r.GroupBy, f)
		g := groups[key]
		if g == nil {
			g = &errorsGroup{labels: labels, first: first, last: last, byClass: map[string]int64{}}
			groups[key] = g
			order = append(order, key)
		}
		g.count += n
		g.byClass[f.errorClass] += n
		if first.Before(g.first) {
			g.first = first
		}
		if last.After(g.last) {
			g.last = last
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("count errors: %w", err)
	}
	slices.Sort(order)
	var out []sample
	for _, key := range order {
		if g := groups[key]; g.count >= r.MinCount {
			out = append(out, errorsSample(r, ec, g))
		}
	}
	return out, nil
}

// errorAdvice says, per class errors watches by default, what someone must do.
var errorAdvice = map[string]string{
	"quota_exhausted": "The organization's quota or credit is spent: retrying only adds failures until someone adds credit or raises the limit.",
	"auth_error":      "The API key was refused (revoked, expired or mistyped): rotate the key the service uses.",
	"permission_error": "The key may not use this model or resource: grant access to it, or point the service at a model " +
		"the key may use.",
}

func errorsSample(r *Rule, ec evalContext, g *errorsGroup) sample {
	type classCount struct {
		class string
		n     int64
	}
	var classes []classCount
	for c, n := range g.byClass {
		classes = append(classes, classCount{c, n})
	}
	slices.SortFunc(classes, func(a, b classCount) int {
		if a.n != b.n {
			return int(b.n - a.n)
		}
		return strings.Compare(a.class, b.class)
	})
	scope := scopeText(g.labels)
	if scope == "" {
		scope = "project " + ec.project.Name
	}
	figures := map[string]string{
		"count":  strconv.FormatInt(g.count, 10),
		"first":  g.first.UTC().Format(time.RFC3339),
		"last":   g.last.UTC().Format(time.RFC3339),
		"window": human(r.Window),
	}
	var parts, names []string
	for _, c := range classes {
		figures["count_"+c.class] = strconv.FormatInt(c.n, 10)
		parts = append(parts, fmt.Sprintf("%s %s", c.class, numfmt.Count(c.n)))
		names = append(names, c.class)
	}
	var d strings.Builder
	fmt.Fprintf(&d, "In the last %s, %s attempts on %s failed with errors retrying cannot fix (%s), the first at %s"+
		" and the last at %s UTC.", human(r.Window), numfmt.Count(g.count), scope, strings.Join(parts, ", "),
		g.first.UTC().Format("15:04:05"), g.last.UTC().Format("15:04:05"))
	for _, c := range classes {
		if a, ok := errorAdvice[c.class]; ok {
			d.WriteString(" " + a)
		}
	}
	d.WriteString(" Stop retrying these errors: each retry is another failed attempt.")
	return sample{
		group:       g.labels,
		figures:     figures,
		summary:     fmt.Sprintf("%s %s on %s since %s UTC", numfmt.Count(g.count), strings.Join(names, "/"), scope, g.first.UTC().Format("15:04")),
		description: d.String(),
	}
}
