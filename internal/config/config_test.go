package config

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

func write(t *testing.T, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "hivedr.yaml")
	if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestLoadDefaultsAreTheLocalStack(t *testing.T) {
	c, err := Load("")
	if err != nil {
		t.Fatal(err)
	}
	if c.Kafka.Brokers[0] != "127.0.0.1:19092" || c.Source.Metastore != "127.0.0.1:19083" {
		t.Fatalf("defaults do not point at the local stack: %+v", c)
	}
	if c.Kafka.ReplicationFactor != 1 || c.File() != "" || c.Applier.Metastore != "127.0.0.1:29083" {
		t.Fatalf("defaults: replication factor %d, file %q, DR metastore %q", c.Kafka.ReplicationFactor, c.File(), c.Applier.Metastore)
	}
	if c.Tailer.TransactionalID != "hivedr-tailer-primary" {
		t.Fatalf("transactional id = %q", c.Tailer.TransactionalID)
	}
	if _, ok := c.Replication.Scope("anything"); !ok {
		t.Fatal("with no databases configured every database should be in scope")
	}
}

func TestLoadPolicy(t *testing.T) {
	c, err := Load(write(t, `
source: {name: prod}
tailer: {heartbeat_interval: 2s, start_event_id: "42"}
replication:
  databases:
    - name: Finance
      include_tables: ["fact_.*", "dim_.*"]
      exclude_tables: ["fact_tmp.*"]
      rpo: 30s
    - name: "sales_*"
  source_roots: ["hdfs://nn:8020/warehouse"]
  path_mappings:
    - {source: "hdfs://nn:8020/", target: "hdfs://dr:8020/"}
    - {source: "hdfs://nn:8020/warehouse/finance.db", target: "s3://dr-finance/tables"}
`))
	if err != nil {
		t.Fatal(err)
	}
	if got := c.Tailer.HeartbeatInterval.Duration; got != 2*time.Second {
		t.Errorf("heartbeat_interval = %v", got)
	}
	if n, _ := c.Tailer.StartPosition(); n != 42 {
		t.Errorf("start position = %d", n)
	}
	fin, ok := c.Replication.Scope("finance")
	if !ok || fin.RPO.Duration != 30*time.Second {
		t.Fatalf("finance scope = %+v %v", fin, ok)
	}
	for table, want := range map[string]bool{
		"fact_orders": true, "dim_customer": true, "fact_tmp_1": false, "old_fact_x": false, "staging": false,
	} {
		if got := fin.TableIncluded(table); got != want {
			t.Errorf("finance.%s included = %v, want %v", table, got, want)
		}
	}
	if p, ok := c.Replication.Scope("sales_eu"); !ok || !p.TableIncluded("anything") || p.RPO.Duration != 5*time.Minute {
		t.Errorf("sales_eu scope = %+v %v", p, ok)
	}
	if _, ok := c.Replication.Scope("hr"); ok {
		t.Error("hr is in scope but no entry names it")
	}

	for src, want := range map[string]string{
		"hdfs://nn:8020/warehouse/finance.db/t/f0": "s3://dr-finance/tables/t/f0",
		"hdfs://NN:8020/warehouse/sales.db/t/f0":   "hdfs://dr:8020/warehouse/sales.db/t/f0",
	} {
		got, err := c.Replication.MapPath(src)
		if err != nil || got != want {
			t.Errorf("MapPath(%s) = %q, %v; want %q", src, got, err, want)
		}
	}
	if _, err := c.Replication.MapPath("hdfs://other:8020/x"); err == nil {
		t.Error("a location no mapping covers was mapped")
	}

	for uri, ok := range map[string]bool{
		"hdfs://nn:8020/warehouse/a/b":         true,
		"hdfs://nn:8020/warehouse":             true,
		"hdfs://nn:8020/warehousex/a":          false,
		"hdfs://nn:8020/warehouse/../etc/pass": false,
		"hdfs://other:8020/warehouse/a":        false,
		"s3://nn:8020/warehouse/a":             false,
		"/warehouse/a":                         false,
	} {
		_, err := c.Replication.CheckSourceRoot(uri)
		if (err == nil) != ok {
			t.Errorf("CheckSourceRoot(%s) err = %v, want ok=%v", uri, err, ok)
		}
		if err != nil && !strings.Contains(err.Error(), uri) {
			t.Errorf("error %q does not name the path %s", err, uri)
		}
	}

	// MapLocation (the applier's) needs both: under a root and mapped.
	if got, err := c.Replication.MapLocation("hdfs://nn:8020/warehouse/sales.db/t"); err != nil || got != "hdfs://dr:8020/warehouse/sales.db/t" {
		t.Errorf("MapLocation under a root = %q, %v", got, err)
	}
	// Mapped (hdfs://nn:8020/ covers it) but outside the roots: refused, named.
	if got, err := c.Replication.MapLocation("hdfs://nn:8020/elsewhere/t"); err == nil || !strings.Contains(err.Error(), "hdfs://nn:8020/elsewhere/t") {
		t.Errorf("MapLocation outside the roots = %q, %v; want an error naming it", got, err)
	}
}

