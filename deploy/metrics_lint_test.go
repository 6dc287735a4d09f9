package deploy

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil/promlint"

	"github.com/hivedr/hivedr/applier"
	"github.com/hivedr/hivedr/copyd"
	"github.com/hivedr/hivedr/internal/buildinfo"
	"github.com/hivedr/hivedr/internal/metrics"
	"github.com/hivedr/hivedr/producer"
)

// populating registers collectors in a registry and gives each labelled
// metric (a *Vec) one child, with a value for every label, so that
// gathering yields a family for every metric the roles define: a vector
// with no child exposes nothing, and a lint of a scrape would miss it.
type populating struct {
	reg    *prometheus.Registry
	vecs   int
	labels *regexp.Regexp
}

func (p *populating) Register(c prometheus.Collector) error {
	if err := p.reg.Register(c); err != nil {
		return err
	}
	ch := make(chan *prometheus.Desc, 64)
	go func() { c.Describe(ch); close(ch) }()
	n := -1
	for d := range ch {
		if m := p.labels.FindStringSubmatch(d.String()); m != nil && m[1] != "" {
			n = len(strings.Split(m[1], ","))
		} else {
			n = 0
		}
	}
	vals := make([]string, max(n, 0))
	for i := range vals {
		vals[i] = "x"
	}
	switch v := c.(type) {
	case *prometheus.CounterVec:
		v.WithLabelValues(vals...)
	case *prometheus.GaugeVec:
		v.WithLabelValues(vals...)
	case *prometheus.HistogramVec:
		v.WithLabelValues(vals...)
	case *prometheus.SummaryVec:
		v.WithLabelValues(vals...)
	default:
		return nil
	}
	p.vecs++
	return nil
}

func (p *populating) MustRegister(cs ...prometheus.Collector) {
	for _, c := range cs {
		if err := p.Register(c); err != nil {
			panic(err)
		}
	}
}

func (p *populating) Unregister(c prometheus.Collector) bool { return p.reg.Unregister(c) }

// TestDashboardMetricNamesLint runs client_golang's promlint (Prometheus's
// naming conventions: counters end in _total, base units in the name,
// no camel case, help on every metric, histogram suffixes) over every
// metric the three roles and hivedr_build_info define, each labelled
// metric with its labels populated.
func TestDashboardMetricNamesLint(t *testing.T) {
	p := &populating{reg: prometheus.NewRegistry(), labels: regexp.MustCompile(`variableLabels: \{([^}]*)\}`)}
	for _, m := range []interface {
		Register(prometheus.Registerer) error
	}{producer.NewMetrics(), copyd.NewMetrics(), applier.NewMetrics()} {
		if err := m.Register(p); err != nil {
			t.Fatal(err)
		}
	}
	if err := p.Register(buildinfo.Get().Collector("test")); err != nil {
		t.Fatal(err)
	}
	mfs, err := p.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, mf := range mfs {
		names = append(names, mf.GetName())
		if !strings.HasPrefix(mf.GetName(), "hivedr_") {
			t.Errorf("metric %s lacks the hivedr_ prefix", mf.GetName())
		}
	}
	// Every metric described is gathered: none is left out of the lint.
	d := &describer{names: map[string]bool{}}
	for _, m := range []interface {
		Register(prometheus.Registerer) error
	}{producer.NewMetrics(), copyd.NewMetrics(), applier.NewMetrics()} {
		m.Register(d)
	}
	d.Register(buildinfo.Get().Collector("test"))
	for n := range d.names {
		if !slices.Contains(names, n) {
			t.Errorf("%s is described but not gathered: the lint misses it", n)
		}
	}
	if len(mfs) != len(d.names) || p.vecs == 0 {
		t.Fatalf("gathered %d metric families (%d labelled), %d described: %v", len(mfs), p.vecs, len(d.names), names)
	}
	problems, err := promlint.NewWithMetricFamilies(mfs).Lint()
	if err != nil {
		t.Fatal(err)
	}
	for _, pr := range problems {
		t.Errorf("%s: %s", pr.Metric, pr.Text)
	}
	// The lint does lint: a counter without _total and a camel-case,
	// millisecond gauge are found.
	bad := prometheus.NewRegistry()
	bad.MustRegister(prometheus.NewCounter(prometheus.CounterOpts{Name: "hivedr_test_copies", Help: "x"}),
		prometheus.NewGauge(prometheus.GaugeOpts{Name: "hivedr_test_lagMilliseconds", Help: "x"}))
	badMFs, _ := bad.Gather()
	if found, _ := promlint.NewWithMetricFamilies(badMFs).Lint(); len(found) < 2 {
		t.Errorf("promlint found %v in badly named metrics, want at least 2 problems", found)
	}
	t.Logf("%d metric families linted (%d labelled, populated), %d problems", len(mfs), p.vecs, len(problems))
}

// Pipelines of prometheus/hivedr-alerts-pipelines_test.yaml: the forward
// pipeline, healthy throughout, and the reverse one, which breaches or
// loses a daemon.
const (
	healthyPipeline = "hivedr"
	faultyPipeline  = "hivedr-rev"
)

