package web

import (
	"context"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/ledgerd/ledgerd/money"
)

var testNow = time.Date(2026, 11, 20, 15, 0, 0, 0, time.UTC)

// TestSessionCookie checks that only a cookie this secret signed, and not yet expired, decodes.
func TestSessionCookie(t *testing.T) {
	t.Parallel()
	s := signer{secret: []byte("secret-a")}
	good := session{Project: 7, Key: 3, Expires: testNow.Add(time.Hour).Unix(), CSRF: "tok"}
	value := s.encode(good)
	payload, sig, _ := strings.Cut(value, ".")
	cases := []struct {
		name  string
		value string
		by    signer
		at    time.Time
		ok    bool
	}{
		// What the signer wrote reads back.
		{"own cookie", value, s, testNow, true},
		// Another deployment's secret does not accept it.
		{"other secret", value, signer{secret: []byte("secret-b")}, testNow, false},
		// Past its expiry the cookie is refused.
		{"expired", value, s, testNow.Add(time.Hour), false},
		// A payload changed after signing fails the signature.
		{"edited payload", payload[:len(payload)-1] + "x." + sig, s, testNow, false},
		// No signature at all.
		{"unsigned", payload, s, testNow, false},
		// Junk.
		{"empty", "", s, testNow, false},
		{"dot only", ".", s, testNow, false},
		// A signed payload missing the fields a session needs is refused.
		{"signed but empty session", s.encode(session{Expires: testNow.Add(time.Hour).Unix()}), s, testNow, false},
	}
	for _, c := range cases {
		got, err := c.by.decode(c.value, c.at)
		if (err == nil) != c.ok {
			t.Errorf("%s: err %v, want ok=%v", c.name, err, c.ok)
		}
		if c.ok && got != good {
			t.Errorf("%s: got %+v, want %+v", c.name, got, good)
		}
	}
}

// FuzzSessionDecode feeds the cookie decoder arbitrary values: it must never panic, and must
// accept nothing but what the signer signed.
func FuzzSessionDecode(f *testing.F) {
	s := signer{secret: []byte("fuzz-secret")}
	f.Add(s.encode(session{Project: 1, Expires: testNow.Add(time.Hour).Unix(), CSRF: "x"}))
	f.Add("eyJwIjoxfQ.AAAA")
	f.Add("")
	f.Fuzz(func(t *testing.T, value string) {
		sess, err := s.decode(value, testNow)
		if err != nil {
			return
		}
		if s.encode(sess) == "" || sess.Project <= 0 || sess.CSRF == "" {
			t.Fatalf("accepted %q as %+v", value, sess)
		}
		payload, sig, _ := strings.Cut(value, ".")
		if sig != s.mac("session", payload) {
			t.Fatalf("accepted %q without its signature", value)
		}
	})
}

// FuzzLocalPath checks that the login redirect never leaves the site, whatever next says.
func FuzzLocalPath(f *testing.F) {
	for _, seed := range []string{"/", "/models?x=1", "//evil.example", "https://evil.example", "/\\evil", "/%2F%2Fevil", " /x", "/\r\nSet-Cookie: a=b"} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, next string) {
		got := localPath(next)
		// A browser drops control characters and reads "\\" as "/" before it resolves a URL.
		seen := strings.ReplaceAll(strings.Map(func(r rune) rune {
			if r < 0x20 || r == 0x7f {
				return -1
			}
			return r
		}, got), "\\", "/")
		if !strings.HasPrefix(seen, "/") || strings.HasPrefix(seen, "//") {
			t.Fatalf("localPath(%q) = %q leaves the site", next, got)
		}
		if got != "/" && got != next {
			t.Fatalf("localPath(%q) = %q changed a local path", next, got)
		}
	})
}

