// Package config is hivedr's YAML configuration: where the source and DR
// systems are, which databases and tables replicate, how source paths map
// to DR paths, and each role's tuning.
//
// With no file every value defaults to the local stack that `make
// stack-up` starts, so `hivedr <command>` works on a fresh demo machine.
// Errors name the offending key, e.g. `replication.databases[1].include_tables[0]`.
package config

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"regexp"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/hivedr/hivedr/internal/fs"
	"github.com/hivedr/hivedr/internal/location"
)

// Config is the whole configuration file.
type Config struct {
	// Source is the primary site's metastore.
	Source Source `yaml:"source"`
	// Kafka is the cluster that carries the topics.
	Kafka Kafka `yaml:"kafka"`
	// SchemaRegistry is the URL of the Confluent-compatible schema registry.
	SchemaRegistry string `yaml:"schema_registry"`
	// Tailer tunes `hivedr tail`.
	Tailer Tailer `yaml:"tailer"`
	// Replication is the policy: what replicates and where files go.
	Replication Replication `yaml:"replication"`
	// Copyd tunes `hivedr copyd`.
	Copyd Copyd `yaml:"copyd"`
	// Applier tunes `hivedr apply`.
	Applier Applier `yaml:"applier"`
	// Filesystems are the stores copyd reads and writes (see fs.Config;
	// fs.NewRouter checks them).
	Filesystems fs.Config `yaml:"filesystems"`
}

// Defaults and bounds of Copyd's range splitting.
const (
	DefaultSplitSize    = 128 << 20
	DefaultSplitWorkers = 4
	MinSplitSize        = 1 << 20
)

// Copyd tunes the copy daemons.
type Copyd struct {
	// Group is the consumer group all copy daemons share. Default
	// hivedr-copyd.
	Group string `yaml:"group"`
	// Instance names this daemon; its transactional ID is
	// hivedr-copyd-<instance>, so it must be unique per daemon and stable
	// across its restarts. Default: the host name.
	Instance string `yaml:"instance"`
	// Workers is how many files one daemon copies at once. Default 8.
	Workers int `yaml:"workers"`
	// MaxBatch is the most tasks taken per round (one transaction).
	// Default 4 x workers.
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
	// CMRoots are change-management roots copyd may read copies of moved
	// or deleted source files from, when they lie outside the source roots.
	// Default: the local stack's source cmroot.
	CMRoots []string `yaml:"cm_roots"`
	// MetricsAddr serves /metrics; empty disables. Default 127.0.0.1:9465.
	MetricsAddr string `yaml:"metrics_addr"`
}

// Source says how to read the source notification log.
type Source struct {
	// Name identifies the source in records and in the tailer's
	// transactional ID. Default "primary".
	Name string `yaml:"name"`
	// Kind is "thrift" (get_next_notification; the default) or "postgres"
	// (NOTIFICATION_LOG read directly from the metastore's database).
	Kind string `yaml:"kind"`
	// Metastore is the source metastore's Thrift address, host:port.
	Metastore string `yaml:"metastore"`
	// PostgresDSN is the metastore database, for kind "postgres" (and for
	// listing databases when the Thrift address is not set).
	PostgresDSN string `yaml:"postgres_dsn"`
}

// Kafka names the cluster and the topics.
type Kafka struct {
	// Brokers are the seed brokers, host:port.
	Brokers []string `yaml:"brokers"`
	// TopicPrefix starts every topic name: <prefix>.events.<db>,
	// <prefix>.manifests, <prefix>.completions, <prefix>.tailer.checkpoints.
	// Default "hivedr".
	TopicPrefix string `yaml:"topic_prefix"`
	// ReplicationFactor of topics the tailer creates. Default 3; the local
	// stack's single broker needs 1.
	ReplicationFactor int16 `yaml:"replication_factor"`
	// ManifestPartitions is the partition count of <prefix>.manifests, the
	// most copy daemons that can share the work. Default 12.
	ManifestPartitions int32 `yaml:"manifest_partitions"`
	// Retention of event and manifest topics; it bounds how far back ops can
	// re-drive. Default 168h (7 days).
	Retention Duration `yaml:"retention"`
}

