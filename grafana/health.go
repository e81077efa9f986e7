package grafana

// sel restricts a ledgerd metric to the instances the $instance variable selects.
const sel = `{instance=~"$instance"}`

func healthDashboard() Dashboard {
	rate := func(metric string) string { return metric + sel + `[$__rate_interval]` }
	return Dashboard{
		UID: "ledgerd-health", Title: "ledgerd health", File: "ledgerd-health.json", Source: PrometheusType, From: "now-6h",
		Description: "ledgerd's own health from Prometheus: ingest rate, rejects, group-commit latency and queue, HTTP, the read standby's replay lag; and the LLM counters.",
		Variables: []Variable{{Name: "instance", Label: "Instance", AllValue: ".*",
			Query: `label_values(ledgerd_writer_queue_records, instance)`}},
		Panels: []Panel{
			{Title: "Records ingested", Kind: TimeSeries, Unit: "reqps", Width: 12, Height: 8,
				Description: "Records per second newly committed, skipped as already stored, and refused by validation.",
				Queries: []Query{
					{PromQL: `sum(rate(` + rate("ledgerd_ingest_records_accepted_total") + `))`, Legend: "accepted"},
					{PromQL: `sum(rate(` + rate("ledgerd_ingest_records_duplicate_total") + `))`, Legend: "duplicate"},
					{PromQL: `sum(rate(` + rate("ledgerd_ingest_records_rejected_total") + `))`, Legend: "rejected"},
				}},
			{Title: "Rejected records by field", Kind: TimeSeries, Unit: "reqps", Width: 12, Height: 8,
				Queries: []Query{{PromQL: `sum by (field) (rate(` + rate("ledgerd_ingest_records_rejected_total") + `))`, Legend: "{{field}}"}}},
			{Title: "Group commit latency", Kind: TimeSeries, Unit: "s", Width: 8, Height: 8,
				Queries: []Query{
					{PromQL: `histogram_quantile(0.5, sum by (le) (rate(` + rate("ledgerd_writer_flush_seconds_bucket") + `)))`, Legend: "p50"},
					{PromQL: `histogram_quantile(0.99, sum by (le) (rate(` + rate("ledgerd_writer_flush_seconds_bucket") + `)))`, Legend: "p99"},
				}},
			{Title: "Records per commit", Kind: TimeSeries, Unit: "short", Width: 8, Height: 8,
				Queries: []Query{{PromQL: `sum(rate(` + rate("ledgerd_writer_batch_records_sum") + `)) / sum(rate(` + rate("ledgerd_writer_batch_records_count") + `))`, Legend: "mean"}}},
			{Title: "Writer queue", Kind: TimeSeries, Unit: "short", Width: 8, Height: 8,
				Description: "Records waiting to be committed; ingest answers 503 when the queue is full.",
				Queries:     []Query{{PromQL: `sum by (instance) (ledgerd_writer_queue_records` + sel + `)`, Legend: "{{instance}}"}}},
			{Title: "Failures and shedding", Kind: TimeSeries, Unit: "reqps", Width: 8, Height: 8,
				Queries: []Query{
					{PromQL: `sum(rate(` + rate("ledgerd_writer_flush_failures_total") + `))`, Legend: "failed commits"},
					{PromQL: `sum(rate(` + rate("ledgerd_ingest_shed_total") + `))`, Legend: "shed ingest requests"},
					{PromQL: `sum(rate(` + rate("ledgerd_rollup_fold_failures_total") + `))`, Legend: "failed rollup folds"},
					{PromQL: `sum(rate(` + rate("ledgerd_partitions_ahead_failures_total") + `))`, Legend: "failed tries to create partitions ahead"},
				}},
			{Title: "HTTP p99 latency by route", Kind: TimeSeries, Unit: "s", Width: 8, Height: 8,
				Queries: []Query{{PromQL: `histogram_quantile(0.99, sum by (le, route) (rate(` + rate("ledgerd_http_request_duration_seconds_bucket") + `)))`, Legend: "{{route}}"}}},
			{Title: "HTTP requests by status", Kind: TimeSeries, Unit: "reqps", Width: 8, Height: 8,
				Queries: []Query{{PromQL: `sum by (code) (rate(` + rate("ledgerd_http_request_duration_seconds_count") + `))`, Legend: "{{code}}"}}},
			{Title: "Read standby replay lag", Kind: TimeSeries, Unit: "s", Width: 8, Height: 8,
				Description: "With --read-database-url: how old the last transaction the standby replayed is while it has WAL left to replay (0 when caught up). Reads wait for the standby up to --read-max-wait, then go to the primary.",
				Queries:     []Query{{PromQL: `max by (instance) (ledgerd_standby_replay_lag_seconds` + sel + `)`, Legend: "{{instance}}"}}},
			{Title: "Read standby replay lag (bytes)", Kind: TimeSeries, Unit: "bytes", Width: 8, Height: 8,
				Description: "WAL the primary has written and the read standby has not replayed yet.",
				Queries:     []Query{{PromQL: `max by (instance) (ledgerd_standby_replay_lag_bytes` + sel + `)`, Legend: "{{instance}}"}}},
			{Title: "Reads by server", Kind: TimeSeries, Unit: "reqps", Width: 8, Height: 8,
				Description: "Read connections the standby served (replayed in time, or while the primary was unreachable) and those sent to the primary (standby lagging past the wait, or unreachable).",
				Queries:     []Query{{PromQL: `sum by (server, reason) (rate(` + rate("ledgerd_reads_total") + `))`, Legend: "{{server}} ({{reason}})"}}},
			{Title: "LLM spend per hour by model", Kind: TimeSeries, Unit: "currencyUSD", Width: 12, Height: 8,
				Description: "From ledgerd_llm_cost_usd_total: what this ledgerd committed, priced attempts only.",
				Queries:     []Query{{PromQL: `sum by (model) (increase(ledgerd_llm_cost_usd_total` + sel + `[1h]))`, Legend: "{{model}}"}}},
			{Title: "LLM attempts by outcome", Kind: TimeSeries, Unit: "reqps", Width: 12, Height: 8,
				Queries: []Query{{PromQL: `sum by (status, error_class) (rate(` + rate("ledgerd_llm_attempts_total") + `))`, Legend: "{{status}} {{error_class}}"}}},
		},
	}
}
