package deploy

import (
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil/promlint"

	"github.com/hivedr/hivedr/applier"
	"github.com/hivedr/hivedr/copyd"
	"github.com/hivedr/hivedr/internal/buildinfo"
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
