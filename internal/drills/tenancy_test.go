package drills

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/ledgerd/ledgerd/ingest"
	"github.com/ledgerd/ledgerd/internal/dbtest"
	"github.com/ledgerd/ledgerd/internal/load"
	"github.com/ledgerd/ledgerd/internal/synth"
	"github.com/ledgerd/ledgerd/money"
	"github.com/ledgerd/ledgerd/schema"
)

// route is one entry of GET /v1/routes (echo's route list).
type route struct {
	Method string `json:"method"`
	Path   string `json:"path"`
}

// markedServices is a one-service mix whose names carry a project's marker, so a response that
// shows another project's data can be recognised by text.
func markedServices(marker string) []synth.Service {
	return []synth.Service{{Name: marker + "-svc", Operations: []string{marker + "-op"}, Weight: 1, Tenants: true,
		Primary: synth.Sonnet55, Fallback: &synth.GPT4o, InputTokens: 2000, OutputTokens: 300,
		Cache: synth.CacheHealthy, PrefixTokens: 4000, PromptHash: marker + "-hash", ErrorRate: 0.05, MaxAttempts: 3}}
}

// Queries that fingerprint everything a project owns: every table with a project_id column.
const (
	projectTablesSQL = `SELECT c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
		JOIN pg_attribute a ON a.attrelid = c.oid AND a.attname = 'project_id' AND NOT a.attisdropped
		WHERE n.nspname = current_schema() AND c.relkind IN ('r', 'p') AND NOT c.relispartition
		ORDER BY c.relname`
	// fingerprintSQL is completed with a table name read from the catalog above.
	fingerprintSQL = `SELECT count(*), md5(coalesce(string_agg(t::text, '|' ORDER BY t::text), '')) FROM %s t WHERE project_id = $1`
	projectRowSQL  = `SELECT md5(p::text) FROM projects p WHERE id = $1`
)

// fingerprint summarises every row a project owns, table by table.
func fingerprint(ctx context.Context, pool *pgxpool.Pool, projectID int64) (map[string]string, error) {
	rows, err := pool.Query(ctx, projectTablesSQL)
	if err != nil {
		return nil, fmt.Errorf("list project tables: %w", err)
	}
	tables, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, fmt.Errorf("list project tables: %w", err)
	}
	out := map[string]string{}
	for _, tbl := range tables {
		var n int64
		var sum string
		if err := pool.QueryRow(ctx, fmt.Sprintf(fingerprintSQL, pgx.Identifier{tbl}.Sanitize()), projectID).Scan(&n, &sum); err != nil {
			return nil, fmt.Errorf("fingerprint %s: %w", tbl, err)
		}
		out[tbl] = fmt.Sprintf("%d rows %s", n, sum)
	}
	var sum string
	if err := pool.QueryRow(ctx, projectRowSQL, projectID).Scan(&sum); err != nil {
		return nil, fmt.Errorf("fingerprint project: %w", err)
	}
	out["projects"] = sum
	return out, nil
}

// call is one request of the sweep and what came back.
type call struct {
	method, target string
	body           []byte
	status         int
	answer         []byte
}

func do(base, key string, c *call) {
	var body io.Reader
	if c.body != nil {
		body = bytes.NewReader(c.body)
	}
	req, err := http.NewRequest(c.method, base+c.target, body)
	if err != nil {
		c.answer = []byte(err.Error())
		return
	}
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	if c.body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	client := &http.Client{Timeout: 30 * time.Second}
	resp, err := client.Do(req)
	if err != nil {
		c.answer = []byte(err.Error())
		return
	}
	defer resp.Body.Close()
	c.status = resp.StatusCode
	c.answer, _ = io.ReadAll(io.LimitReader(resp.Body, 8<<20))
}