// TestMetricsPipelineLabel: two pipelines side by side (a failback's
// forward and reverse) stay apart in Prometheus.
//
// Every metric a role's registry serves (the role's, each labelled one
// populated; hivedr_build_info; go_*; process_*) carries pipeline.
// promtool runs hivedr-alerts-pipelines_test.yaml, where one pipeline
// breaches or loses a daemon while the other is healthy, and every alert
// has a case there that fires for the faulty pipeline only (promtool
// compares the whole list of alerts firing) with series of both pipelines
// in its input. The same cases fail once the rules drop pipeline from
// their expressions, so they do test it.
func TestMetricsPipelineLabel(t *testing.T) {
	t.Run("registry", func(t *testing.T) {
		for role, m := range map[string]interface {
			Register(prometheus.Registerer) error
		}{"tail": producer.NewMetrics(), "copyd": copyd.NewMetrics(), "apply": applier.NewMetrics()} {
			// Give each vector a child, so that its family is gathered.
			p := &populating{reg: prometheus.NewRegistry(), labels: regexp.MustCompile(`variableLabels: \{([^}]*)\}`)}
			if err := m.Register(p); err != nil {
				t.Fatal(err)
			}
			reg, err := metrics.NewRegistry(role, faultyPipeline, m)
			if err != nil {
				t.Fatal(err)
			}
			mfs, err := reg.Gather()
			if err != nil {
				t.Fatal(err)
			}
			d := &describer{names: map[string]bool{}}
			m.Register(d)
			d.Register(buildinfo.Get().Collector(role))
			prefixes := map[string]int{}
			for _, mf := range mfs {
				delete(d.names, mf.GetName())
				prefixes[strings.SplitAfter(mf.GetName(), "_")[0]]++
				for _, s := range mf.GetMetric() {
					var got []string
					for _, l := range s.GetLabel() {
						if l.GetName() == metrics.PipelineLabel {
							got = append(got, l.GetValue())
						}
					}
					if !slices.Equal(got, []string{faultyPipeline}) {
						t.Errorf("%s: a series of %s has pipeline %q, want [%s]", role, mf.GetName(), got, faultyPipeline)
					}
				}
			}
			if len(d.names) > 0 || prefixes["go_"] == 0 || prefixes["process_"] == 0 {
				t.Errorf("%s: not gathered: %v; families by prefix %v", role, d.names, prefixes)
			}
			t.Logf("%s: %d families, every series labelled pipeline=%s (%v)", role, len(mfs), faultyPipeline, prefixes)
		}
	})
	t.Run("alerts", func(t *testing.T) {
		const file = "hivedr-alerts-pipelines_test.yaml"
		if out := run(t, "prometheus", "promtool", "test", "rules", file); !strings.Contains(string(out), "SUCCESS") {
			t.Fatalf("promtool test rules %s:\n%s", file, out)
		}
		var f struct {
			RuleFiles []string `yaml:"rule_files"`
			Tests     []struct {
				InputSeries []struct {
					Series string
				} `yaml:"input_series"`
				AlertRuleTest []alertCase `yaml:"alert_rule_test"`
			}
		}
		mustYAML(t, readFile(t, "prometheus/"+file), &f)
		if !slices.Equal(f.RuleFiles, []string{"hivedr-alerts.yaml"}) {
			t.Errorf("%s loads %v, want hivedr-alerts.yaml", file, f.RuleFiles)
		}
		apart := map[string]bool{}
		for _, tc := range f.Tests {
			both := 0
			for _, p := range []string{healthyPipeline, faultyPipeline} {
				if slices.ContainsFunc(tc.InputSeries, func(s struct{ Series string }) bool {
					return strings.Contains(s.Series, `pipeline="`+p+`"`)
				}) {
					both++
				}
			}
			for _, c := range tc.AlertRuleTest {
				if len(c.ExpAlerts) == 0 {
					continue // quiet before the fault: fine, and not what is counted
				}
				only := true
				for _, a := range c.ExpAlerts {
					labels, _ := a["exp_labels"].(map[string]any)
					only = only && labels["pipeline"] == faultyPipeline
				}
				if !only || both != 2 {
					t.Errorf("%s at %s: expects %v with input of %d of the 2 pipelines; want it firing for %s only, with series of both",
						c.Alertname, c.EvalTime, c.ExpAlerts, both, faultyPipeline)
					continue
				}
				apart[c.Alertname] = true
			}
		}
		for _, n := range alertNames(t) {
			if !apart[n] {
				t.Errorf("%s has no case in %s firing for one pipeline of two", n, file)
			}
		}

		// The cases catch rules that lose the pipeline: with it renamed
		// in every expression, promtool fails them.
		dir := t.TempDir()
		rules := string(readFile(t, "prometheus/hivedr-alerts.yaml"))
		var lost strings.Builder
		inExpr := false
		for _, l := range strings.SplitAfter(rules, "\n") {
			trimmed := strings.TrimSpace(l)
			switch {
			case strings.HasPrefix(trimmed, "expr:"):
				inExpr = true
			case strings.HasPrefix(trimmed, "for:"), strings.HasPrefix(trimmed, "labels:"):
				inExpr = false
			}
			if inExpr {
				l = strings.ReplaceAll(l, "pipeline", "instance")
			}
			lost.WriteString(l)
		}
		if lost.String() == rules {
			t.Fatal("the rules' expressions name no pipeline")
		}
		for name, b := range map[string][]byte{"hivedr-alerts.yaml": []byte(lost.String()), file: readFile(t, "prometheus/"+file)} {
			if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		cmd := exec.Command(tool(t, "promtool"), "test", "rules", file)
		cmd.Dir = dir
		out, err := cmd.CombinedOutput()
		if err == nil || !strings.Contains(string(out), "FAILED") {
			t.Errorf("promtool passed %s against rules without pipeline (%v):\n%s", file, err, out)
		}
	})
}