// Tailer tunes the tailer.
type Tailer struct {
	// BatchSize is the most events read per poll and published per Kafka
	// transaction. Default 1000.
	BatchSize int `yaml:"batch_size"`
	// PollInterval is the wait between polls when the log has nothing new.
	// Default 1s.
	PollInterval Duration `yaml:"poll_interval"`
	// HeartbeatInterval is how often each in-scope database topic gets a
	// heartbeat. Default 5s.
	HeartbeatInterval Duration `yaml:"heartbeat_interval"`
	// StartEventID is where a tailer with no checkpoint starts: "latest"
	// (the log's head when it first starts: the default), "earliest", or an
	// event ID N (the first event published is N+1).
	StartEventID string `yaml:"start_event_id"`
	// MetricsAddr serves Prometheus /metrics, host:port; empty disables.
	// Default 127.0.0.1:9464.
	MetricsAddr string `yaml:"metrics_addr"`
	// TransactionalID fences zombie tailers; it must be stable across
	// restarts. Default hivedr-tailer-<source.name>.
	TransactionalID string `yaml:"transactional_id"`
}

// Replication is the replication policy.
type Replication struct {
	// Databases in scope. Empty means every database.
	Databases []DatabasePolicy `yaml:"databases"`
	// PathMappings rewrite source locations into DR locations, longest
	// source prefix first.
	PathMappings []PathMapping `yaml:"path_mappings"`
	// SourceRoots are the only source locations files may come from; a file
	// elsewhere is an error on its event, never a copy task.
	SourceRoots []string `yaml:"source_roots"`

	roots    []location.Location
	mappings []mapping
}

// DatabasePolicy puts databases in scope.
type DatabasePolicy struct {
	// Name is a database name or a glob pattern (path.Match syntax, e.g.
	// "sales_*"). Names are compared in lower case, as the metastore keeps them.
	Name string `yaml:"name"`
	// IncludeTables are regexes; when set, only matching tables replicate.
	IncludeTables []string `yaml:"include_tables"`
	// ExcludeTables are regexes; matching tables never replicate. Exclude
	// wins over include.
	ExcludeTables []string `yaml:"exclude_tables"`
	// RPO is the recovery point objective for the database, for alerts and
	// status. Default 5m.
	RPO Duration `yaml:"rpo"`

	include, exclude []*regexp.Regexp
}

// PathMapping maps a source location prefix to a DR one.
type PathMapping struct {
	Source string `yaml:"source"`
	Target string `yaml:"target"`
}

// Duration is a time.Duration written as "5s", "2m" in YAML.
type Duration struct{ time.Duration }

// UnmarshalYAML parses a Go duration string.
func (d *Duration) UnmarshalYAML(n *yaml.Node) error {
	v, err := time.ParseDuration(n.Value)
	if err != nil {
		return fmt.Errorf("line %d: %q is not a duration like 5s or 2m", n.Line, n.Value)
	}
	d.Duration = v
	return nil
}

// MarshalYAML writes the duration as a string.
func (d Duration) MarshalYAML() (any, error) { return d.String(), nil }

// Local-stack defaults (e2e/stack/lib.sh keeps the same ports).
const (
	localKafka    = "127.0.0.1:19092"
	localHMSSrc   = "127.0.0.1:19083"
	localRegistry = "http://127.0.0.1:18081"
	localPGSrc    = "postgres://hive:hive@127.0.0.1:15432/metastore_src?sslmode=disable"
	localHDFSSrc  = "hdfs://127.0.0.1:18020"
	localHDFSDR   = "hdfs://127.0.0.1:28020"
	localS3       = "http://127.0.0.1:19000"
)

