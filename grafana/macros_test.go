package grafana_test

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// grafanaEnv expands a panel's SQL the way Grafana does before PostgreSQL sees it: first the
// front end replaces template variables (templateSrv.replace with the SQL data sources'
// interpolateVariable, or a named format such as ${var:sqlstring}) and $__interval; then the
// back end's sqleng.Interpolate replaces $__interval_ms, $__interval, $__unixEpochFrom() and
// $__unixEpochTo(), and the PostgreSQL macro engine (pkg/tsdb/grafana-postgresql-datasource/
// macros.go) replaces each $__macro(args).
type grafanaEnv struct {
	from, to time.Time
	interval string // $__interval as Grafana writes it: "1h", "1d", "30m"
	vars     map[string]varValue
}

// varValue is the current value of a multi-value variable with an All option.
type varValue struct {
	values   []string // selected values; with all, every value the variable's query returned
	all      bool
	allValue string // custom all value, inserted unformatted when all is selected
}

// variableRe is Grafana's template variable syntax: $name, [[name:format]], ${name:format}.
var variableRe = regexp.MustCompile(`\$(\w+)|\[\[(\w+?)(?::(\w+))?\]\]|\$\{(\w+)(?:\.([^:^\}]+))?(?::([^\}]+))?\}`)

// macroRe is the PostgreSQL macro engine's expression: $name(args), args without ')'.
var macroRe = regexp.MustCompile(`\$([_a-zA-Z0-9]+)\(([^\)]*)\)`)

func (e grafanaEnv) expand(sql string) (string, error) {
	iv, err := parseInterval(e.interval)
	if err != nil {
		return "", err
	}
	var fail error
	sql = variableRe.ReplaceAllStringFunc(sql, func(m string) string {
		g := variableRe.FindStringSubmatch(m)
		name, format := g[1], ""
		if g[2] != "" {
			name, format = g[2], g[3]
		} else if g[4] != "" {
			name, format = g[4], g[6]
		}
		switch name {
		case "__interval":
			return e.interval
		case "__interval_ms":
			return strconv.FormatInt(iv.Milliseconds(), 10)
		}
		v, ok := e.vars[name]
		if !ok {
			return m // not a variable: a macro, left to the back end
		}
		if v.all && v.allValue != "" && format != "text" && format != "percentencode" {
			return v.allValue
		}
		switch format {
		case "":
			// SqlDatasource.interpolateVariable for a multi-value variable: each value quoted.
			return joinQuoted(v.values, func(s string) string { return strings.ReplaceAll(s, "'", "''") })
		case "sqlstring":
			// sqlStringFormatter: ' doubled and " backslash-escaped.
			return joinQuoted(v.values, func(s string) string {
				return strings.NewReplacer("'", "''", `"`, `\"`).Replace(s)
			})
		}
		fail = fmt.Errorf("variable format %q not emulated", format)
		return m
	})
	if fail != nil {
		return "", fail
	}
	// sqleng.Interpolate.
	sql = strings.ReplaceAll(sql, "$__interval_ms", strconv.FormatInt(iv.Milliseconds(), 10))
	sql = strings.ReplaceAll(sql, "$__interval", e.interval)
	sql = strings.ReplaceAll(sql, "$__unixEpochFrom()", strconv.FormatInt(e.from.Unix(), 10))
	sql = strings.ReplaceAll(sql, "$__unixEpochTo()", strconv.FormatInt(e.to.Unix(), 10))
	sql = macroRe.ReplaceAllStringFunc(sql, func(m string) string {
		g := macroRe.FindStringSubmatch(m)
		args := strings.Split(g[2], ",")
		for i := range args {
			args[i] = strings.Trim(args[i], " ")
		}
		out, err := e.macro(g[1], args)
		if err != nil && fail == nil {
			fail = err
		}
		return out
	})
	return sql, fail
}

func joinQuoted(values []string, escape func(string) string) string {
	q := make([]string, len(values))
	for i, v := range values {
		q[i] = "'" + escape(v) + "'"
	}
	return strings.Join(q, ",")
}

// macro is postgresMacroEngine.evaluateMacro for the macros ledgerd's panels use (no TimescaleDB);
// any other macro is an error, as an unknown one is in Grafana.
func (e grafanaEnv) macro(name string, args []string) (string, error) {
	rfc := func(t time.Time) string { return t.UTC().Format(time.RFC3339Nano) }
	switch name {
	case "__timeFilter":
		if args[0] == "" {
			return "", fmt.Errorf("missing time column argument for macro %v", name)
		}
		return fmt.Sprintf("%s BETWEEN '%s' AND '%s'", args[0], rfc(e.from), rfc(e.to)), nil
	case "__timeFrom":
		return fmt.Sprintf("'%s'", rfc(e.from)), nil
	case "__timeTo":
		return fmt.Sprintf("'%s'", rfc(e.to)), nil
	case "__timeGroup", "__timeGroupAlias":
		if len(args) < 2 {
			return "", fmt.Errorf("macro %v needs time column and interval and optional fill value", name)
		}
		iv, err := parseInterval(strings.Trim(args[1], `'`))
		if err != nil {
			return "", fmt.Errorf("error parsing interval %v", args[1])
		}
		s := fmt.Sprintf("floor(extract(epoch from %s)/%v)*%v", args[0], iv.Seconds(), iv.Seconds())
		if name == "__timeGroupAlias" {
			s += ` AS "time"`
		}
		return s, nil
	}
	return "", fmt.Errorf("unknown macro %q", name)
}

// parseInterval reads Grafana's interval notation (gtime.ParseInterval): a number and one of
// ms, s, m, h, d, w, M, y.
func parseInterval(s string) (time.Duration, error) {
	m := regexp.MustCompile(`^(\d+)(ms|s|m|h|d|w|M|y)$`).FindStringSubmatch(s)
	if m == nil {
		return 0, fmt.Errorf("interval %q", s)
	}
	n, _ := strconv.Atoi(m[1])
	unit := map[string]time.Duration{"ms": time.Millisecond, "s": time.Second, "m": time.Minute, "h": time.Hour,
		"d": 24 * time.Hour, "w": 7 * 24 * time.Hour, "M": 30 * 24 * time.Hour, "y": 365 * 24 * time.Hour}[m[2]]
	return time.Duration(n) * unit, nil
}