// TestTenancy checks that a key of project A can neither read nor change project B through any
// route under /v1. The routes come from the running server (GET /v1/routes), so routes added later
// are swept too. Each is called with A's key, with path parameters filled with B's identifiers,
// with query parameters and bodies that name B; no answer may contain B's names or totals, and
// every row B owns must be unchanged afterwards. Every private route must refuse a request
// without a key.
func TestTenancy(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dbURL := dbtest.NewURL(t)
	pool := connect(t, dbURL)
	a := newProject(t, pool, "tenancy-alpha")
	b := newProject(t, pool, "tenancy-bravo")
	srv := startLedgerd(t, dbURL)
	now := time.Now()
	price, err := prices()
	if err != nil {
		t.Fatal(err)
	}
	seed := func(p project, marker string, s int64) []load.Ack {
		var acks ackBuffer
		g := synth.New(synth.Options{Seed: s, Start: now.AddDate(0, 0, -3), End: now, Services: markedServices(marker)})
		src := clientCostTwice(load.History(g), price)
		sum, err := runLoad(ctx, srv.url(), p, load.Options{Source: src, Count: 2000, Batch: 200, Concurrency: 4}, &acks)
		if err != nil {
			t.Fatal(err)
		}
		if sum.Acknowledged != 2000 {
			t.Fatalf("seeding %s: %d of 2000 records acknowledged", marker, sum.Acknowledged)
		}
		return acks.acks(t)
	}
	acksA, acksB := seed(a, "alphaqx", 21), seed(b, "bravoqx", 22)
	ta, tb := load.Sum(acksA), load.Sum(acksB)

	// What would betray B's data in A's answers: its names, and its totals alone or added to A's.
	secrets := []string{"bravoqx", "tenancy-bravo"}
	for _, n := range []int64{tb.InputTokens, ta.InputTokens + tb.InputTokens, tb.OutputTokens, ta.OutputTokens + tb.OutputTokens} {
		secrets = append(secrets, fmt.Sprint(n))
	}
	for _, n := range []int64{tb.CostNanos, ta.CostNanos + tb.CostNanos} {
		s := money.Nanos(n).String()
		secrets = append(secrets, s, strings.TrimRight(s, "0"))
	}

	status, body := get(srv.url()+"/v1/routes", a.Key)
	if status != http.StatusOK {
		t.Fatalf("GET /v1/routes: %d %s", status, body)
	}
	var all []route
	if err := json.Unmarshal(body, &all); err != nil {
		t.Fatalf("GET /v1/routes: %v", err)
	}
	var api, elsewhere []route
	for _, r := range all {
		if !slices.Contains([]string{"GET", "POST", "PUT", "PATCH", "DELETE"}, r.Method) {
			continue // echo's not-found catch-alls
		}
		if r.Path == "/v1" || strings.HasPrefix(r.Path, "/v1/") {
			api = append(api, r)
		} else {
			elsewhere = append(elsewhere, r)
		}
	}
	slices.SortFunc(api, func(x, y route) int { return strings.Compare(x.Path+x.Method, y.Path+y.Method) })

	before, err := fingerprint(ctx, pool, b.ID)
	if err != nil {
		t.Fatal(err)
	}
	ids := bIdentifiers(t, pool, b, acksB)
	var calls, public, refused, errors5xx, shownToB int
	for _, r := range api {
		// Without a key, a private route must refuse; a public one must show no project's data.
		anon := &call{method: r.Method, target: fill(r.Path, ids[0])}
		if r.Method != http.MethodGet {
			anon.body = []byte(`{}`)
		}
		do(srv.url(), "", anon)
		switch {
		case anon.status == http.StatusUnauthorized:
			refused++
		default:
			public++
			if leak := leaked(anon.answer, append(secrets, "alphaqx")); leak != "" {
				t.Errorf("%s %s without a key answered %d showing %q", r.Method, r.Path, anon.status, leak)
			}
		}
		// B's own key: a read route that shows B's names proves the marker check can see data.
		own := &call{method: r.Method, target: fill(r.Path, ids[0])}
		if r.Method == http.MethodGet {
			do(srv.url(), b.Key, own)
			if leaked(own.answer, secrets[:1]) != "" {
				shownToB++
			}
		}
		for _, c := range sweep(r, b, ids) {
			do(srv.url(), a.Key, &c)
			calls++
			if c.status >= 500 {
				errors5xx++
				t.Logf("note: %s %s answered %d: %.200s", c.method, c.target, c.status, c.answer)
			}
			if leak := leaked(c.answer, unasked(secrets, c)); leak != "" {
				t.Errorf("%s %s with project A's key answered %d showing project B's %q: %.300s", c.method, c.target, c.status, leak, c.answer)
			}
		}
	}
	after, err := fingerprint(ctx, pool, b.ID)
	if err != nil {
		t.Fatal(err)
	}
	for tbl, fp := range before {
		if after[tbl] != fp {
			t.Errorf("project B's %s changed during the sweep with A's key: %s -> %s", tbl, fp, after[tbl])
		}
	}
	for tbl := range after {
		if _, ok := before[tbl]; !ok {
			t.Errorf("project B gained rows in %s during the sweep with A's key: %s", tbl, after[tbl])
		}
	}
	if status, _ := get(srv.url()+"/v1/routes", b.Key); status != http.StatusOK {
		t.Errorf("project B's key stopped working after the sweep: %d", status)
	}
	var paths []string
	for _, r := range api {
		paths = append(paths, r.Method+" "+r.Path)
	}
	var other []string
	for _, r := range elsewhere {
		other = append(other, r.Method+" "+r.Path)
	}
	t.Logf("\nDRILL tenancy\n  routes under /v1 from GET /v1/routes (%d): %s\n  requests with A's key aimed at B: %d; leaks 0 is required (see errors above); 5xx answers %d\n  without a key: %d routes refused (401), %d public\n  read routes where B's own key sees B's data: %d\n  project B's rows in %d tables unchanged: %v\n  not swept (outside /v1, the dashboard's session routes): %s",
		len(api), strings.Join(paths, ", "), calls, errors5xx, refused, public, shownToB, len(before), !t.Failed(), strings.Join(other, ", "))
	if shownToB == 0 && hasReadRoutes(api) {
		t.Errorf("no read route showed project B its own data with B's key, so the leak check saw nothing to find")
	}
}

