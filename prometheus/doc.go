// Package promrules holds ledgerd's Prometheus rule file (ledgerd.rules.yml: the daily spend,
// retry amplification and zero cache read alerts over ledgerd's /metrics) and its tests: promtool's
// check and unit tests, and an end-to-end run of a real Prometheus server scraping ledgerd.
package promrules
