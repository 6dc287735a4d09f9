package config

import (
	"errors"
	"fmt"
	"maps"
	"os"
	"slices"
	"strings"
)

// Copyd tunes the copy daemons.
type Copyd struct {
	// Group is the consumer group all copy daemons share. Default
	// hivedr-copyd.
	Group string `yaml:"group"`
	// Instance names this daemon; its transactional ID is
	// <kafka.topic_prefix>-copyd-<instance> (hivedr-copyd-<instance> with
	// the default prefix), so it must be unique per daemon of the pipeline
	// and stable across its restarts. Default: the host name.
	Instance string `yaml:"instance"`
	// SessionTimeout is how long the group waits for a daemon that stopped
	// heartbeating before its manifest partitions move to the others (as
	// applier.session_timeout). Default 6s.
	SessionTimeout Duration `yaml:"session_timeout"`
	// Workers is how many files one daemon copies at once. Default 8.
	Workers int `yaml:"workers"`
	// MaxBatch bounds each manifest partition's window: the most copy
	// tasks one partition holds at once (queued, copying, or finished and
	// waiting for an older task of the partition before they can be
	// committed); a partition holding that many is not fetched until a
	// commit. Default 4 x workers.
	MaxBatch int `yaml:"max_batch"`
	// BytesPerSecond limits the daemon's copy bandwidth; 0 is unlimited.
	BytesPerSecond int64 `yaml:"bytes_per_second"`
	// SplitSize: a file larger than this many bytes is copied as ranges in
	// parallel, to targets that can take them (S3; HDFS clusters with
	// filesystems.hdfs[].concat). 0 disables. Default 128 MiB.
	SplitSize int64 `yaml:"split_size"`
	// SplitWorkers is the most ranges of one file copied at once; a file
	// gets more than one only while the daemon runs fewer than this many
	// copy streams in all, so a busy daemon gains no streams from
	// splitting. Default 4.
	SplitWorkers int `yaml:"split_workers"`
	// Retries of a transient failure before a task completes FAILED.
	// Default 5.
	Retries int `yaml:"retries"`
	// TargetRoots are the only locations copyd writes; default: the
	// targets of replication.path_mappings.
	TargetRoots []string `yaml:"target_roots"`
	// AnyTarget lets a copy task name any target under target_roots. By
	// default a task's target must be the DR path replication.path_mappings
	// give its source (or the name the tailer gives a compaction's file
	// there), so that whoever can write the manifests topic cannot point a
	// copy at another DR file; a task that names another completes FAILED,
	// naming both. Set it only for a copy daemon fed by a producer of its
	// own that copies across mappings. Default false.
	AnyTarget bool `yaml:"any_target"`
	// CMRoots are change-management roots copyd may read copies of moved
	// or deleted source files from, when they lie outside the source roots.
	// Default none (the local stack's defaults: its source cmroot).
	CMRoots []string `yaml:"cm_roots"`
	// MetricsAddr serves /metrics; empty disables. Default 127.0.0.1:9465.
	MetricsAddr string `yaml:"metrics_addr"`
	// Preserve is the source file metadata DR copies keep. Default none.
	Preserve Preserve `yaml:"preserve"`
	// StallAfter is how long the daemon's main loop (polling tasks,
	// committing completions) may go without going round
	// (hivedr_copyd_loop_timestamp_seconds) before /healthz fails and a
	// liveness probe restarts the daemon. Default 10m; 0 disables the
	// check.
	StallAfter Duration `yaml:"stall_after"`
}

// Preserve is copyd.preserve: which metadata of a source file its DR copy
// keeps (HDFS targets; DistCp -p), read from the source file's status at
// copy time. A copy that cannot keep it fails saying why: the owner needs
// filesystems.hdfs[].user to be the DR cluster's superuser.
type Preserve struct {
	// Owner keeps the source file's owner (mapped by users); it needs
	// filesystems.hdfs[].user to be the DR cluster's superuser.
	Owner bool `yaml:"owner"`
	// Group keeps the source file's group (mapped by groups).
	Group bool `yaml:"group"`
	// Permission keeps the source file's permission bits.
	Permission bool `yaml:"permission"`
	// Times keeps the source file's modification time.
	Times bool `yaml:"times"`
	// Users maps source user names to DR ones where the sites differ;
	// unlisted names are kept. Only with owner.
	Users map[string]string `yaml:"users"`
	// Groups maps source group names to DR ones where the sites differ;
	// unlisted names are kept. Only with group.
	Groups map[string]string `yaml:"groups"`
}

