package deploy

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
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

// aggregation matches a PromQL aggregation and its by clause, if any
// (group 2): sum by (pipeline, db) (, max(, group(.
var aggregation = regexp.MustCompile(`\b(sum|max|min|avg|count|group|topk|bottomk|quantile|stddev|stdvar)\s*(?:by\s*\(([^)]*)\)\s*)?\(`)

// selector matches a hivedr metric and its label matchers (group 1).
var selector = regexp.MustCompile(`hivedr_[a-z_]+(?:\{([^}]*)\})?`)

// pipelineProblems returns the aggregations of expr that do not keep the
// pipeline label (no by clause, or one without pipeline), except the
// global `unless on () group(...)` of a rule's absent() fallback, and,
// with matchers given, the hivedr metrics it selects without each of them.
func pipelineProblems(expr string, matchers ...string) []string {
	var problems []string
	for _, m := range aggregation.FindAllStringSubmatchIndex(expr, -1) {
		by := ""
		if m[4] >= 0 {
			by = expr[m[4]:m[5]]
		}
		if expr[m[2]:m[3]] == "group" && m[4] < 0 && strings.HasSuffix(strings.TrimSpace(expr[:m[0]]), "unless on ()") {
			continue
		}
		if !slices.Contains(strings.Split(strings.ReplaceAll(by, " ", ""), ","), "pipeline") {
			problems = append(problems, fmt.Sprintf("%q does not keep pipeline", expr[m[0]:m[1]]))
		}
	}
	for _, m := range selector.FindAllStringSubmatch(expr, -1) {
		for _, want := range matchers {
			if !strings.Contains(m[1], want) {
				problems = append(problems, fmt.Sprintf("%s lacks %s", m[0], want))
			}
		}
	}
	return problems
}

// TestDashboardPipelineVariables: the dashboard has namespace, pipeline,
// job and database variables (all values by default), every hivedr metric
// a panel selects is filtered by the first three, every aggregation of a
// panel or an alert rule keeps pipeline (so two pipelines' event IDs are
// never mixed), and every panel query parses as PromQL (promtool, with the
// variables substituted).
func TestDashboardPipelineVariables(t *testing.T) {
	var dash struct {
		Templating struct {
			List []struct {
				Name, Type, AllValue string
				IncludeAll, Multi    bool
				Definition           string
			}
		}
		Panels []struct {
			Title   string
			Targets []struct{ Expr, LegendFormat string }
		}
	}
	if err := json.Unmarshal(readFile(t, "grafana/hivedr-dashboard.json"), &dash); err != nil {
		t.Fatal(err)
	}
	vars := map[string]string{}
	for _, v := range dash.Templating.List {
		if v.Type == "query" {
			if !v.IncludeAll || !v.Multi || v.AllValue != ".*" {
				t.Errorf("variable %s: includeAll %v, multi %v, allValue %q; want all values, several, .*", v.Name, v.IncludeAll, v.Multi, v.AllValue)
			}
			vars[v.Name] = v.Definition
		}
	}
	for _, name := range []string{"namespace", "pipeline", "job", "db"} {
		if !strings.HasPrefix(vars[name], "label_values(") {
			t.Errorf("no query variable %s (variables: %v)", name, vars)
		}
	}
	matchers := []string{`pipeline=~"$pipeline"`, `job=~"$job"`, `namespace=~"$namespace"`}
	var rules strings.Builder
	rules.WriteString("groups:\n  - name: dashboard\n    rules:\n")
	n := 0
	for _, p := range dash.Panels {
		for _, tg := range p.Targets {
			for _, pr := range pipelineProblems(tg.Expr, matchers...) {
				t.Errorf("panel %q: %s", p.Title, pr)
			}
			if !strings.Contains(tg.LegendFormat, "{{pipeline}}") {
				t.Errorf("panel %q: legend %q does not name the pipeline", p.Title, tg.LegendFormat)
			}
			q := strings.NewReplacer("$pipeline", ".*", "$job", ".*", "$namespace", ".*", "$db", ".*", "$__rate_interval", "1m").Replace(tg.Expr)
			n++
			fmt.Fprintf(&rules, "      - record: panel_%d\n        expr: %q\n", n, q)
		}
	}
	for _, e := range alertExprs(t) {
		for _, pr := range pipelineProblems(e) {
			t.Errorf("alert rule %q: %s", e, pr)
		}
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "panels.yaml"), []byte(rules.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	run(t, dir, "promtool", "check", "rules", "panels.yaml")
	// The check finds what it must.
	for expr, want := range map[string]string{
		`max(hivedr_tailer_source_head_event_id)`:                        "does not keep pipeline",
		`sum by (db) (hivedr_applier_lag_events{pipeline=~"$pipeline"})`: "does not keep pipeline",
		`max by (pipeline) (hivedr_rpo_seconds{pipeline=~"$pipeline"})`:  `lacks job=~"$job"`,
	} {
		if got := pipelineProblems(expr, matchers...); !slices.ContainsFunc(got, func(p string) bool { return strings.Contains(p, want) }) {
			t.Errorf("pipelineProblems(%s) = %q, want one saying %q", expr, got, want)
		}
	}
	if got := pipelineProblems(`absent(x) unless on () group(max_over_time(hivedr_build_info[1d]))`); len(got) > 0 {
		t.Errorf("the absent() fallback's global group: %q", got)
	}
}

// alertExprs are the expressions of prometheus/hivedr-alerts.yaml's rules.
func alertExprs(t *testing.T) []string {
	t.Helper()
	var f struct {
		Groups []struct {
			Rules []struct{ Expr string }
		}
	}
	mustYAML(t, readFile(t, "prometheus/hivedr-alerts.yaml"), &f)
	var exprs []string
	for _, g := range f.Groups {
		for _, r := range g.Rules {
			exprs = append(exprs, r.Expr)
		}
	}
	return exprs
}
