package producer

import (
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/hivedr/hivedr/internal/health"
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

	bootstrapRecords *prometheus.CounterVec
	bootstraps       *prometheus.GaugeVec
	relistedTables   prometheus.Counter
	requestsSkipped  prometheus.Counter
	// What bootstraps read from the source metastore (bootstrap_reads.go).
	tablesRead        *prometheus.CounterVec
	partitionsRead    *prometheus.CounterVec
	partitionListings *prometheus.CounterVec
	// HDFS snapshots of bootstraps (hdfssnap.go).
	snapshotsHeld     prometheus.Gauge
	snapshotsReleased prometheus.Counter
	// Source transactions (txns.go).
	openTxns      prometheus.Gauge
	writesFetched *prometheus.CounterVec
	// The main loop's rounds (health.Loop).
	loop *health.Loop
}

// NewMetrics makes the tailer's metrics.
func NewMetrics() *Metrics {
	return &Metrics{
		loop: health.NewLoop("tailer"),
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
		bootstrapRecords: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "hivedr_tailer_bootstrap_records_total", Help: "Bootstrap (snapshot) records published, by database.",
		}, []string{"db"}),
		bootstraps: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "hivedr_tailer_bootstraps", Help: "Bootstraps in progress, by phase (SNAPSHOT, CATCHUP).",
		}, []string{"phase"}),
		relistedTables: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "hivedr_tailer_bootstrap_relisted_tables_total", Help: "Tables whose partition listing a bootstrap started again after a tailer restart (the table in progress at the restart: at most one per bootstrap and restart).",
		}),
		requestsSkipped: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "hivedr_tailer_bootstrap_requests_skipped_total", Help: "Bootstrap requests on the control topic for another source.",
		}),
		tablesRead: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "hivedr_tailer_bootstrap_tables_read_total", Help: "Tables bootstraps read from the source metastore, by database: each table once per bootstrap and tailer process (the table in progress is read again on each of its pages; counted once).",
		}, []string{"db"}),
		partitionsRead: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "hivedr_tailer_bootstrap_partitions_read_total", Help: "Partitions bootstraps read from the source metastore, by database.",
		}, []string{"db"}),
		partitionListings: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "hivedr_tailer_bootstrap_partition_listings_total", Help: "Listings of a table's partition names (a window of up to 10,000 after the cursor) bootstraps asked of the source metastore, by database.",
		}, []string{"db"}),
		snapshotsHeld: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "hivedr_tailer_bootstrap_snapshots_held", Help: "HDFS snapshots bootstraps took that wait for their copy tasks to complete.",
		}),
		snapshotsReleased: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "hivedr_tailer_bootstrap_snapshots_released_total", Help: "HDFS snapshots of bootstraps deleted: their copies done, or their bootstrap unknown to the checkpoint.",
		}),
		openTxns: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "hivedr_tailer_open_transactions", Help: "Source transactions that allocated write IDs and have not ended, as of the checkpoint (kept in it).",
		}),
		writesFetched: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "hivedr_tailer_commit_writes_read_total", Help: "COMMIT_TXN events whose message named no writes and whose writes the tailer read from the source metastore (get_all_write_event_info), by outcome: writes, none (the transaction wrote nothing), unavailable (published with WRITES_UNAVAILABLE).",
		}, []string{"outcome"}),
	}
}

// Register adds the metrics to reg.
func (m *Metrics) Register(reg prometheus.Registerer) error {
	for _, c := range []prometheus.Collector{m.eventsRead, m.eventsPublished, m.eventsFiltered, m.tasksPublished,
		m.errors, m.sourceHead, m.lastPublished, m.state, m.pollSeconds, m.produceSeconds,
		m.bootstrapRecords, m.bootstraps, m.relistedTables, m.requestsSkipped, m.tablesRead, m.partitionsRead, m.partitionListings,
		m.snapshotsHeld, m.snapshotsReleased,
		m.openTxns, m.writesFetched, m.loop.Collector()} {
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

// setBootstraps sets the bootstraps gauge from the committed ones.
func (m *Metrics) setBootstraps(boots []schemas.BootstrapState) {
	n := map[string]int{schemas.PhaseSnapshot: 0, schemas.PhaseCatchup: 0}
	for _, b := range boots {
		n[b.Phase]++
	}
	for phase, c := range n {
		m.bootstraps.WithLabelValues(phase).Set(float64(c))
	}
}

// RelistedTables is the number of tables whose partition listing a
// bootstrap started again after a restart
// (hivedr_tailer_bootstrap_relisted_tables_total).
func (m *Metrics) RelistedTables() int64 {
	var pb dto.Metric
	if err := m.relistedTables.Write(&pb); err != nil {
		return 0
	}
	return int64(pb.GetCounter().GetValue())
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

// EventsPublished is the number of event records published to the
// database topics (an event on two databases' topics counts twice).
func (m *Metrics) EventsPublished() int64 {
	ch := make(chan prometheus.Metric, 64)
	go func() { m.eventsPublished.Collect(ch); close(ch) }()
	var n float64
	for c := range ch {
		var pb dto.Metric
		if c.Write(&pb) == nil {
			n += pb.GetCounter().GetValue()
		}
	}
	return int64(n)
}
