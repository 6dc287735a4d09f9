package deploy

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"errors"
	"io"
	"maps"
	"math/big"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	sigsyaml "sigs.k8s.io/yaml"

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
	// monitoring: the values enable the ServiceMonitor and PrometheusRule
	// and the cluster serves their API; else there are none.
	monitoring bool
}

// TestHelmChart lints the chart and renders it twice, with its default
// values and with a secret and monitoring given, then checks the
// manifests: one tailer,
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
		{name: "a secret and 3 copy daemons with monitoring", copyd: 3, secret: "s3-Secret-Value-4711", monitoring: true, values: `
config:
  filesystems:
    s3:
      - {endpoint: "https://s3.example", access_key: "${S3_ACCESS_KEY}", secret_key: "${S3_SECRET_KEY}"}
secrets:
  values: {S3_ACCESS_KEY: AKIAEXAMPLE, S3_SECRET_KEY: s3-Secret-Value-4711}
copyd: {replicas: 3}
serviceMonitor: {enabled: true}
prometheusRule: {enabled: true}
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
	if cc.monitoring {
		args = append(args, "--api-versions", "monitoring.coreos.com/v1")
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
	// ServiceMonitor and the repository's alert rules where enabled, and
	// the dashboard.
	monitors := 0
	if cc.monitoring {
		monitors = 1
	}
	if len(byKind["ServiceMonitor"]) != monitors || len(byKind["Service"]) != 3 {
		t.Errorf("%d ServiceMonitors (want %d), %d Services", len(byKind["ServiceMonitor"]), monitors, len(byKind["Service"]))
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
	var want []string
	if cc.monitoring {
		want = alertNames(t)
	}
	if !slices.Equal(rendered, want) {
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

// k8sObjects is a rendering of the chart, every document decoded strictly
// into its Kubernetes API type: a field the type does not have, or a
// field given twice, fails the decoding.
type k8sObjects struct {
	workloads       map[string]workload // by component: tail, copyd, apply
	services        map[string]*corev1.Service
	pdbs            map[string]*policyv1.PodDisruptionBudget
	configMaps      map[string]*corev1.ConfigMap
	secrets         map[string]*corev1.Secret
	serviceAccounts []*corev1.ServiceAccount
	networkPolicies []*networkingv1.NetworkPolicy
	serviceMonitors []*serviceMonitor
	prometheusRules []*prometheusRule
}

// workload is a role's Deployment or StatefulSet.
type workload struct {
	kind     string
	name     string
	replicas int32
	pod      corev1.PodTemplateSpec
}

// serviceMonitor and prometheusRule are the Prometheus Operator's
// monitoring.coreos.com/v1 kinds, whose Go types k8s.io/api does not
// have: the fields the chart writes, decoded as strictly as the others.
type serviceMonitor struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata"`
	Spec              struct {
		Selector  metav1.LabelSelector `json:"selector"`
		Endpoints []struct {
			Port     string `json:"port"`
			Path     string `json:"path"`
			Interval string `json:"interval"`
		} `json:"endpoints"`
	} `json:"spec"`
}

type prometheusRule struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata"`
	Spec              struct {
		Groups []struct {
			Name     string `json:"name"`
			Interval string `json:"interval,omitempty"`
			Rules    []struct {
				Alert         string            `json:"alert,omitempty"`
				Record        string            `json:"record,omitempty"`
				Expr          string            `json:"expr"`
				For           string            `json:"for,omitempty"`
				KeepFiringFor string            `json:"keep_firing_for,omitempty"`
				Labels        map[string]string `json:"labels,omitempty"`
				Annotations   map[string]string `json:"annotations,omitempty"`
			} `json:"rules"`
		} `json:"groups"`
	} `json:"spec"`
}

