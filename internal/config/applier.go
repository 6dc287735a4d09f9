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
	// SessionTimeout is how long the group waits for a member that stopped
	// heartbeating (a killed process, a lost host) before its databases
	// move to the others; members heartbeat every sixth of it. A static
	// member restarted within it takes its databases back with no
	// rebalance; one restarted later costs a rebalance out and one back.
	// Default 6s (the broker's group.min.session.timeout.ms default).
	SessionTimeout Duration `yaml:"session_timeout"`
	// Metastore is the DR Hive Metastore (host:port, Thrift). Required by
	// the commands that reach the DR (SectionDRMetastore).
	Metastore string `yaml:"metastore"`
	// MetastorePrincipal is the DR metastore's Kerberos principal
	// (hive/_HOST@REALM); set, hivedr speaks SASL GSSAPI to it as
	// kerberos.principal, at the strongest QOP it offers, as
	// source.metastore_principal.
	MetastorePrincipal string `yaml:"metastore_principal"`
	// MetastoreTLS reaches the DR metastore over TLS (metastore.use.SSL),
	// as source.metastore_tls does the source's. Off by default.
	MetastoreTLS TLS `yaml:"metastore_tls"`
	// HaltAfter is how long a database waits on a file that can no longer
	// be copied (FAILED, SOURCE_GONE) with no later event removing its
	// object, or retries an event the DR metastore keeps failing with an
	// error of its own (an internal error, an unreachable DR
	// filesystem), before it halts. Default 2m.
	HaltAfter Duration `yaml:"halt_after"`
	// PruneDelay is how long the DR files of obsolete ACID directories
	// (the deltas and older bases a base's commit or a compaction made
	// obsolete) stay before they are removed: a DR query planned before
	// that event still reads them, and fails with FileNotFound if they go
	// while it runs. Longer keeps longer queries safe, at the cost of the
	// space those directories hold meanwhile and of the replica's
	// listing holding more than the source's for that long (readers
	// starting later never read them). Files of non-transactional
	// objects (an INSERT OVERWRITE's old files, a truncate's) go at once
	// whatever it is: every reader would read them beside the new ones.
	// Set it to the longest query run on DR. Default 0: at once.
	PruneDelay Duration `yaml:"prune_delay"`
	// LookAhead is the most events of one database read ahead of the one
	// being applied. Default 10000.
	LookAhead int `yaml:"look_ahead"`
	// LookAheadBytes bounds what the applier reads ahead, over all its
	// databases together, by the records' encoded size: a database's
	// worker past its fair share (this divided among the running workers)
	// pauses its topic while all of them hold more than this, and while
	// the applying workers together hold more than this, every topic is
	// held back until they are down to half of it; so the applier holds
	// about twice it at most, plus the fetches in flight. Default 16 MiB.
	LookAheadBytes int64 `yaml:"look_ahead_bytes"`
	// BatchPartitions is the most partitions one metastore call adds or
	// alters: consecutive HIVEDR_SNAPSHOT_PARTITION records of one table,
	// and consecutive events of one table (a run: ADD_PARTITION,
	// ALTER_PARTITION, DROP_PARTITION, INSERT, ALTER_TABLE without a
	// rename), are applied as one plan, their offsets committed together
	// after it; 1 applies every record alone. Default 1000.
	BatchPartitions int `yaml:"batch_partitions"`
	// DRConnections is the most connections the applier holds to the DR
	// metastore: its database workers share them, each taking one for a
	// step (one plan's reads and calls) and giving it back, first come
	// first served, so the number of databases never decides the number
	// of connections. Every applier of a group holds its own: the
	// metastore serves at most the instances times this (plus one for a
	// failover's fence), which must stay below its own connection pool
	// (docs/applier.md, DR metastore connections). Default 8.
	DRConnections int `yaml:"dr_connections"`
	// MetricsAddr serves /metrics; empty disables. Default 127.0.0.1:9466.
	MetricsAddr string `yaml:"metrics_addr"`
	// StallAfter is how long the applier's main loop (consuming events
	// and handing them to the databases' workers) may go without going
	// round (hivedr_applier_loop_timestamp_seconds) before /healthz fails
	// and a liveness probe restarts the daemon. A halted database or a
	// slow one does not stop the loop. Default 10m; 0 disables the check.
	StallAfter Duration `yaml:"stall_after"`
}

