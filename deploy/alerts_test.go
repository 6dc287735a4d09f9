package deploy

import (
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

// TestAlertRules: the rules load in promtool and pass their unit tests
// (prometheus/hivedr-alerts_test.yaml), every alert of the rules file has a
// test case where it fires and one where it does not (alertCoverage), and
// every alert is documented under a heading of its own in the Alerts
// section of docs/operations.md (so alerts and runbooks can link it).
func TestAlertRules(t *testing.T) {
	run(t, "prometheus", "promtool", "check", "rules", "hivedr-alerts.yaml")
	out := run(t, "prometheus", "promtool", "test", "rules", "hivedr-alerts_test.yaml")
	if !strings.Contains(string(out), "SUCCESS") {
		t.Fatalf("promtool test rules:\n%s", out)
	}
	ops, err := os.ReadFile("../docs/operations.md")
	if err != nil {
		t.Fatal(err)
	}
	_, alertsSection, ok := strings.Cut(string(ops), "\n## Alerts\n")
	if !ok {
		t.Fatal("docs/operations.md has no Alerts section")
	}
	alertsSection, _, _ = strings.Cut(alertsSection, "\n## ")
	names := alertNames(t)
	if len(names) < 7 {
		t.Fatalf("read %d alerts from hivedr-alerts.yaml: %v", len(names), names)
	}
	for _, name := range names {
		if !strings.Contains(alertsSection, "\n### "+name+"\n") {
			t.Errorf("alert %s has no heading in the Alerts section of docs/operations.md", name)
		}
		if !strings.Contains(alertsSection, "`"+name+"` fires when") {
			t.Errorf("alert %s: the Alerts section of docs/operations.md does not say when it fires", name)
		}
	}
	for _, p := range alertCoverage(names, readPromtoolTests(t)) {
		t.Error(p)
	}
}

// TestAlertCoverageCatchesGaps: alertCoverage, which TestAlertRules trusts,
// finds an alert that never fires in a test, one that is never shown
// quiet, a test of an alert the rules do not have, and a test file that
// does not load the rules.
func TestAlertCoverageCatchesGaps(t *testing.T) {
	names := alertNames(t)
	// without returns the real test file less the cases keep refuses.
	without := func(keep func(c *alertCase) bool) promtoolTests {
		f := readPromtoolTests(t)
		for i := range f.Tests {
			f.Tests[i].AlertRuleTest = slices.DeleteFunc(f.Tests[i].AlertRuleTest, func(c alertCase) bool { return !keep(&c) })
		}
		return f
	}
	cases := []struct {
		name string
		f    promtoolTests
		want []string // each a problem alertCoverage must report; none for the real file
	}{
		{"the real file", readPromtoolTests(t), nil},
		{"copyd's firing case gone", without(func(c *alertCase) bool { return c.Alertname != "HivedrCopydGroupEmpty" || len(c.ExpAlerts) == 0 }),
			[]string{"HivedrCopydGroupEmpty fires in no test case"}},
		{"the RPO alert never shown quiet", without(func(c *alertCase) bool { return c.Alertname != "HivedrRPOBreached" || len(c.ExpAlerts) > 0 }),
			[]string{"HivedrRPOBreached is shown not firing in no test case"}},
		{"no tests at all", promtoolTests{RuleFiles: []string{"hivedr-alerts.yaml"}},
			[]string{"HivedrChainBroken fires in no test case", "HivedrChainBroken is shown not firing in no test case"}},
		{"a misspelt alert", func() promtoolTests {
			f := readPromtoolTests(t)
			f.Tests[0].AlertRuleTest = append(f.Tests[0].AlertRuleTest, alertCase{EvalTime: "1m", Alertname: "HivedrRPOBreach"})
			return f
		}(), []string{"tests alert HivedrRPOBreach, which hivedr-alerts.yaml does not define"}},
		{"another rules file", func() promtoolTests { f := readPromtoolTests(t); f.RuleFiles = []string{"other.yaml"}; return f }(),
			[]string{"loads rule files [other.yaml], want hivedr-alerts.yaml"}},
	}
	for _, c := range cases {
		got := alertCoverage(names, c.f)
		if c.want == nil && len(got) > 0 {
			t.Errorf("%s: problems %q, want none", c.name, got)
		}
		for _, w := range c.want {
			if !slices.ContainsFunc(got, func(p string) bool { return strings.Contains(p, w) }) {
				t.Errorf("%s: problems %q, want one saying %q", c.name, got, w)
			}
		}
	}
}

// promtoolTests is the part of a `promtool test rules` file the coverage
// check reads.
type promtoolTests struct {
	RuleFiles []string `yaml:"rule_files"`
	Tests     []struct {
		AlertRuleTest []alertCase `yaml:"alert_rule_test"`
	}
}

// alertCase is one alert_rule_test entry: the alerts expected firing at
// an evaluation time (none: the alert must not fire then).
type alertCase struct {
	EvalTime  string           `yaml:"eval_time"`
	Alertname string           `yaml:"alertname"`
	ExpAlerts []map[string]any `yaml:"exp_alerts"`
}

func readPromtoolTests(t *testing.T) promtoolTests {
	t.Helper()
	var f promtoolTests
	mustYAML(t, readFile(t, "prometheus/hivedr-alerts_test.yaml"), &f)
	return f
}

// alertCoverage returns what f lacks for the alerts names: each alert
// needs a case where it fires (exp_alerts not empty) and one where it does
// not (exp_alerts empty), f must load hivedr-alerts.yaml, and it may test
// no alert the rules lack (promtool passes a test of an unknown alert that
// expects nothing).
func alertCoverage(names []string, f promtoolTests) []string {
	var problems []string
	if !slices.Contains(f.RuleFiles, "hivedr-alerts.yaml") {
		problems = append(problems, fmt.Sprintf("the test file loads rule files %v, want hivedr-alerts.yaml", f.RuleFiles))
	}
	fires, quiet := map[string]bool{}, map[string]bool{}
	for _, tc := range f.Tests {
		for _, c := range tc.AlertRuleTest {
			if !slices.Contains(names, c.Alertname) {
				problems = append(problems, fmt.Sprintf("the test file tests alert %s, which hivedr-alerts.yaml does not define (at %s)", c.Alertname, c.EvalTime))
			}
			if len(c.ExpAlerts) > 0 {
				fires[c.Alertname] = true
			} else {
				quiet[c.Alertname] = true
			}
		}
	}
	for _, n := range names {
		if !fires[n] {
			problems = append(problems, n+" fires in no test case (no alert_rule_test with exp_alerts)")
		}
		if !quiet[n] {
			problems = append(problems, n+" is shown not firing in no test case (no alert_rule_test with exp_alerts: [])")
		}
	}
	return problems
}

// alertNames are the alerts of prometheus/hivedr-alerts.yaml.
func alertNames(t *testing.T) []string {
	t.Helper()
	b, err := os.ReadFile("prometheus/hivedr-alerts.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var f struct {
		Groups []struct {
			Rules []struct{ Alert string }
		}
	}
	if err := yaml.Unmarshal(b, &f); err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, g := range f.Groups {
		for _, r := range g.Rules {
			names = append(names, r.Alert)
		}
	}
	slices.Sort(names)
	return names
}

// runbookBase starts every alert's runbook_url: docs/operations.md as the
// project's GitHub repository shows it, where a heading's anchor is the
// one anchor computes. A site that serves the docs elsewhere rewrites it
// in its copy of the rules (docs/operations.md "Alerts").
const runbookBase = "https://github.com/hivedr/hivedr/blob/main/docs/operations.md#"

// alertRule is an alert of the rules file with its annotations.
type alertRule struct {
	Alert       string
	Annotations map[string]string
}

// alertRules are the alerts of prometheus/hivedr-alerts.yaml.
func alertRules(t *testing.T) []alertRule {
	t.Helper()
	var f struct {
		Groups []struct{ Rules []alertRule }
	}
	mustYAML(t, readFile(t, "prometheus/hivedr-alerts.yaml"), &f)
	var rules []alertRule
	for _, g := range f.Groups {
		rules = append(rules, g.Rules...)
	}
	return rules
}

// runbookProblems returns what is wrong with the rules' runbook_url
// annotations against the anchors of docs/operations.md: each must be
// runbookBase and the anchor of the alert's own heading, which must exist.
func runbookProblems(rules []alertRule, anchors map[string]bool) []string {
	var problems []string
	for _, r := range rules {
		u, ok := r.Annotations["runbook_url"]
		frag, based := strings.CutPrefix(u, runbookBase)
		switch {
		case !ok:
			problems = append(problems, r.Alert+" has no runbook_url annotation")
		case !based:
			problems = append(problems, fmt.Sprintf("%s: runbook_url %q does not start with %s", r.Alert, u, runbookBase))
		case !anchors[frag]:
			problems = append(problems, fmt.Sprintf("%s: runbook_url %q names #%s, which no heading of docs/operations.md has", r.Alert, u, frag))
		case frag != anchor(r.Alert):
			problems = append(problems, fmt.Sprintf("%s: runbook_url %q links #%s, not the alert's own heading #%s", r.Alert, u, frag, anchor(r.Alert)))
		}
	}
	return problems
}

// TestAlertRunbookLinks: every alert links its runbook, the heading of its
// name in docs/operations.md, by a runbook_url whose anchor exists there
// (GitHub's anchors); and the check finds a missing annotation, another
// base, an anchor no heading has and another alert's heading.
func TestAlertRunbookLinks(t *testing.T) {
	rules := alertRules(t)
	if len(rules) < 8 {
		t.Fatalf("read %d alerts from hivedr-alerts.yaml", len(rules))
	}
	anchors := parseMarkdown(string(readFile(t, "../docs/operations.md"))).anchors
	for _, p := range runbookProblems(rules, anchors) {
		t.Error(p)
	}
	bad := []alertRule{
		{Alert: "HivedrA"},
		{Alert: "HivedrRPOBreached", Annotations: map[string]string{"runbook_url": "https://example.com/ops#hivedrrpobreached"}},
		{Alert: "HivedrRPOBreached", Annotations: map[string]string{"runbook_url": runbookBase + "hivedrrpobreach"}},
		{Alert: "HivedrRPOAtRisk", Annotations: map[string]string{"runbook_url": runbookBase + "hivedrrpobreached"}},
	}
	got := runbookProblems(bad, anchors)
	for i, want := range []string{"no runbook_url", "does not start with", "which no heading", "not the alert's own heading"} {
		if i >= len(got) || !strings.Contains(got[i], want) {
			t.Errorf("problems %q: want #%d to say %q", got, i, want)
		}
	}
}
