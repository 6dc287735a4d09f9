package config

import (
	"os"
	"path/filepath"
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
		{"tailer: {poll_interval: soon}", "not a duration"},
		{"tailer: {start_event_id: yesterday}", "tailer.start_event_id"},
		{"source: {kind: mysql}", "source.kind"},
		{"kafka: {brokers: []}", "kafka.brokers"},
		{"replication: {databases: [{name: db, include_tables: ['(']}]}", "replication.databases[0].include_tables[0]"},
		{"replication: {source_roots: ['relative/dir']}", "replication.source_roots[0]"},
		{"replication: {path_mappings: [{source: 'hdfs://a/x/../y', target: 'hdfs://b/'}]}", "replication.path_mappings[0].source"},
		{"replication: {databasez: []}", "field databasez not found"},
	}
	for _, tt := range tests {
		_, err := Load(write(t, tt.yaml))
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("Load(%q) err = %v, want it to mention %q", tt.yaml, err, tt.want)
		}
	}
}
