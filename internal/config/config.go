// Package config is hivedr's YAML configuration: where the source and DR
// systems are, which databases and tables replicate, how source paths map
// to DR paths, and each role's tuning.
//
// There are two ways to configure hivedr, never mixed:
//
//   - No file (Load("")): every value, addresses included, is the local
//     stack's that `make stack-up` starts (Default), so `hivedr <command>`
//     works on a fresh demo machine.
//   - A file: tuning keys (batch sizes, intervals, groups, workers, metrics
//     addresses) keep their defaults, but nothing that names a system does.
//     A section or address the file omits is left empty, and each command
//     calls Require with what it reads, so a production file that forgets
//     schema_registry fails at start naming it instead of using
//     127.0.0.1.
//
// Each section type owns its defaults (its defaultX function: what a file
// that omits a key gets), the defaults derived from other values
// (EnsureDefaults) and its checks (Validate). Together the defaultX
// functions are the one table of defaults (fileDefaults): the roles keep
// none of their own, and fill a field their caller left zero from it
// (FillZero). Errors name the offending key path, e.g.
// `replication.databases[1].include_tables[0]`, and YAML errors the line
// too.
//
// docs/config-reference.md, the reference of every key, is generated from
// the structs' doc comments and the table of defaults (`go generate
// ./internal/config`; Reference), and TestConfigDocGenerated keeps it so.
//
// Replication also answers the policy questions the roles ask: which
// database and table are in scope (Scope, TableIncluded, Replicated),
// whether a source file lies under the source roots (CheckSourceRoot),
// where it goes on the DR (MapPath, MapLocation), and a database's RPO.
// MaskedYAML prints the configuration in effect with its secrets masked
// (`hivedr config check`).
package config

import (
	"errors"
	"fmt"
	"net"
	"os"
	"path"
	"regexp"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/hivedr/hivedr/internal/fs"
	"github.com/hivedr/hivedr/internal/hms"
	"github.com/hivedr/hivedr/internal/krb"
	"github.com/hivedr/hivedr/internal/location"
)

// Config is the whole configuration file.
type Config struct {
	// Source is the primary site's metastore.
	Source Source `yaml:"source"`
	// Kafka is the cluster that carries the topics.
	Kafka Kafka `yaml:"kafka"`
	// SchemaRegistry is the Confluent-compatible schema registry: its URL,
	// or a mapping with basic auth and TLS.
	SchemaRegistry SchemaRegistry `yaml:"schema_registry"`
	// Tailer tunes `hivedr tail`.
	Tailer Tailer `yaml:"tailer"`
	// Replication is the policy: what replicates and where files go.
	Replication Replication `yaml:"replication"`
	// Site names the DR site the top-level applier, copyd and replication
	// sections describe; its topics keep their names without a site part.
	// Default dr.
	Site string `yaml:"site"`
	// Sites are further DR sites reading the same topics (fan-out), each
	// with its own groups, DR metastore, scope and path mappings; a role
	// or tool serves one with -site NAME (docs/fan-out.md).
	Sites []Site `yaml:"sites"`
	// Copyd tunes `hivedr copyd`.
	Copyd Copyd `yaml:"copyd"`
	// Applier tunes `hivedr apply`.
	Applier Applier `yaml:"applier"`
	// Filesystems are the stores copyd reads and writes (see fs.Config).
	Filesystems fs.Config `yaml:"filesystems"`
	// Kerberos is the principal the command authenticates as to kerberized
	// metastores (source.metastore_principal, applier.metastore_principal)
	// and HDFS clusters (filesystems.hdfs[].namenode_principal). Each role
	// has its own principal: give each its own file, or write
	// principal: ${HIVEDR_PRINCIPAL} and set the variable per process.
	Kerberos krb.Config `yaml:"kerberos"`

	site  string          // the further site ForSite chose; "" for the top-level one
	top   *Config         // the configuration ForSite made this one from
	file  string          // the file loaded; "" for the local stack's defaults
	given map[string]bool // the top-level keys the file gives (not null)
	kc    *krb.Client     // the logged-in principal (SetKerberos)
}

// SetKerberos gives the configuration the principal the command logged in
// as (krb.Login with c.Kerberos), for the metastore options and the
// filesystems.
func (c *Config) SetKerberos(kc *krb.Client) {
	c.kc = kc
	c.Filesystems.Kerberos = kc
}

// KerberosClient is the principal SetKerberos gave; nil without one.
func (c *Config) KerberosClient() *krb.Client { return c.kc }

