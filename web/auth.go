package web

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/labstack/echo/v4"

	"github.com/ledgerd/ledgerd/internal/server"
	"github.com/ledgerd/ledgerd/internal/store"
)

// Cookie names. The login cookie carries the login form's CSRF token (double submit).
const (
	sessionCookie = "ledgerd_session"
	loginCookie   = "ledgerd_login"
	// secretSetting names the settings row holding the session signing secret.
	secretSetting = "dashboard_session_secret"
)

// Queries of the login path. A session made with an API key stays valid only while the key does.
const (
	keyIDSQL = `SELECT id FROM api_keys WHERE hash = $1 AND revoked_at IS NULL`

	keySessionSQL = `SELECT p.id, p.name FROM api_keys k JOIN projects p ON p.id = k.project_id
		WHERE k.project_id = $1 AND k.id = $2 AND k.revoked_at IS NULL`
)

// errRefused is a credential that names no project: a wrong, revoked or expired one.
var errRefused = errors.New("credential refused")

// project resolves a secret sent as a Bearer token or typed into the login form: the viewer
// token, or a project API key (through the server's key cache).
func (h *Handler) project(ctx context.Context, secret string) (store.Project, error) {
	if h.isViewerToken(secret) {
		return h.viewerProject(ctx)
	}
	p, err := h.srv.Authenticate(ctx, secret)
	if errors.Is(err, store.ErrBadKey) {
		return store.Project{}, errRefused
	}
	return p, err
}

// credential resolves what someone typed into the login form to its project and the session it
// opens, which names the key (or viewer token) so that revoking it ends the session.
func (h *Handler) credential(ctx context.Context, secret string) (store.Project, session, error) {
	p, err := h.project(ctx, secret)
	if err != nil {
		return store.Project{}, session{}, err
	}
	if h.isViewerToken(secret) {
		return p, session{Project: p.ID, Viewer: h.sign.viewerFingerprint(secret)}, nil
	}
	sum := sha256.Sum256([]byte(secret))
	var keyID int64
	err = h.opt.Store.Pool.QueryRow(ctx, keyIDSQL, sum[:]).Scan(&keyID)
	if errors.Is(err, pgx.ErrNoRows) {
		return store.Project{}, session{}, errRefused
	}
	if err != nil {
		return store.Project{}, session{}, fmt.Errorf("look up key: %w", err)
	}
	return p, session{Project: p.ID, Key: keyID}, nil
}

func (h *Handler) isViewerToken(secret string) bool {
	if h.opt.ViewerToken == "" {
		return false
	}
	a, b := sha256.Sum256([]byte(secret)), sha256.Sum256([]byte(h.opt.ViewerToken))
	return subtle.ConstantTimeCompare(a[:], b[:]) == 1
}

func (h *Handler) viewerProject(ctx context.Context) (store.Project, error) {
	p, err := h.opt.Store.ProjectByName(ctx, h.opt.ViewerProject)
	if errors.Is(err, store.ErrNotFound) {
		return store.Project{}, errRefused
	}
	return p, err
}

// resolve checks that a signed session still holds: its key unrevoked, or its viewer token still
// the configured one, for the same project.
func (h *Handler) resolve(ctx context.Context, s session) (store.Project, error) {
	if s.Key == 0 {
		if h.opt.ViewerToken == "" || s.Viewer != h.sign.viewerFingerprint(h.opt.ViewerToken) {
			return store.Project{}, errRefused
		}
		p, err := h.viewerProject(ctx)
		if err == nil && p.ID != s.Project {
			return store.Project{}, errRefused
		}
		return p, err
	}
	var p store.Project
	err := h.opt.Store.Pool.QueryRow(ctx, keySessionSQL, s.Project, s.Key).Scan(&p.ID, &p.Name)
	if errors.Is(err, pgx.ErrNoRows) {
		return store.Project{}, errRefused
	}
	if err != nil {
		return store.Project{}, fmt.Errorf("check session: %w", err)
	}
	return p, nil
}

// requireLogin admits requests with a valid session cookie or an "Authorization: Bearer" API key
// or viewer token, and records their project; others are sent to the login page.
func (h *Handler) requireLogin(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		r := c.Request()
		ctx := r.Context()
		if key := server.BearerKey(r); key != "" {
			p, err := h.project(ctx, key)
			if errors.Is(err, errRefused) {
				c.Response().Header().Set("WWW-Authenticate", `Bearer realm="ledgerd", error="invalid_token"`)
				return echo.NewHTTPError(http.StatusUnauthorized, "invalid or revoked API key")
			}
			if err != nil {
				return unavailable(err)
			}
			server.SetProject(c, p)
			return next(c)
		}
		ck, err := r.Cookie(sessionCookie)
		if err != nil {
			return h.toLogin(c)
		}
		sess, err := h.sign.decode(ck.Value, h.now())
		if err != nil {
			h.clearCookie(c, sessionCookie, "/")
			return h.toLogin(c)
		}
		p, err := h.resolve(ctx, sess)
		if errors.Is(err, errRefused) {
			h.clearCookie(c, sessionCookie, "/")
			return h.toLogin(c)
		}
		if err != nil {
			return unavailable(err)
		}
		server.SetProject(c, p)
		c.Set(sessionKey, sess)
		return next(c)
	}
}

