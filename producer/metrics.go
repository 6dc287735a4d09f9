package producer

import (
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/hivedr/hivedr/schemas"
)

// states are the values of the hivedr_tailer_state gauge's state label.
var states = []schemas.TailerState{schemas.StateStarting, schemas.StateRunning, schemas.StateChainBroken,
	schemas.StateFailed, schemas.StateStopped}

// Metrics are the tailer's Prometheus metrics. Register them with
// Register; they are not registered globally.
type Metrics struct {
	eventsRead      *prometheus.CounterVec
	eventsPublished *prometheus.CounterVec
	eventsFiltered  *prometheus.CounterVec
	tasksPublished  prometheus.Counter
	errors          prometheus.Counter
	sourceHead      prometheus.Gauge
	lastPublished   prometheus.Gauge
	state           *prometheus.GaugeVec
	pollSeconds     prometheus.Histogram
	produceSeconds  prometheus.Histogram
}

// NewMetrics makes the tailer's metrics.
func NewMetrics() *Metrics {
	return &Metrics{
		eventsRead: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "hivedr_tailer_events_read_total", Help: "Events read from the source notification log, by event type.",
		}, []string{"type"}),
		eventsPublished: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "hivedr_tailer_events_published_total", Help: "Events published to database topics, by event type and database (an event concerning two databases counts twice).",
		}, []string{"type", "db"}),
		eventsFiltered: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "hivedr_tailer_events_filtered_total", Help: "Events read but published nowhere, by reason (no_database, database_out_of_scope, table_excluded) and database.",
		}, []string{"reason", "db"}),
		tasksPublished: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "hivedr_tailer_copy_tasks_published_total", Help: "Copy tasks published to the manifests topic.",
		}),
		errors: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "hivedr_tailer_retried_errors_total", Help: "Transient errors the tailer retried from its checkpoint.",
		}),
		sourceHead: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "hivedr_tailer_source_head_event_id", Help: "Newest event ID of the source notification log when last polled.",
		}),
		lastPublished: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "hivedr_tailer_last_published_event_id", Help: "Last event ID covered by a committed transaction (the checkpoint).",
		}),
		state: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "hivedr_tailer_state", Help: "1 for the tailer's current state, 0 for the others.",
		}, []string{"state"}),
		pollSeconds: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "hivedr_tailer_poll_seconds", Help: "Latency of one read from the source log.", Buckets: prometheus.ExponentialBuckets(0.001, 2, 16),
		}),
		produceSeconds: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "hivedr_tailer_produce_seconds", Help: "Latency of producing and committing one batch's transaction.", Buckets: prometheus.ExponentialBuckets(0.001, 2, 16),
		}),
	}
}

// Register adds the metrics to reg.
func (m *Metrics) Register(reg prometheus.Registerer) error {
	for _, c := range []prometheus.Collector{m.eventsRead, m.eventsPublished, m.eventsFiltered, m.tasksPublished,
		m.errors, m.sourceHead, m.lastPublished, m.state, m.pollSeconds, m.produceSeconds} {
		if err := reg.Register(c); err != nil {
			return err
		}
	}
	return nil
}

func (m *Metrics) setState(s schemas.TailerState) {
	for _, st := range states {
		v := 0.0
		if st == s {
			v = 1
		}
		m.state.WithLabelValues(string(st)).Set(v)
	}
}

// LastPublished is the checkpoint: the last event ID covered by a committed
// transaction.
func (m *Metrics) LastPublished() int64 { return int64(gaugeValue(m.lastPublished)) }

// TasksPublished is the number of copy tasks published.
func (m *Metrics) TasksPublished() int64 {
	var pb dto.Metric
	if err := m.tasksPublished.Write(&pb); err != nil {
		return 0
	}
	return int64(pb.GetCounter().GetValue())
}

func gaugeValue(g prometheus.Gauge) float64 {
	var pb dto.Metric
	if err := g.Write(&pb); err != nil {
		return 0
	}
	return pb.GetGauge().GetValue()
}
