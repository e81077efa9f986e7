package alerts

import (
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"
)

// metrics are the evaluator's Prometheus series. Rule and receiver names come from the
// configuration, so their label values are bounded.
type metrics struct {
	evaluations *prometheus.CounterVec
	duration    prometheus.Histogram
	leader      prometheus.Gauge
	alerts      *prometheus.GaugeVec
	sent        *prometheus.CounterVec
	failed      *prometheus.CounterVec
	retries     *prometheus.CounterVec
}

func newMetrics(reg prometheus.Registerer) *metrics {
	f := promauto.With(reg)
	return &metrics{
		evaluations: f.NewCounterVec(prometheus.CounterOpts{Name: "ledgerd_alert_rule_evaluations_total",
			Help: "Evaluations of each alerting rule (one per project it covers), by result (ok or error)."},
			[]string{"rule", "result"}),
		duration: f.NewHistogram(prometheus.HistogramOpts{Name: "ledgerd_alert_evaluation_seconds",
			Help: "Time one evaluation of every rule took on the leading replica.", Buckets: prometheus.ExponentialBuckets(0.005, 2, 14)}),
		leader: f.NewGauge(prometheus.GaugeOpts{Name: "ledgerd_alert_leader",
			Help: "1 when this replica holds the alerting lock and evaluates rules, else 0."}),
		alerts: f.NewGaugeVec(prometheus.GaugeOpts{Name: "ledgerd_alerts",
			Help: "Alerts by state (pending or firing) after the last evaluation on this replica."}, []string{"state"}),
		sent: f.NewCounterVec(prometheus.CounterOpts{Name: "ledgerd_alert_notifications_sent_total",
			Help: "Alert notifications delivered, by receiver name and status (firing or resolved)."},
			[]string{"receiver", "status"}),
		failed: f.NewCounterVec(prometheus.CounterOpts{Name: "ledgerd_alert_notifications_failed_total",
			Help: "Alert notifications not delivered, by receiver name and outcome (rejected: a 4xx; failed: retries ran out)."},
			[]string{"receiver", "outcome"}),
		retries: f.NewCounterVec(prometheus.CounterOpts{Name: "ledgerd_alert_notification_retries_total",
			Help: "Retried delivery attempts, by receiver name."}, []string{"receiver"}),
	}
}
