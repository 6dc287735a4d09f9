package applier

import (
	"errors"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/hivedr/hivedr/internal/health"
)

// Metrics are the applier's Prometheus metrics. Register them with
// Register; they are not registered globally.
type Metrics struct {
	loop         *health.Loop // the consume loop's rounds
	events       *prometheus.CounterVec
	applySeconds *prometheus.HistogramVec
	eventLag     *prometheus.HistogramVec
	lastID       *prometheus.GaugeVec
	lastTime     *prometheus.GaugeVec
	lagEvents    *prometheus.GaugeVec
	lookAhead    prometheus.Gauge
	fetchGated   prometheus.Gauge
	replicaAge   *prometheus.GaugeVec
	rpo          *prometheus.GaugeVec
	waiting      *prometheus.GaugeVec
	waitingFiles *prometheus.GaugeVec
	waitSeconds  *prometheus.CounterVec
	halted       *prometheus.GaugeVec
	completions  *prometheus.CounterVec
	undecodable  prometheus.Counter

	bootstrapApplied *prometheus.CounterVec
	batchEvents      *prometheus.HistogramVec
	drCallSeconds    *prometheus.HistogramVec
	drOpen, drPeak   prometheus.Gauge
	drWait           prometheus.Histogram
}

// NewMetrics makes the applier's metrics.
func NewMetrics() *Metrics {
	return &Metrics{
		loop: health.NewLoop("applier"),
		events: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "hivedr_applier_events_total",
			Help: "Events handled, by database, event type and result (applied, or the reason it changed nothing: already_applied, superseded, not_replicated_*, ...).",
		}, []string{"db", "type", "result"}),
		applySeconds: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "hivedr_applier_apply_seconds",
			Help:    "Time to apply one plan to the DR metastore (read state, plan, run actions): an event, a run of events of one table or a batch of a bootstrap's records, by the type of its first; waiting for files is not included.",
			Buckets: prometheus.ExponentialBuckets(0.001, 2, 16),
		}, []string{"type"}),
		eventLag: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "hivedr_applier_event_lag_seconds",
			Help:    "End-to-end lag of applied events: from the source event time (whole seconds, as the metastore records it) to applied on DR.",
			Buckets: []float64{0.25, 0.5, 0.75, 1, 1.5, 2, 2.5, 3, 4, 5, 6, 8, 10, 15, 20, 30, 60, 120, 300},
		}, []string{"db"}),
		lastID: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "hivedr_applier_last_event_id", Help: "Source event ID of the last event applied (or found already applied) per database.",
		}, []string{"db"}),
		lastTime: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "hivedr_applier_last_event_timestamp_seconds", Help: "Source time (Unix seconds) of the last event applied per database.",
		}, []string{"db"}),
		lagEvents: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "hivedr_applier_lag_events", Help: "Events fetched from the database's topic and not yet applied (see also the consumer group's lag).",
		}, []string{"db"}),
		lookAhead: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "hivedr_applier_look_ahead_bytes",
			Help: "Encoded size of the records all the database workers hold fetched and not yet applied, bounded by applier.look_ahead_bytes (each worker's fair share of it, and about twice it in all).",
		}),
		fetchGated: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "hivedr_applier_fetch_held",
			Help: "1 while the applier holds back fetching from every database's topic: the queues of the workers that are applying hold more than applier.look_ahead_bytes together (it fetches again once they are down to half of it); 0 otherwise.",
		}),
		replicaAge: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "hivedr_replica_age_seconds",
			Help: "How old the DR replica of a database is: now minus the source time up to which it is complete (the oldest unapplied event's time, or, when caught up, the newest event or heartbeat applied). It grows while the tailer is down, since heartbeats stop. Compare with hivedr_rpo_seconds.",
		}, []string{"db"}),
		rpo: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "hivedr_rpo_seconds",
			Help: "The database's recovery point objective (replication.databases[].rpo): alert when hivedr_replica_age_seconds exceeds it.",
		}, []string{"db"}),
		waiting: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "hivedr_applier_waiting", Help: "1 while a database's worker waits, by reason (waiting_for_files, cross_database, source_gone, copy_failed); no series when it does not wait.",
		}, []string{"db", "reason"}),
		waitingFiles: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "hivedr_applier_waiting_files", Help: "Files the event (or batch) a database's worker waits for have no successful completion yet; no series when it does not wait for files.",
		}, []string{"db"}),
		waitSeconds: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "hivedr_applier_wait_seconds_total", Help: "Time workers spent waiting, by database and reason.",
		}, []string{"db", "reason"}),
		halted: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "hivedr_applier_halted", Help: "1 when a database's worker has halted, by reason; the log and `hivedr status` name the event.",
		}, []string{"db", "reason"}),
		completions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "hivedr_applier_completions_total", Help: "Copy completions read from the completions topic, by status.",
		}, []string{"status"}),
		bootstrapApplied: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "hivedr_applier_bootstrap_applied_total",
			Help: "Bootstrap records done (applied, found applied, or left out because a later event removes the object), by database and kind: tables, partitions, and the files of those records. The DR database's hivedr.bootstrap.applied parameter holds the same figures for the bootstrap in progress.",
		}, []string{"db", "kind"}),
		batchEvents: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "hivedr_applier_batch_events",
			Help:    "Events (or bootstrap records) one plan of a database's worker applied or found applied: 1 for an event alone, more for a run of events on one table or a batch of a bootstrap's partition records, applied in one set of metastore calls.",
			Buckets: []float64{1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000, 10000},
		}, []string{"db"}),
		drCallSeconds: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "hivedr_applier_dr_call_seconds",
			Help:    "Time of each call a database's worker made to the DR metastore (get_database, get_table, get_partitions_by_names, add_partitions, alter_partitions, alter_table, alter_database, ...) or, for prune_files, to the DR filesystem; its _count is the number of calls.",
			Buckets: prometheus.ExponentialBuckets(0.001, 2, 16),
		}, []string{"call"}),
		drOpen: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "hivedr_applier_dr_connections_open",
			Help: "Connections the applier holds to the DR metastore, idle or in use (at most applier.dr_connections).",
		}),
		drPeak: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "hivedr_applier_dr_connections_peak",
			Help: "The most connections the applier held to the DR metastore at once since it started.",
		}),
		drWait: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "hivedr_applier_dr_connection_wait_seconds",
			Help:    "Time a database's worker waited for a DR metastore connection (applier.dr_connections) before a step, dialling and backoff included.",
			Buckets: prometheus.ExponentialBuckets(0.0001, 2, 20),
		}),
		undecodable: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "hivedr_applier_undecodable_completions_total", Help: "Completion records that did not decode (logged with their offset); an event waiting for one waits until it is re-copied.",
		}),
	}
}

// Register adds the metrics to reg.
func (m *Metrics) Register(reg prometheus.Registerer) error {
	var errs []error
	for _, c := range []prometheus.Collector{m.events, m.applySeconds, m.eventLag, m.lastID, m.lastTime,
		m.lagEvents, m.lookAhead, m.fetchGated, m.replicaAge, m.rpo, m.waiting, m.waitingFiles, m.waitSeconds, m.halted, m.completions, m.undecodable, m.bootstrapApplied, m.batchEvents, m.drCallSeconds,
		m.drOpen, m.drPeak, m.drWait, m.loop.Collector()} {
		errs = append(errs, reg.Register(c))
	}
	return errors.Join(errs...)
}
