package grafana_test

import (
	"bytes"
	"encoding/json"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/ledgerd/ledgerd/grafana"
)

// TestDashboardFilesFresh regenerates the dashboards in memory and compares them byte for byte
// with the committed files: run `go generate ./grafana/` after changing a dashboard.
func TestDashboardFilesFresh(t *testing.T) {
	t.Parallel()
	files, err := grafana.Files()
	if err != nil {
		t.Fatal(err)
	}
	onDisk, err := filepath.Glob("dashboards/*.json")
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, p := range onDisk {
		names = append(names, filepath.Base(p))
	}
	want := slices.Sorted(maps.Keys(files))
	if !slices.Equal(names, want) {
		t.Errorf("dashboards/ holds %v, the generator makes %v: run go generate ./grafana/", names, want)
	}
	for name, b := range files {
		disk, err := os.ReadFile(filepath.Join("dashboards", name))
		if err != nil {
			t.Errorf("%s: %v: run go generate ./grafana/", name, err)
			continue
		}
		if !bytes.Equal(disk, b) {
			t.Errorf("dashboards/%s is stale: run go generate ./grafana/", name)
		}
	}
}

// TestDashboardShape checks what Grafana needs of each generated file: unique uids and panel ids,
// panels inside the 24-column grid, every target on the dashboard's data source variable, and
// variables that exist where queries use them.
func TestDashboardShape(t *testing.T) {
	t.Parallel()
	files, err := grafana.Files()
	if err != nil {
		t.Fatal(err)
	}
	uids := map[string]bool{}
	for name, b := range files {
		var d struct {
			UID        string `json:"uid"`
			Templating struct {
				List []struct {
					Name  string `json:"name"`
					Type  string `json:"type"`
					Query string `json:"query"`
				} `json:"list"`
			} `json:"templating"`
			Panels []struct {
				ID         int `json:"id"`
				Datasource struct{ Type, UID string }
				GridPos    struct{ H, W, X, Y int } `json:"gridPos"`
				Targets    []struct {
					Datasource struct{ Type, UID string }
					RawSQL     string `json:"rawSql"`
					Expr       string `json:"expr"`
				} `json:"targets"`
			} `json:"panels"`
		}
		if err := json.Unmarshal(b, &d); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if d.UID == "" || uids[d.UID] {
			t.Errorf("%s: uid %q empty or used twice", name, d.UID)
		}
		uids[d.UID] = true
		vars := map[string]bool{"__interval": true, "__rate_interval": true}
		if len(d.Templating.List) == 0 || d.Templating.List[0].Name != "datasource" || d.Templating.List[0].Type != "datasource" {
			t.Errorf("%s: first variable must be the data source", name)
			continue
		}
		dsType := d.Templating.List[0].Query
		for _, v := range d.Templating.List {
			vars[v.Name] = true
		}
		ids := map[int]bool{}
		for _, p := range d.Panels {
			if ids[p.ID] {
				t.Errorf("%s: panel id %d twice", name, p.ID)
			}
			ids[p.ID] = true
			if p.GridPos.X < 0 || p.GridPos.W <= 0 || p.GridPos.X+p.GridPos.W > 24 || p.GridPos.H <= 0 {
				t.Errorf("%s: panel %d outside the grid: %+v", name, p.ID, p.GridPos)
			}
			if p.Datasource.Type != dsType || p.Datasource.UID != "${datasource}" {
				t.Errorf("%s: panel %d data source %+v", name, p.ID, p.Datasource)
			}
			for _, tg := range p.Targets {
				if tg.Datasource != p.Datasource {
					t.Errorf("%s: panel %d target data source %+v", name, p.ID, tg.Datasource)
				}
				q := tg.RawSQL + tg.Expr
				if q == "" {
					t.Errorf("%s: panel %d has an empty query", name, p.ID)
				}
				for _, m := range variableRe.FindAllStringSubmatch(q, -1) {
					if v := m[1] + m[2] + m[4]; !strings.HasPrefix(v, "__") && !vars[v] {
						t.Errorf("%s: panel %d uses undefined variable $%s", name, p.ID, v)
					}
				}
			}
		}
	}
}

