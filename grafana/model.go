// Package grafana defines ledgerd's Grafana dashboards in Go and renders them to the JSON files
// under grafana/dashboards/ (go generate ./grafana/). The cost, cache and reliability dashboards
// query ledgerd's PostgreSQL rollups through Grafana's PostgreSQL data source; the health dashboard
// queries Prometheus. Tests expand every query's Grafana macros as Grafana does and run it on a
// real ledger.
package grafana

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
)

// Plugin ids of the data sources the dashboards use (Grafana 10.4 or later).
const (
	PostgresType   = "grafana-postgresql-datasource"
	PrometheusType = "prometheus"
)

// Default data source uids: the ones provisioning/datasources/ledgerd.yaml creates. An imported
// dashboard falls back to the first data source of the right type, and its data source variable
// picks another.
const (
	PostgresUID   = "ledgerd-postgres"
	PrometheusUID = "prometheus"
)

// Kind is how a panel draws its query.
type Kind int

// The panel kinds the dashboards use.
const (
	Stat       Kind = iota // one figure
	TimeSeries             // lines over time
	Bars                   // bars over time (per-day figures)
	Table                  // rows and columns
)

// Format is the shape a SQL query's result is read in.
type Format string

// The result formats of Grafana's SQL data sources.
const (
	FormatTable      Format = "table"
	FormatTimeSeries Format = "time_series"
)

// Query is one target of a panel: SQL for the PostgreSQL data source or PromQL for Prometheus.
type Query struct {
	SQL    string
	Format Format
	PromQL string
	Legend string // PromQL series name, e.g. "{{route}}"
}

// Panel is one Grafana panel.
type Panel struct {
	Title       string
	Description string
	Kind        Kind
	Unit        string            // Grafana unit of every value ("currencyUSD", "percentunit", "ms")
	Columns     map[string]string // unit per column, for tables mixing units
	Decimals    int               // shown decimals; 0 leaves Grafana's choice
	Width       int               // of 24 columns
	Height      int
	MinInterval string // lower bound of $__interval, e.g. "1h" for hourly rollups
	Queries     []Query
}

// Variable is a template variable filled by a query on the dashboard's data source. Every one is
// multi-value with an "All" option. Selecting All inserts AllValue as it is when set, else every
// value the query returned, each quoted.
type Variable struct {
	Name, Label string
	Query       string
	AllValue    string
}

// Dashboard is one dashboard file.
type Dashboard struct {
	UID         string
	Title       string
	File        string // name under dashboards/
	Description string
	Source      string // PostgresType or PrometheusType
	From        string // default time range start, e.g. "now-7d"
	Variables   []Variable
	Panels      []Panel
}

// Dashboards are every dashboard ledgerd ships, in file order.
func Dashboards() []Dashboard {
	return []Dashboard{costDashboard(), cacheDashboard(), reliabilityDashboard(), healthDashboard()}
}

// Files renders every dashboard and returns the file contents by name.
func Files() (map[string][]byte, error) {
	out := map[string][]byte{}
	for _, d := range Dashboards() {
		b, err := d.JSON()
		if err != nil {
			return nil, fmt.Errorf("render dashboard %s: %w", d.UID, err)
		}
		out[d.File] = b
	}
	return out, nil
}

