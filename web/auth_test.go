package web_test

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"
)

// TestLogin covers the ways into the dashboard and the ways a request is refused.
func TestLogin(t *testing.T) {
	t.Parallel()
	s := newSite(t)

	t.Run("a visitor is sent to the login page, keeping where they were going", func(t *testing.T) {
		t.Parallel()
		resp, err := noRedirect.Get(s.URL + "/models?model=x")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/login?next=%2Fmodels%3Fmodel%3Dx" {
			t.Fatalf("status %d, Location %q", resp.StatusCode, resp.Header.Get("Location"))
		}
	})

	cases := []struct {
		name    string
		secret  string
		status  int
		project string // shown once logged in; "" when refused
	}{
		// A project API key opens its own project.
		{"project key", "", http.StatusSeeOther, "acme"},
		// The viewer token opens the viewer project.
		{"viewer token", viewerToken, http.StatusSeeOther, "acme"},
		// A wrong key is refused with the form shown again.
		{"wrong key", "ldg_0000000000000000000000000000000000000000000000", http.StatusUnauthorized, ""},
		// Something close to the viewer token is not it.
		{"near viewer token", viewerToken + "x", http.StatusUnauthorized, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			secret := c.secret
			if secret == "" {
				secret = s.keyAcme
			}
			cl := browserClient(t)
			resp := s.login(t, cl, secret)
			if resp.StatusCode != c.status {
				t.Fatalf("login: status %d, want %d", resp.StatusCode, c.status)
			}
			if c.project == "" {
				s.fetch(t, cl, "/", http.StatusSeeOther) // still logged out
				return
			}
			var session *http.Cookie
			for _, ck := range resp.Cookies() {
				if ck.Name == "ledgerd_session" {
					session = ck
				}
			}
			if session == nil || !session.HttpOnly || session.SameSite != http.SameSiteLaxMode || session.Secure || session.Path != "/" {
				t.Fatalf("session cookie %+v: want HttpOnly, SameSite=Lax, not Secure over plain HTTP, Path=/", session)
			}
			doc := s.fetch(t, cl, "/", http.StatusOK)
			if got := testText(doc, "project"); got != c.project {
				t.Errorf("logged in as %q, want %q", got, c.project)
			}
		})
	}

	t.Run("the form shows why a login was refused", func(t *testing.T) {
		t.Parallel()
		cl := browserClient(t)
		doc := s.fetch(t, cl, "/login", http.StatusOK)
		token := attr(find(doc, byAttr("name", "csrf")), "value")
		resp, err := cl.PostForm(s.URL+"/login", url.Values{"key": {"ldg_nope"}, "csrf": {token}})
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		page := readDoc(t, resp)
		if resp.StatusCode != http.StatusUnauthorized || testText(page, "login-problem") != "That key or token was not accepted." {
			t.Fatalf("status %d, problem %q", resp.StatusCode, testText(page, "login-problem"))
		}
	})

	t.Run("behind TLS the session cookie is Secure", func(t *testing.T) {
		t.Parallel()
		cl := browserClient(t)
		doc := s.fetch(t, cl, "/login", http.StatusOK)
		token := attr(find(doc, byAttr("name", "csrf")), "value")
		req, _ := http.NewRequest(http.MethodPost, s.URL+"/login", strings.NewReader(url.Values{"key": {s.keyAcme}, "csrf": {token}}.Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.Header.Set("X-Forwarded-Proto", "https")
		for _, ck := range cl.Jar.Cookies(req.URL) {
			req.AddCookie(ck)
		}
		resp, err := noRedirect.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		secure := false
		for _, ck := range resp.Cookies() {
			secure = secure || ck.Name == "ledgerd_session" && ck.Secure
		}
		if resp.StatusCode != http.StatusSeeOther || !secure {
			t.Fatalf("status %d, cookies %v: want a Secure session cookie", resp.StatusCode, resp.Cookies())
		}
	})

	t.Run("login redirects only within the site", func(t *testing.T) {
		t.Parallel()
		for next, want := range map[string]string{"/cache?from=2026-11-01": "/cache?from=2026-11-01", "//evil.example/": "/",
			"https://evil.example/": "/", "/\\evil.example": "/", "/\t/evil.example": "/"} {
			cl := browserClient(t)
			doc := s.fetch(t, cl, "/login", http.StatusOK)
			token := attr(find(doc, byAttr("name", "csrf")), "value")
			resp, err := cl.PostForm(s.URL+"/login", url.Values{"key": {s.keyAcme}, "csrf": {token}, "next": {next}})
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if got := resp.Header.Get("Location"); got != want {
				t.Errorf("next %q: redirected to %q, want %q", next, got, want)
			}
		}
	})

	t.Run("a bearer key opens pages for scripts", func(t *testing.T) {
		t.Parallel()
		doc := s.get(t, s.keyOth, "/models", http.StatusOK)
		if got := testText(doc, "project"); got != "other" {
			t.Errorf("project %q, want other", got)
		}
		s.get(t, "ldg_wrong", "/models", http.StatusUnauthorized)
		s.get(t, viewerToken, "/models", http.StatusOK)
	})
}

// TestCSRF checks that the login and logout forms refuse requests forged by another site.
func TestCSRF(t *testing.T) {
	t.Parallel()
	s := newSite(t)
	cases := []struct {
		name   string
		path   string
		header map[string]string
		// token is the form's csrf field: "form" sends the right one.
		token  string
		status int
	}{
		// The login form needs the token its page set as a cookie.
		{"login without token", "/login", nil, "", http.StatusForbidden},
		{"login with a wrong token", "/login", nil, "forged", http.StatusForbidden},
		// A cross-site POST is refused whatever it carries.
		{"login from another site", "/login", map[string]string{"Sec-Fetch-Site": "cross-site"}, "form", http.StatusForbidden},
		{"login from another origin", "/login", map[string]string{"Origin": "https://evil.example"}, "form", http.StatusForbidden},
		// Logout needs the session's own token.
		{"logout without token", "/logout", nil, "", http.StatusForbidden},
		{"logout from another site", "/logout", map[string]string{"Sec-Fetch-Site": "cross-site"}, "form", http.StatusForbidden},
		{"logout from the page", "/logout", nil, "form", http.StatusSeeOther},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			cl := browserClient(t)
			var token string
			if c.path == "/logout" {
				if resp := s.login(t, cl, s.keyAcme); resp.StatusCode != http.StatusSeeOther {
					t.Fatalf("login: %d", resp.StatusCode)
				}
				token = attr(find(s.fetch(t, cl, "/", http.StatusOK), byAttr("name", "csrf")), "value")
			} else {
				token = attr(find(s.fetch(t, cl, "/login", http.StatusOK), byAttr("name", "csrf")), "value")
			}
			if c.token != "form" {
				token = c.token
			}
			form := url.Values{"key": {s.keyAcme}, "csrf": {token}}
			req, _ := http.NewRequest(http.MethodPost, s.URL+c.path, strings.NewReader(form.Encode()))
			req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
			for k, v := range c.header {
				req.Header.Set(k, v)
			}
			resp, err := cl.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != c.status {
				t.Fatalf("status %d, want %d", resp.StatusCode, c.status)
			}
			if c.path == "/logout" {
				// After a refused logout the session still works; after logout it is gone.
				want := http.StatusOK
				if c.status == http.StatusSeeOther {
					want = http.StatusSeeOther
				}
				s.fetch(t, cl, "/", want)
			}
		})
	}
}