func TestLoadErrorsNameTheKey(t *testing.T) {
	tests := []struct{ yaml, want string }{
		{"tailer: {batch_size: 0}", "tailer.batch_size"},
		{"tailer: {start_event_id: yesterday}", "tailer.start_event_id"},
		{"source: {kind: mysql}", "source.kind"},
		{"source: {metastore: thrift://h:9083}", `source.metastore: "thrift://h:9083" is not host:port`},
		{"kafka: {brokers: [h]}", `kafka.brokers[0]: "h" is not host:port`},
		{"schema_registry: 127.0.0.1:18081", `schema_registry: "127.0.0.1:18081" is not an http(s) URL`},
		{"applier: {metastore: dr}", `applier.metastore: "dr" is not host:port`},
		{"applier: {batch_partitions: 0}", "applier.batch_partitions: 0 must be between 1 and 10000"},
		{"applier: {batch_partitions: 20000}", "applier.batch_partitions: 20000 must be between 1 and 10000"},
		{"applier: {dr_connections: 0}", "applier.dr_connections: 0 must be between 1 and 1000"},
		{"applier: {session_timeout: 500ms}", "applier.session_timeout: 500ms must be between 1s and 30m"},
		{"copyd: {session_timeout: 1h}", "copyd.session_timeout: 1h0m0s must be between 1s and 30m"},
		{"replication: {databases: [{name: db, include_tables: ['(']}]}", "replication.databases[0].include_tables[0]"},
		{"replication: {databases: [{name: a}, {name: b, rpo: -1s}]}", "replication.databases[1].rpo: -1s must be positive"},
		{"replication: {databases: [{name: a, bootstrap: sometimes}]}", `replication.databases[0].bootstrap: "sometimes" is not manual or auto`},
		{"replication: {databases: [{name: a, external_data: all}]}", `replication.databases[0].external_data: "all" is not with_data or metadata_only`},
		{"tailer: {chain_broken_linger: -1s}", "tailer.chain_broken_linger: -1s must not be negative"},
		{"tailer: {bootstrap_page: 0}", "tailer.bootstrap_page: 0 must be between 1 and 100000"},
		{"tailer: {bootstrap_concurrency: 100}", "tailer.bootstrap_concurrency: 100 must be between 1 and 64"},
		{"tailer: {bootstrap_open_txn_wait: -1s}", "tailer.bootstrap_open_txn_wait: -1s must not be negative"},
		{"tailer: {stall_after: -1s}", "tailer.stall_after: -1s must not be negative"},
		{"copyd: {stall_after: -1m}", "copyd.stall_after: -1m0s must not be negative"},
		{"applier: {stall_after: -5s}", "applier.stall_after: -5s must not be negative"},
		{"replication: {source_roots: ['relative/dir']}", "replication.source_roots[0]"},
		{"replication: {path_mappings: [{source: 'hdfs://a/x/../y', target: 'hdfs://b/'}]}", "replication.path_mappings[0].source"},
		{"copyd: {target_roots: ['hdfs://dr/a/../b']}", "copyd.target_roots[0]"},
		{"kerberos: {keytab: /k}", "kerberos.keytab: set without a principal"},
		{"kerberos: {principal: copyd@R}", "kerberos.keytab: required with principal copyd@R"},
		{"source: {metastore: 'h:9083', metastore_principal: hive/_HOST@R}", "source.metastore_principal: hive/_HOST@R needs kerberos.principal"},
		{"applier: {metastore: 'h:9083', metastore_principal: hive/h@R}", "applier.metastore_principal: hive/h@R needs kerberos.principal"},
		{"filesystems: {hdfs: [{namenodes: ['nn:8020'], webhdfs: 'nn:9870', namenode_principal: nn/_HOST@R}]}", "filesystems.hdfs[0].namenode_principal: nn/_HOST@R needs kerberos.principal"},
		{"kerberos: {principal: c, keytab: /k}\nfilesystems: {hdfs: [{namenodes: ['nn:8020'], webhdfs: 'nn:9870', user: hive, namenode_principal: nn/_HOST@R}]}", `filesystems.hdfs[0].user: "hive" is not used with namenode_principal`},
		{"filesystems: {hdfs: [{namenodes: ['nn:8020'], webhdfs: 'nn:9870', user: hive, http_principal: HTTP/_HOST}]}", "filesystems.hdfs[0].http_principal: set without namenode_principal"},
		{"kerberos: {principal: c, keytab: /k}\nfilesystems: {hdfs: [{namenodes: ['nn:8020'], webhdfs: 'nn:9870', namenode_principal: nn/_HOST@R, data_transfer_protection: auth-conf}]}", `filesystems.hdfs[0].data_transfer_protection: "auth-conf" is not one of authentication, integrity, privacy`},

		// YAML errors: the key path and the line, never Go type names.
		{"replication: {databasez: []}", "replication.databasez: unknown key, did you mean databases? (line 1)"},
		{"kafka:\n  brokers: [k:9092]\n  topic_prefx: x\n", "kafka.topic_prefx: unknown key, did you mean topic_prefix? (line 3)"},
		{"kafak: {}", "kafak: unknown key, did you mean kafka? (line 1)"},
		{"copyd: {frobnicate: 1}", "copyd.frobnicate: unknown key (line 1)"},
		{"copyd:\n  workers: eight\n", `copyd.workers: "eight" is not an integer (line 2)`},
		{"copyd: {workers: 1.5}", `copyd.workers: "1.5" is not an integer (line 1)`},
		{"kafka: {retention: 5}", `kafka.retention: "5" is not a duration like 5s or 2m (line 1)`},
		{`copyd: {workers: "8"}`, `copyd.workers: "8" is quoted, so a string; want an integer: write it without quotes (line 1)`},
		{"kafka: {replication_factor: 70000}", "kafka.replication_factor: 70000 is out of range (line 1)"},
		{"filesystems: {local: maybe}", `filesystems.local: "maybe" is not true or false (line 1)`},
		{"tailer: {poll_interval: soon}", `tailer.poll_interval: "soon" is not a duration like 5s or 2m (line 1)`},
		{"tailer: {poll_interval: [1s]}", "tailer.poll_interval: a list is not a duration like 5s or 2m (line 1)"},
		{"replication:\n  databases:\n    - name: a\n    - name: b\n      rpo: later\n", `replication.databases[1].rpo: "later" is not a duration like 5s or 2m (line 5)`},
		{"replication:\n  databases:\n    - name: a\n    - {name: b, rpo_: 1m}\n", "replication.databases[1].rpo_: unknown key, did you mean rpo? (line 4)"},
		{"kafka: {brokers: 'k:9092'}", `kafka.brokers: "k:9092", want a list (line 1)`},
		{"source: [a]", "source: a list, want a mapping of keys (line 1)"},
		{"source: {name: {first: a}}", "source.name: a mapping, want a string (line 1)"},
		{"kafka: {topic_prefix: a}\nkafka: {topic_prefix: b}\n", "kafka: given twice (first on line 1) (line 2)"},
		{"- a\n- b\n", "the file is a list; want a mapping of sections"},
		{"kafka: {}\n---\ncopyd: {}\n", "line 2: a second YAML document"},
		{"kafka: [", "yaml: line 1"},

		// filesystems are validated with the rest: key paths under filesystems.
		{"filesystems: {hdfs: [{namenodes: ['a:1'], webhdfs: 'a:2', user: u}, {namenodes: ['b:1'], webhdfs: 'b:2'}]}", "filesystems.hdfs[1].user: required"},
		{"filesystems: {hdfs: [{namenodes: [nn]}]}", `filesystems.hdfs[0].namenodes[0]: "nn" is not host:port`},
		{"filesystems: {hdfs: [{namenodes: ['a:1'], webhdfs: 'a:2', user: u}, {authority: 'A:1', namenodes: ['b:1'], webhdfs: 'b:2', user: u}]}", "filesystems.hdfs[1]: authority a:1 is hdfs[0]'s too"},
		{"filesystems: {s3: [{endpoint: 'ftp://x'}]}", `filesystems.s3[0].endpoint: "ftp://x" is not an http(s) URL`},
		{"filesystems: {s3: [{part_size: 1024}]}", "filesystems.s3[0].part_size: 1024 is below S3's minimum"},
		{"filesystems: {s3: [{access_key: a}]}", "filesystems.s3[0].access_key, secret_key (or secret_key_file): give both or neither"},
		{"filesystems: {s3: [{}, {}]}", "filesystems.s3[1].buckets: s3[0] lists none already"},
		{"filesystems: {s3: [{buckets: [a]}, {buckets: [b, A]}]}", "filesystems.s3[1].buckets[1]: bucket a is listed by s3[0] too"},
	}
	for _, tt := range tests {
		p := write(t, tt.yaml)
		_, err := Load(p)
		if err == nil || !strings.Contains(err.Error(), tt.want) || !strings.HasPrefix(err.Error(), "config "+p+": ") {
			t.Errorf("Load(%q) err = %v, want it to name the file and say %q", tt.yaml, err, tt.want)
		}
		if err != nil && strings.Contains(err.Error(), "config.") {
			t.Errorf("Load(%q) err = %v names a Go type", tt.yaml, err)
		}
	}
}

