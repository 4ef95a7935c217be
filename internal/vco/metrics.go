package vco

import (
	"errors"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// metrics are per call, labelled only by operation (a fixed set: the names in the operation
// table) and by result class, so cardinality is bounded.
type metrics struct {
	requests *prometheus.CounterVec
	duration *prometheus.HistogramVec
}

func newMetrics(reg prometheus.Registerer) *metrics {
	m := &metrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "vco_client_requests_total",
			Help: "whitesky.cloud API calls by operation and result class (2xx, 4xx, 5xx, 429, error).",
		}, []string{"operation", "code"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "vco_client_request_duration_seconds",
			Help: "whitesky.cloud API call latency by operation; calls block until the work is done, so the buckets reach minutes.",
			// The API is synchronous: cloudspace and VM creates take seconds, DNS writes ~30 s.
			Buckets: []float64{0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600},
		}, []string{"operation"}),
	}
	if reg != nil {
		m.requests = registerCollector(reg, m.requests)
		m.duration = registerCollector(reg, m.duration)
	}
	return m
}

// register tolerates a second client on the same registry by reusing the collector.
func registerCollector[T prometheus.Collector](reg prometheus.Registerer, c T) T {
	if err := reg.Register(c); err != nil {
		var are prometheus.AlreadyRegisteredError
		if errors.As(err, &are) {
			if existing, ok := are.ExistingCollector.(T); ok {
				return existing
			}
		}
	}
	return c
}

func codeClass(status int, err error) string {
	switch {
	case status == 429:
		return "429"
	case status >= 500:
		return "5xx"
	case status >= 400:
		return "4xx"
	case status >= 200 && err == nil:
		return "2xx"
	}
	return "error"
}

func (m *metrics) observe(operation string, status int, err error, took time.Duration) {
	m.requests.WithLabelValues(operation, codeClass(status, err)).Inc()
	m.duration.WithLabelValues(operation).Observe(took.Seconds())
}
