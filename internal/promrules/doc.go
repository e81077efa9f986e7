// Package promrules tests ledgerd's Prometheus rule file, prometheus/ledgerd.rules.yml (the daily
// spend, retry amplification and zero cache read alerts over ledgerd's /metrics), which is a
// deployment file and lives beside grafana/: promtool's check and unit tests, and an end-to-end run
// of a real Prometheus server scraping ledgerd.
package promrules