// TestLoadAliasesAndMerges: anchors, aliases and << merges are checked
// like any other key and decoded as yaml.v3 does.
func TestLoadAliasesAndMerges(t *testing.T) {
	c, err := Load(write(t, `
filesystems:
  hdfs:
    - &src {namenodes: ["a:1"], webhdfs: "a:2", user: hive}
    - {<<: *src, namenodes: ["b:1"], webhdfs: "b:2"}
`))
	if err != nil {
		t.Fatal(err)
	}
	if h := c.Filesystems.HDFS; len(h) != 2 || h[1].User != "hive" || h[1].NameNodes[0] != "b:1" {
		t.Fatalf("hdfs = %+v", h)
	}
	_, err = Load(write(t, "filesystems:\n  hdfs:\n    - &src {namenodes: ['a:1'], webhdfs: 'a:2', user: hive}\n    - {<<: *src, usr: x}\n"))
	if err == nil || !strings.Contains(err.Error(), "filesystems.hdfs[1].usr: unknown key, did you mean user? (line 4)") {
		t.Fatalf("merge with a typo: %v", err)
	}
}

// full is a configuration file with every section a command may need.
const full = `
source: {name: prod, kind: thrift, metastore: "hms.prod:9083"}
kafka: {brokers: ["k1.prod:9092", "k2.prod:9092"]}
schema_registry: "https://sr.prod:8081"
applier: {metastore: "hms.dr:9083"}
replication:
  source_roots: ["hdfs://prod/warehouse"]
  path_mappings: [{source: "hdfs://prod/", target: "hdfs://dr/"}]
filesystems:
  hdfs:
    - {namenodes: ["nn.prod:8020"], webhdfs: "nn.prod:9870", user: hive}
    - {namenodes: ["nn.dr:8020"], webhdfs: "nn.dr:9870", user: hive}
`