// TestFormat checks the dashboard's own formats; money and counts are money's and numfmt's.
func TestFormat(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name, got, want string
	}{
		// A cost per call is divided exactly, rounded half away from zero at the nano-dollar.
		{"exact division", perCall(4_840_000_000, 25).String(), "0.193600000"},
		{"division rounds", perCall(2, 3).String(), "0.000000001"},
		// Counts read with their noun, plural from two on.
		{"plural", plural(1, "hash", "hashes") + ", " + plural(3, "hash", "hashes"), "1 hash, 3 hashes"},
		{"hashes used once", "(" + plural(12, "hash", "hashes") + usedOnce(12) + ")", "(12 hashes, 12 used once)"},
		{"no hash used once", "(" + plural(1, "hash", "hashes") + usedOnce(0) + ")", "(1 hash)"},
	}
	for _, c := range cases {
		if c.got != c.want {
			t.Errorf("%s: %q, want %q", c.name, c.got, c.want)
		}
	}
}

// TestCapped checks that a long breakdown keeps its biggest rows and says how many it left out.
func TestCapped(t *testing.T) {
	t.Parallel()
	for _, n := range []int{0, maxRows, maxRows + 7} {
		b := capped(breakdown{Rows: make([]statRow, n)})
		if len(b.Rows) != min(n, maxRows) || b.Hidden != max(0, n-maxRows) {
			t.Errorf("%d rows: kept %d, hidden %d", n, len(b.Rows), b.Hidden)
		}
	}
}

// TestSpendUsageUnknown renders the spend of groups with attempts whose usage is unknown: they are
// flagged as "usage unknown (N)" beside the amount, like unpriced ones, and never read as $0.
func TestSpendUsageUnknown(t *testing.T) {
	t.Parallel()
	cost := money.Nanos(2_350_000_000)
	cases := []struct {
		name              string
		cost              *money.Nanos
		unpriced, unknown int64
		want              string
	}{
		// only usage-unknown attempts: no amount at all
		{"all unknown", nil, 0, 439, "usage unknown (439)"},
		// some priced, some without usage: the amount and the flag
		{"partly unknown", &cost, 0, 2007, "$2.35+ usage unknown (2,007)"},
		// both kinds of missing cost are named
		{"both", nil, 3, 2, "unpriced (3)usage unknown (2)"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var b strings.Builder
			if err := spend(tc.cost, tc.unpriced, tc.unknown).Render(context.Background(), &b); err != nil {
				t.Fatal(err)
			}
			text := regexp.MustCompile(`<[^>]*>`).ReplaceAllString(b.String(), "")
			if text = strings.Join(strings.Fields(text), ""); text != strings.ReplaceAll(tc.want, " ", "") {
				t.Errorf("rendered %q, want %q", text, tc.want)
			}
		})
	}
}

// TestScopeText checks that an alert's scope reads as words, not as raw label pairs: the labels
// every alert carries are left out and the rest come in the order a reader narrows down.
func TestScopeText(t *testing.T) {
	t.Parallel()
	cases := []struct {
		labels map[string]string
		want   string
	}{
		{map[string]string{"alertname": "retry-storm", "kind": "attempts_per_call", "severity": "warning", "project": "acme",
			"service": "router", "operation": "classify", "model": "claude-haiku-5-5", "team": "platform"},
			"model claude-haiku-5-5 · service router · operation classify · team platform"},
		{map[string]string{"alertname": "budget", "kind": "monthly_budget", "project": "acme"}, "whole project"},
	}
	for _, c := range cases {
		if got := scopeText(c.labels); got != c.want {
			t.Errorf("scopeText(%v) = %q, want %q", c.labels, got, c.want)
		}
	}
}

// TestBasisText checks that the projection card says what its run rate averages, a young
// ledger's few days included.
func TestBasisText(t *testing.T) {
	t.Parallel()
	for n, want := range map[int]string{0: "today so far", 1: "1 complete day", 2: "2 complete days (a young ledger)", 7: "the last 7 complete days"} {
		if got := basisText(n); got != want {
			t.Errorf("basisText(%d) = %q, want %q", n, got, want)
		}
	}
}