// SourceMetastoreOptions returns hms.Options for the source metastore:
// SASL GSSAPI as the logged-in principal when source.metastore_principal
// is set, over TLS when source.metastore_tls is on.
func (c *Config) SourceMetastoreOptions() hms.Options {
	return metastoreOptions(c.kc, c.Source.MetastorePrincipal, "source.metastore_principal", c.Source.MetastoreTLS, "source.metastore_tls")
}

// DRMetastoreOptions returns hms.Options for the DR metastore, as
// SourceMetastoreOptions does with applier.metastore_principal and
// applier.metastore_tls.
func (c *Config) DRMetastoreOptions() hms.Options {
	return metastoreOptions(c.kc, c.Applier.MetastorePrincipal, "applier.metastore_principal", c.Applier.MetastoreTLS, "applier.metastore_tls")
}

// metastoreOptions are the options of a metastore whose principal is
// principal, held by the configuration key key, reached with the TLS
// settings t of the key tlsKey. The TLS files are read now; an error
// reading them is left for Dial to return.
func metastoreOptions(kc *krb.Client, principal, key string, t TLS, tlsKey string) hms.Options {
	o := hms.Options{PrincipalKey: key, TLSKey: tlsKey}
	o.TLS, o.TLSError = t.ClientConfig(tlsKey)
	if principal != "" && kc != nil {
		o.Kerberos, o.Principal = kc, principal
	}
	return o
}

// checkKerberos checks that every service principal given has a client
// principal to authenticate with.
func (c *Config) checkKerberos() error {
	if err := c.Kerberos.Validate(); err != nil {
		return fmt.Errorf("kerberos.%w", err)
	}
	if c.Kerberos.Enabled() {
		return nil
	}
	need := func(key, v string) error {
		if v == "" {
			return nil
		}
		return fmt.Errorf("%s: %s needs kerberos.principal and kerberos.keytab (hivedr's own principal)", key, v)
	}
	if err := need("source.metastore_principal", c.Source.MetastorePrincipal); err != nil {
		return err
	}
	if err := need("applier.metastore_principal", c.Applier.MetastorePrincipal); err != nil {
		return err
	}
	for i, h := range c.Filesystems.HDFS {
		if err := need(fmt.Sprintf("filesystems.hdfs[%d].namenode_principal", i), h.NameNodePrincipal); err != nil {
			return err
		}
	}
	return nil
}

// Section is a part of the configuration that a command reads and that a
// configuration file must give, having no default there: a top-level
// section, or one address in one (SectionDRMetastore).
type Section string

// The sections commands need (Require).
const (
	// SectionSource is source, with the address its kind reads:
	// source.metastore (thrift) or source.postgres_dsn (postgres).
	SectionSource Section = "source"
	// SectionKafka is kafka, with kafka.brokers.
	SectionKafka Section = "kafka"
	// SectionSchemaRegistry is schema_registry.
	SectionSchemaRegistry Section = "schema_registry"
	// SectionReplication is replication, with replication.source_roots.
	SectionReplication Section = "replication"
	// SectionFilesystems is filesystems, with at least one filesystem.
	SectionFilesystems Section = "filesystems"
	// SectionDRMetastore is applier.metastore, the DR metastore.
	SectionDRMetastore Section = "applier.metastore"
)

// Source says how to read the source notification log.
type Source struct {
	// Name identifies the source in records and in the tailer's
	// transactional ID. Default "primary".
	Name string `yaml:"name"`
	// Kind is "thrift" (get_next_notification; the default) or "postgres"
	// (NOTIFICATION_LOG read directly from the metastore's database).
	Kind string `yaml:"kind"`
	// Metastore is the source metastore's Thrift address, host:port.
	// Required with kind thrift by the commands that read the source.
	Metastore string `yaml:"metastore"`
	// PostgresDSN is the metastore database, required with kind postgres.
	PostgresDSN string `yaml:"postgres_dsn"`
	// MetastorePrincipal is the source metastore's Kerberos principal
	// (metastore.kerberos.principal, e.g. hive/_HOST@REALM; _HOST becomes
	// the metastore's host). Set, hivedr speaks SASL GSSAPI to it as
	// kerberos.principal, at the strongest QOP the metastore offers (its
	// hadoop.rpc.protection: auth, auth-int, or auth-conf under privacy,
	// every Thrift message then encrypted); empty, plain Thrift.
	MetastorePrincipal string `yaml:"metastore_principal"`
	// MetastoreTLS reaches the source metastore over TLS, for one that
	// serves its Thrift port so (metastore.use.SSL=true, its certificate
	// in metastore.keystore.path): ca_file is the CA that signed that
	// certificate; server_name the name it carries, when not the host of
	// source.metastore. With metastore_principal too, SASL runs inside
	// TLS at QOP auth, as Hive sets it under TLS. Off by default.
	MetastoreTLS TLS `yaml:"metastore_tls"`
}

