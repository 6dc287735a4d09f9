package deploy

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"maps"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"

	"github.com/hivedr/hivedr/internal/config"
)

// manifest is one rendered Kubernetes object, as much of it as the tests read.
type manifest struct {
	Kind     string
	Metadata struct {
		Name   string
		Labels map[string]string
	}
	Data       map[string]string
	StringData map[string]string `yaml:"stringData"`
	Spec       struct {
		Replicas *int
		Strategy struct{ Type string }
		Template struct {
			Spec podSpec
		}
		Groups []struct {
			Rules []struct{ Alert string }
		}
		Ports []struct {
			Name       string
			Port       int
			TargetPort string `yaml:"targetPort"`
		}
	}
}

type podSpec struct {
	SecurityContext map[string]any `yaml:"securityContext"`
	Containers      []struct {
		Name    string
		Args    []string
		Env     []map[string]any
		EnvFrom []map[string]any `yaml:"envFrom"`
		Ports   []struct {
			Name          string
			ContainerPort int `yaml:"containerPort"`
		}
		LivenessProbe   probe          `yaml:"livenessProbe"`
		ReadinessProbe  probe          `yaml:"readinessProbe"`
		Resources       map[string]any `yaml:"resources"`
		SecurityContext map[string]any `yaml:"securityContext"`
	}
}

type probe struct {
	HTTPGet struct{ Path, Port string } `yaml:"httpGet"`
}

// chartCase is one rendering of the chart and what it must give.
type chartCase struct {
	name   string
	values string // a values file's text; "" renders the chart's defaults
	copyd  int    // copyd replicas
	// secret is a secret value the values give (in the Secret only, never
	// in a ConfigMap); "": the values give none, and no Secret is made.
	secret string
}

// TestHelmChart lints the chart and renders it twice, with its default
// values and with a secret given, then checks the manifests: one tailer,
// copyd and applier StatefulSets whose pods are stable group members
// (instance = pod name), probes on /healthz and /readyz on the named port
// that is the role's metrics address in the configuration, resources and
// a non-root read-only pod, a secret only in the Secret (never in a
// ConfigMap), a configuration every role loads, and the alert rules and
// dashboard as the repository has them.
func TestHelmChart(t *testing.T) {
	run(t, "helm/hivedr", "helm", "lint", "--strict", ".")
	for _, c := range []chartCase{
		{name: "default values", copyd: 2},
		{name: "a secret and 3 copy daemons", copyd: 3, secret: "s3-Secret-Value-4711", values: `
config:
  filesystems:
    s3:
      - {endpoint: "https://s3.example", access_key: "${S3_ACCESS_KEY}", secret_key: "${S3_SECRET_KEY}"}
secrets:
  values: {S3_ACCESS_KEY: AKIAEXAMPLE, S3_SECRET_KEY: s3-Secret-Value-4711}
copyd: {replicas: 3}
`},
	} {
		t.Run(c.name, func(t *testing.T) { checkChart(t, c) })
	}
}

