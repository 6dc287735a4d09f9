package deploy

import (
	"os"
	"slices"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

// TestAlertRules: the rules load in promtool and pass their unit tests
// (prometheus/hivedr-alerts_test.yaml: each alert fires when it should and
// only then), and every alert is documented in the README's Alerts section.
func TestAlertRules(t *testing.T) {
	run(t, "prometheus", "promtool", "check", "rules", "hivedr-alerts.yaml")
	out := run(t, "prometheus", "promtool", "test", "rules", "hivedr-alerts_test.yaml")
	if !strings.Contains(string(out), "SUCCESS") {
		t.Fatalf("promtool test rules:\n%s", out)
	}
	readme, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, alertsSection, _ := strings.Cut(string(readme), "\n## Alerts\n")
	alertsSection, _, _ = strings.Cut(alertsSection, "\n## ")
	tested, _ := os.ReadFile("prometheus/hivedr-alerts_test.yaml")
	for _, name := range alertNames(t) {
		if !strings.Contains(alertsSection, "`"+name+"`") {
			t.Errorf("alert %s is not in the README's Alerts section", name)
		}
		if !strings.Contains(string(tested), "alertname: "+name) {
			t.Errorf("alert %s has no promtool test", name)
		}
	}
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