// Kinds of Source.
const (
	SourceThrift   = "thrift"
	SourcePostgres = "postgres"
)

func defaultSource() Source { return Source{Name: "primary", Kind: SourceThrift} }

// Validate checks s, naming the key at fault. It requires no address:
// Config.Require does, for the commands that read the source.
func (s Source) Validate() error {
	if s.Name == "" {
		return errors.New("source.name: must not be empty")
	}
	switch s.Kind {
	case SourceThrift, SourcePostgres:
	default:
		return fmt.Errorf("source.kind: %q is not %s or %s", s.Kind, SourceThrift, SourcePostgres)
	}
	if err := s.MetastoreTLS.Validate("source.metastore_tls"); err != nil {
		return err
	}
	return checkHostPort("source.metastore", s.Metastore)
}

// address returns the key of the address s's kind reads, and its value.
func (s Source) address() (key, value string) {
	if s.Kind == SourcePostgres {
		return "source.postgres_dsn", s.PostgresDSN
	}
	return "source.metastore", s.Metastore
}

// Kafka names the cluster and the topics.
type Kafka struct {
	// Brokers are the seed brokers, host:port.
	Brokers []string `yaml:"brokers"`
	// TopicPrefix starts every topic name: <prefix>.events.<db>,
	// <prefix>.manifests, <prefix>.completions, <prefix>.tailer.checkpoints.
	// Default "hivedr".
	TopicPrefix string `yaml:"topic_prefix"`
	// ReplicationFactor of the topics hivedr creates. Default 3 in a
	// configuration file; the local stack's defaults use 1, its single
	// broker. The topics are created with min.insync.replicas 2 (1 with
	// a single replica), so an acknowledged write survives losing a
	// broker. Topics that exist are left as they are.
	ReplicationFactor int16 `yaml:"replication_factor"`
	// ManifestPartitions is the partition count of <prefix>.manifests, the
	// most copy daemons that can share the work. Default 12.
	ManifestPartitions int32 `yaml:"manifest_partitions"`
	// Retention of event and manifest topics; it bounds how far back ops can
	// re-drive. Default 168h (7 days); 0 leaves the broker's default.
	Retention Duration `yaml:"retention"`
	// MaxMessageBytes is the largest record batch the topics hivedr
	// creates take (their max.message.bytes, set at creation) and the
	// largest the tailer produces. A record larger than it halts its
	// database only. Default 16 MiB; the broker's own default is 1 MiB.
	MaxMessageBytes int32 `yaml:"max_message_bytes"`
	// PrecreatedTopics says the topics are made by someone else (a
	// platform team, Strimzi's KafkaTopic resources): hivedr then never
	// creates a topic; a role whose topic is missing reports it, naming it
	// and the layout it needs (partitions, settings), and tries again
	// until it exists (the tailer for a new database's events topic; a
	// daemon at start gives up after its start budget). Default false:
	// hivedr creates the topics it needs, and leaves existing ones as
	// they are.
	PrecreatedTopics bool `yaml:"precreated_topics"`
	// SASL authenticates every client hivedr makes; none by default.
	SASL SASL `yaml:"sasl"`
	// TLS encrypts every connection to the brokers; off by default.
	TLS TLS `yaml:"tls"`
}

// Security names the listener protocol k's settings speak (PLAINTEXT,
// SSL, SASL_PLAINTEXT, SASL_SSL) and who it authenticates as, for logs
// and errors: "SASL_SSL as SCRAM-SHA-512 user \"tailer\"".
func (k Kafka) Security() string {
	proto := "PLAINTEXT"
	switch {
	case k.SASL.Mechanism != "" && k.TLS.On():
		proto = "SASL_SSL"
	case k.SASL.Mechanism != "":
		proto = "SASL_PLAINTEXT"
	case k.TLS.On():
		proto = "SSL"
	}
	if k.SASL.Mechanism == "" {
		if k.TLS.CertFile != "" {
			return proto + " as the client certificate " + k.TLS.CertFile
		}
		return proto + " (anonymous)"
	}
	return proto + " as " + k.SASL.Principal()
}

// Defaults of the kafka section in a configuration file.
const (
	DefaultReplicationFactor  int16 = 3
	DefaultManifestPartitions int32 = 12
	DefaultMaxMessageBytes    int32 = 16 << 20
)