// TestSessions checks what keeps a session valid: its signature, its lifetime, its key, and the
// shared secret that lets another replica (or a restarted one) read it.
func TestSessions(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name string
		// change alters the session or the world after login; then / is fetched.
		change func(t *testing.T, s *site, cl *http.Client)
		want   int
	}{
		// Nothing changed: the session opens the page.
		{"fresh session", func(*testing.T, *site, *http.Client) {}, http.StatusOK},
		// A cookie whose payload was edited fails its signature.
		{"tampered cookie", func(t *testing.T, s *site, cl *http.Client) {
			u, _ := url.Parse(s.URL)
			for _, ck := range cl.Jar.Cookies(u) {
				if ck.Name == "ledgerd_session" {
					payload, sig, _ := strings.Cut(ck.Value, ".")
					ck.Value = payload[:len(payload)-2] + "AA." + sig
					cl.Jar.SetCookies(u, []*http.Cookie{ck})
				}
			}
		}, http.StatusSeeOther},
		// Past its lifetime (12 h) the session is over.
		{"expired", func(t *testing.T, s *site, _ *http.Client) { s.clock.set(now.Add(13 * time.Hour)) }, http.StatusSeeOther},
		// Revoking the key ends the sessions it opened.
		{"key revoked", func(t *testing.T, s *site, _ *http.Client) {
			if err := s.st.RevokeKey(context.Background(), s.keyAcme); err != nil {
				t.Fatal(err)
			}
		}, http.StatusSeeOther},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			s := newSite(t)
			cl := browserClient(t)
			if resp := s.login(t, cl, s.keyAcme); resp.StatusCode != http.StatusSeeOther {
				t.Fatalf("login: %d", resp.StatusCode)
			}
			c.change(t, s, cl)
			s.fetch(t, cl, "/", c.want)
		})
	}

	t.Run("another replica on the same database reads the session", func(t *testing.T) {
		t.Parallel()
		s := newSite(t)
		cl := browserClient(t)
		if resp := s.login(t, cl, viewerToken); resp.StatusCode != http.StatusSeeOther {
			t.Fatalf("login: %d", resp.StatusCode)
		}
		u, _ := url.Parse(s.URL)
		cookies := cl.Jar.Cookies(u)
		for _, c := range []struct {
			name   string
			viewer string
			want   int
		}{
			// Same secret from the settings table, same viewer token: the session holds.
			{"same token", viewerToken, http.StatusOK},
			// The viewer token was changed: sessions made with the old one end.
			{"token changed", "a-new-viewer-token-987654", http.StatusSeeOther},
		} {
			replica := mountSiteOn(t, s, c.viewer)
			ru, _ := url.Parse(replica)
			cl2 := browserClient(t)
			cl2.Jar.SetCookies(ru, cookies)
			resp, err := cl2.Get(replica + "/")
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != c.want {
				t.Errorf("%s: status %d, want %d", c.name, resp.StatusCode, c.want)
			}
		}
	})
}
