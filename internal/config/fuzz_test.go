package config

import (
	"os"
	"strings"
	"testing"
)

// FuzzParse loads configuration text (the file and the environment are an
// operator's, but a Helm value or a templated ConfigMap can hold anything).
// It must not panic; a configuration it accepts must print masked, and its
// masked YAML must not show the S3 secret keys it holds.
func FuzzParse(f *testing.F) {
	if b, err := os.ReadFile("../../compose/conf/hivedr.yaml"); err == nil {
		f.Add(string(b))
	}
	for _, s := range []string{
		"kafka: {brokers: [k1:9092], topic_prefix: dr}\nschema_registry: http://r:8081\n",
		"source: {kind: postgres, postgres_dsn: \"postgres://hive:pw@db/metastore\"}\n",
		"replication:\n  databases: [{name: sales_*, include_tables: ['^o.*$'], exclude_tables: [tmp]}]\n" +
			"  path_mappings: [{source: hdfs://src-nn:8020/, target: hdfs://dr-nn:8020/}]\n  source_roots: [hdfs://src-nn:8020/warehouse/]\n",
		"filesystems:\n  s3: [{endpoint: http://127.0.0.1:19000, access_key: \"${S3_KEY}\", secret_key: \"${S3_SECRET}\", path_style: true}]\n",
		"base: &b {batch_size: 10}\ntailer: {<<: *b, poll_interval: 2s}\n",
		"applier: {metastore: dr-hms:9083}\ncopyd: {workers: 4}\n",
	} {
		f.Add(s)
	}
	env := map[string]string{"S3_KEY": "AKIAFUZZ", "S3_SECRET": "fuzz-secret-value"}
	lookup := func(n string) (string, bool) { v, ok := env[n]; return v, ok }
	f.Fuzz(func(t *testing.T, text string) {
		c, err := parse([]byte(text), lookup)
		if err != nil {
			return
		}
		out, err := c.MaskedYAML()
		if err != nil {
			t.Fatalf("an accepted configuration does not print: %v", err)
		}
		for _, s := range c.Filesystems.S3 {
			if len(s.SecretKey) >= 8 && strings.Contains(string(out), s.SecretKey) {
				t.Fatalf("config check shows secret_key %q:\n%s", s.SecretKey, out)
			}
		}
	})
}