// JSON renders the dashboard in Grafana's dashboard model (schemaVersion 39), indented, with a
// trailing newline. The output depends only on the definition, so regenerating is byte-stable.
func (d Dashboard) JSON() ([]byte, error) {
	ds := jsonRef{Type: d.Source, UID: "${datasource}"}
	def := PostgresUID
	if d.Source == PrometheusType {
		def = PrometheusUID
	}
	vars := []any{jsonDatasourceVar{Name: "datasource", Label: "Data source", Type: "datasource", Query: d.Source,
		Current: jsonCurrent{Text: def, Value: def}, Options: []any{}}}
	for _, v := range d.Variables {
		vars = append(vars, jsonQueryVar{Name: v.Name, Label: v.Label, Type: "query", Datasource: ds,
			Query: v.Query, Definition: v.Query, Refresh: 2, Multi: true, IncludeAll: true, AllValue: v.AllValue, Sort: 1,
			Current: jsonCurrent{Text: []string{"All"}, Value: []string{"$__all"}}, Options: []any{}})
	}
	jd := jsonDashboard{UID: d.UID, Title: d.Title, Description: d.Description, Tags: []string{"ledgerd"},
		Editable: true, GraphTooltip: 1, SchemaVersion: 39, Version: 1, Refresh: "5m",
		Time: jsonTime{From: d.From, To: "now"}, Timezone: "", Annotations: jsonList{List: []any{}},
		Templating: jsonList{List: vars}}
	x, y, rowH := 0, 0, 0
	for i, p := range d.Panels {
		if x+p.Width > 24 {
			x, y, rowH = 0, y+rowH, 0
		}
		jd.Panels = append(jd.Panels, p.json(i+1, ds, jsonGrid{H: p.Height, W: p.Width, X: x, Y: y}))
		x += p.Width
		rowH = max(rowH, p.Height)
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(jd); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

func (p Panel) json(id int, ds jsonRef, grid jsonGrid) jsonPanel {
	jp := jsonPanel{ID: id, Title: p.Title, Description: p.Description, Datasource: ds, GridPos: grid,
		Interval: p.MinInterval}
	defaults := jsonDefaults{Unit: p.Unit, Custom: map[string]any{}}
	if p.Decimals > 0 {
		defaults.Decimals = &p.Decimals
	}
	switch p.Kind {
	case Stat:
		jp.Type = "stat"
		jp.Options = map[string]any{"reduceOptions": map[string]any{"calcs": []string{"lastNotNull"}, "fields": "", "values": false},
			"colorMode": "none", "graphMode": "none", "textMode": "auto", "justifyMode": "auto", "orientation": "auto"}
	case TimeSeries, Bars:
		jp.Type = "timeseries"
		jp.Options = map[string]any{"legend": map[string]any{"displayMode": "table", "placement": "right", "showLegend": true,
			"calcs": []string{"sum"}}, "tooltip": map[string]any{"mode": "multi", "sort": "desc"}}
		defaults.Custom = map[string]any{"drawStyle": "line", "lineWidth": 1, "fillOpacity": 10, "showPoints": "never",
			"spanNulls": false, "stacking": map[string]any{"mode": "none"}}
		if p.Kind == Bars {
			defaults.Custom["drawStyle"] = "bars"
			defaults.Custom["fillOpacity"] = 80
			defaults.Custom["stacking"] = map[string]any{"mode": "normal"}
		}
	case Table:
		jp.Type = "table"
		jp.Options = map[string]any{"showHeader": true, "cellHeight": "sm", "footer": map[string]any{"show": false}}
		defaults.Custom = map[string]any{"align": "auto", "filterable": true}
	}
	overrides := []jsonOverride{}
	for _, col := range slices.Sorted(maps.Keys(p.Columns)) {
		overrides = append(overrides, jsonOverride{Matcher: jsonMatcher{ID: "byName", Options: col},
			Properties: []jsonProperty{{ID: "unit", Value: p.Columns[col]}}})
	}
	jp.FieldConfig = jsonFieldConfig{Defaults: defaults, Overrides: overrides}
	for i, q := range p.Queries {
		t := jsonTarget{RefID: string(rune('A' + i)), Datasource: ds}
		if q.PromQL != "" {
			t.Expr, t.LegendFormat, t.Range = q.PromQL, q.Legend, true
		} else {
			t.RawSQL, t.Format, t.RawQuery, t.EditorMode = q.SQL, string(q.Format), true, "code"
		}
		jp.Targets = append(jp.Targets, t)
	}
	return jp
}

// The JSON shapes of Grafana's dashboard model, in the field order Grafana exports.
type (
	jsonDashboard struct {
		Annotations   jsonList    `json:"annotations"`
		Description   string      `json:"description"`
		Editable      bool        `json:"editable"`
		GraphTooltip  int         `json:"graphTooltip"`
		Panels        []jsonPanel `json:"panels"`
		Refresh       string      `json:"refresh"`
		SchemaVersion int         `json:"schemaVersion"`
		Tags          []string    `json:"tags"`
		Templating    jsonList    `json:"templating"`
		Time          jsonTime    `json:"time"`
		Timezone      string      `json:"timezone"`
		Title         string      `json:"title"`
		UID           string      `json:"uid"`
		Version       int         `json:"version"`
	}
	jsonList struct {
		List []any `json:"list"`
	}
	jsonTime struct {
		From string `json:"from"`
		To   string `json:"to"`
	}
	jsonRef struct {
		Type string `json:"type"`
		UID  string `json:"uid"`
	}
	jsonCurrent struct {
		Text  any `json:"text"`
		Value any `json:"value"`
	}
	jsonDatasourceVar struct {
		Current jsonCurrent `json:"current"`
		Label   string      `json:"label"`
		Name    string      `json:"name"`
		Options []any       `json:"options"`
		Query   string      `json:"query"`
		Type    string      `json:"type"`
	}
	jsonQueryVar struct {
		AllValue   string      `json:"allValue,omitempty"`
		Current    jsonCurrent `json:"current"`
		Datasource jsonRef     `json:"datasource"`
		Definition string      `json:"definition"`
		IncludeAll bool        `json:"includeAll"`
		Label      string      `json:"label"`
		Multi      bool        `json:"multi"`
		Name       string      `json:"name"`
		Options    []any       `json:"options"`
		Query      string      `json:"query"`
		Refresh    int         `json:"refresh"`
		Sort       int         `json:"sort"`
		Type       string      `json:"type"`
	}
	jsonPanel struct {
		Datasource  jsonRef         `json:"datasource"`
		Description string          `json:"description,omitempty"`
		FieldConfig jsonFieldConfig `json:"fieldConfig"`
		GridPos     jsonGrid        `json:"gridPos"`
		ID          int             `json:"id"`
		Interval    string          `json:"interval,omitempty"`
		Options     map[string]any  `json:"options"`
		Targets     []jsonTarget    `json:"targets"`
		Title       string          `json:"title"`
		Type        string          `json:"type"`
	}
	jsonGrid struct {
		H int `json:"h"`
		W int `json:"w"`
		X int `json:"x"`
		Y int `json:"y"`
	}
	jsonFieldConfig struct {
		Defaults  jsonDefaults   `json:"defaults"`
		Overrides []jsonOverride `json:"overrides"`
	}
	jsonDefaults struct {
		Custom   map[string]any `json:"custom"`
		Decimals *int           `json:"decimals,omitempty"`
		Unit     string         `json:"unit,omitempty"`
	}
	jsonOverride struct {
		Matcher    jsonMatcher    `json:"matcher"`
		Properties []jsonProperty `json:"properties"`
	}
	jsonMatcher struct {
		ID      string `json:"id"`
		Options string `json:"options"`
	}
	jsonProperty struct {
		ID    string `json:"id"`
		Value string `json:"value"`
	}
	jsonTarget struct {
		Datasource   jsonRef `json:"datasource"`
		EditorMode   string  `json:"editorMode,omitempty"`
		Expr         string  `json:"expr,omitempty"`
		Format       string  `json:"format,omitempty"`
		LegendFormat string  `json:"legendFormat,omitempty"`
		Range        bool    `json:"range,omitempty"`
		RawQuery     bool    `json:"rawQuery,omitempty"`
		RawSQL       string  `json:"rawSql,omitempty"`
		RefID        string  `json:"refId"`
	}
)