// Defaults of Applier.
const (
	DefaultHaltAfter = 2 * time.Minute
	DefaultLookAhead = 10000
	// DefaultLookAheadBytes is applier.look_ahead_bytes' default.
	DefaultLookAheadBytes = 16 << 20
	// DefaultBatchPartitions is applier.batch_partitions' default, and
	// MaxBatchPartitions its bound: one add_partitions call must fit the
	// metastore's Thrift message and socket timeout.
	DefaultBatchPartitions = 1000
	MaxBatchPartitions     = 10000
	// DefaultDRConnections is applier.dr_connections' default: well
	// below a stock metastore's connection pool (10 per pool).
	DefaultDRConnections = 8
	// MaxDRConnections bounds applier.dr_connections.
	MaxDRConnections = 1000
	// DefaultSessionTimeout is applier.session_timeout's and
	// copyd.session_timeout's default: the shortest session a Kafka broker
	// accepts by default, so a lost member's work moves within seconds.
	DefaultSessionTimeout = 6 * time.Second
)

// DefaultPruneDelay is applier.prune_delay's default, MaxPruneDelay its
// bound (the delay is held in memory, per database).
const (
	DefaultPruneDelay time.Duration = 0
	MaxPruneDelay                   = 24 * time.Hour
)

// CheckSessionTimeout checks a session_timeout key's value.
func CheckSessionTimeout(key string, d time.Duration) error {
	if d < time.Second || d > 30*time.Minute {
		return fmt.Errorf("%s: %s must be between 1s and 30m (and within the brokers' group.min/max.session.timeout.ms)", key, d)
	}
	return nil
}

// HeartbeatInterval is how often a group member with session timeout d
// heartbeats: six times per session, so a loaded host that misses one or
// two keeps its membership.
func HeartbeatInterval(d time.Duration) time.Duration { return d / 6 }

func defaultApplier() Applier {
	return Applier{Group: "hivedr-applier", HaltAfter: Duration{DefaultHaltAfter}, LookAhead: DefaultLookAhead,
		LookAheadBytes: DefaultLookAheadBytes, BatchPartitions: DefaultBatchPartitions, DRConnections: DefaultDRConnections, MetricsAddr: "127.0.0.1:" + ApplierMetricsPort, SessionTimeout: Duration{DefaultSessionTimeout},
		StallAfter: Duration{DefaultStallAfter}}
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
	if err := a.MetastoreTLS.Validate("applier.metastore_tls"); err != nil {
		return err
	}
	if err := CheckSessionTimeout("applier.session_timeout", a.SessionTimeout.Duration); err != nil {
		return err
	}
	if err := CheckStallAfter("applier.stall_after", a.StallAfter.Duration); err != nil {
		return err
	}
	if a.HaltAfter.Duration < time.Second {
		return fmt.Errorf("applier.halt_after: %s must be at least 1s", a.HaltAfter.Duration)
	}
	if a.PruneDelay.Duration < 0 || a.PruneDelay.Duration > MaxPruneDelay {
		return fmt.Errorf("applier.prune_delay: %s must be between 0s and %s", a.PruneDelay.Duration, MaxPruneDelay)
	}
	if a.LookAhead < 1 {
		return fmt.Errorf("applier.look_ahead: %d must be positive", a.LookAhead)
	}
	if a.LookAheadBytes < 1<<20 {
		return fmt.Errorf("applier.look_ahead_bytes: %d must be at least 1048576 (1 MiB)", a.LookAheadBytes)
	}
	if a.BatchPartitions < 1 || a.BatchPartitions > MaxBatchPartitions {
		return fmt.Errorf("applier.batch_partitions: %d must be between 1 and %d", a.BatchPartitions, MaxBatchPartitions)
	}
	if a.DRConnections < 1 || a.DRConnections > MaxDRConnections {
		return fmt.Errorf("applier.dr_connections: %d must be between 1 and %d", a.DRConnections, MaxDRConnections)
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