// decodeStrict decodes helm template's output, failing t on a document
// of a kind the chart does not make or with a field its type lacks.
func decodeStrict(t *testing.T, out []byte) k8sObjects {
	t.Helper()
	scheme := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{corev1.AddToScheme, appsv1.AddToScheme, policyv1.AddToScheme, networkingv1.AddToScheme} {
		if err := add(scheme); err != nil {
			t.Fatal(err)
		}
	}
	decoder := serializer.NewCodecFactory(scheme, serializer.EnableStrict).UniversalDeserializer()
	objs := k8sObjects{workloads: map[string]workload{}, services: map[string]*corev1.Service{},
		pdbs: map[string]*policyv1.PodDisruptionBudget{}, configMaps: map[string]*corev1.ConfigMap{}, secrets: map[string]*corev1.Secret{}}
	for i, doc := range regexp.MustCompile(`(?m)^---\s*$`).Split(string(out), -1) {
		var tm metav1.TypeMeta
		if err := sigsyaml.Unmarshal([]byte(doc), &tm); err != nil {
			t.Fatalf("document %d: %v\n%s", i, err, doc)
		}
		if tm.Kind == "" {
			continue // only comments
		}
		if tm.APIVersion == "monitoring.coreos.com/v1" {
			var o any
			switch tm.Kind {
			case "ServiceMonitor":
				sm := &serviceMonitor{}
				objs.serviceMonitors, o = append(objs.serviceMonitors, sm), sm
			case "PrometheusRule":
				pr := &prometheusRule{}
				objs.prometheusRules, o = append(objs.prometheusRules, pr), pr
			default:
				t.Fatalf("document %d: kind %s of monitoring.coreos.com/v1", i, tm.Kind)
			}
			if err := sigsyaml.UnmarshalStrict([]byte(doc), o); err != nil {
				t.Fatalf("%s: %v\n%s", tm.Kind, err, doc)
			}
			continue
		}
		obj, _, err := decoder.Decode([]byte(doc), nil, nil)
		if err != nil {
			t.Fatalf("%s %s: %v\n%s", tm.APIVersion, tm.Kind, err, doc)
		}
		switch o := obj.(type) {
		case *appsv1.Deployment:
			objs.addWorkload(t, "Deployment", o.ObjectMeta, o.Spec.Replicas, o.Spec.Template)
		case *appsv1.StatefulSet:
			objs.addWorkload(t, "StatefulSet", o.ObjectMeta, o.Spec.Replicas, o.Spec.Template)
		case *corev1.Service:
			objs.services[o.Labels[componentLabel]] = o
		case *policyv1.PodDisruptionBudget:
			objs.pdbs[o.Labels[componentLabel]] = o
		case *corev1.ConfigMap:
			objs.configMaps[o.Name] = o
		case *corev1.Secret:
			objs.secrets[o.Name] = o
		case *corev1.ServiceAccount:
			objs.serviceAccounts = append(objs.serviceAccounts, o)
		case *networkingv1.NetworkPolicy:
			objs.networkPolicies = append(objs.networkPolicies, o)
		default:
			t.Fatalf("document %d: the chart makes no %T", i, obj)
		}
	}
	return objs
}

const componentLabel = "app.kubernetes.io/component"

func (o k8sObjects) addWorkload(t *testing.T, kind string, meta metav1.ObjectMeta, replicas *int32, pod corev1.PodTemplateSpec) {
	t.Helper()
	if replicas == nil {
		t.Fatalf("%s %s: no replicas", kind, meta.Name)
	}
	o.workloads[meta.Labels[componentLabel]] = workload{kind: kind, name: meta.Name, replicas: *replicas, pod: pod}
}

// securedOverlay goes over deploy/helm/secured-values.yaml in
// TestHelmSecured: a Secret of environment variables for every role, and
// for single roles their own Secret, variables, volumes and ports; an
// environment variable every role gets that copyd overrides.
const securedOverlay = `
secrets: {values: {SHARED_TOKEN: shared-Value-0815}}
extraEnv: [{name: HIVEDR_SITE, value: all}]
tailer:
  secrets: {existingSecret: tail-env}
  extraEnv: [{name: KRB5_TRACE, value: /dev/stderr}]
copyd:
  replicas: 3
  port: 19465
  secrets: {values: {COPYD_ONLY: copyd-Secret-4711}}
  extraEnv: [{name: HIVEDR_SITE, value: copyd}]
  extraVolumes: [{name: scratch, emptyDir: {medium: Memory}}]
  extraVolumeMounts: [{name: scratch, mountPath: /scratch}]
  nodeSelector: {disk: ssd}
  tolerations: [{key: dedicated, operator: Equal, value: hivedr, effect: NoSchedule}]
applier:
  replicas: 2
serviceMonitor: {enabled: true}
prometheusRule: {enabled: true}
`

