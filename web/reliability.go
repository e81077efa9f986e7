package web

import (
	"github.com/labstack/echo/v4"
	"golang.org/x/sync/errgroup"

	"github.com/ledgerd/ledgerd/alerts"
	"github.com/ledgerd/ledgerd/internal/analytics"
	"github.com/ledgerd/ledgerd/internal/server"
)

// reliabilityData is what the reliability page shows.
type reliabilityData struct {
	View  view
	Total analytics.Stats
	// Primary is each provider and model's own traffic; Fallback the answers models gave in place
	// of another, kept apart so they never blend into the primary model's figures.
	Primary, Fallback []analytics.Group
	AttemptsPerCall   chartSpec
	Shares            chartSpec
	Errors            chartSpec
	// Budget is the attempts within which most retried calls end (analytics.RetryBudget);
	// Multiplied says that some calls took at least twice that (retry layers that multiply).
	Budget     int
	Multiplied bool
}

// reliability shows retry amplification, error classes, rate limiting, wasted spend and fallback
// answers, per provider and model.
func (h *Handler) reliability(c echo.Context) error {
	v, err := h.parseView(c)
	if err != nil {
		return err
	}
	f := v.filter(server.ProjectOf(c).ID)
	var byDay, byModel analytics.Summary
	g, gctx := errgroup.WithContext(c.Request().Context())
	g.Go(func() (err error) { byDay, err = h.opt.Analytics.Summary(gctx, f, v.timeDim()); return err })
	g.Go(func() (err error) {
		fa := f
		fa.WithAttempts = true
		byModel, err = h.opt.Analytics.Summary(gctx, fa, analytics.ByProvider, analytics.ByModel)
		return err
	})
	if err := g.Wait(); err != nil {
		return h.dataError(err)
	}
	d := reliabilityData{View: v, Total: byModel.Total,
		Budget:     analytics.RetryBudget(byModel.Total.CallsByAttempts),
		Multiplied: analytics.Multiplied(byModel.Total.CallsByAttempts, byModel.Total.MaxAttempts),
		AttemptsPerCall: ratioChart(v, byDay.Groups, "ratio",
			ratioLine{label: "Attempts per call", of: func(s analytics.Stats) *float64 { return s.AttemptsPerCall }}),
		Shares: ratioChart(v, byDay.Groups, "percent",
			ratioLine{label: "Error rate", of: func(s analytics.Stats) *float64 { return s.ErrorRate }, percent: true},
			ratioLine{label: "429 share", of: func(s analytics.Stats) *float64 { return s.RateLimitedShare }, percent: true},
			ratioLine{label: "Fallback share", of: func(s analytics.Stats) *float64 { return s.FallbackShare }, percent: true}),
		Errors: errorChart(v, byDay.Groups),
	}
	for _, g := range byModel.Groups {
		if g.Key.Fallback != nil && *g.Key.Fallback {
			d.Fallback = append(d.Fallback, g)
		} else {
			d.Primary = append(d.Primary, g)
		}
	}
	fr := h.page(c, "Reliability")
	fr.Filter = v
	return h.render(c, 200, reliabilityView(fr, d))
}

// p95 is the 95th percentile of a latency, or "–" without one.
func p95(l *analytics.Latency) string {
	if l == nil {
		return "–"
	}
	return millis(l.P95)
}

// tooManyAttempts tells whether attempts per call pass the alerting default (1.5), the level at
// which retries amplify spend worth a look.
func tooManyAttempts(r *float64) bool {
	limit, _ := alerts.DefaultThreshold().Float64()
	return r != nil && *r > limit
}