// TestFileHasNoLocalStackFallback: a file that omits a section gets no
// address of the local stack, anywhere.
func TestFileHasNoLocalStackFallback(t *testing.T) {
	for _, body := range []string{"", "# nothing\n", "copyd: {workers: 2}", "kafka:\nsource:\n", full} {
		c, err := Load(write(t, body))
		if err != nil {
			t.Fatalf("Load(%q): %v", body, err)
		}
		y, err := c.MaskedYAML()
		if err != nil {
			t.Fatal(err)
		}
		for _, local := range []string{"19092", "19083", "29083", "18081", "15432", "18020", "28020", "18070", "19000", "hivedr-secret-key", "cmroot"} {
			if strings.Contains(string(y), local) {
				t.Errorf("Load(%q) has the local stack's %s:\n%s", body, local, y)
			}
		}
	}
}

func TestReplicationFactorDefault(t *testing.T) {
	for body, want := range map[string]int16{
		"":                                 3,
		"kafka: {brokers: ['k:9092']}":     3,
		"kafka: {replication_factor: 1}":   1,
		"kafka: {replication_factor: 2}\n": 2,
	} {
		c, err := Load(write(t, body))
		if err != nil {
			t.Fatal(err)
		}
		if c.Kafka.ReplicationFactor != want {
			t.Errorf("Load(%q): replication_factor = %d, want %d", body, c.Kafka.ReplicationFactor, want)
		}
	}
	c, err := Load("")
	if err != nil {
		t.Fatal(err)
	}
	if c.Kafka.ReplicationFactor != 1 {
		t.Errorf("the local stack's replication_factor = %d, want 1 (one broker)", c.Kafka.ReplicationFactor)
	}
	if _, err := Load(write(t, "kafka: {replication_factor: 0}")); err == nil || !strings.Contains(err.Error(), "kafka.replication_factor: 0 must be at least 1") {
		t.Errorf("replication_factor 0: %v", err)
	}
}