// roleWant is what TestHelmSecured's values give one role.
type roleWant struct {
	key, principal, identity string
	port                     int32
	replicas                 int32
	envSecrets               []string          // envFrom, in order
	env                      map[string]string // literal variables beyond POD_NAME and HIVEDR_PRINCIPAL
	volume                   string            // a volume of this role only
}

// TestHelmSecured renders the chart for a Kerberos and TLS pipeline
// (deploy/helm/secured-values.yaml) with per-role secrets, variables and
// volumes, decodes every document strictly into Kubernetes API types, and
// checks: each role's pod runs as its own principal with its own keytab
// Secret, environment Secret, variables and volumes (and no other role's),
// beside the volumes every role shares; its probes, container port,
// Service and configuration's metrics_addr agree on the role's port; it
// has resources, a PodDisruptionBudget exactly when it runs more than one
// replica, and the chart's ServiceAccount with no token mounted; the
// configuration loads in each role's pod, every file it names lying under
// a volume mounted there; the NetworkPolicy admits the roles' ports; the
// ServiceMonitor and PrometheusRule exist only where enabled and the
// cluster serves monitoring.coreos.com/v1. helm lint --strict passes with
// the schema, and values with a typo'd or forbidden key fail it.
// docs/deploy.md shows the values file as it is.
func TestHelmSecured(t *testing.T) {
	dir := t.TempDir()
	secured, err := filepath.Abs("helm/secured-values.yaml")
	if err != nil {
		t.Fatal(err)
	}
	overlay := filepath.Join(dir, "overlay.yaml")
	if err := os.WriteFile(overlay, []byte(securedOverlay), 0o644); err != nil {
		t.Fatal(err)
	}
	run(t, "helm/hivedr", "helm", "lint", "--strict", ".", "-f", secured, "-f", overlay)
	example, err := os.ReadFile(secured)
	if err != nil {
		t.Fatal(err)
	}
	if doc, err := os.ReadFile("../docs/deploy.md"); err != nil || !strings.Contains(string(doc), "```yaml\n"+string(example)+"```\n") {
		t.Errorf("docs/deploy.md does not show helm/secured-values.yaml as it is (%v)", err)
	}

	t.Run("roles", func(t *testing.T) {
		objs := decodeStrict(t, run(t, "helm/hivedr", "helm", "template", "dr", ".", "-f", secured, "-f", overlay,
			"--api-versions", "monitoring.coreos.com/v1"))
		checkSecuredRoles(t, objs, []roleWant{
			{key: "tail", principal: "hivedr-tail@EXAMPLE.COM", identity: "hivedr-tail-identity", port: 9464, replicas: 1,
				envSecrets: []string{"dr-hivedr-secrets", "tail-env"}, env: map[string]string{"HIVEDR_SITE": "all", "KRB5_TRACE": "/dev/stderr"}},
			{key: "copyd", principal: "hivedr-copyd@EXAMPLE.COM", identity: "hivedr-copyd-identity", port: 19465, replicas: 3,
				envSecrets: []string{"dr-hivedr-secrets", "dr-hivedr-copyd-secrets"}, env: map[string]string{"HIVEDR_SITE": "copyd"}, volume: "scratch"},
			{key: "apply", principal: "hivedr-apply@EXAMPLE.COM", identity: "hivedr-apply-identity", port: 9466, replicas: 2,
				envSecrets: []string{"dr-hivedr-secrets"}, env: map[string]string{"HIVEDR_SITE": "all"}},
		})
		if s := objs.secrets["dr-hivedr-copyd-secrets"]; s == nil || s.StringData["COPYD_ONLY"] != "copyd-Secret-4711" || len(s.StringData) != 1 {
			t.Errorf("copyd's Secret: %+v", s)
		}
		if s := objs.secrets["dr-hivedr-secrets"]; s == nil || s.StringData["SHARED_TOKEN"] != "shared-Value-0815" {
			t.Errorf("the roles' shared Secret: %+v", s)
		}
		if len(objs.secrets) != 2 {
			t.Errorf("Secrets %v, want the shared one and copyd's (tail-env exists already)", slices.Sorted(maps.Keys(objs.secrets)))
		}
		copyd := objs.workloads["copyd"].pod.Spec
		if copyd.NodeSelector["disk"] != "ssd" || len(copyd.Tolerations) != 1 || copyd.Tolerations[0].Value != "hivedr" {
			t.Errorf("copyd: nodeSelector %v tolerations %+v", copyd.NodeSelector, copyd.Tolerations)
		}
		for _, role := range []string{"tail", "apply"} {
			if p := objs.workloads[role].pod.Spec; len(p.NodeSelector) != 0 || len(p.Tolerations) != 0 {
				t.Errorf("%s: copyd's nodeSelector %v or tolerations %+v", role, p.NodeSelector, p.Tolerations)
			}
		}
		if len(objs.networkPolicies) != 1 {
			t.Fatalf("%d NetworkPolicies, want 1", len(objs.networkPolicies))
		}
		np := objs.networkPolicies[0]
		var ports []int32
		for _, in := range np.Spec.Ingress {
			for _, p := range in.Ports {
				ports = append(ports, p.Port.IntVal)
			}
			if len(in.From) != 1 || in.From[0].NamespaceSelector == nil {
				t.Errorf("NetworkPolicy ingress from %+v, want the monitoring namespace", in.From)
			}
		}
		if slices.Sort(ports); !slices.Equal(ports, []int32{9464, 9466, 19465}) {
			t.Errorf("NetworkPolicy admits ports %v, want the roles' 9464, 9466 and 19465", ports)
		}
		if len(objs.serviceMonitors) != 1 || len(objs.prometheusRules) != 1 {
			t.Fatalf("enabled, API served: %d ServiceMonitors, %d PrometheusRules, want 1 each", len(objs.serviceMonitors), len(objs.prometheusRules))
		}
		if ep := objs.serviceMonitors[0].Spec.Endpoints; len(ep) != 1 || ep[0].Port != "metrics" || ep[0].Path != "/metrics" {
			t.Errorf("ServiceMonitor endpoints %+v", ep)
		}
		var alerts []string
		for _, g := range objs.prometheusRules[0].Spec.Groups {
			for _, r := range g.Rules {
				alerts = append(alerts, r.Alert)
			}
		}
		if slices.Sort(alerts); !slices.Equal(alerts, alertNames(t)) {
			t.Errorf("PrometheusRule alerts %v, want %v", alerts, alertNames(t))
		}
	})

	t.Run("monitoring", func(t *testing.T) {
		for _, c := range []struct {
			name string
			args []string
		}{
			{"enabled, API missing", []string{"-f", secured, "-f", overlay}},
			{"disabled, API served", []string{"--api-versions", "monitoring.coreos.com/v1"}},
			{"defaults", nil},
		} {
			objs := decodeStrict(t, run(t, "helm/hivedr", "helm", append([]string{"template", "dr", "."}, c.args...)...))
			if len(objs.serviceMonitors)+len(objs.prometheusRules) != 0 {
				t.Errorf("%s: %d ServiceMonitors, %d PrometheusRules, want none", c.name, len(objs.serviceMonitors), len(objs.prometheusRules))
			}
			if len(objs.workloads) != 3 || len(objs.services) != 3 {
				t.Errorf("%s: workloads %v, Services %v", c.name, slices.Sorted(maps.Keys(objs.workloads)), slices.Sorted(maps.Keys(objs.services)))
			}
		}
	})

	t.Run("defaults", func(t *testing.T) {
		objs := decodeStrict(t, run(t, "helm/hivedr", "helm", "template", "dr", "."))
		if len(objs.networkPolicies) != 0 {
			t.Errorf("a NetworkPolicy by default: %+v", objs.networkPolicies)
		}
		// copyd runs 2 replicas by default, the applier 1.
		if len(objs.pdbs) != 1 || objs.pdbs["copyd"] == nil {
			t.Errorf("PodDisruptionBudgets %v, want copyd's only", slices.Sorted(maps.Keys(objs.pdbs)))
		}
		for role, w := range objs.workloads {
			for _, v := range w.pod.Spec.Volumes {
				if v.Name == "identity" {
					t.Errorf("%s: an identity volume with no identity given", role)
				}
			}
		}
	})

	t.Run("lint refuses", func(t *testing.T) {
		for _, c := range []struct{ values, want string }{
			{"tailer:\n  replicsa: 2\n", "replicsa"},
			{"serviceMonitr: {enabled: true}\n", "serviceMonitr"},
			{"copyd:\n  identity: {principle: x@EXAMPLE.COM}\n", "principle"},
			{"config:\n  copyd: {metrics_addr: \":9999\"}\n", "metrics_addr"},
			{"applier:\n  port: \"9466\"\n", "port"},
			{"extraVolumes: [{name: config, emptyDir: {}}]\n", "extraVolumes"},
		} {
			p := filepath.Join(t.TempDir(), "values.yaml")
			if err := os.WriteFile(p, []byte(c.values), 0o644); err != nil {
				t.Fatal(err)
			}
			cmd := exec.Command(tool(t, "helm"), "lint", "--strict", ".", "-f", p)
			cmd.Dir = "helm/hivedr"
			out, err := cmd.CombinedOutput()
			if err == nil || !strings.Contains(string(out), c.want) {
				t.Errorf("helm lint --strict with\n%s: err %v, want a failure naming %s:\n%s", c.values, err, c.want, out)
			}
		}
	})
}