func defaultKafka() Kafka {
	return Kafka{TopicPrefix: "hivedr", ReplicationFactor: DefaultReplicationFactor, ManifestPartitions: DefaultManifestPartitions,
		Retention: Duration{168 * time.Hour}, MaxMessageBytes: DefaultMaxMessageBytes}
}

// Validate checks k, naming the key at fault. It requires no broker:
// Config.Require does.
func (k Kafka) Validate() error {
	for i, b := range k.Brokers {
		if !isHostPort(b) {
			return fmt.Errorf("kafka.brokers[%d]: %q is not host:port", i, b)
		}
	}
	if k.TopicPrefix == "" || strings.ContainsAny(k.TopicPrefix, " /\\") {
		return fmt.Errorf("kafka.topic_prefix: %q is not a valid topic name prefix", k.TopicPrefix)
	}
	if k.ReplicationFactor < 1 {
		return fmt.Errorf("kafka.replication_factor: %d must be at least 1", k.ReplicationFactor)
	}
	if k.ManifestPartitions < 1 {
		return fmt.Errorf("kafka.manifest_partitions: %d must be at least 1", k.ManifestPartitions)
	}
	if k.Retention.Duration < 0 {
		return fmt.Errorf("kafka.retention: %s must not be negative", k.Retention)
	}
	if k.MaxMessageBytes < 64<<10 {
		return fmt.Errorf("kafka.max_message_bytes: %d must be at least 65536", k.MaxMessageBytes)
	}
	if err := k.SASL.Validate("kafka.sasl"); err != nil {
		return err
	}
	return k.TLS.Validate("kafka.tls")
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
	// HeartbeatRate bounds the heartbeat records a second over all the
	// in-scope databases: while more databases are in scope than
	// heartbeat_rate x heartbeat_interval, each database's heartbeats go
	// every few heartbeat_intervals instead of every one (staggered), but
	// never more than a tenth of the database's rpo apart. 0: every
	// database every heartbeat_interval. Default 100.
	HeartbeatRate int `yaml:"heartbeat_rate"`
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
	// ListRetryFor bounds how long the tailer retries listing an external
	// table's directory whose store fails (every database waits
	// meanwhile); then the event carries LISTING_FAILED and the applier
	// halts that database alone. Default 30s.
	ListRetryFor Duration `yaml:"list_retry_for"`
	// ChainBrokenLinger is how long a tailer stopped on CHAIN_BROKEN keeps
	// serving /metrics, /healthz and /readyz before it exits 3, so that
	// Prometheus scrapes hivedr_tailer_state{state="CHAIN_BROKEN"} (at
	// least two scrape intervals; a SIGTERM ends it at once). 0 exits at
	// once. Default 60s.
	ChainBrokenLinger Duration `yaml:"chain_broken_linger"`
	// BootstrapPage is the most partition records one bootstrap
	// transaction publishes (a page of the snapshot). Default 1000.
	BootstrapPage int `yaml:"bootstrap_page"`
	// BootstrapConcurrency is the most databases whose snapshots are
	// published at once; the others wait their turn. Default 4.
	BootstrapConcurrency int `yaml:"bootstrap_concurrency"`
	// BootstrapOpenTxnWait bounds how long a bootstrap waits for the
	// write IDs open on a transactional table to end before it publishes
	// the table with them marked open (the applier makes them aborted on
	// DR). The bootstrap retries the table meanwhile; nothing else waits.
	// Default 10m; 0 publishes at once.
	BootstrapOpenTxnWait Duration `yaml:"bootstrap_open_txn_wait"`
	// StallAfter is how long the tailer's main loop may go without going
	// round (hivedr_tailer_loop_timestamp_seconds) before /healthz fails
	// and a liveness probe restarts the daemon: a loop blocked for good (a
	// call with no deadline, a deadlock). A loop that fails and retries
	// still goes round. Default 10m; 0 disables the check.
	StallAfter Duration `yaml:"stall_after"`
	// CDC is the change view: the tailer also writes each replicated
	// database's objects' changes, in Debezium's shape and keyed by
	// object, to a compacted topic <prefix>.cdc.<db>, for Flink, Kafka
	// Connect and other consumers (docs/change-topics.md). Off by
	// default.
	CDC CDC `yaml:"cdc"`
}