// clientCostTwice makes each priced record report a client-side cost twice ledgerd's, so the
// projects' data also shows where cost mismatches are listed.
func clientCostTwice(src load.Source, price ingest.PriceFunc) load.Source {
	return func(now time.Time) []schema.Attempt {
		atts := src(now)
		for i := range atts {
			if c := price(&atts[i]); c.Priced && c.Cost > 0 {
				v := 2 * c.Cost
				atts[i].CostUSD = &v
			}
		}
		return atts
	}
}

// bIdentifiers lists values that name B's rows, to put into path parameters: B's project id and
// name, one of its attempt ids and request ids, and the ids of its rows in tables with an id column.
func bIdentifiers(t *testing.T, pool *pgxpool.Pool, b project, acks []load.Ack) []string {
	t.Helper()
	ids := []string{acks[0].AttemptID, fmt.Sprint(b.ID), "tenancy-bravo", strings.TrimSuffix(acks[0].AttemptID, "-1")}
	var series int64
	if err := pool.QueryRow(context.Background(), `SELECT min(id) FROM series WHERE project_id = $1`, b.ID).Scan(&series); err != nil {
		t.Fatal(err)
	}
	return append(ids, fmt.Sprint(series))
}

// fill puts v into every path parameter (:name) and wildcard (*) of path.
func fill(path, v string) string {
	parts := strings.Split(path, "/")
	for i, p := range parts {
		if strings.HasPrefix(p, ":") || p == "*" {
			parts[i] = url.PathEscape(v)
		}
	}
	return strings.Join(parts, "/")
}