// TestFileTuningDefaults: tuning keys keep their defaults in a file,
// derived ones follow what the file gives, and a zero that means
// something (metrics_addr "", split_size 0, retries 0) is kept.
func TestFileTuningDefaults(t *testing.T) {
	c, err := Load(write(t, full))
	if err != nil {
		t.Fatal(err)
	}
	def := fileDefaults()
	if c.Tailer.BatchSize != def.Tailer.BatchSize || c.Copyd.Workers != DefaultCopydWorkers || c.Copyd.MaxBatch != DefaultMaxBatch(DefaultCopydWorkers) ||
		c.Applier.HaltAfter.Duration != DefaultHaltAfter || c.Applier.LookAhead != DefaultLookAhead || c.Applier.BatchPartitions != DefaultBatchPartitions || c.Kafka.TopicPrefix != "hivedr" ||
		c.Applier.SessionTimeout.Duration != DefaultSessionTimeout || c.Copyd.SessionTimeout.Duration != DefaultSessionTimeout ||
		c.Copyd.Group != "hivedr-copyd" || c.Applier.Group != "hivedr-applier" || c.Tailer.MetricsAddr != "127.0.0.1:9464" ||
		c.Tailer.ChainBrokenLinger.Duration != DefaultChainBrokenLinger {
		t.Errorf("tuning defaults lost: %+v", c)
	}
	if c.Tailer.StallAfter.Duration != DefaultStallAfter || c.Copyd.StallAfter.Duration != DefaultStallAfter || c.Applier.StallAfter.Duration != DefaultStallAfter {
		t.Errorf("stall_after = %s, %s, %s; want %s for every role", c.Tailer.StallAfter, c.Copyd.StallAfter, c.Applier.StallAfter, DefaultStallAfter)
	}
	if c.Tailer.TransactionalID != "hivedr-tailer-prod" {
		t.Errorf("transactional_id = %q, want hivedr-tailer-prod", c.Tailer.TransactionalID)
	}
	if got := strings.Join(c.Copyd.TargetRoots, " "); got != "hdfs://dr/" {
		t.Errorf("target_roots = %q, want the mapping targets", got)
	}
	if h, _ := os.Hostname(); c.Copyd.Instance != h || c.Applier.Instance != h {
		t.Errorf("instances = %q, %q; want the host name %q", c.Copyd.Instance, c.Applier.Instance, h)
	}
	if c.Filesystems.HDFS[1].Authority != "nn.dr:8020" {
		t.Errorf("hdfs[1].authority = %q, want its first NameNode", c.Filesystems.HDFS[1].Authority)
	}

	c, err = Load(write(t, `
tailer: {metrics_addr: "", chain_broken_linger: 0s, stall_after: 0s}
copyd: {workers: 2, split_size: 0, retries: 0, metrics_addr: "", stall_after: 3s}
applier: {metrics_addr: "", stall_after: 0s}
filesystems: {s3: [{endpoint: "https://s3.example"}]}
`))
	if err != nil {
		t.Fatal(err)
	}
	if c.Tailer.MetricsAddr != "" || c.Copyd.MetricsAddr != "" || c.Applier.MetricsAddr != "" {
		t.Errorf("metrics_addr \"\" (disabled) became %q %q %q", c.Tailer.MetricsAddr, c.Copyd.MetricsAddr, c.Applier.MetricsAddr)
	}
	if c.Tailer.ChainBrokenLinger.Duration != 0 {
		t.Errorf("chain_broken_linger 0s (exit at once) became %s", c.Tailer.ChainBrokenLinger)
	}
	if c.Tailer.StallAfter.Duration != 0 || c.Copyd.StallAfter.Duration != 3*time.Second || c.Applier.StallAfter.Duration != 0 {
		t.Errorf("stall_after 0s (disabled), 3s, 0s became %s, %s, %s", c.Tailer.StallAfter, c.Copyd.StallAfter, c.Applier.StallAfter)
	}
	if c.Copyd.SplitSize != 0 || c.Copyd.Retries != 0 || c.Copyd.MaxBatch != 8 {
		t.Errorf("copyd = %+v; want split_size 0, retries 0, max_batch 4 x 2", c.Copyd)
	}
	if s := c.Filesystems.S3[0]; s.Region != "us-east-1" || s.PartSize != 8<<20 || s.PartsInFlight != 2 {
		t.Errorf("s3 defaults not filled: %+v", s)
	}
}

