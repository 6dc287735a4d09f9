package copyd

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/hivedr/hivedr/internal/fs"
	"github.com/hivedr/hivedr/internal/health"
	"github.com/hivedr/hivedr/schemas"
)

// Metrics are the copy engine's Prometheus metrics. Register them with
// Register; they are not registered globally.
type Metrics struct {
	files        *prometheus.CounterVec
	bytes        *prometheus.CounterVec
	transferred  prometheus.Counter
	retries      prometheus.Counter
	inFlight     prometheus.Gauge
	fileSeconds  *prometheus.HistogramVec
	throttleWait prometheus.Counter
	window       prometheus.Gauge
	txns         *prometheus.CounterVec
	sessions     prometheus.Counter
	repaired     *prometheus.CounterVec
	dirsMade     prometheus.Counter
	loop         *health.Loop // the daemon's main loop's rounds
}

// NewMetrics makes the copy engine's metrics.
func NewMetrics() *Metrics {
	return &Metrics{
		loop: health.NewLoop("copyd"),
		files: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "hivedr_copyd_files_total", Help: "Copy tasks completed, by status (COPIED, SKIPPED_IDENTICAL, FAILED, SOURCE_GONE).",
		}, []string{"status"}),
		bytes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "hivedr_copyd_file_bytes_total", Help: "Lengths of the files of completed copy tasks, by status (SKIPPED_IDENTICAL counts bytes not moved).",
		}, []string{"status"}),
		transferred: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "hivedr_copyd_transferred_bytes_total", Help: "Bytes streamed to targets, and re-read for sampled verification, as they move, failed attempts included; its rate is the throughput.",
		}),
		retries: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "hivedr_copyd_retries_total", Help: "Attempts made again after a transient error or a checksum mismatch.",
		}),
		inFlight: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "hivedr_copyd_tasks_in_flight", Help: "Copy tasks being worked on.",
		}),
		fileSeconds: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "hivedr_copyd_file_seconds", Help: "Time from the start of a copy task to its completion, by status.",
			Buckets: prometheus.ExponentialBuckets(0.005, 2, 18),
		}, []string{"status"}),
		throttleWait: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "hivedr_copyd_throttle_wait_seconds_total", Help: "Time copies spent waiting for the bandwidth limit, summed over concurrent copies.",
		}),
		window: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "hivedr_copyd_window_tasks", Help: "Copy tasks held in the sliding window: queued, copying, or finished and waiting for an older task of their partition to be committed.",
		}),
		txns: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "hivedr_copyd_transactions_total", Help: "Kafka transactions that publish completions with their offsets, by outcome (committed, aborted).",
		}, []string{"outcome"}),
		sessions: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "hivedr_copyd_session_restarts_total", Help: "Kafka sessions that failed (broker away, a transaction ended in error) and were replaced by a new one.",
		}),
		repaired: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "hivedr_copyd_metadata_repairs_total", Help: "Existing DR files (already identical, not copied) and directories given their source's owner, group, permission bits or mtime (copyd.preserve), by object (file, directory).",
		}, []string{"object"}),
		dirsMade: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "hivedr_copyd_directories_made_total", Help: "DR directories made with their source directory's owner, group and permission bits (copyd.preserve).",
		}),
	}
}

// Register adds the metrics to reg.
func (m *Metrics) Register(reg prometheus.Registerer) error {
	for _, c := range []prometheus.Collector{m.files, m.bytes, m.transferred, m.retries, m.inFlight, m.fileSeconds, m.throttleWait, m.window, m.txns, m.sessions, m.repaired, m.dirsMade, m.loop.Collector()} {
		if err := reg.Register(c); err != nil {
			return err
		}
	}
	return nil
}

// completed records one completion.
func (m *Metrics) completed(c *schemas.CopyCompletion) {
	st := string(c.Status)
	m.files.WithLabelValues(st).Inc()
	if c.Length > 0 {
		m.bytes.WithLabelValues(st).Add(float64(c.Length))
	}
	m.fileSeconds.WithLabelValues(st).Observe(c.Finished.Sub(c.Started).Seconds())
}

func (m *Metrics) waited(d time.Duration) { m.throttleWait.Add(d.Seconds()) }

// dirsKept records what keepDirs did to one directory.
func (m *Metrics) dirsKept(ch fs.DirChange) {
	switch ch {
	case fs.DirMade:
		m.dirsMade.Inc()
	case fs.DirFixed:
		m.repaired.WithLabelValues("directory").Inc()
	}
}
func (m *Metrics) moved(n int) { m.transferred.Add(float64(n)) }
