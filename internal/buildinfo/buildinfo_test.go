package buildinfo

import (
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

func TestCollector(t *testing.T) {
	in := Info{Version: "v1.2.3", Commit: "abc", Date: "2026-01-02T03:04:05Z", GoVersion: "go1.26"}
	reg := prometheus.NewRegistry()
	reg.MustRegister(in.Collector("apply"))
	want := `# HELP hivedr_build_info Always 1; the labels name the process's role (tail, copyd, apply) and its build (version, commit, build date, Go version).
# TYPE hivedr_build_info gauge
hivedr_build_info{commit="abc",date="2026-01-02T03:04:05Z",goversion="go1.26",role="apply",version="v1.2.3"} 1
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want)); err != nil {
		t.Error(err)
	}
	if got := in.String(); got != "hivedr v1.2.3 (commit abc, built 2026-01-02T03:04:05Z, go1.26)" {
		t.Errorf("String() = %q", got)
	}
	// Unstamped (a test binary): never empty.
	if g := Get(); g.Version == "" || g.Commit == "" || g.Date == "" || g.GoVersion == "" {
		t.Errorf("Get() = %+v: want every field filled", g)
	}
}
