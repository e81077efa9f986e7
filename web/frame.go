package web

import (
	"github.com/labstack/echo/v4"

	"github.com/ledgerd/ledgerd/internal/server"
)

// frame is what every page's layout shows around its content.
type frame struct {
	Title string
	// Path is the page's route; the navigation marks it as current.
	Path string
	// Project is the logged-in project's name; empty on the login and error pages of a visitor.
	Project string
	// CSRF is the session's logout token; empty for Bearer requests, which have nothing to log
	// out of.
	CSRF   string
	assets *assets
	// Timezone names the zone days are counted in.
	Timezone string
	// Filter is the page's filter, which the navigation links keep.
	Filter view
}

// navLink is a page's URL with the current filter.
func (f frame) navLink(path string) string { return f.Filter.link(path) }

// asset returns the hashed URL of a static file.
func (f frame) asset(name string) string { return f.assets.url(name) }

// navItem is one entry of the navigation.
type navItem struct {
	Path, Label string
}

// nav lists the pages in the order the navigation shows them.
var nav = []navItem{
	{"/", "Overview"}, {"/models", "Models"}, {"/services", "Services"}, {"/cache", "Cache"},
	{"/reliability", "Reliability"}, {"/incidents", "Incidents"}, {"/load", "Load"}, {"/alerts", "Alerts"}, {"/prices", "Prices"},
}

// page returns the frame of the request's page.
func (h *Handler) page(c echo.Context, title string) frame {
	f := frame{Title: title, Path: c.Path(), Project: server.ProjectOf(c).Name, assets: h.assets,
		Timezone: h.opt.Timezone.String()}
	if s, ok := sessionOf(c); ok {
		f.CSRF = s.CSRF
	}
	return f
}