// checkSecuredRoles checks each role's workload against want.
func checkSecuredRoles(t *testing.T, objs k8sObjects, want []roleWant) {
	t.Helper()
	if len(objs.workloads) != len(want) {
		t.Fatalf("workloads %v, want %d", slices.Sorted(maps.Keys(objs.workloads)), len(want))
	}
	if len(objs.serviceAccounts) != 1 {
		t.Fatalf("%d ServiceAccounts, want 1", len(objs.serviceAccounts))
	}
	sa := objs.serviceAccounts[0]
	if sa.AutomountServiceAccountToken == nil || *sa.AutomountServiceAccountToken {
		t.Errorf("ServiceAccount %s mounts its token", sa.Name)
	}
	conf := objs.configMaps["dr-hivedr-config"].Data["hivedr.yaml"]
	for _, rw := range want {
		t.Run(rw.key, func(t *testing.T) {
			w, ok := objs.workloads[rw.key]
			if !ok {
				t.Fatal("no workload")
			}
			pod := w.pod.Spec
			if w.replicas != rw.replicas {
				t.Errorf("replicas %d, want %d", w.replicas, rw.replicas)
			}
			if pod.ServiceAccountName != sa.Name || pod.AutomountServiceAccountToken == nil || *pod.AutomountServiceAccountToken {
				t.Errorf("service account %q automount %v, want %s without its token", pod.ServiceAccountName, pod.AutomountServiceAccountToken, sa.Name)
			}
			if len(pod.Containers) != 1 {
				t.Fatalf("%d containers", len(pod.Containers))
			}
			ct := pod.Containers[0]

			// One port, named by the probes and the Service.
			if len(ct.Ports) != 1 || ct.Ports[0].ContainerPort != rw.port || ct.Ports[0].Name != "metrics" {
				t.Errorf("ports %+v, want metrics on %d", ct.Ports, rw.port)
			}
			for _, p := range []struct {
				what, path string
				probe      *corev1.Probe
			}{{"startup", "/healthz", ct.StartupProbe}, {"liveness", "/healthz", ct.LivenessProbe}, {"readiness", "/readyz", ct.ReadinessProbe}} {
				if p.probe == nil || p.probe.HTTPGet == nil || p.probe.HTTPGet.Path != p.path || p.probe.HTTPGet.Port.StrVal != "metrics" {
					t.Errorf("%s probe %+v, want %s on the metrics port", p.what, p.probe, p.path)
				}
			}
			if svc := objs.services[rw.key]; svc == nil || len(svc.Spec.Ports) != 1 || svc.Spec.Ports[0].Port != rw.port || svc.Spec.Ports[0].TargetPort.StrVal != "metrics" {
				t.Errorf("Service %+v, want port %d to metrics", svc, rw.port)
			}
			if len(ct.Resources.Requests) == 0 || len(ct.Resources.Limits) == 0 {
				t.Errorf("resources %+v", ct.Resources)
			}

			// A PodDisruptionBudget exactly when there is more than one pod,
			// selecting this role's pods.
			pdb := objs.pdbs[rw.key]
			switch {
			case rw.replicas > 1 && pdb == nil:
				t.Errorf("%d replicas and no PodDisruptionBudget", rw.replicas)
			case rw.replicas <= 1 && pdb != nil:
				t.Errorf("%d replica and a PodDisruptionBudget", rw.replicas)
			case pdb != nil:
				sel, err := metav1.LabelSelectorAsSelector(pdb.Spec.Selector)
				if err != nil || !sel.Matches(labels.Set(w.pod.Labels)) || pdb.Spec.MaxUnavailable == nil || pdb.Spec.MaxUnavailable.IntVal != 1 {
					t.Errorf("PodDisruptionBudget %+v does not take one of the pods %v at a time", pdb.Spec, w.pod.Labels)
				}
			}

			// Identity and environment: this role's, and no other's.
			env := map[string]string{}
			for _, e := range ct.Env {
				if _, dup := env[e.Name]; dup {
					t.Errorf("env %s twice", e.Name)
				}
				env[e.Name] = e.Value
			}
			wantEnv := maps.Clone(rw.env)
			wantEnv["POD_NAME"] = ""
			wantEnv["HIVEDR_PRINCIPAL"] = rw.principal
			if !maps.Equal(env, wantEnv) {
				t.Errorf("env %v, want %v", env, wantEnv)
			}
			var from []string
			for _, f := range ct.EnvFrom {
				if f.SecretRef != nil {
					from = append(from, f.SecretRef.Name)
				}
			}
			if !slices.Equal(from, rw.envSecrets) {
				t.Errorf("env from Secrets %v, want %v", from, rw.envSecrets)
			}
			volumes := map[string]corev1.Volume{}
			for _, v := range pod.Volumes {
				volumes[v.Name] = v
			}
			wantVolumes := []string{"ca", "config", "identity", "krb5", "registry", "state", "tmp"}
			if rw.volume != "" {
				wantVolumes = append(wantVolumes, rw.volume)
			}
			if got := slices.Sorted(maps.Keys(volumes)); !slices.Equal(got, slices.Sorted(slices.Values(wantVolumes))) {
				t.Errorf("volumes %v, want %v", got, wantVolumes)
			}
			if id := volumes["identity"].Secret; id == nil || id.SecretName != rw.identity {
				t.Errorf("identity volume %+v, want Secret %s", volumes["identity"], rw.identity)
			}
			mounts := map[string]string{} // mount path: volume
			for _, m := range ct.VolumeMounts {
				if _, ok := volumes[m.Name]; !ok {
					t.Errorf("mount %s of no volume %s", m.MountPath, m.Name)
				}
				if m.Name != "state" && m.Name != "tmp" && m.Name != "scratch" && !m.ReadOnly {
					t.Errorf("mount %s of %s is writable", m.MountPath, m.Name)
				}
				mounts[m.MountPath] = m.Name
			}
			if len(mounts) != len(volumes) {
				t.Errorf("mounts %v of volumes %v", mounts, slices.Sorted(maps.Keys(volumes)))
			}

			checkRoleConfig(t, conf, w, rw, env, mounts)
		})
	}
}

