package web_test

import (
	"net/http"
	"testing"

	"golang.org/x/net/html"
)

// TestFilterRoundTrip checks that a page's filter lives in its URL: the form shows it, the
// navigation and drill-down links keep it, and the figures follow it.
func TestFilterRoundTrip(t *testing.T) {
	t.Parallel()
	s := newSite(t)
	const path = "/models?from=2026-11-01&to=2026-11-20&service=support-bot&tenant=globex"
	doc := s.get(t, s.keyAcme, path, http.StatusOK)

	inputs := []struct{ id, want string }{
		{"f-from", "2026-11-01"}, {"f-to", "2026-11-20"}, {"f-service", "support-bot"},
		{"f-model", ""}, {"f-tenant", "globex"},
	}
	for _, in := range inputs {
		n := find(doc, byAttr("id", in.id))
		if n == nil {
			t.Errorf("no input #%s", in.id)
			continue
		}
		if got := attr(n, "value"); got != in.want {
			t.Errorf("input #%s = %q, want %q", in.id, got, in.want)
		}
		// Every filter input has a label.
		if find(doc, byAttr("for", in.id)) == nil {
			t.Errorf("input #%s has no label", in.id)
		}
	}

	links := []struct{ text, want string }{
		// Navigation keeps the filter.
		{"Cache", "/cache?from=2026-11-01&service=support-bot&tenant=globex&to=2026-11-20"},
		// A range preset changes the range only.
		{"7 days", "/models?from=2026-11-14&service=support-bot&tenant=globex&to=2026-11-20"},
		// A model's row drills down to it, keeping the rest.
		{"anthropic / claude-sonnet-5-5", "/models?from=2026-11-01&model=claude-sonnet-5-5&service=support-bot&tenant=globex&to=2026-11-20"},
	}
	for _, l := range links {
		a := find(doc, func(n *html.Node) bool { return n.Data == "a" && text(n) == l.text })
		if got := attr(a, "href"); got != l.want {
			t.Errorf("link %q goes to %q, want %q", l.text, got, l.want)
		}
	}

	// The figures are those of support-bot for globex in November: two calls today ($0.80) and the
	// failed sonnet attempt of 11-15 ($0.20), gpt-4o's fallback answer ($0.35) in its own row.
	for _, c := range []struct{ row, col, want string }{
		{"anthropic / claude-sonnet-5-5", "spend", "$1.00"},
		{"anthropic / claude-sonnet-5-5", "calls", "3"},
		{"openai / gpt-4o", "spend", "$0.35"},
	} {
		if got := cell(doc, "models", c.row, c.col); got != c.want {
			t.Errorf("%s %s = %q, want %q", c.row, c.col, got, c.want)
		}
	}
	if got := testText(doc, "total-spend"); got != "$1.35" {
		t.Errorf("total spend %q, want $1.35", got)
	}
}

// TestBadFilter checks that a filter the pages cannot use is answered 400 with an HTML page saying
// why.
func TestBadFilter(t *testing.T) {
	t.Parallel()
	s := newSite(t)
	cases := []struct {
		name, path, want string
	}{
		// Dates are YYYY-MM-DD.
		{"not a date", "/models?from=last-week", "from must be a date written YYYY-MM-DD"},
		// The range runs forward.
		{"backwards range", "/services?from=2026-11-20&to=2026-11-01", "from must be on or before to"},
		// Analytics refuses ranges longer than it answers.
		{"range too long", "/cache?from=2020-01-01&to=2026-11-20", "from: the range may span at most 400 days"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			doc := s.get(t, s.keyAcme, c.path, http.StatusBadRequest)
			if got := testText(doc, "error"); got != c.want {
				t.Errorf("error %q, want %q", got, c.want)
			}
		})
	}
}
