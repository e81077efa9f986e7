package web

import (
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"fmt"
	"io/fs"
	"mime"
	"net/http"
	"path"
	"strings"

	"github.com/labstack/echo/v4"
)

// staticFiles are the stylesheet, the chart script and the vendored uPlot, served by ledgerd itself
// so the dashboard needs no internet access.
//
//go:embed static
var staticFiles embed.FS

// asset is one static file ready to serve.
type asset struct {
	body  []byte
	ctype string
	etag  string
}

// assets serves the static files under content-hashed names (charts.1a2b3c4d5e.js), so a page
// always loads the files of the binary that rendered it and browsers may cache them forever.
type assets struct {
	byURL  map[string]asset  // "/static/charts.1a2b3c4d5e.js" → file
	urlFor map[string]string // "charts.js" → "/static/charts.1a2b3c4d5e.js"
}

func loadAssets() (*assets, error) {
	a := &assets{byURL: map[string]asset{}, urlFor: map[string]string{}}
	err := fs.WalkDir(staticFiles, "static", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		body, err := staticFiles.ReadFile(p)
		if err != nil {
			return err
		}
		sum := sha256.Sum256(body)
		hash := hex.EncodeToString(sum[:5])
		name := strings.TrimPrefix(p, "static/")
		ext := path.Ext(name)
		url := "/static/" + strings.TrimSuffix(name, ext) + "." + hash + ext
		ctype := mime.TypeByExtension(ext)
		if ctype == "" {
			ctype = "text/plain; charset=utf-8"
		}
		a.byURL[url] = asset{body: body, ctype: ctype, etag: `"` + hash + `"`}
		a.urlFor[name] = url
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("load static files: %w", err)
	}
	return a, nil
}

// url returns the hashed URL of a static file; templates link through it. An unknown name is a
// programming error caught by the page tests (the link would 404).
func (a *assets) url(name string) string { return a.urlFor[name] }

// serve answers GET /static/*: immutable for a year, with an ETag for revalidating clients.
func (a *assets) serve(c echo.Context) error {
	f, ok := a.byURL[c.Request().URL.Path]
	if !ok {
		return echo.NewHTTPError(http.StatusNotFound, "no such file")
	}
	h := c.Response().Header()
	h.Set("Cache-Control", "public, max-age=31536000, immutable")
	h.Set("ETag", f.etag)
	h.Set("X-Content-Type-Options", "nosniff")
	if c.Request().Header.Get("If-None-Match") == f.etag {
		return c.NoContent(http.StatusNotModified)
	}
	return c.Blob(http.StatusOK, f.ctype, f.body)
}
