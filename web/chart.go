package web

import (
	"cmp"
	"slices"
	"time"

	"github.com/ledgerd/ledgerd/internal/analytics"
	"github.com/ledgerd/ledgerd/internal/numfmt"
	"github.com/ledgerd/ledgerd/money"
)

// chartSpec is what static/charts.js draws: one point per local day, hour or minute of the range
// (the view's step).
type chartSpec struct {
	// Kind is "bars" or "lines".
	Kind    string `json:"kind"`
	Stacked bool   `json:"stacked"`
	// Unit formats the value axis: "usd", "count", "ratio" or "percent".
	Unit string `json:"unit"`
	TZ   string `json:"tz"`
	// Step is the distance between points in seconds.
	Step int64 `json:"step"`
	// From and To bound the x-axis: the range shown, [From, To) in Unix seconds. Each point covers
	// [x, x + step).
	From   int64         `json:"from"`
	To     int64         `json:"to"`
	X      []int64       `json:"x"`
	Series []chartSeries `json:"series"`
	// Days are the labels of X (local dates, or local times for hours and minutes), for the table
	// of the same figures; Head names them.
	Days []string `json:"-"`
	Head string   `json:"-"`
}

// chartSeries is one series: values to plot (money as decimal strings, never floats computed
// here) and the text the legend shows for each point.
type chartSeries struct {
	Label  string   `json:"label"`
	Values []any    `json:"values"`
	Text   []string `json:"text"`
	// Join draws the line across days without a value (a projection's two ends).
	Join bool `json:"join,omitempty"`
}

// maxSeries bounds the series of a stacked chart; the smallest others are summed as "other".
const maxSeries = 7

func newChart(v view, kind, unit string, stacked bool) chartSpec {
	c := chartSpec{Kind: kind, Stacked: stacked, Unit: unit, TZ: v.tz.String(), Step: int64(v.step / time.Second),
		From: v.from.Unix(), To: v.to.Unix(), Head: "Day", Series: []chartSeries{}}
	switch v.timeDim() {
	case analytics.ByHour:
		c.Head = "Hour"
	case analytics.ByMinute:
		c.Head = "Minute"
	}
	for _, d := range v.points() {
		c.X = append(c.X, d.Start.Unix())
		c.Days = append(c.Days, d.Label)
	}
	return c
}

// spendCell is an amount with the number of attempts it leaves out for want of a price.
type spendCell struct {
	cost              money.Nanos
	unpriced, unknown int64
}

func (s *spendCell) add(st analytics.Stats) {
	s.cost += costOf(st)
	s.unpriced += st.UnpricedAttempts
	s.unknown += st.UsageUnknownAttempts
}

func (s spendCell) text() string {
	t := s.cost.USD()
	if s.unpriced > 0 {
		t += " + " + numfmt.Count(s.unpriced) + " unpriced"
	}
	if s.unknown > 0 {
		t += " + usage unknown (" + numfmt.Count(s.unknown) + ")"
	}
	return t
}

// spendChart stacks each point's spend by the label of its group (groups of a summary by the view's time dimension
// and one more), the biggest spender at the bottom.
func spendChart(v view, groups []analytics.Group, label func(analytics.Key) string) chartSpec {
	c := newChart(v, "bars", "usd", true)
	index := pointIndex(v)
	cells := map[string][]spendCell{}
	totals := map[string]money.Nanos{}
	for _, g := range groups {
		i, ok := index[v.pointOf(g.Key)]
		if !ok {
			continue
		}
		l := label(g.Key)
		if cells[l] == nil {
			cells[l] = make([]spendCell, len(c.X))
		}
		cells[l][i].add(g.Stats)
		totals[l] += costOf(g.Stats)
	}
	labels := topLabels(totals, func(a, b money.Nanos) int { return cmp.Compare(a, b) })
	if len(labels) > maxSeries {
		other := make([]spendCell, len(c.X))
		for _, l := range labels[maxSeries-1:] {
			for i, s := range cells[l] {
				other[i].cost += s.cost
				other[i].unpriced += s.unpriced
			}
		}
		labels = labels[:maxSeries-1]
		cells["other"] = other
		labels = append(labels, "other")
	}
	for _, l := range labels {
		s := chartSeries{Label: l}
		for _, cell := range cells[l] {
			s.Values = append(s.Values, cell.cost.String())
			s.Text = append(s.Text, cell.text())
		}
		c.Series = append(c.Series, s)
	}
	return c
}

// errorChart stacks each day's failed attempts by error class, from the groups of a summary by day
// (and possibly more dimensions, whose groups it adds up).
func errorChart(v view, groups []analytics.Group) chartSpec {
	c := newChart(v, "bars", "count", true)
	index := pointIndex(v)
	counts := map[string][]int64{}
	totals := map[string]int64{}
	for _, g := range groups {
		i, ok := index[v.pointOf(g.Key)]
		if !ok {
			continue
		}
		for class, n := range g.Errors {
			if counts[class] == nil {
				counts[class] = make([]int64, len(c.X))
			}
			counts[class][i] += n
			totals[class] += n
		}
	}
	for _, class := range topLabels(totals, cmpInt64) {
		s := chartSeries{Label: class}
		for _, n := range counts[class] {
			s.Values = append(s.Values, n)
			s.Text = append(s.Text, numfmt.Count(n))
		}
		c.Series = append(c.Series, s)
	}
	return c
}

// ratioLine is one line of a ratio chart: the ratio a day's stats give.
type ratioLine struct {
	label string
	of    func(analytics.Stats) *float64
	// percent shows the ratio as a percentage.
	percent bool
}

// ratioChart draws one line per ratio over the days of a summary by day; days without the
// figure are gaps.
func ratioChart(v view, groups []analytics.Group, unit string, lines ...ratioLine) chartSpec {
	c := newChart(v, "lines", unit, false)
	index := pointIndex(v)
	for _, l := range lines {
		s := chartSeries{Label: l.label, Values: make([]any, len(c.X)), Text: make([]string, len(c.X))}
		for i := range s.Text {
			s.Text[i] = "–"
		}
		for _, g := range groups {
			i, ok := index[v.pointOf(g.Key)]
			r := l.of(g.Stats)
			if !ok || r == nil {
				continue
			}
			if l.percent {
				s.Values[i] = *r * 100
				s.Text[i] = percent(r)
			} else {
				s.Values[i] = *r
				s.Text[i] = ratio(r)
			}
		}
		c.Series = append(c.Series, s)
	}
	return c
}

func cmpInt64(a, b int64) int { return cmp.Compare(a, b) }

// pointIndex maps the label of each point of the view to its position on the chart.
func pointIndex(v view) map[string]int {
	m := map[string]int{}
	for i, d := range v.points() {
		m[d.Label] = i
	}
	return m
}

// topLabels orders labels by their total, largest first, then by name.
func topLabels[T any](totals map[string]T, compare func(a, b T) int) []string {
	labels := make([]string, 0, len(totals))
	for l := range totals {
		labels = append(labels, l)
	}
	slices.SortFunc(labels, func(a, b string) int {
		if c := compare(totals[b], totals[a]); c != 0 {
			return c
		}
		return cmp.Compare(a, b)
	})
	return labels
}

// modelLabel names a model's group, marking fallback traffic apart from the model's own.
func modelLabel(k analytics.Key) string {
	l := deref(k.Model)
	if k.Fallback != nil && *k.Fallback {
		l += " (fallback)"
	}
	return l
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// costOf is the priced part of a group's spend.
func costOf(st analytics.Stats) money.Nanos {
	if st.CostUSD == nil {
		return 0
	}
	return *st.CostUSD
}
