package web

import (
	"strconv"
	"time"

	"github.com/labstack/echo/v4"
	"golang.org/x/sync/errgroup"

	"github.com/ledgerd/ledgerd/internal/analytics"
	"github.com/ledgerd/ledgerd/internal/server"
)

// cacheData is what the cache page shows.
type cacheData struct {
	View view
	// Rows are every cached prefix, broken caches first.
	Rows  []analytics.CacheRow
	Total analytics.Stats
	// Broken counts the broken caches, a model's once (its row and its hash's row show one).
	Broken int
}

// cache lists every cached prefix with its writes, reads, hit ratio and what it saved or lost;
// broken caches (written, never read) come first with what usually causes them.
func (h *Handler) cache(c echo.Context) error {
	v, err := h.parseView(c)
	if err != nil {
		return err
	}
	f := v.filter(server.ProjectOf(c).ID)
	d := cacheData{View: v}
	var total analytics.Summary
	g, gctx := errgroup.WithContext(c.Request().Context())
	g.Go(func() (err error) {
		d.Rows, err = h.opt.Analytics.Cache(gctx, f, analytics.DefaultMinCalls)
		return err
	})
	g.Go(func() (err error) { total, err = h.opt.Analytics.Summary(gctx, f); return err })
	if err := g.Wait(); err != nil {
		return h.dataError(err)
	}
	d.Total = total.Total
	d.Broken = analytics.BrokenCaches(d.Rows)
	fr := h.page(c, "Cache")
	fr.Filter = v
	return h.render(c, 200, cacheView(fr, d))
}

// cacheKey names a cache row for tests and scripts: service/operation/model, then the prompt hash
// on a hash's row.
func cacheKey(r analytics.CacheRow) string {
	k := r.Service + "/" + r.Operation + "/" + r.Model
	if r.Fallback {
		k += "/fallback"
	}
	if r.PromptHash != nil {
		k += "/" + *r.PromptHash
	}
	return k
}

// brokenAt is when a broken cache broke, in the view's timezone.
func brokenAt(r analytics.CacheRow, tz *time.Location) string {
	if r.BrokenSince == nil {
		return ""
	}
	return r.BrokenSince.In(tz).Format("2006-01-02 15:04")
}

// usedOnce tells how many of a model's prompt hashes were used by a single call, if any: many of
// them is the mark of a prompt that changes on every call.
func usedOnce(n int64) string {
	if n == 0 {
		return ""
	}
	return ", " + strconv.FormatInt(n, 10) + " used once"
}
