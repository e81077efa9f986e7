package web

import (
	"time"

	"github.com/labstack/echo/v4"

	"github.com/ledgerd/ledgerd/internal/analytics"
	"github.com/ledgerd/ledgerd/internal/server"
	"github.com/ledgerd/ledgerd/pricing"
)

// priceRow is one model of the catalog with the price version in force.
type priceRow struct {
	Model pricing.Model
	Price pricing.Price
	// InForce is false for a model whose first price takes effect later; Price is then that one.
	InForce bool
}

// pricesData is what the prices page shows.
type pricesData struct {
	Rows []priceRow
	// Unpriced are the models the ledger has attempts of that carry no cost, all time.
	Unpriced []analytics.UnpricedModel
}

// pricesPage shows the catalog in force and the models seen in the ledger that it could not price.
func (h *Handler) pricesPage(c echo.Context) error {
	v, err := h.parseView(c)
	if err != nil {
		return err
	}
	var d pricesData
	if d.Unpriced, err = analytics.Unpriced(c.Request().Context(), h.opt.Store.Pool, h.opt.Catalog, server.ProjectOf(c).ID); err != nil {
		return h.dataError(err)
	}
	now := h.now()
	for _, m := range h.opt.Catalog.Models() {
		p, ok := m.PriceAt(now)
		if !ok && len(m.Prices) > 0 {
			p = m.Prices[0]
		}
		d.Rows = append(d.Rows, priceRow{Model: m, Price: p, InForce: ok})
	}
	fr := h.page(c, "Prices")
	fr.Filter = v
	return h.render(c, 200, pricesView(fr, d))
}

// dayAfter returns the day after a YYYY-MM-DD date: the exclusive end of a range ending on it.
func dayAfter(d string) string {
	t, err := time.Parse(time.DateOnly, d)
	if err != nil {
		return d
	}
	return t.AddDate(0, 0, 1).Format(time.DateOnly)
}