func TestRequire(t *testing.T) {
	all := []Section{SectionSource, SectionKafka, SectionSchemaRegistry, SectionReplication, SectionFilesystems, SectionDRMetastore}
	const why = "; only with no config file do the local stack's defaults apply)"
	tests := []struct {
		yaml  string
		needs []Section
		want  string // "" for no error
	}{
		{full, all, ""},
		{strings.Replace(full, `schema_registry: "https://sr.prod:8081"`, "", 1), []Section{SectionKafka, SectionSchemaRegistry},
			"schema_registry: required (hivedr test needs it" + why},
		{strings.Replace(full, `schema_registry: "https://sr.prod:8081"`, "schema_registry:", 1), []Section{SectionSchemaRegistry},
			"schema_registry: required (hivedr test needs it" + why},
		{"kafka: {topic_prefix: x}", []Section{SectionKafka}, "kafka.brokers: required (hivedr test needs it"},
		{"kafka:", []Section{SectionKafka}, ": kafka: required (hivedr test needs it"},
		{"copyd: {workers: 1}", []Section{SectionSource}, ": source: required"},
		{"source: {name: prod}", []Section{SectionSource}, "source.metastore: required"},
		{"source: {kind: postgres, metastore: 'h:1'}", []Section{SectionSource}, "source.postgres_dsn: required"},
		{"source: {name: prod}", []Section{SectionKafka}, "kafka: required"},
		{"source: {name: prod}\nkafka: {brokers: ['k:1']}", []Section{SectionKafka}, ""},
		{"replication: {databases: [{name: a}]}", []Section{SectionReplication}, "replication.source_roots: required"},
		{"filesystems: {local: false}", []Section{SectionFilesystems}, ": filesystems: required"},
		{"filesystems: {local: true}", []Section{SectionFilesystems}, ""},
		{"applier: {group: g}", []Section{SectionDRMetastore}, "applier.metastore: required"},
		{"", all, ": source, kafka, schema_registry, replication, filesystems, applier.metastore: required (hivedr test needs them" + why},
	}
	for _, tt := range tests {
		p := write(t, tt.yaml)
		c, err := Load(p)
		if err != nil {
			t.Fatalf("Load(%q): %v", tt.yaml, err)
		}
		err = c.Require("hivedr test", tt.needs...)
		if tt.want == "" {
			if err != nil {
				t.Errorf("Require(%v) of %q: %v", tt.needs, tt.yaml, err)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), tt.want) || !strings.HasPrefix(err.Error(), "config "+p+": ") {
			t.Errorf("Require(%v) of %q = %v, want %q", tt.needs, tt.yaml, err, tt.want)
		}
	}

	c, err := Load("")
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Require("hivedr test", all...); err != nil {
		t.Errorf("the local stack's defaults lack something: %v", err)
	}
	c.SchemaRegistry = SchemaRegistry{} // a Config changed in code: named without a file
	if err := c.Require("hivedr test", all...); err == nil || err.Error() != "config: schema_registry: required (hivedr test needs it)" {
		t.Errorf("Require in code = %v", err)
	}
	if err := c.Require("hivedr test", "frobnicator"); err == nil || !strings.Contains(err.Error(), `unknown section "frobnicator"`) {
		t.Errorf("unknown section: %v", err)
	}
}