// validate checks p, naming the key at fault. A mapping of names that
// nothing uses (users without owner, groups without group) is refused, as
// it can only be a mistake.
func (p Preserve) validate() error {
	for _, m := range []struct {
		key, flag string
		on        bool
		names     map[string]string
	}{{"copyd.preserve.users", "owner", p.Owner, p.Users}, {"copyd.preserve.groups", "group", p.Group, p.Groups}} {
		for _, from := range slices.Sorted(maps.Keys(m.names)) {
			to := m.names[from]
			if from == "" || to == "" || strings.ContainsAny(from+to, ": \t/") {
				return fmt.Errorf("%s: %q: %q is not a mapping of one name to another", m.key, from, to)
			}
		}
		if len(m.names) > 0 && !m.on {
			return fmt.Errorf("%s: given without copyd.preserve.%s: true, so nothing would use it", m.key, m.flag)
		}
	}
	return nil
}

// Defaults and bounds of Copyd.
const (
	DefaultCopydWorkers = 8
	DefaultSplitSize    = 128 << 20
	DefaultSplitWorkers = 4
	MinSplitSize        = 1 << 20
)

// DefaultMaxBatch is Copyd.MaxBatch's default for a daemon of workers
// workers.
func DefaultMaxBatch(workers int) int { return 4 * workers }

func defaultCopyd() Copyd {
	return Copyd{Group: "hivedr-copyd", Workers: DefaultCopydWorkers, Retries: 5, MetricsAddr: "127.0.0.1:" + CopydMetricsPort,
		SplitSize: DefaultSplitSize, SplitWorkers: DefaultSplitWorkers, SessionTimeout: Duration{DefaultSessionTimeout},
		StallAfter: Duration{DefaultStallAfter}}
}

// EnsureDefaults fills Instance (the host name), MaxBatch (from Workers)
// and TargetRoots (the targets of mappings).
func (d *Copyd) EnsureDefaults(mappings []PathMapping) {
	if d.Instance == "" {
		d.Instance, _ = os.Hostname() // Validate reports a failure
	}
	if d.MaxBatch == 0 {
		d.MaxBatch = DefaultMaxBatch(d.Workers)
	}
	if len(d.TargetRoots) == 0 {
		for _, m := range mappings {
			d.TargetRoots = append(d.TargetRoots, m.Target)
		}
	}
}

// Validate checks d, naming the key at fault.
func (d Copyd) Validate() error {
	if d.Group == "" {
		return errors.New("copyd.group: must not be empty")
	}
	if d.Instance == "" {
		return errors.New("copyd.instance: not set and the host name is unknown")
	}
	if err := CheckSessionTimeout("copyd.session_timeout", d.SessionTimeout.Duration); err != nil {
		return err
	}
	if err := CheckStallAfter("copyd.stall_after", d.StallAfter.Duration); err != nil {
		return err
	}
	if d.Workers < 1 || d.Workers > 1024 {
		return fmt.Errorf("copyd.workers: %d must be between 1 and 1024", d.Workers)
	}
	if d.MaxBatch < 1 {
		return fmt.Errorf("copyd.max_batch: %d must be positive", d.MaxBatch)
	}
	if d.BytesPerSecond < 0 {
		return fmt.Errorf("copyd.bytes_per_second: %d must not be negative", d.BytesPerSecond)
	}
	if d.Retries < 0 {
		return fmt.Errorf("copyd.retries: %d must not be negative", d.Retries)
	}
	if d.SplitSize != 0 && d.SplitSize < MinSplitSize {
		return fmt.Errorf("copyd.split_size: %d must be 0 (no splitting) or at least %d (1 MiB)", d.SplitSize, MinSplitSize)
	}
	if d.SplitWorkers < 1 || d.SplitWorkers > 64 {
		return fmt.Errorf("copyd.split_workers: %d must be between 1 and 64", d.SplitWorkers)
	}
	if err := checkLocations("copyd.target_roots", d.TargetRoots); err != nil {
		return err
	}
	if err := d.Preserve.validate(); err != nil {
		return err
	}
	return checkLocations("copyd.cm_roots", d.CMRoots)
}