// CDC configures the change view (tailer.cdc).
type CDC struct {
	// Enabled turns the change view on. It reads the event topics and
	// writes its own in Kafka transactions of its own; a failure there
	// stops only the view, never the tailer. Default false.
	Enabled bool `yaml:"enabled"`
	// TopicConfigs are more Kafka topic configs for the view's topics
	// when the tailer creates them (they are created compacted, one
	// partition each), e.g. segment.ms, min.cleanable.dirty.ratio,
	// delete.retention.ms. cleanup.policy, if given, must include
	// compact.
	TopicConfigs map[string]string `yaml:"topic_configs"`
}

// DefaultStallAfter is tailer.stall_after's, copyd.stall_after's and
// applier.stall_after's default: far longer than any one round of a main
// loop (a batch of events, a snapshot page, a Kafka transaction, all
// bounded by their calls' timeouts), so only a loop that is stuck fails
// it.
const DefaultStallAfter = 10 * time.Minute

// CheckStallAfter checks a stall_after key's value.
func CheckStallAfter(key string, d time.Duration) error {
	if d < 0 {
		return fmt.Errorf("%s: %s must not be negative (0 disables the check)", key, d)
	}
	return nil
}

// DefaultBootstrapOpenTxnWait is Tailer.BootstrapOpenTxnWait's default.
const DefaultBootstrapOpenTxnWait = 10 * time.Minute

// DefaultListRetryFor is Tailer.ListRetryFor's default.
const DefaultListRetryFor = 30 * time.Second

// DefaultChainBrokenLinger is Tailer.ChainBrokenLinger's default: two
// scrape intervals of 30 s.
const DefaultChainBrokenLinger = 60 * time.Second

func defaultTailer() Tailer {
	return Tailer{BatchSize: 1000, PollInterval: Duration{time.Second}, HeartbeatInterval: Duration{5 * time.Second}, HeartbeatRate: 100,
		StartEventID: "latest", MetricsAddr: "127.0.0.1:" + TailerMetricsPort, ListRetryFor: Duration{DefaultListRetryFor},
		ChainBrokenLinger: Duration{DefaultChainBrokenLinger}, BootstrapPage: 1000, BootstrapConcurrency: 4,
		BootstrapOpenTxnWait: Duration{DefaultBootstrapOpenTxnWait}, StallAfter: Duration{DefaultStallAfter}}
}

// EnsureDefaults fills TransactionalID from the source's name.
func (t *Tailer) EnsureDefaults(source string) {
	if t.TransactionalID == "" && source != "" {
		t.TransactionalID = "hivedr-tailer-" + source
	}
}