func TestMaskedYAML(t *testing.T) {
	secrets := []string{"s3cr3t-ABC", "pgpass-DEF", "tok-GHI", "pw-JKL"}
	p := write(t, full+`
  s3:
    - {endpoint: "https://s3.prod", access_key: AKIAPROD, secret_key: s3cr3t-ABC}
    - {endpoint: "https://u:tok-GHI@s3.other?x=1", buckets: [other]}
`)
	y, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	y = []byte(strings.Replace(string(y), `kind: thrift, metastore: "hms.prod:9083"`, `kind: postgres, postgres_dsn: "postgres://hive:pgpass-DEF@db.prod:5432/metastore?password=pw-JKL"`, 1))
	if err := os.WriteFile(p, y, 0o644); err != nil {
		t.Fatal(err)
	}
	c, err := Load(p)
	if err != nil {
		t.Fatal(err)
	}
	out, err := c.MaskedYAML()
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range secrets {
		if strings.Contains(string(out), s) {
			t.Errorf("the secret %s is in the output:\n%s", s, out)
		}
	}
	for _, want := range []string{"postgres://hive:***@db.prod:5432/metastore?password=***", "secret_key: '***'",
		"access_key: AKIAPROD", "https://u:***@s3.other?x=1", "replication_factor: 3", "retention: 168h\n", "halt_after: 2m\n"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	if c.Filesystems.S3[0].SecretKey != "s3cr3t-ABC" {
		t.Error("MaskedYAML changed the configuration itself")
	}
	// The output is a complete configuration: loaded again, it prints
	// the same.
	again, err := Load(write(t, string(out)))
	if err != nil {
		t.Fatalf("the output does not load: %v\n%s", err, out)
	}
	out2, err := again.MaskedYAML()
	if err != nil {
		t.Fatal(err)
	}
	if string(out2) != string(out) {
		t.Errorf("the output changed when loaded again:\n%s\nthen:\n%s", out, out2)
	}

	for in, want := range map[string]string{
		"host=db user=hive password=hunter2 dbname=m": "host=db user=hive password=*** dbname=m",
		"host=db password='two words' dbname=m":       "host=db password=*** dbname=m",
		"host=db password = hunter2 dbname=m":         "host=db password=*** dbname=m",
		"host=db PASSWORD=  'it\\'s two' dbname=m":    "host=db PASSWORD=*** dbname=m",
		"user=x password\t=\t's p' sslmode=disable":   "user=x password=*** sslmode=disable",
		"mysql://root:x@tcp(h)/db":                    "mysql://root:***@tcp(h)/db",
		"postgres://hive:p@ss:w@rd@db/m":              "postgres://hive:***@db/m",
		"hdfs://nn:8020/warehouse":                    "hdfs://nn:8020/warehouse",
		"https://sr.prod:8081":                        "https://sr.prod:8081",
	} {
		if got := MaskSecrets(in); got != want {
			t.Errorf("MaskSecrets(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestReplicationRPO(t *testing.T) {
	c := Default()
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	if got := c.Replication.RPO("anything"); got != DefaultRPO {
		t.Errorf("RPO with no databases configured = %s, want %s", got, DefaultRPO)
	}
	c.Replication.Databases = []DatabasePolicy{{Name: "fin", RPO: Duration{30 * time.Second}}, {Name: "hr"}}
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	for db, want := range map[string]time.Duration{"fin": 30 * time.Second, "hr": DefaultRPO, "other": 0} {
		if got := c.Replication.RPO(db); got != want {
			t.Errorf("RPO(%s) = %s, want %s", db, got, want)
		}
	}
}

// TestCopydPreserve: copyd.preserve parses into its flags and name
// mappings, defaults to keeping nothing, and refuses mappings that are
// not one name to another, or that nothing would use.
func TestCopydPreserve(t *testing.T) {
	c, err := Load(write(t, "copyd:\n  preserve:\n    owner: true\n    group: true\n    permission: true\n    times: true\n"+
		"    users: {etl: etl_dr, svc: svc_dr}\n    groups: {analysts: dr_analysts}\n"))
	if err != nil {
		t.Fatal(err)
	}
	want := Preserve{Owner: true, Group: true, Permission: true, Times: true,
		Users: map[string]string{"etl": "etl_dr", "svc": "svc_dr"}, Groups: map[string]string{"analysts": "dr_analysts"}}
	if !reflect.DeepEqual(c.Copyd.Preserve, want) {
		t.Errorf("copyd.preserve = %+v, want %+v", c.Copyd.Preserve, want)
	}
	if c, err := Load(write(t, "copyd: {workers: 2}\n")); err != nil || !reflect.DeepEqual(c.Copyd.Preserve, Preserve{}) {
		t.Errorf("default copyd.preserve = %+v, %v; want nothing kept", c.Copyd.Preserve, err)
	}
	if c, err := Load(write(t, "copyd: {preserve: {permission: true}}\n")); err != nil || !c.Copyd.Preserve.Permission || c.Copyd.Preserve.Owner {
		t.Errorf("permission only: %+v, %v", c.Copyd.Preserve, err)
	}
	for _, tt := range []struct{ yaml, want string }{
		{"copyd: {preserve: {owner: true, users: {etl: ''}}}", `copyd.preserve.users: "etl": "" is not a mapping of one name to another`},
		{"copyd: {preserve: {owner: true, users: {'a:b': c}}}", `copyd.preserve.users: "a:b": "c" is not a mapping`},
		{"copyd: {preserve: {group: true, groups: {g: 'x y'}}}", `copyd.preserve.groups: "g": "x y" is not a mapping`},
		{"copyd: {preserve: {group: true, users: {etl: etl_dr}}}", "copyd.preserve.users: given without copyd.preserve.owner: true"},
		{"copyd: {preserve: {owner: true, groups: {a: b}}}", "copyd.preserve.groups: given without copyd.preserve.group: true"},
		{"copyd: {preserve: {owner: maybe}}", `copyd.preserve.owner: "maybe" is not true or false`},
		{"copyd: {preserve: {mode: true}}", "copyd.preserve.mode: unknown key"},
		{"copyd: {preserve: {owner: true, users: [etl]}}", "copyd.preserve.users: a list, want a mapping"},
	} {
		p := write(t, tt.yaml)
		if _, err := Load(p); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("Load(%q) err = %v, want it to say %q", tt.yaml, err, tt.want)
		}
	}
}