// sweep builds the requests with A's key aimed at B for one route: each of B's identifiers in
// the path parameters, query parameters naming B, and for writes bodies naming B.
func sweep(r route, b project, ids []string) []call {
	targets := []string{}
	if strings.Contains(r.Path, ":") || strings.Contains(r.Path, "*") {
		for _, id := range ids {
			targets = append(targets, fill(r.Path, id))
		}
	} else {
		targets = append(targets, r.Path)
	}
	queries := []string{"", "project=tenancy-bravo", fmt.Sprintf("project_id=%d", b.ID), "service=bravoqx-svc",
		"operation=bravoqx-op", "group_by=service", "group_by=tenant", "from=2000-01-01", "tenant=acme"}
	bodies := [][]byte{
		[]byte(fmt.Sprintf(`{"project":"tenancy-bravo","project_id":%d}`, b.ID)),
		[]byte(fmt.Sprintf(`[{"project_id":%d,"attempt_id":"tenancy-probe","request_id":"r","attempt_no":1,"started_at":%q,"latency_ms":1,"provider":"anthropic","model":"claude-haiku-5-5","service":"bravoqx-svc","status":"ok"}]`,
			b.ID, time.Now().UTC().Format(time.RFC3339))),
		[]byte(fmt.Sprintf(`[{"attempt_id":"tenancy-probe-%d","request_id":"r","attempt_no":1,"started_at":%q,"latency_ms":1,"provider":"anthropic","model":"claude-haiku-5-5","service":"tenancy-probe","status":"ok"}]`,
			time.Now().UnixNano(), time.Now().UTC().Format(time.RFC3339))),
	}
	var out []call
	for _, tg := range targets {
		for _, q := range queries {
			target := tg
			if q != "" {
				target += "?" + q
			}
			if r.Method == http.MethodGet {
				out = append(out, call{method: r.Method, target: target})
				continue
			}
			for _, body := range bodies {
				out = append(out, call{method: r.Method, target: target, body: body})
			}
		}
	}
	return out
}

// unasked drops the secrets a request itself carries: an answer that repeats the request's own
// filter (service=bravoqx-svc) reveals nothing.
func unasked(secrets []string, c call) []string {
	var out []string
	for _, s := range secrets {
		if !strings.Contains(c.target, s) && !bytes.Contains(c.body, []byte(s)) {
			out = append(out, s)
		}
	}
	return out
}

// leaked returns the first secret found in an answer.
func leaked(answer []byte, secrets []string) string {
	for _, s := range secrets {
		if s != "" && bytes.Contains(answer, []byte(s)) {
			return s
		}
	}
	return ""
}

// hasReadRoutes tells whether any GET route under /v1 serves data (not the route list or the
// schema).
func hasReadRoutes(api []route) bool {
	for _, r := range api {
		if r.Method == http.MethodGet && r.Path != "/v1/routes" && r.Path != "/v1/schema" {
			return true
		}
	}
	return false
}

// TestSweepHelpers guards the tenancy drill's own tools: a leak checker that cannot see a leak
// would pass any server.
func TestSweepHelpers(t *testing.T) {
	t.Parallel()
	secrets := []string{"bravoqx", "12345678"}
	cases := []struct {
		name   string
		c      call
		answer string
		want   string
	}{
		// Another project's name in an answer is a leak.
		{"name in answer", call{target: "/v1/summary"}, `{"rows":[{"service":"bravoqx-svc"}]}`, "bravoqx"},
		// Another project's total in an answer is a leak.
		{"total in answer", call{target: "/v1/summary"}, `{"input_tokens":12345678}`, "12345678"},
		// An answer repeating the request's own filter reveals nothing.
		{"echoed filter", call{target: "/v1/summary?service=bravoqx-svc"}, `{"error":"no service bravoqx-svc"}`, ""},
		// A body naming B, echoed back, reveals nothing either.
		{"echoed body", call{target: "/v1/attempts", body: []byte(`{"project":"bravoqx"}`)}, `{"error":"project: unknown field bravoqx"}`, ""},
		// A clean answer is clean.
		{"clean", call{target: "/v1/summary"}, `{"rows":[]}`, ""},
	}
	for _, c := range cases {
		if got := leaked([]byte(c.answer), unasked(secrets, c.c)); got != c.want {
			t.Errorf("%s: leaked = %q, want %q", c.name, got, c.want)
		}
	}
	fills := []struct{ path, want string }{
		{"/v1/alerts/:id", "/v1/alerts/b%2F1"},                     // a parameter takes the escaped value
		{"/v1/traces/:a/spans/:b", "/v1/traces/b%2F1/spans/b%2F1"}, // every parameter is filled
		{"/static/*", "/static/b%2F1"},                             // a wildcard too
		{"/v1/summary", "/v1/summary"},                             // no parameters, no change
	}
	for _, f := range fills {
		if got := fill(f.path, "b/1"); got != f.want {
			t.Errorf("fill(%q) = %q, want %q", f.path, got, f.want)
		}
	}
}