// Validate checks t, naming the key at fault.
func (t Tailer) Validate() error {
	if t.BatchSize < 1 || t.BatchSize > 100000 {
		return fmt.Errorf("tailer.batch_size: %d must be between 1 and 100000", t.BatchSize)
	}
	if t.PollInterval.Duration <= 0 {
		return fmt.Errorf("tailer.poll_interval: %s must be positive", t.PollInterval)
	}
	if t.HeartbeatInterval.Duration <= 0 {
		return fmt.Errorf("tailer.heartbeat_interval: %s must be positive", t.HeartbeatInterval)
	}
	if t.HeartbeatRate < 0 {
		return fmt.Errorf("tailer.heartbeat_rate: %d must not be negative", t.HeartbeatRate)
	}
	if t.ListRetryFor.Duration < 0 {
		return fmt.Errorf("tailer.list_retry_for: %s must not be negative", t.ListRetryFor)
	}
	if t.ChainBrokenLinger.Duration < 0 {
		return fmt.Errorf("tailer.chain_broken_linger: %s must not be negative", t.ChainBrokenLinger)
	}
	if p, ok := t.CDC.TopicConfigs["cleanup.policy"]; ok && !strings.Contains(p, "compact") {
		return fmt.Errorf("tailer.cdc.topic_configs: cleanup.policy %q must include compact (the view keeps each object's latest record)", p)
	}
	if t.BootstrapPage < 1 || t.BootstrapPage > 100000 {
		return fmt.Errorf("tailer.bootstrap_page: %d must be between 1 and 100000", t.BootstrapPage)
	}
	if t.BootstrapConcurrency < 1 || t.BootstrapConcurrency > 64 {
		return fmt.Errorf("tailer.bootstrap_concurrency: %d must be between 1 and 64", t.BootstrapConcurrency)
	}
	if t.BootstrapOpenTxnWait.Duration < 0 {
		return fmt.Errorf("tailer.bootstrap_open_txn_wait: %s must not be negative", t.BootstrapOpenTxnWait)
	}
	if err := CheckStallAfter("tailer.stall_after", t.StallAfter.Duration); err != nil {
		return err
	}
	if t.TransactionalID == "" {
		return errors.New("tailer.transactional_id: must not be empty")
	}
	_, err := t.StartPosition()
	return err
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

// Replication is the replication policy.
type Replication struct {
	// Databases in scope. Empty means every database.
	Databases []DatabasePolicy `yaml:"databases"`
	// PathMappings rewrite source locations into DR locations, longest
	// source prefix first.
	PathMappings []PathMapping `yaml:"path_mappings"`
	// SourceRoots are the only source locations files may come from; a file
	// elsewhere is an error on its event, never a copy task. Required by
	// the commands that read the policy.
	SourceRoots []string `yaml:"source_roots"`

	roots    []location.Location
	mappings []mapping
	scope    *scopeIndex
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
	// Bootstrap is manual (the default: copying an existing warehouse is
	// an operator's decision, `hivedr bootstrap`) or auto: the tailer
	// bootstraps a database of the scope it has never published (a new
	// database in the policy) and one it started over without a
	// checkpoint (a discontinuity) by itself.
	Bootstrap string `yaml:"bootstrap"`
	// ExternalData is with_data (the default: a bootstrap copies the
	// files of external tables too) or metadata_only. Managed tables'
	// and Iceberg tables' files are always copied.
	ExternalData string `yaml:"external_data"`

	include, exclude []*regexp.Regexp
}

// The values of DatabasePolicy.Bootstrap and ExternalData.
const (
	BootstrapManual = "manual"
	BootstrapAuto   = "auto"
	WithData        = "with_data"
	MetadataOnly    = "metadata_only"
)

// AutoBootstrap reports whether the tailer bootstraps the database by
// itself (bootstrap: auto).
func (d *DatabasePolicy) AutoBootstrap() bool { return d.Bootstrap == BootstrapAuto }

// ExternalWithData reports whether a bootstrap copies external tables'
// files (external_data: with_data, the default).
func (d *DatabasePolicy) ExternalWithData() bool { return d.ExternalData != MetadataOnly }

// DefaultRPO is DatabasePolicy.RPO's default.
const DefaultRPO = 5 * time.Minute

// PathMapping maps a source location prefix to a DR one.
type PathMapping struct {
	// Source is a source location prefix, e.g. hdfs://prod-nn:8020/.
	Source string `yaml:"source"`
	// Target is the DR location prefix that replaces it, e.g.
	// hdfs://dr-nn:8020/.
	Target string `yaml:"target"`
}

// EnsureDefaults fills each database's RPO, bootstrap and external_data.
func (r *Replication) EnsureDefaults() {
	for i := range r.Databases {
		if r.Databases[i].RPO.Duration == 0 {
			r.Databases[i].RPO.Duration = DefaultRPO
		}
		if r.Databases[i].Bootstrap == "" {
			r.Databases[i].Bootstrap = BootstrapManual
		}
		if r.Databases[i].ExternalData == "" {
			r.Databases[i].ExternalData = WithData
		}
	}
}

// Validate checks and compiles the policy (patterns, roots, mappings),
// naming the key at fault. It requires no source root: Config.Require
// does.
func (r *Replication) Validate() error {
	for i := range r.Databases {
		if err := r.Databases[i].compile(fmt.Sprintf("replication.databases[%d]", i)); err != nil {
			return err
		}
	}
	return r.compile()
}

// Duration is a time.Duration written as "5s", "2m" in YAML.
type Duration struct{ time.Duration }

// UnmarshalYAML parses a Go duration string.
func (d *Duration) UnmarshalYAML(n *yaml.Node) error {
	v, err := time.ParseDuration(n.Value)
	if err != nil || n.Kind != yaml.ScalarNode {
		return fmt.Errorf("line %d: %q is not a duration like 5s or 2m", n.Line, n.Value)
	}
	d.Duration = v
	return nil
}

// MarshalYAML writes the duration as a string, without zero minutes and
// seconds after larger units: 168h, 2m, 1m30s.
func (d Duration) MarshalYAML() (any, error) {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s, nil
}

// Local-stack defaults (e2e/stack/lib.sh keeps the same ports).
const (
	localKafka    = "127.0.0.1:19092"
	localHMSSrc   = "127.0.0.1:19083"
	localHMSDR    = "127.0.0.1:29083"
	localRegistry = "http://127.0.0.1:18081"
	localPGSrc    = "postgres://hive:hive@127.0.0.1:15432/metastore_src?sslmode=disable"
	localHDFSSrc  = "hdfs://127.0.0.1:18020"
	localHDFSDR   = "hdfs://127.0.0.1:28020"
	localS3       = "http://127.0.0.1:19000"
)

// The roles' metrics ports: their default metrics_addr listens on
// 127.0.0.1 at these, and the container image, the Helm chart and the
// compose files expose the same (TestMetricsPortsAgree).
const (
	TailerMetricsPort  = "9464"
	CopydMetricsPort   = "9465"
	ApplierMetricsPort = "9466"
)

// LocalStack summarises the addresses of the local stack's defaults, for
// the line every command prints when it runs without a file.
const LocalStack = "Kafka " + localKafka + ", schema registry " + localRegistry +
	", metastores " + localHMSSrc + " -> " + localHMSDR + ", HDFS " + localHDFSSrc + " -> " + localHDFSDR + ", S3 " + localS3

// fileDefaults is the configuration a file starts from: every tuning
// key's default, no address.
func fileDefaults() *Config {
	return &Config{Source: defaultSource(), Kafka: defaultKafka(), Tailer: defaultTailer(), Copyd: defaultCopyd(),
		Applier: defaultApplier()}
}

// Default returns the configuration for the local stack: the file
// defaults with the local stack's addresses, policy and filesystems, and
// kafka.replication_factor 1 for its single broker.
func Default() *Config {
	c := fileDefaults()
	c.Source.Metastore, c.Source.PostgresDSN = localHMSSrc, localPGSrc
	c.Kafka.Brokers = []string{localKafka}
	c.Kafka.ReplicationFactor = 1
	c.SchemaRegistry = SchemaRegistry{URL: localRegistry}
	c.Copyd.CMRoots = []string{localHDFSSrc + "/cmroot/"}
	c.Applier.Metastore = localHMSDR
	c.Filesystems = fs.Config{
		HDFS: []fs.HDFSConfig{
			{NameNodes: []string{"127.0.0.1:18020"}, WebHDFS: "127.0.0.1:18070", User: "hivedr"},
			{NameNodes: []string{"127.0.0.1:28020"}, WebHDFS: "127.0.0.1:28070", User: "hivedr"},
		},
		S3: []fs.S3Config{{Endpoint: localS3, Region: "us-east-1", AccessKey: "hivedr", SecretKey: "hivedr-secret-key", PathStyle: true}},
	}
	c.Replication = Replication{
		PathMappings: []PathMapping{{Source: localHDFSSrc + "/", Target: localHDFSDR + "/"}},
		SourceRoots:  []string{localHDFSSrc + "/warehouse/", localHDFSSrc + "/external/"},
	}
	return c
}

// Load reads the configuration file at p over the file defaults and
// validates it; p == "" gives the local stack's defaults (Default).
// Unknown keys are errors, so a typo cannot silently change the policy.
// A command then calls Require with the sections it reads.
func Load(p string) (*Config, error) {
	if p == "" {
		c := Default()
		if err := c.Validate(); err != nil {
			return nil, fmt.Errorf("config: %w", err)
		}
		return c, nil
	}
	b, err := os.ReadFile(p)
	if err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	c, err := parse(b, osLookup)
	if err != nil {
		return nil, fmt.Errorf("config %s: %w", p, err)
	}
	c.file = p
	return c, nil
}

// parse is Load's work on a file's text: ${NAME} expanded with lookup,
// decoded over the file defaults, validated.
func parse(b []byte, lookup func(string) (string, bool)) (*Config, error) {
	c := fileDefaults()
	var err error
	if c.given, err = decode(b, c, lookup); err != nil {
		return nil, err
	}
	if err := c.Validate(); err != nil {
		return nil, err
	}
	return c, nil
}

// File is the file c was loaded from; "" when c is the local stack's
// defaults (or was built in code).
func (c *Config) File() string { return c.file }

// EnsureDefaults fills the values whose defaults derive from other values
// or from the host: the tailer's transactional ID, copyd's target roots,
// instances and window, the databases' RPOs, the S3 endpoints' defaults.
// Validate calls it.
func (c *Config) EnsureDefaults() {
	c.Tailer.EnsureDefaults(c.Source.Name)
	c.Kafka.SASL.EnsureDefaults()
	c.Kafka.TLS.Enabled = c.Kafka.TLS.On() // printed as in effect
	c.Source.MetastoreTLS.Enabled = c.Source.MetastoreTLS.On()
	c.Applier.MetastoreTLS.Enabled = c.Applier.MetastoreTLS.On()
	c.Replication.EnsureDefaults()
	c.Copyd.EnsureDefaults(c.Replication.PathMappings)
	c.Applier.EnsureDefaults()
	c.Filesystems.EnsureDefaults()
	c.ensureSites()
}

// Validate fills derived defaults (EnsureDefaults) and checks every value
// given, naming the key at fault. Load calls it; call it after building or
// changing a Config in code. It requires no section: Require does.
func (c *Config) Validate() error {
	c.EnsureDefaults()
	if err := c.Source.Validate(); err != nil {
		return err
	}
	if err := c.Kafka.Validate(); err != nil {
		return err
	}
	if err := c.SchemaRegistry.Validate(); err != nil {
		return err
	}
	if err := c.Tailer.Validate(); err != nil {
		return err
	}
	if err := c.Replication.Validate(); err != nil {
		return err
	}
	if err := c.Copyd.Validate(); err != nil {
		return err
	}
	if err := c.Applier.Validate(); err != nil {
		return err
	}
	if err := c.Filesystems.Validate(); err != nil {
		return fmt.Errorf("filesystems.%w", err)
	}
	if err := c.validateSites(); err != nil {
		return err
	}
	return c.checkKerberos()
}

// Require returns an error naming every section and address in needs that
// c lacks, on behalf of command (e.g. "hivedr apply"):
//
//	config prod.yaml: schema_registry: required (hivedr apply needs it; ...)
//
// A section the file omits is named whole; one it gives without the
// address is named by that key (kafka.brokers). The local stack's
// defaults lack nothing.
func (c *Config) Require(command string, needs ...Section) error {
	// key is what to name: the section when a file omits it, else k.
	key := func(section, k string) string {
		if c.file != "" && !c.given[section] {
			return section
		}
		return k
	}
	var missing []string
	for _, s := range needs {
		switch s {
		case SectionSource:
			if k, v := c.Source.address(); v == "" {
				missing = append(missing, key("source", k))
			}
		case SectionKafka:
			if len(c.Kafka.Brokers) == 0 {
				missing = append(missing, key("kafka", "kafka.brokers"))
			}
		case SectionSchemaRegistry:
			if c.SchemaRegistry.URL == "" {
				missing = append(missing, "schema_registry")
			}
		case SectionReplication:
			if len(c.Replication.SourceRoots) == 0 {
				missing = append(missing, key("replication", "replication.source_roots"))
			}
		case SectionFilesystems:
			if f := c.Filesystems; !f.Local && len(f.HDFS) == 0 && len(f.S3) == 0 {
				missing = append(missing, "filesystems")
			}
		case SectionDRMetastore:
			if c.Applier.Metastore == "" {
				missing = append(missing, "applier.metastore")
			}
		default:
			return fmt.Errorf("config: %s asks for an unknown section %q", command, s)
		}
	}
	if len(missing) == 0 {
		return nil
	}
	it := "it"
	if len(missing) > 1 {
		it = "them"
	}
	if c.file == "" {
		return fmt.Errorf("config: %s: required (%s needs %s)", strings.Join(missing, ", "), command, it)
	}
	return fmt.Errorf("config %s: %s: required (%s needs %s; only with no config file do the local stack's defaults apply)",
		c.file, strings.Join(missing, ", "), command, it)
}

// checkHostPort checks that a non-empty value is host:port.
func checkHostPort(key, v string) error {
	if v == "" {
		return nil
	}
	if !isHostPort(v) {
		return fmt.Errorf("%s: %q is not host:port", key, v)
	}
	return nil
}

func isHostPort(v string) bool {
	h, p, err := net.SplitHostPort(v)
	return err == nil && h != "" && p != "" && !strings.ContainsAny(h, "/@")
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
	if d.RPO.Duration <= 0 {
		return fmt.Errorf("%s.rpo: %s must be positive", key, d.RPO)
	}
	switch d.Bootstrap {
	case "", BootstrapManual, BootstrapAuto:
	default:
		return fmt.Errorf("%s.bootstrap: %q is not %s or %s", key, d.Bootstrap, BootstrapManual, BootstrapAuto)
	}
	switch d.ExternalData {
	case "", WithData, MetadataOnly:
	default:
		return fmt.Errorf("%s.external_data: %q is not %s or %s", key, d.ExternalData, WithData, MetadataOnly)
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

// checkLocations parses every location of a list key.
func checkLocations(key string, locs []string) error {
	for i, l := range locs {
		if _, err := location.Parse(l); err != nil {
			return fmt.Errorf("%s[%d]: %w", key, i, err)
		}
	}
	return nil
}
