package producer

import (
	"slices"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/hivedr/hivedr/schemas"
)

// What bootstraps read from the source metastore, counted so that a
// restart's work can be checked against what was left at the kill: a
// restarted tailer reads again only the table in progress (and the
// tables it has not published), never a finished one.
//
//   - hivedr_tailer_bootstrap_tables_read_total{db}: each table read once
//     per bootstrap and process (a table whose partitions span several
//     pages is read again on each; that counts once), kept in
//     Tailer.tablesRead;
//   - hivedr_tailer_bootstrap_partitions_read_total{db}: every partition
//     read;
//   - hivedr_tailer_bootstrap_partition_listings_total{db}: every listing
//     of a table's partition names (a window, partitionNames).

// noteTableRead counts b's read of table name, once per bootstrap and
// process. The names kept are dropped with the bootstraps no longer in
// progress, when the next bootstrap reads its first table.
func (t *Tailer) noteTableRead(b *schemas.BootstrapState, name string) {
	seen := t.tablesRead[b.BootstrapID]
	if seen == nil {
		for id := range t.tablesRead {
			if !slices.ContainsFunc(t.boots, func(x schemas.BootstrapState) bool { return x.BootstrapID == id }) {
				delete(t.tablesRead, id)
			}
		}
		if t.tablesRead == nil {
			t.tablesRead = map[string]map[string]bool{}
		}
		seen = map[string]bool{}
		t.tablesRead[b.BootstrapID] = seen
	}
	if !seen[name] {
		seen[name] = true
		t.m.tablesRead.WithLabelValues(b.Database).Inc()
	}
}

// BootstrapReads is what bootstraps of db read from the source metastore
// in this process: tables (each once per bootstrap), partitions, and
// listings of partition names.
func (m *Metrics) BootstrapReads(db string) (tables, partitions, listings int64) {
	return counterOf(m.tablesRead, db), counterOf(m.partitionsRead, db), counterOf(m.partitionListings, db)
}

// counterOf is the value of c's series with the given label values (0
// when it has none).
func counterOf(c *prometheus.CounterVec, labels ...string) int64 {
	var pb dto.Metric
	if err := c.WithLabelValues(labels...).Write(&pb); err != nil {
		return 0
	}
	return int64(pb.GetCounter().GetValue())
}
