package prices

import (
	"errors"
	"net/http"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/labstack/echo/v4"

	"github.com/ledgerd/ledgerd/pricing"
	"github.com/ledgerd/ledgerd/server"
	"github.com/ledgerd/ledgerd/store"
)

// Options are what the routes answer from.
type Options struct {
	Pool *pgxpool.Pool
	// Catalog is the catalog the running server prices new attempts with.
	Catalog *pricing.Catalog
	// Timezone is the ledger's (settings 'timezone'); a plain date in a query is its midnight there.
	Timezone *time.Location
	// Now is the clock the default range is counted from (time.Now).
	Now func() time.Time
}

// Listing is the body of GET /v1/prices. Its models are in the catalog's own JSON form, so the
// body loads as a price file (pricing.Load) as it is.
type Listing struct {
	Models   []pricing.Model `json:"models"`
	Unpriced []UnpricedModel `json:"unpriced"`
}

// MismatchListing is the body of GET /v1/cost-mismatches.
type MismatchListing struct {
	From       time.Time  `json:"from"`
	To         time.Time  `json:"to"`
	Mismatches []Mismatch `json:"mismatches"`
}

type handler struct{ opt Options }

// Mount adds GET /v1/prices and GET /v1/cost-mismatches?from=&to= to the API (behind a project's
// key). from and to are RFC 3339 times or YYYY-MM-DD local dates (the start of that day); to is
// exclusive; like the analytics endpoints they default to the last 7 local days, today included.
func Mount(s *server.Server, opt Options) {
	if opt.Timezone == nil {
		opt.Timezone = time.UTC
	}
	if opt.Now == nil {
		opt.Now = time.Now
	}
	h := &handler{opt: opt}
	s.API.GET("/prices", h.prices)
	s.API.GET("/cost-mismatches", h.mismatches)
}

func (h *handler) prices(c echo.Context) error {
	unpriced, err := Unpriced(c.Request().Context(), h.opt.Pool, h.opt.Catalog, server.ProjectOf(c).ID)
	if err != nil {
		return dbError(err)
	}
	return c.JSON(http.StatusOK, Listing{Models: h.opt.Catalog.Models(), Unpriced: unpriced})
}

func (h *handler) mismatches(c echo.Context) error {
	y, m, d := h.opt.Now().In(h.opt.Timezone).Date()
	tomorrow := time.Date(y, m, d+1, 0, 0, 0, 0, h.opt.Timezone)
	to, err := h.bound(c, "to", tomorrow)
	if err != nil {
		return err
	}
	ty, tm, td := to.In(h.opt.Timezone).Date()
	from, err := h.bound(c, "from", time.Date(ty, tm, td-7, 0, 0, 0, 0, h.opt.Timezone))
	if err != nil {
		return err
	}
	list, err := Mismatches(c.Request().Context(), h.opt.Pool, server.ProjectOf(c).ID, from, to)
	var re *RangeError
	switch {
	case errors.As(err, &re):
		return echo.NewHTTPError(http.StatusBadRequest, err.Error())
	case err != nil:
		return dbError(err)
	}
	return c.JSON(http.StatusOK, MismatchListing{From: from.UTC(), To: to.UTC(), Mismatches: list})
}

// bound reads a time parameter: an RFC 3339 time, or a date meaning its midnight in the ledger's
// timezone; def when it is absent.
func (h *handler) bound(c echo.Context, name string, def time.Time) (time.Time, error) {
	s := c.QueryParam(name)
	if s == "" {
		return def, nil
	}
	if t, err := time.ParseInLocation(time.DateOnly, s, h.opt.Timezone); err == nil {
		return t, nil
	}
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return time.Time{}, echo.NewHTTPError(http.StatusBadRequest, name+": not a date (2006-01-02) nor an RFC 3339 time")
	}
	return t, nil
}

// dbError answers 503 when the database is out of reach, 500 otherwise.
func dbError(err error) error {
	if store.IsUnavailable(err) {
		return echo.NewHTTPError(http.StatusServiceUnavailable, "database unavailable")
	}
	return err
}