// Default returns the configuration for the local stack.
func Default() *Config {
	return &Config{
		Source: Source{Name: "primary", Kind: "thrift", Metastore: localHMSSrc, PostgresDSN: localPGSrc},
		Kafka: Kafka{
			Brokers: []string{localKafka}, TopicPrefix: "hivedr", ReplicationFactor: 1,
			ManifestPartitions: 12, Retention: Duration{168 * time.Hour},
		},
		SchemaRegistry: localRegistry,
		Tailer: Tailer{
			BatchSize: 1000, PollInterval: Duration{time.Second}, HeartbeatInterval: Duration{5 * time.Second},
			StartEventID: "latest", MetricsAddr: "127.0.0.1:9464",
		},
		Copyd: Copyd{Group: "hivedr-copyd", Workers: 8, Retries: 5, MetricsAddr: "127.0.0.1:9465",
			SplitSize: DefaultSplitSize, SplitWorkers: DefaultSplitWorkers,
			CMRoots: []string{localHDFSSrc + "/cmroot/"}},
		Applier: defaultApplier(),
		Filesystems: fs.Config{
			HDFS: []fs.HDFSConfig{
				{NameNodes: []string{"127.0.0.1:18020"}, WebHDFS: "127.0.0.1:18070", User: "hivedr"},
				{NameNodes: []string{"127.0.0.1:28020"}, WebHDFS: "127.0.0.1:28070", User: "hivedr"},
			},
			S3: []fs.S3Config{{Endpoint: localS3, Region: "us-east-1", AccessKey: "hivedr", SecretKey: "hivedr-secret-key", PathStyle: true}},
		},
		Replication: Replication{
			PathMappings: []PathMapping{{Source: localHDFSSrc + "/", Target: localHDFSDR + "/"}},
			SourceRoots:  []string{localHDFSSrc + "/warehouse/", localHDFSSrc + "/external/"},
		},
	}
}

// Load reads the file at p over the defaults; p == "" gives the defaults.
// Unknown keys are errors, so a typo cannot silently change the policy.
func Load(p string) (*Config, error) {
	c := Default()
	if p != "" {
		b, err := os.ReadFile(p)
		if err != nil {
			return nil, fmt.Errorf("config: %w", err)
		}
		// A file replaces defaults only where it says something; lists it
		// gives replace the default lists.
		dec := yaml.NewDecoder(bytes.NewReader(b))
		dec.KnownFields(true)
		if err := dec.Decode(c); err != nil && !errors.Is(err, io.EOF) /* an empty file */ {
			return nil, fmt.Errorf("config %s: %w", p, err)
		}
	}
	if err := c.Validate(); err != nil {
		if p != "" {
			return nil, fmt.Errorf("config %s: %w", p, err)
		}
		return nil, fmt.Errorf("config: %w", err)
	}
	return c, nil
}

// Validate fills derived defaults and checks every value, naming the key at
// fault. Load calls it; call it after building a Config in code.
func (c *Config) Validate() error {
	if c.Source.Name == "" {
		return errors.New("source.name: must not be empty")
	}
	switch c.Source.Kind {
	case "thrift":
		if c.Source.Metastore == "" {
			return errors.New("source.metastore: required when source.kind is thrift")
		}
	case "postgres":
		if c.Source.PostgresDSN == "" {
			return errors.New("source.postgres_dsn: required when source.kind is postgres")
		}
	default:
		return fmt.Errorf("source.kind: %q is not thrift or postgres", c.Source.Kind)
	}
	if len(c.Kafka.Brokers) == 0 {
		return errors.New("kafka.brokers: at least one broker is required")
	}
	if c.Kafka.TopicPrefix == "" || strings.ContainsAny(c.Kafka.TopicPrefix, " /\\") {
		return fmt.Errorf("kafka.topic_prefix: %q is not a valid topic name prefix", c.Kafka.TopicPrefix)
	}
	if c.Kafka.ReplicationFactor < 1 {
		return fmt.Errorf("kafka.replication_factor: %d must be at least 1", c.Kafka.ReplicationFactor)
	}
	if c.Kafka.ManifestPartitions < 1 {
		return fmt.Errorf("kafka.manifest_partitions: %d must be at least 1", c.Kafka.ManifestPartitions)
	}
	if c.Tailer.BatchSize < 1 || c.Tailer.BatchSize > 100000 {
		return fmt.Errorf("tailer.batch_size: %d must be between 1 and 100000", c.Tailer.BatchSize)
	}
	if c.Tailer.PollInterval.Duration <= 0 {
		return fmt.Errorf("tailer.poll_interval: %s must be positive", c.Tailer.PollInterval)
	}
	if c.Tailer.HeartbeatInterval.Duration <= 0 {
		return fmt.Errorf("tailer.heartbeat_interval: %s must be positive", c.Tailer.HeartbeatInterval)
	}
	if _, err := c.Tailer.StartPosition(); err != nil {
		return err
	}
	if err := c.validateApplier(); err != nil {
		return err
	}
	if c.Tailer.TransactionalID == "" {
		c.Tailer.TransactionalID = "hivedr-tailer-" + c.Source.Name
	}
	for i := range c.Replication.Databases {
		if err := c.Replication.Databases[i].compile(fmt.Sprintf("replication.databases[%d]", i)); err != nil {
			return err
		}
	}
	if len(c.Replication.SourceRoots) == 0 {
		return errors.New("replication.source_roots: at least one root is required (files elsewhere are refused)")
	}
	if err := c.Replication.compile(); err != nil {
		return err
	}
	if err := c.validateCopyd(); err != nil {
		return err
	}
	return nil
}

