package config

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hivedr/hivedr/internal/config/internal/docgen"
)

// TestConfigDocGenerated checks that docs/config-reference.md is what `go
// generate ./internal/config` writes now, and that every key has a doc
// comment.
func TestConfigDocGenerated(t *testing.T) {
	const root = "../.."
	keys, err := docgen.Keys(fileDefaults(), root)
	if err != nil {
		t.Fatal(err)
	}
	if missing := docgen.Undocumented(keys); len(missing) > 0 {
		t.Errorf("keys without a doc comment on their field: %s", strings.Join(missing, ", "))
	}
	for _, want := range []string{"copyd.preserve.owner", "filesystems.s3[].sse", "filesystems.s3[].acl", "kafka.sasl.mechanism"} {
		if !hasKey(keys, want) {
			t.Errorf("the reference lacks %s", want)
		}
	}
	got, err := os.ReadFile(filepath.Join(root, ReferencePath))
	if err != nil {
		t.Fatal(err)
	}
	if want := docgen.Render(keys); !bytes.Equal(got, want) {
		t.Errorf("%s is stale: run go generate ./internal/config and commit it", ReferencePath)
	}
}

// TestConfigDocDefaults checks that the reference gives the defaults of
// the one table of defaults (fileDefaults).
func TestConfigDocDefaults(t *testing.T) {
	keys, err := docgen.Keys(fileDefaults(), "../..")
	if err != nil {
		t.Fatal(err)
	}
	for path, want := range map[string]string{
		"kafka.replication_factor": "3", "kafka.retention": "168h", "tailer.metrics_addr": "127.0.0.1:9464",
		"applier.halt_after": "2m", "copyd.preserve.owner": "", "source.kind": "thrift",
	} {
		for _, k := range keys {
			if k.Path == path && k.Default != want {
				t.Errorf("%s: default %q, want %q", path, k.Default, want)
			}
		}
	}
}

func hasKey(keys []docgen.Key, path string) bool {
	for _, k := range keys {
		if k.Path == path {
			return true
		}
	}
	return false
}

// TestMetricsPortsAgree checks that the deployment files written in YAML
// expose each role's metrics port as the constants name it.
func TestMetricsPortsAgree(t *testing.T) {
	for file, wants := range map[string][]string{
		// The chart's one port value per role; it writes metrics_addr.
		"deploy/helm/hivedr/values.yaml": {"port: " + TailerMetricsPort, "port: " + CopydMetricsPort,
			"port: " + ApplierMetricsPort},
		"compose/compose.yaml": {`"127.0.0.1:` + TailerMetricsPort + `:` + TailerMetricsPort + `"`,
			`"127.0.0.1:` + CopydMetricsPort + `:` + CopydMetricsPort + `"`, `"127.0.0.1:` + ApplierMetricsPort + `:` + ApplierMetricsPort + `"`},
		"compose/conf/hivedr.yaml": {`metrics_addr: ":` + TailerMetricsPort + `"`,
			`metrics_addr: ":` + CopydMetricsPort + `"`, `metrics_addr: ":` + ApplierMetricsPort + `"`},
		"compose/conf/prometheus.yaml": {`"tail:` + TailerMetricsPort + `"`, `"copyd:` + CopydMetricsPort + `"`,
			`"apply:` + ApplierMetricsPort + `"`},
	} {
		b, err := os.ReadFile(filepath.Join("../..", file))
		if err != nil {
			t.Fatal(err)
		}
		for _, want := range wants {
			if !strings.Contains(string(b), want) {
				t.Errorf("%s does not hold %s", file, want)
			}
		}
	}
}

func TestFillZero(t *testing.T) {
	var d time.Duration
	FillZero(&d, "applier.halt_after")
	var rf int16
	FillZero(&rf, "kafka.replication_factor")
	var w, set int = 0, 3
	FillZero(&w, "copyd.workers")
	FillZero(&set, "copyd.workers")
	if d != DefaultHaltAfter || rf != DefaultReplicationFactor || w != DefaultCopydWorkers || set != 3 {
		t.Errorf("FillZero: halt_after %s, replication_factor %d, workers %d and %d (given 3)", d, rf, w, set)
	}
	for _, bad := range []func(){
		func() { var s string; FillZero(&s, "applier.halt_after") },
		func() { var n int; FillZero(&n, "applier.no_such_key") },
		func() { var n int; FillZero(&n, "applier.halt_after.x") },
	} {
		func() {
			defer func() {
				if recover() == nil {
					t.Error("FillZero of a wrong key or type did not panic")
				}
			}()
			bad()
		}()
	}
}