// sessionKey is where requireLogin leaves the session of a cookie-authenticated request.
const sessionKey = "ledgerd.web.session"

func sessionOf(c echo.Context) (session, bool) {
	s, ok := c.Get(sessionKey).(session)
	return s, ok
}

func (h *Handler) toLogin(c echo.Context) error {
	return c.Redirect(http.StatusSeeOther, "/login?next="+url.QueryEscape(c.Request().URL.RequestURI()))
}

// localPath returns next when it is a path on this site, else "/": the login form never redirects
// elsewhere. Browsers drop tabs and newlines from a URL and read a backslash as a slash, so
// "/\t/evil.example" would mean "//evil.example": such characters are refused too.
func localPath(next string) string {
	bad := func(r rune) bool { return r < 0x20 || r == 0x7f || r == '\\' }
	if !strings.HasPrefix(next, "/") || strings.HasPrefix(next, "//") || strings.ContainsFunc(next, bad) {
		return "/"
	}
	return next
}

func (h *Handler) setCookie(c echo.Context, name, value, path string, ttl time.Duration, same http.SameSite) {
	c.SetCookie(&http.Cookie{Name: name, Value: value, Path: path, MaxAge: int(ttl.Seconds()),
		HttpOnly: true, SameSite: same, Secure: c.Scheme() == "https"})
}

func (h *Handler) clearCookie(c echo.Context, name, path string) {
	c.SetCookie(&http.Cookie{Name: name, Path: path, MaxAge: -1, HttpOnly: true,
		SameSite: http.SameSiteLaxMode, Secure: c.Scheme() == "https"})
}

// loginPage shows the login form with a fresh CSRF token, also set as a cookie the POST must match.
func (h *Handler) loginPage(c echo.Context) error {
	return h.showLogin(c, http.StatusOK, "")
}

func (h *Handler) showLogin(c echo.Context, status int, problem string) error {
	token := randomToken()
	h.setCookie(c, loginCookie, token, "/login", time.Hour, http.SameSiteStrictMode)
	next := localPath(c.FormValue("next"))
	return h.render(c, status, loginView(h.page(c, "Log in"), loginForm{Next: next, CSRF: token, Problem: problem,
		Viewer: h.opt.ViewerToken != ""}))
}

// login checks the form (same origin, CSRF token) and the key or token typed in, sets the session
// cookie and sends the browser on.
func (h *Handler) login(c echo.Context) error {
	r := c.Request()
	if err := h.csrf.Check(r); err != nil {
		return echo.NewHTTPError(http.StatusForbidden, "cross-origin form refused")
	}
	ck, err := r.Cookie(loginCookie)
	if err != nil || subtle.ConstantTimeCompare([]byte(ck.Value), []byte(c.FormValue("csrf"))) != 1 {
		return h.showLogin(c, http.StatusForbidden, "The form expired. Please try again.")
	}
	p, sess, err := h.credential(r.Context(), strings.TrimSpace(c.FormValue("key")))
	if errors.Is(err, errRefused) {
		return h.showLogin(c, http.StatusUnauthorized, "That key or token was not accepted.")
	}
	if err != nil {
		return unavailable(err)
	}
	sess.Expires = h.now().Add(h.opt.SessionTTL).Unix()
	sess.CSRF = randomToken()
	h.setCookie(c, sessionCookie, h.sign.encode(sess), "/", h.opt.SessionTTL, http.SameSiteLaxMode)
	h.clearCookie(c, loginCookie, "/login")
	h.opt.Logger.Info("dashboard login", "project", p.Name, "viewer", sess.Key == 0)
	return c.Redirect(http.StatusSeeOther, localPath(c.FormValue("next")))
}

// logout ends the session: the form must come from this site and carry the session's token.
func (h *Handler) logout(c echo.Context) error {
	r := c.Request()
	if err := h.csrf.Check(r); err != nil {
		return echo.NewHTTPError(http.StatusForbidden, "cross-origin form refused")
	}
	if ck, err := r.Cookie(sessionCookie); err == nil {
		if sess, err := h.sign.decode(ck.Value, h.now()); err == nil &&
			subtle.ConstantTimeCompare([]byte(sess.CSRF), []byte(c.FormValue("csrf"))) != 1 {
			return echo.NewHTTPError(http.StatusForbidden, "logout form token mismatch")
		}
	}
	h.clearCookie(c, sessionCookie, "/")
	return c.Redirect(http.StatusSeeOther, "/login")
}

// unavailable answers a database failure 503, the way the API does.
func unavailable(err error) error {
	return &echo.HTTPError{Code: http.StatusServiceUnavailable, Message: "database unavailable", Internal: err}
}