func (d *DatabasePolicy) compile(key string) error {
	if d.Name == "" {
		return fmt.Errorf("%s.name: must not be empty", key)
	}
	d.Name = strings.ToLower(d.Name)
	if _, err := path.Match(d.Name, ""); err != nil {
		return fmt.Errorf("%s.name: %q is not a valid pattern: %w", key, d.Name, err)
	}
	var err error
	if d.include, err = compileAll(key+".include_tables", d.IncludeTables); err != nil {
		return err
	}
	if d.exclude, err = compileAll(key+".exclude_tables", d.ExcludeTables); err != nil {
		return err
	}
	if d.RPO.Duration == 0 {
		d.RPO.Duration = 5 * time.Minute
	}
	if d.RPO.Duration < 0 {
		return fmt.Errorf("%s.rpo: %s must be positive", key, d.RPO)
	}
	return nil
}

func compileAll(key string, exprs []string) ([]*regexp.Regexp, error) {
	var out []*regexp.Regexp
	for i, e := range exprs {
		// Anchor the whole name: "fact_.*" must not match "old_fact_x".
		re, err := regexp.Compile("^(?:" + e + ")$")
		if err != nil {
			return nil, fmt.Errorf("%s[%d]: %q is not a valid regular expression: %w", key, i, e, err)
		}
		out = append(out, re)
	}
	return out, nil
}

func (c *Config) validateCopyd() error {
	d := &c.Copyd
	if d.Group == "" {
		return errors.New("copyd.group: must not be empty")
	}
	if d.Instance == "" {
		h, err := os.Hostname()
		if err != nil || h == "" {
			return errors.New("copyd.instance: not set and the host name is unknown")
		}
		d.Instance = h
	}
	if d.Workers < 1 || d.Workers > 1024 {
		return fmt.Errorf("copyd.workers: %d must be between 1 and 1024", d.Workers)
	}
	if d.MaxBatch == 0 {
		d.MaxBatch = 4 * d.Workers
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
	if len(d.TargetRoots) == 0 {
		for _, m := range c.Replication.PathMappings {
			d.TargetRoots = append(d.TargetRoots, m.Target)
		}
	}
	for i, r := range d.TargetRoots {
		if _, err := location.Parse(r); err != nil {
			return fmt.Errorf("copyd.target_roots[%d]: %w", i, err)
		}
	}
	for i, r := range d.CMRoots {
		if _, err := location.Parse(r); err != nil {
			return fmt.Errorf("copyd.cm_roots[%d]: %w", i, err)
		}
	}
	return nil
}

// StartPosition parses StartEventID: -1 for latest, 0 for earliest (the
// first event published is the log's first), or N.
func (t Tailer) StartPosition() (int64, error) {
	switch t.StartEventID {
	case "", "latest":
		return -1, nil
	case "earliest":
		return 0, nil
	}
	n, err := strconv.ParseInt(t.StartEventID, 10, 64)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("tailer.start_event_id: %q is not latest, earliest or an event ID", t.StartEventID)
	}
	return n, nil
}
