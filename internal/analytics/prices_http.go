package analytics

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/ledgerd/ledgerd/internal/server"
	"github.com/ledgerd/ledgerd/internal/store"
	"github.com/ledgerd/ledgerd/pricing"
)

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

// getPrices answers GET /v1/prices: the catalog in force and the models the project used that it
// cannot price.
func (s *Service) getPrices(c echo.Context) error {
	unpriced, err := s.UnpricedModels(c.Request().Context(), server.ProjectOf(c).ID)
	if err != nil {
		return dbError(err)
	}
	return c.JSON(http.StatusOK, Listing{Models: s.catalog.Models(), Unpriced: unpriced})
}

// getMismatches answers GET /v1/cost-mismatches: from and to default to the last 7 local days,
// today included.
func (s *Service) getMismatches(c echo.Context) error {
	y, m, d := s.now().In(s.tz).Date()
	tomorrow := time.Date(y, m, d+1, 0, 0, 0, 0, s.tz)
	to, err := s.bound(c, "to", tomorrow)
	if err != nil {
		return err
	}
	ty, tm, td := to.In(s.tz).Date()
	from, err := s.bound(c, "from", time.Date(ty, tm, td-7, 0, 0, 0, 0, s.tz))
	if err != nil {
		return err
	}
	list, err := s.mismatches(c.Request().Context(), server.ProjectOf(c).ID, from, to)
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
func (s *Service) bound(c echo.Context, name string, def time.Time) (time.Time, error) {
	v := c.QueryParam(name)
	if v == "" {
		return def, nil
	}
	if t, err := time.ParseInLocation(time.DateOnly, v, s.tz); err == nil {
		return t, nil
	}
	t, err := time.Parse(time.RFC3339Nano, v)
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

// mismatches is Mismatches read where the Service reads.
func (s *Service) mismatches(ctx context.Context, projectID int64, from, to time.Time) ([]Mismatch, error) {
	conn, err := s.reads.Acquire(ctx)
	if err != nil {
		return nil, fmt.Errorf("compare client costs: %w", err)
	}
	defer conn.Release()
	return Mismatches(ctx, conn, projectID, from, to)
}