func checkChart(t *testing.T, cc chartCase) {
	args := []string{"template", "dr", "."}
	if cc.values != "" {
		values := filepath.Join(t.TempDir(), "values.yaml")
		if err := os.WriteFile(values, []byte(cc.values), 0o644); err != nil {
			t.Fatal(err)
		}
		args = append(args, "-f", values)
	}
	objs := decodeAll(t, run(t, "helm/hivedr", "helm", args...))

	byKind := map[string][]manifest{}
	for _, o := range objs {
		byKind[o.Kind] = append(byKind[o.Kind], o)
	}
	workloads := map[string]manifest{}
	for _, k := range []string{"Deployment", "StatefulSet"} {
		for _, o := range byKind[k] {
			workloads[o.Metadata.Labels["app.kubernetes.io/component"]] = o
		}
	}
	if len(workloads) != 3 {
		t.Fatalf("workloads %v, want tail, copyd and apply", slices.Collect(maps.Keys(workloads)))
	}
	if tail := workloads["tail"]; tail.Kind != "Deployment" || tail.Spec.Replicas == nil || *tail.Spec.Replicas != 1 || tail.Spec.Strategy.Type != "Recreate" {
		t.Errorf("tailer: %s replicas %v strategy %q, want one Deployment replaced with Recreate", tail.Kind, tail.Spec.Replicas, tail.Spec.Strategy.Type)
	}
	if c := workloads["copyd"]; c.Kind != "StatefulSet" || c.Spec.Replicas == nil || *c.Spec.Replicas != cc.copyd {
		t.Errorf("copyd: %s replicas %v, want a StatefulSet of %d", c.Kind, c.Spec.Replicas, cc.copyd)
	}
	if a := workloads["apply"]; a.Kind != "StatefulSet" {
		t.Errorf("applier: %s, want a StatefulSet", a.Kind)
	}

	// The ConfigMap's file: no secret in it, a configuration every role
	// loads, with the instance of a pod its name and the secret from the
	// environment.
	var conf string
	for _, cm := range byKind["ConfigMap"] {
		for k, v := range cm.Data {
			if cc.secret != "" && (strings.Contains(v, cc.secret) || strings.Contains(v, "AKIAEXAMPLE")) {
				t.Errorf("ConfigMap %s key %s holds a secret", cm.Metadata.Name, k)
			}
		}
		if c, ok := cm.Data["hivedr.yaml"]; ok {
			conf = c
		}
	}
	p := filepath.Join(t.TempDir(), "hivedr.yaml")
	if err := os.WriteFile(p, []byte(conf), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Setenv("POD_NAME", "dr-hivedr-copyd-2")
	if cc.secret != "" {
		t.Setenv("S3_ACCESS_KEY", "AKIAEXAMPLE")
		t.Setenv("S3_SECRET_KEY", cc.secret)
	}
	c, err := config.Load(p)
	if err != nil {
		t.Fatalf("the chart's configuration does not load: %v\n%s", err, conf)
	}
	for _, need := range [][]config.Section{
		{config.SectionSource, config.SectionKafka, config.SectionSchemaRegistry, config.SectionReplication, config.SectionFilesystems},
		{config.SectionDRMetastore},
	} {
		if err := c.Require("chart", need...); err != nil {
			t.Error(err)
		}
	}
	if c.Copyd.Instance != "dr-hivedr-copyd-2" || c.Applier.Instance != "dr-hivedr-copyd-2" {
		t.Errorf("instances %q %q: want the pod name", c.Copyd.Instance, c.Applier.Instance)
	}
	if cc.secret != "" && (len(c.Filesystems.S3) == 0 || c.Filesystems.S3[0].SecretKey != cc.secret) {
		t.Errorf("S3 %+v: want the secret from the environment", c.Filesystems.S3)
	}

	// Each role's pod: its metrics port is the one its metrics_addr
	// listens on, and both probes ask that port.
	addrs := map[string]string{"tail": c.Tailer.MetricsAddr, "copyd": c.Copyd.MetricsAddr, "apply": c.Applier.MetricsAddr}
	for role, w := range workloads {
		pod := w.Spec.Template.Spec
		if pod.SecurityContext["runAsNonRoot"] != true || pod.SecurityContext["runAsUser"] != 65532 {
			t.Errorf("%s: pod securityContext %v", role, pod.SecurityContext)
		}
		if len(pod.Containers) != 1 {
			t.Fatalf("%s: %d containers", role, len(pod.Containers))
		}
		ct := pod.Containers[0]
		if ct.Args[0] != role || !slices.Contains(ct.Args, "-config=/etc/hivedr/hivedr.yaml") {
			t.Errorf("%s: args %v", role, ct.Args)
		}
		_, want, err := net.SplitHostPort(addrs[role])
		if err != nil || want == "" {
			t.Fatalf("%s: metrics_addr %q in the chart's configuration: %v", role, addrs[role], err)
		}
		if len(ct.Ports) != 1 || ct.Ports[0].Name != "metrics" || strconv.Itoa(ct.Ports[0].ContainerPort) != want {
			t.Errorf("%s: ports %+v, want one named metrics on %s (metrics_addr %s)", role, ct.Ports, want, addrs[role])
		}
		if ct.LivenessProbe.HTTPGet.Path != "/healthz" || ct.LivenessProbe.HTTPGet.Port != "metrics" {
			t.Errorf("%s: liveness probe %+v, want /healthz on port metrics", role, ct.LivenessProbe)
		}
		if ct.ReadinessProbe.HTTPGet.Path != "/readyz" || ct.ReadinessProbe.HTTPGet.Port != "metrics" {
			t.Errorf("%s: readiness probe %+v, want /readyz on port metrics", role, ct.ReadinessProbe)
		}
		if ct.SecurityContext["readOnlyRootFilesystem"] != true || ct.SecurityContext["allowPrivilegeEscalation"] != false {
			t.Errorf("%s: container securityContext %v", role, ct.SecurityContext)
		}
		if ct.Resources["requests"] == nil || ct.Resources["limits"] == nil {
			t.Errorf("%s: resources %v", role, ct.Resources)
		}
		env, _ := json.Marshal(ct.Env)
		if !strings.Contains(string(env), `"name":"POD_NAME","valueFrom":{"fieldRef":{"fieldPath":"metadata.name"}}`) {
			t.Errorf("%s: env %s, want POD_NAME from the pod's name", role, env)
		}
		from, _ := json.Marshal(ct.EnvFrom)
		if hasRef := strings.Contains(string(from), `"secretRef":{"name":"dr-hivedr-secrets"}`); hasRef != (cc.secret != "") {
			t.Errorf("%s: envFrom %s; want the Secret exactly when the values give one", role, from)
		}
	}

	// Secrets only in the Secret (and none made when none is given).
	switch {
	case cc.secret == "" && len(byKind["Secret"]) != 0:
		t.Errorf("a Secret with no secret given: %+v", byKind["Secret"])
	case cc.secret != "" && (len(byKind["Secret"]) != 1 || byKind["Secret"][0].StringData["S3_SECRET_KEY"] != cc.secret):
		t.Errorf("Secrets: %+v", byKind["Secret"])
	}

	// Monitoring: a Service per role on its metrics port, a
	// ServiceMonitor, the repository's alert rules and dashboard.
	if len(byKind["ServiceMonitor"]) != 1 || len(byKind["Service"]) != 3 {
		t.Errorf("%d ServiceMonitors, %d Services", len(byKind["ServiceMonitor"]), len(byKind["Service"]))
	}
	for _, svc := range byKind["Service"] {
		role := svc.Metadata.Labels["app.kubernetes.io/component"]
		_, want, _ := net.SplitHostPort(addrs[role])
		if len(svc.Spec.Ports) != 1 || svc.Spec.Ports[0].TargetPort != "metrics" || strconv.Itoa(svc.Spec.Ports[0].Port) != want {
			t.Errorf("Service %s (%s): ports %+v, want %s to the metrics port", svc.Metadata.Name, role, svc.Spec.Ports, want)
		}
	}
	var rendered []string
	for _, r := range byKind["PrometheusRule"] {
		for _, g := range r.Spec.Groups {
			for _, rule := range g.Rules {
				rendered = append(rendered, rule.Alert)
			}
		}
	}
	slices.Sort(rendered)
	if want := alertNames(t); !slices.Equal(rendered, want) {
		t.Errorf("PrometheusRule alerts %v, want %v", rendered, want)
	}
	dash, _ := os.ReadFile("grafana/hivedr-dashboard.json")
	found := false
	for _, cm := range byKind["ConfigMap"] {
		if v, ok := cm.Data["hivedr-dashboard.json"]; ok {
			found = strings.TrimSpace(v) == strings.TrimSpace(string(dash))
		}
	}
	if !found {
		t.Error("no ConfigMap holds grafana/hivedr-dashboard.json as it is")
	}
}

func decodeAll(t *testing.T, b []byte) []manifest {
	t.Helper()
	var out []manifest
	d := yaml.NewDecoder(bytes.NewReader(b))
	for {
		var m manifest
		err := d.Decode(&m)
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			t.Fatalf("rendered manifests: %v", err)
		}
		if m.Kind != "" {
			out = append(out, m)
		}
	}
}
