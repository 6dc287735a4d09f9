package deploy

import (
	"encoding/json"
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/hivedr/hivedr/applier"
	"github.com/hivedr/hivedr/copyd"
	"github.com/hivedr/hivedr/internal/buildinfo"
	"github.com/hivedr/hivedr/producer"
)

// describer records the names of the metrics registered with it.
type describer struct{ names map[string]bool }

func (d *describer) Register(c prometheus.Collector) error {
	ch := make(chan *prometheus.Desc, 64)
	go func() { c.Describe(ch); close(ch) }()
	name := regexp.MustCompile(`fqName: "([^"]+)"`)
	for desc := range ch {
		if m := name.FindStringSubmatch(desc.String()); m != nil {
			d.names[m[1]] = true
		}
	}
	return nil
}
func (d *describer) MustRegister(cs ...prometheus.Collector) {
	for _, c := range cs {
		d.Register(c)
	}
}
func (d *describer) Unregister(prometheus.Collector) bool { return true }

// TestDashboardMetricsExist: every hivedr metric a dashboard query or an
// alert rule names is one the roles define (a renamed metric breaks this
// test, not a dashboard in production), and every panel has a query.
// TestDashboardQueriesOnPrometheus (e2e) runs the queries on real data.
func TestDashboardMetricsExist(t *testing.T) {
	d := &describer{names: map[string]bool{}}
	for _, m := range []interface {
		Register(prometheus.Registerer) error
	}{producer.NewMetrics(), copyd.NewMetrics(), applier.NewMetrics()} {
		if err := m.Register(d); err != nil {
			t.Fatal(err)
		}
	}
	d.Register(buildinfo.Get().Collector("test"))
	if len(d.names) < 30 {
		t.Fatalf("found only %d metrics: %v", len(d.names), d.names)
	}
	var dash struct {
		Panels []struct {
			Title   string
			Targets []struct{ Expr string }
		}
	}
	if err := json.Unmarshal(readFile(t, "grafana/hivedr-dashboard.json"), &dash); err != nil {
		t.Fatal(err)
	}
	var exprs []string
	for _, p := range dash.Panels {
		if len(p.Targets) == 0 {
			t.Errorf("panel %q has no query", p.Title)
		}
		for _, tg := range p.Targets {
			exprs = append(exprs, tg.Expr)
		}
	}
	rules, err := os.ReadFile("prometheus/hivedr-alerts.yaml")
	if err != nil {
		t.Fatal(err)
	}
	exprs = append(exprs, string(rules))
	used := 0
	for _, e := range exprs {
		for _, name := range regexp.MustCompile(`hivedr_[a-z_]+`).FindAllString(e, -1) {
			base := name
			for _, suf := range []string{"_bucket", "_count", "_sum"} {
				if b, ok := strings.CutSuffix(name, suf); ok && d.names[b] {
					base = b
				}
			}
			if !d.names[base] && !strings.HasPrefix(name, "hivedr_test") {
				t.Errorf("%s is not a metric of hivedr (in %q)", name, e[:min(len(e), 120)])
			}
			used++
		}
	}
	if used < 20 {
		t.Errorf("only %d metric references found", used)
	}
}