// TestProvisioning checks the provisioning files against the dashboards: the data source the
// dashboards default to, of the type they query.
func TestProvisioning(t *testing.T) {
	t.Parallel()
	var ds struct {
		APIVersion  int `yaml:"apiVersion"`
		Datasources []struct {
			Name, UID, Type, URL, User, Access string
			Editable                           bool
			JSONData                           map[string]any `yaml:"jsonData"`
			SecureJSONData                     map[string]any `yaml:"secureJsonData"`
		} `yaml:"datasources"`
	}
	var dash struct {
		APIVersion int `yaml:"apiVersion"`
		Providers  []struct {
			Name, Type, Folder    string
			DisableDeletion       bool `yaml:"disableDeletion"`
			AllowUIUpdates        bool `yaml:"allowUiUpdates"`
			UpdateIntervalSeconds int  `yaml:"updateIntervalSeconds"`
			Options               struct {
				Path                      string
				FoldersFromFilesStructure bool `yaml:"foldersFromFilesStructure"`
			}
		} `yaml:"providers"`
	}
	for _, f := range []struct {
		path string
		into any
	}{{"provisioning/datasources/ledgerd.yaml", &ds}, {"provisioning/dashboards/ledgerd.yaml", &dash}} {
		b, err := os.ReadFile(f.path)
		if err != nil {
			t.Fatal(err)
		}
		dec := yaml.NewDecoder(bytes.NewReader(b))
		dec.KnownFields(true)
		if err := dec.Decode(f.into); err != nil {
			t.Fatalf("%s: %v", f.path, err)
		}
	}
	if ds.APIVersion != 1 || len(ds.Datasources) != 1 {
		t.Fatalf("datasources file: %+v", ds)
	}
	d := ds.Datasources[0]
	if d.UID != grafana.PostgresUID || d.Type != grafana.PostgresType {
		t.Errorf("provisioned data source %s of type %s, dashboards default to %s of type %s", d.UID, d.Type, grafana.PostgresUID, grafana.PostgresType)
	}
	if d.JSONData["database"] == nil || d.SecureJSONData["password"] == nil || d.User == "" {
		t.Errorf("data source lacks database, user or password: %+v", d)
	}
	if dash.APIVersion != 1 || len(dash.Providers) != 1 || dash.Providers[0].Type != "file" || dash.Providers[0].Options.Path == "" {
		t.Errorf("dashboards file: %+v", dash)
	}
}

// TestExpandLikeGrafana pins the test's macro expansion to Grafana's own outputs, from its
// PostgreSQL macro engine and template formats.
func TestExpandLikeGrafana(t *testing.T) {
	t.Parallel()
	e := grafanaEnv{
		from: time.Date(2017, 7, 18, 11, 15, 52, 0, time.UTC), to: time.Date(2017, 7, 18, 11, 25, 52, 0, time.UTC),
		interval: "5m",
		vars: map[string]varValue{
			"service": {values: []string{"a", "o'b"}},
			"model":   {values: []string{"x", "y"}, all: true, allValue: "'__all'"},
			"quote":   {values: []string{`say "hi"`}},
		},
	}
	cases := []struct{ in, want string }{
		{`$__timeFilter(time_column)`, `time_column BETWEEN '2017-07-18T11:15:52Z' AND '2017-07-18T11:25:52Z'`}, // range as RFC 3339 literals
		{`$__timeFrom() $__timeTo()`, `'2017-07-18T11:15:52Z' '2017-07-18T11:25:52Z'`},                          // bare bounds
		{`$__timeGroup(dateColumn,'5m')`, `floor(extract(epoch from dateColumn)/300)*300`},                      // Grafana's documented example
		{`$__timeGroupAlias(bucket, $__interval)`, `floor(extract(epoch from bucket)/300)*300 AS "time"`},       // $__interval first
		{`$__timeGroup(b, 30d)`, `floor(extract(epoch from b)/2.592e+06)*2.592e+06`},                            // Go's %v of float seconds
		{`IN ($service)`, `IN ('a','o''b')`},                                                                    // multi-value, quoted and escaped
		{`IN (${service})`, `IN ('a','o''b')`},                                                                  // braces
		{`IN (${quote:sqlstring})`, `IN ('say \"hi\"')`},                                                        // sqlstring escapes " too
		{`('__all' IN ($model) OR m IN ($model))`, `('__all' IN ('__all') OR m IN ('__all'))`},                  // custom all value, unformatted
		{`$__interval_ms $__unixEpochFrom()`, `300000 1500376552`},                                              // global substitutions
	}
	for _, c := range cases {
		got, err := e.expand(c.in)
		if err != nil || got != c.want {
			t.Errorf("expand %q = %q, %v; want %q", c.in, got, err, c.want)
		}
	}
	if _, err := e.expand(`$__nosuch(x)`); err == nil {
		t.Errorf("unknown macro expanded without error")
	}
}