// checkRoleConfig loads the chart's configuration as the role's pod
// would: with its environment, and each file it names from the volume
// mounted over the file's path (a directory of the test standing in for
// the mount). Every file must lie under a volume the role mounts, its
// keytab under its own identity Secret, and the role's metrics_addr must
// listen on its port.
func checkRoleConfig(t *testing.T, conf string, w workload, rw roleWant, env, mounts map[string]string) {
	t.Helper()
	var tree any
	if err := yaml.Unmarshal([]byte(conf), &tree); err != nil {
		t.Fatal(err)
	}
	root := t.TempDir()
	files := map[string]string{} // key: path in the pod
	var walk func(key string, n any) any
	walk = func(key string, n any) any {
		switch n := n.(type) {
		case map[string]any:
			for k, v := range n {
				n[k] = walk(strings.TrimPrefix(key+"."+k, "."), v)
			}
		case []any:
			for i, v := range n {
				n[i] = walk(key+"["+strconv.Itoa(i)+"]", v)
			}
		case string:
			base := key[strings.LastIndexByte(key, '.')+1:]
			if base == "keytab" || base == "krb5_conf" || strings.HasSuffix(base, "_file") {
				files[key] = n
				return filepath.Join(root, n) // where the test puts the pod's file
			}
		}
		return n
	}
	tree = walk("", tree)
	caPEM := selfSignedPEM(t)
	if len(files) == 0 {
		t.Fatal("the configuration names no file")
	}
	for key, p := range files {
		var under string // the longest mount path p lies under
		for mp := range mounts {
			if strings.HasPrefix(p, strings.TrimSuffix(mp, "/")+"/") && len(mp) > len(under) {
				under = mp
			}
		}
		switch v := mounts[under]; {
		case v == "" || v == "config" || v == "state" || v == "tmp":
			t.Errorf("%s: %s lies under no volume mounted for it (%v)", key, p, mounts)
			continue
		case strings.HasSuffix(key, "keytab") && v != "identity":
			t.Errorf("%s: %s is not in the role's identity Secret", key, p)
		}
		if err := os.MkdirAll(filepath.Join(root, filepath.Dir(p)), 0o755); err != nil {
			t.Fatal(err)
		}
		content := []byte("stand-in\n")
		if strings.HasSuffix(key, "ca_file") {
			content = caPEM
		}
		if err := os.WriteFile(filepath.Join(root, p), content, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	b, err := yaml.Marshal(tree)
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(root, "hivedr.yaml")
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
	for k, v := range env {
		t.Setenv(k, v)
	}
	t.Setenv("POD_NAME", w.name+"-0")
	c, err := config.Load(p)
	if err != nil {
		t.Fatalf("the configuration does not load in %s's pod: %v\n%s", rw.key, err, b)
	}
	if c.Kerberos.Principal != rw.principal || c.Kafka.SASL.Kerberos.Principal != rw.principal {
		t.Errorf("principals %q (kerberos) and %q (kafka.sasl), want %s", c.Kerberos.Principal, c.Kafka.SASL.Kerberos.Principal, rw.principal)
	}
	addr := map[string]string{"tail": c.Tailer.MetricsAddr, "copyd": c.Copyd.MetricsAddr, "apply": c.Applier.MetricsAddr}[rw.key]
	if _, port, err := net.SplitHostPort(addr); err != nil || port != strconv.Itoa(int(rw.port)) {
		t.Errorf("metrics_addr %q, want port %d", addr, rw.port)
	}
}

// selfSignedPEM is a CA certificate in PEM, for a configuration's
// ca_file keys, which hivedr reads when it loads the file.
func selfSignedPEM(t *testing.T) []byte {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "hivedr test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), IsCA: true, BasicConstraintsValid: true}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
}
