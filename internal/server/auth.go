package server

import (
	"context"
	"crypto/sha256"
	"errors"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/ledgerd/ledgerd/internal/store"
)

// keyCache remembers authenticated keys for a minute, and refused ones for a few seconds, so the
// ingest path does not query the database on every request.
type keyCache struct {
	st  *store.Store
	now func() time.Time

	mu      sync.Mutex
	entries map[[32]byte]keyEntry
}

type keyEntry struct {
	project store.Project
	ok      bool
	expires time.Time
}

const (
	keyTTL    = time.Minute
	badKeyTTL = 5 * time.Second
)

func newKeyCache(st *store.Store, now func() time.Time) *keyCache {
	return &keyCache{st: st, now: now, entries: map[[32]byte]keyEntry{}}
}

func (k *keyCache) lookup(ctx context.Context, key string) (store.Project, error) {
	sum := sha256.Sum256([]byte(key))
	now := k.now()
	k.mu.Lock()
	e, hit := k.entries[sum]
	k.mu.Unlock()
	if hit && now.Before(e.expires) {
		if !e.ok {
			return store.Project{}, store.ErrBadKey
		}
		return e.project, nil
	}
	p, err := k.st.Authenticate(ctx, key)
	switch {
	case err == nil:
		e = keyEntry{project: p, ok: true, expires: now.Add(keyTTL)}
	case errors.Is(err, store.ErrBadKey):
		e = keyEntry{expires: now.Add(badKeyTTL)}
	default:
		return store.Project{}, err
	}
	k.mu.Lock()
	if len(k.entries) > 10_000 {
		clear(k.entries)
	}
	k.entries[sum] = e
	k.mu.Unlock()
	return p, err
}

// ProjectOf returns the project the request authenticated as. Handlers behind RequireKey (or the
// dashboard's session check) always have one.
func ProjectOf(c echo.Context) store.Project {
	p, _ := c.Get("ledgerd.project").(store.Project)
	return p
}

// SetProject records the authenticated project on the request; the dashboard's login uses it.
func SetProject(c echo.Context, p store.Project) {
	c.Set("ledgerd.project", p)
}

// Authenticate resolves an API key to its project, through the cache.
func (s *Server) Authenticate(ctx context.Context, key string) (store.Project, error) {
	return s.auth.lookup(ctx, key)
}

// BearerKey extracts the key from an "Authorization: Bearer KEY" header.
func BearerKey(r *http.Request) string {
	h := r.Header.Get("Authorization")
	if len(h) > 7 && strings.EqualFold(h[:7], "bearer ") {
		return strings.TrimSpace(h[7:])
	}
	return ""
}

// RequireKey is middleware that admits only requests with a valid project API key.
func (s *Server) RequireKey(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		key := BearerKey(c.Request())
		if key == "" {
			c.Response().Header().Set("WWW-Authenticate", `Bearer realm="ledgerd"`)
			return echo.NewHTTPError(http.StatusUnauthorized, "missing API key: send Authorization: Bearer KEY")
		}
		p, err := s.Authenticate(c.Request().Context(), key)
		if errors.Is(err, store.ErrBadKey) {
			c.Response().Header().Set("WWW-Authenticate", `Bearer realm="ledgerd", error="invalid_token"`)
			return echo.NewHTTPError(http.StatusUnauthorized, "invalid or revoked API key")
		}
		if err != nil {
			s.opt.Logger.Error("authenticate", "err", err)
			return echo.NewHTTPError(http.StatusServiceUnavailable, "database unavailable")
		}
		SetProject(c, p)
		return next(c)
	}
}
