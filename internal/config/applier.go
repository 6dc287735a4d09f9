package config

import (
	"errors"
	"fmt"
	"os"
	"time"
)

// Applier tunes `hivedr apply`.
type Applier struct {
	// Group is the applier's consumer group; its committed offsets on the
	// event topics are the replication checkpoints (and its lag is the
	// RPO a dashboard reads). Default hivedr-applier.
	Group string `yaml:"group"`
	// Instance is the applier's static group membership ID (KIP-345): an
	// applier restarted after a crash takes its databases back at once
	// instead of after the old session times out. Default: the host name.
	Instance string `yaml:"instance"`
	// Metastore is the DR Hive Metastore (host:port, Thrift). Required by
	// the commands that reach the DR (SectionDRMetastore).
	Metastore string `yaml:"metastore"`
	// HaltAfter is how long a database waits on a file that can no longer
	// be copied (FAILED, SOURCE_GONE) with no later event removing its
	// object, before it halts. Default 2m.
	HaltAfter Duration `yaml:"halt_after"`
	// LookAhead is the most events of one database read ahead of the one
	// being applied. Default 10000.
	LookAhead int `yaml:"look_ahead"`
	// BatchPartitions is the most partitions of a bootstrap one metastore
	// call adds or alters: consecutive HIVEDR_SNAPSHOT_PARTITION records
	// of one table are applied as one batch, their offsets committed
	// together after it. Default 1000.
	BatchPartitions int `yaml:"batch_partitions"`
	// MetricsAddr serves /metrics; empty disables. Default 127.0.0.1:9466.
	MetricsAddr string `yaml:"metrics_addr"`
}

// Defaults of Applier (package applier's Config uses them as its own
// defaults too).
const (
	DefaultHaltAfter = 2 * time.Minute
	DefaultLookAhead = 10000
	// DefaultBatchPartitions is applier.batch_partitions' default, and
	// MaxBatchPartitions its bound: one add_partitions call must fit the
	// metastore's Thrift message and socket timeout.
	DefaultBatchPartitions = 1000
	MaxBatchPartitions     = 10000
)

func defaultApplier() Applier {
	return Applier{Group: "hivedr-applier", HaltAfter: Duration{DefaultHaltAfter}, LookAhead: DefaultLookAhead,
		BatchPartitions: DefaultBatchPartitions, MetricsAddr: "127.0.0.1:9466"}
}

// EnsureDefaults fills Instance with the host name.
func (a *Applier) EnsureDefaults() {
	if a.Instance == "" {
		a.Instance, _ = os.Hostname() // Validate reports a failure
	}
}

// Validate checks a, naming the key at fault. It requires no metastore:
// Config.Require does.
func (a Applier) Validate() error {
	if a.Group == "" {
		return errors.New("applier.group: must not be empty")
	}
	if a.Instance == "" {
		return errors.New("applier.instance: not set and the host name is unknown")
	}
	if err := checkHostPort("applier.metastore", a.Metastore); err != nil {
		return err
	}
	if a.HaltAfter.Duration < time.Second {
		return fmt.Errorf("applier.halt_after: %s must be at least 1s", a.HaltAfter.Duration)
	}
	if a.LookAhead < 1 {
		return fmt.Errorf("applier.look_ahead: %d must be positive", a.LookAhead)
	}
	if a.BatchPartitions < 1 || a.BatchPartitions > MaxBatchPartitions {
		return fmt.Errorf("applier.batch_partitions: %d must be between 1 and %d", a.BatchPartitions, MaxBatchPartitions)
	}
	return nil
}

// Replicated reports whether db.table is in the replication scope.
func (r *Replication) Replicated(db, table string) bool {
	p, ok := r.Scope(db)
	return ok && p.TableIncluded(table)
}

// MapLocation maps a metastore location to its DR location (MapPath) after
// checking that it lies under the source roots (CheckSourceRoot): the
// applier never points a DR object at a place the copy daemons may not
// write (guarantee 7).
func (r *Replication) MapLocation(uri string) (string, error) {
	if _, err := r.CheckSourceRoot(uri); err != nil {
		return "", err
	}
	return r.MapPath(uri)
}
