package deploy

import (
	"encoding/json"
	"fmt"
	"net"
	"net/url"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/compose-spec/compose-go/v2/schema"
	"go.yaml.in/yaml/v3"

	"github.com/hivedr/hivedr/internal/config"
)

const composeFile = "../compose/compose.yaml"

// composeSpec is the part of compose.yaml the drift checks read.
type composeSpec struct {
	Services map[string]struct {
		Image       string
		Hostname    string
		Command     []string
		Ports       []string
		Environment map[string]string
		Volumes     []string
		Build       struct{ Context, Dockerfile string }
	}
}

// TestComposeSchema validates compose.yaml against the Compose
// specification's JSON schema (compose-spec.json as compose-go v2.16.2
// ships it), after YAML anchors and merges are resolved as Compose does.
func TestComposeSchema(t *testing.T) {
	b, err := os.ReadFile(composeFile)
	if err != nil {
		t.Fatal(err)
	}
	var doc map[string]any
	if err := yaml.Unmarshal(b, &doc); err != nil {
		t.Fatalf("compose.yaml: %v", err)
	}
	if err := schema.Validate(doc); err != nil {
		t.Fatalf("compose.yaml is not valid by the Compose specification: %v", err)
	}
	// The checker does check: a wrong type is refused.
	doc["services"].(map[string]any)["kafka"].(map[string]any)["ports"] = "19092"
	if err := schema.Validate(doc); err == nil {
		t.Fatal("the schema accepted ports given as a string")
	}
	want := []string{"apply", "copyd", "grafana", "hdfs-dr", "hdfs-dr-dn", "hdfs-src", "hdfs-src-dn", "hms-dr", "hms-src", "kafka", "postgres", "prometheus", "registry", "s3", "tail"}
	var spec composeSpec
	mustYAML(t, b, &spec)
	var got []string
	for name := range spec.Services {
		got = append(got, name)
	}
	slices.Sort(got)
	if !slices.Equal(got, want) {
		t.Errorf("services %v, want %v", got, want)
	}
}

// TestComposeMatchesStack checks compose/ against the local stack's
// scripts, so neither drifts silently: every port, version, HDFS site
// setting (block sizes included) and its NameNode/DataNode layout, Kafka
// broker setting, metastore property (the listener class included), the
// registry's settings, and hivedr's configuration (the stack defaults with
// service names).
func TestComposeMatchesStack(t *testing.T) {
	var spec composeSpec
	mustYAML(t, readFile(t, composeFile), &spec)
	lib := shellVars(string(readFile(t, "../e2e/stack/lib.sh")))

	// Ports: published on loopback as the stack listens, same number inside.
	for v, svc := range map[string]string{"POSTGRES_PORT": "postgres", "KAFKA_PORT": "kafka", "REGISTRY_PORT": "registry",
		"HDFS_SRC_NN_PORT": "hdfs-src", "HDFS_SRC_HTTP_PORT": "hdfs-src", "HDFS_DR_NN_PORT": "hdfs-dr", "HDFS_DR_HTTP_PORT": "hdfs-dr",
		"HMS_SRC_PORT": "hms-src", "HMS_DR_PORT": "hms-dr", "S3_PORT": "s3"} {
		p := lib[v]
		if want := "127.0.0.1:" + p + ":" + p; !slices.Contains(spec.Services[svc].Ports, want) {
			t.Errorf("%s: ports %v, want %s (%s in lib.sh)", svc, spec.Services[svc].Ports, want, v)
		}
	}
	kafka := spec.Services["kafka"].Environment
	if want := "PLAINTEXT://:" + lib["KAFKA_PORT"] + ",CONTROLLER://:" + lib["KAFKA_CONTROLLER_PORT"]; kafka["KAFKA_LISTENERS"] != want {
		t.Errorf("KAFKA_LISTENERS %q, want %q", kafka["KAFKA_LISTENERS"], want)
	}

	// Versions: the stack's pins (lib.sh), the Prometheus the tests run
	// (Debian's, `make tools`), the Grafana the dashboard requires.
	promVersion := regexp.MustCompile(`version (\d+\.\d+\.\d+)`).FindStringSubmatch(string(run(t, ".", "prometheus", "--version")))
	if promVersion == nil {
		t.Fatal("prometheus --version names no version")
	}
	var dash struct {
		Requires []struct{ ID, Version string } `json:"__requires"`
	}
	if err := json.Unmarshal(readFile(t, "grafana/hivedr-dashboard.json"), &dash); err != nil {
		t.Fatal(err)
	}
	grafana := ""
	for _, r := range dash.Requires {
		if r.ID == "grafana" {
			grafana = r.Version
		}
	}
	if grafana == "" {
		t.Error("the dashboard's __requires names no Grafana version")
	}
	for svc, want := range map[string]string{"kafka": "apache/kafka:" + lib["KAFKA_VERSION"], "s3": "versity/versitygw:" + lib["VERSITYGW_VERSION"],
		"postgres": "postgres:" + lib["POSTGRES_VERSION"], "prometheus": "prom/prometheus:v" + promVersion[1], "grafana": "grafana/grafana:" + grafana} {
		if spec.Services[svc].Image != want || strings.HasSuffix(want, ":") {
			t.Errorf("%s: image %q, want %q", svc, spec.Services[svc].Image, want)
		}
	}

	// Standing on its own: no mount of a local stack's state; bind
	// mounts are compose/'s own files or the repository's deploy/ files.
	for name, svc := range spec.Services {
		for _, v := range svc.Volumes {
			src, _, _ := strings.Cut(v, ":")
			named := !strings.ContainsAny(src, "./")
			if strings.Contains(v, ".stack") || !(named || strings.HasPrefix(src, "./") || strings.HasPrefix(src, "../deploy/")) {
				t.Errorf("%s mounts %s: compose must not need a local stack (or anything outside compose/ and deploy/)", name, v)
			}
		}
	}

	// Metastores: built by Dockerfile.hms from the stack's pom at the
	// stack's Hive version, the listener made as hms.sh makes it, started
	// with hms.sh's JVM flags, each with its site file.
	dockerHMS := string(readFile(t, "../compose/Dockerfile.hms"))
	entry := string(readFile(t, "../compose/hms/entrypoint.sh"))
	hmsPom := string(readFile(t, "../e2e/stack/hms/pom.xml"))
	if !strings.Contains(hmsPom, "<hive.version>"+lib["HIVE_VERSION"]+"</hive.version>") {
		t.Errorf("the stack's metastore pom is not Hive %s", lib["HIVE_VERSION"])
	}
	for _, want := range []string{"COPY e2e/stack/hms/pom.xml", "COPY e2e/stack/services/hms.sh", "hms_write_tools", "Retarget",
		"DbNotificationListener401.java", "COPY compose/hms/entrypoint.sh", "FROM eclipse-temurin:17-jre"} {
		if !strings.Contains(dockerHMS, want) {
			t.Errorf("Dockerfile.hms lacks %q", want)
		}
	}
	javaFlags := regexp.MustCompile(`(?s)hms_java\(\) \{(.*?)\n\}`).FindStringSubmatch(string(readFile(t, "../e2e/stack/services/hms.sh")))
	if javaFlags == nil {
		t.Fatal("hms.sh has no hms_java")
	}
	heap := regexp.MustCompile(`HMS_HEAP=\$\{HMS_HEAP:-(\w+)\}`).FindStringSubmatch(string(readFile(t, "../e2e/stack/services/hms.sh")))
	flags := 0
	for _, f := range strings.Fields(javaFlags[1]) {
		f = strings.Trim(f, `"\`)
		if f == `-Xmx$HMS_HEAP` && heap != nil {
			f = "-Xmx" + heap[1]
		}
		if strings.HasPrefix(f, "-") && !strings.Contains(f, "$") && f != "-cp" {
			flags++
			if !strings.Contains(entry, f) {
				t.Errorf("compose/hms/entrypoint.sh lacks the stack's JVM flag %s", f)
			}
		}
	}
	if flags < 6 || !strings.Contains(entry, `"${HMS_JVM_OPENS[@]}"`) || !strings.Contains(entry, "MetastoreSchemaTool") {
		t.Errorf("compose/hms/entrypoint.sh: %d of hms_java's flags checked; want them all, HMS_JVM_OPENS and the schema tool", flags)
	}
	for _, side := range []string{"src", "dr"} {
		svc := spec.Services["hms-"+side]
		if svc.Build.Dockerfile != "compose/Dockerfile.hms" || svc.Build.Context != ".." || svc.Image != "" {
			t.Errorf("hms-%s: build %+v image %q, want compose/Dockerfile.hms", side, svc.Build, svc.Image)
		}
		if want := "./conf/hms-" + side + "-site.xml:/etc/metastore/metastore-site.xml:ro"; !slices.Contains(svc.Volumes, want) {
			t.Errorf("hms-%s: volumes %v, want %s", side, svc.Volumes, want)
		}
	}
	regVersion := shellVars(string(readFile(t, "../e2e/stack/services/registry.sh")))["REGISTRY_VERSION"]
	if d := string(readFile(t, "../compose/Dockerfile.registry")); strings.Count(d, "@"+regVersion) != 1 || !strings.Contains(d, "main.version="+regVersion) {
		t.Errorf("Dockerfile.registry does not build the registry at %s", regVersion)
	}
	if pom := string(readFile(t, "../e2e/stack/hdfs/pom.xml")); !strings.Contains(pom, lib["HADOOP_VERSION"]) {
		t.Errorf("the stack's HDFS pom is not Hadoop %s", lib["HADOOP_VERSION"])
	}

	// HDFS: the stack's pom, process layout, JVM flags, logging and every
	// setting of its site files (composeMatchesHDFS).
	composeMatchesHDFS(t, spec, lib)

	// Kafka: every literal broker setting of kafka.sh, as KAFKA_* variables.
	// The secured variant's settings (heredocs ending SECURED) are not
	// compose's: it mirrors the plain stack.
	secured := regexp.MustCompile(`(?s)<<SECURED\n.*?\nSECURED\n`)
	kafkaSh := secured.ReplaceAllString(string(readFile(t, "../e2e/stack/services/kafka.sh")), "")
	props := regexp.MustCompile(`(?m)^([a-z][a-z.]+)=([^$\n]+)$`).FindAllStringSubmatch(kafkaSh, -1)
	if len(props) < 20 {
		t.Fatalf("read %d settings from kafka.sh", len(props))
	}
	for _, m := range props {
		key := "KAFKA_" + strings.ToUpper(strings.ReplaceAll(m[1], ".", "_"))
		if kafka[key] != m[2] {
			t.Errorf("kafka: %s=%q, want %q (%s in kafka.sh)", key, kafka[key], m[2], m[1])
		}
	}

	// Metastores: every property of hms.sh but the secured variant's
	// (heredocs ending SECURED), literal values equal; the listener is the
	// stack's default (compat) class; change management on the source only.
	hmsSh := secured.ReplaceAllString(string(readFile(t, "../e2e/stack/services/hms.sh")), "")
	stackProps := xmlProps(hmsSh)
	compat := regexp.MustCompile(`compat\) listener=(\S+) ;;`).FindStringSubmatch(hmsSh)
	for _, side := range []string{"src", "dr"} {
		got := xmlProps(string(readFile(t, "../compose/conf/hms-"+side+"-site.xml")))
		for name, v := range stackProps {
			cm := strings.HasPrefix(name, "metastore.repl.cm")
			switch {
			case cm && side == "dr":
				if _, ok := got[name]; ok {
					t.Errorf("hms-dr-site.xml sets %s: change management is the source's", name)
				}
			case v == "$listener":
				if compat == nil || got[name] != compat[1] {
					t.Errorf("hms-%s: listener %q, want the stack's %v", side, got[name], compat)
				}
			case !strings.Contains(v, "$"):
				if got[name] != v {
					t.Errorf("hms-%s: %s=%q, want %q as hms.sh sets it", side, name, got[name], v)
				}
			default:
				if _, ok := got[name]; !ok {
					t.Errorf("hms-%s: %s missing", side, name)
				}
			}
		}
		if p := got["metastore.thrift.port"]; p != lib["HMS_"+strings.ToUpper(side)+"_PORT"] {
			t.Errorf("hms-%s: thrift port %s", side, p)
		}
	}

	// Registry: the stack's settings, its port, its database.
	var reg, stackReg map[string]any
	mustYAML(t, readFile(t, "../compose/conf/registry.yaml"), &reg)
	regSh := string(readFile(t, "../e2e/stack/services/registry.sh"))
	heredoc := regexp.MustCompile(`(?s)<<EOF\n(.*?)\nEOF`).FindStringSubmatch(regSh)
	r := strings.NewReplacer(`"$HOST"`, `"x"`, "$REGISTRY_PORT", lib["REGISTRY_PORT"], "$POSTGRES_PORT", lib["POSTGRES_PORT"], "$REGISTRY_DB", "schema_registry")
	mustYAML(t, []byte(r.Replace(heredoc[1])), &stackReg)
	for _, m := range []map[string]any{reg, stackReg} {
		m["server"].(map[string]any)["host"] = "x"
		m["storage"].(map[string]any)["postgresql"].(map[string]any)["host"] = "x"
	}
	if a, b := fmt.Sprint(reg), fmt.Sprint(stackReg); a != b {
		t.Errorf("registry.yaml:\n%s\nwant (registry.sh):\n%s", a, b)
	}

	// hivedr: the local stack's defaults, with service names for hosts.
	// The keys compose gives when the environment does not: ${VAR:-default}.
	for _, k := range []string{"S3_ACCESS_KEY", "S3_SECRET_KEY"} {
		m := regexp.MustCompile(`^\$\{` + k + `:-(.*)\}$`).FindStringSubmatch(spec.Services["tail"].Environment[k])
		if m == nil {
			t.Fatalf("tail: %s=%q, want ${%s:-default}", k, spec.Services["tail"].Environment[k], k)
		}
		t.Setenv(k, m[1])
	}
	c, err := config.Load("../compose/conf/hivedr.yaml")
	if err != nil {
		t.Fatal(err)
	}
	d := config.Default()
	same := func(what string, got, want any) {
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("hivedr.yaml %s: %v, want %v as the stack's defaults", what, got, want)
		}
	}
	same("source metastore port", port(c.Source.Metastore), port(d.Source.Metastore))
	same("kafka broker port", port(c.Kafka.Brokers[0]), port(d.Kafka.Brokers[0]))
	same("kafka replication factor", c.Kafka.ReplicationFactor, d.Kafka.ReplicationFactor)
	same("kafka topic prefix", c.Kafka.TopicPrefix, d.Kafka.TopicPrefix)
	same("schema registry port", port(c.SchemaRegistry.URL), port(d.SchemaRegistry.URL))
	same("DR metastore port", port(c.Applier.Metastore), port(d.Applier.Metastore))
	for i := range d.Filesystems.HDFS {
		same("hdfs namenode port", port(c.Filesystems.HDFS[i].NameNodes[0]), port(d.Filesystems.HDFS[i].NameNodes[0]))
		same("webhdfs port", port(c.Filesystems.HDFS[i].WebHDFS), port(d.Filesystems.HDFS[i].WebHDFS))
	}
	same("s3 endpoint port", port(c.Filesystems.S3[0].Endpoint), port(d.Filesystems.S3[0].Endpoint))
	same("s3 keys", c.Filesystems.S3[0].AccessKey+"/"+c.Filesystems.S3[0].SecretKey, d.Filesystems.S3[0].AccessKey+"/"+d.Filesystems.S3[0].SecretKey)
	same("source roots", paths(c.Replication.SourceRoots), paths(d.Replication.SourceRoots))
	same("cm roots", paths(c.Copyd.CMRoots), paths(d.Copyd.CMRoots))
	for i, m := range d.Replication.PathMappings {
		same("path mapping", port(c.Replication.PathMappings[i].Source)+"->"+port(c.Replication.PathMappings[i].Target), port(m.Source)+"->"+port(m.Target))
	}
	for _, role := range []string{"tail", "copyd", "apply"} {
		if env := spec.Services[role].Environment; env["HIVEDR_CONFIG"] != "/etc/hivedr/hivedr.yaml" || spec.Services[role].Command[0] != role {
			t.Errorf("%s: command %v environment %v", role, spec.Services[role].Command, env)
		}
	}

	// Prometheus scrapes each daemon where its metrics_addr listens, under
	// its service's name, and loads the alert rules it mounts.
	var prom struct {
		RuleFiles     []string `yaml:"rule_files"`
		ScrapeConfigs []struct {
			JobName       string                       `yaml:"job_name"`
			StaticConfigs []struct{ Targets []string } `yaml:"static_configs"`
		} `yaml:"scrape_configs"`
	}
	mustYAML(t, readFile(t, "../compose/conf/prometheus.yaml"), &prom)
	targets := map[string][]string{}
	for _, sc := range prom.ScrapeConfigs {
		for _, st := range sc.StaticConfigs {
			targets[sc.JobName] = append(targets[sc.JobName], st.Targets...)
		}
	}
	for role, addr := range map[string]string{"tail": c.Tailer.MetricsAddr, "copyd": c.Copyd.MetricsAddr, "apply": c.Applier.MetricsAddr} {
		p := port(addr)
		if p == "" {
			t.Errorf("hivedr.yaml: %s metrics address %q has no port", role, addr)
			continue
		}
		if got := targets["hivedr-"+role]; !slices.Equal(got, []string{role + ":" + p}) {
			t.Errorf("prometheus.yaml: job hivedr-%s targets %v, want [%s:%s] (hivedr.yaml's metrics address %s)", role, got, role, p, addr)
		}
		if want := "127.0.0.1:" + p + ":" + p; !slices.Contains(spec.Services[role].Ports, want) {
			t.Errorf("%s: ports %v, want %s (its metrics address)", role, spec.Services[role].Ports, want)
		}
		delete(targets, "hivedr-"+role)
	}
	if len(targets) != 0 {
		t.Errorf("prometheus.yaml scrapes jobs hivedr.yaml has no daemon for: %v", targets)
	}
	for _, rf := range prom.RuleFiles {
		if !slices.Contains(spec.Services["prometheus"].Volumes, "../deploy/prometheus/hivedr-alerts.yaml:"+rf+":ro") {
			t.Errorf("prometheus.yaml loads %s, which compose.yaml does not mount from deploy/prometheus", rf)
		}
	}
}

// shellVars are a shell script's NAME=value assignments at line start.
// A port written as $((N + PORT_OFFSET)) (lib.sh) is N: the compose file
// describes the stack without an offset.
func shellVars(s string) map[string]string {
	out := map[string]string{}
	for _, m := range regexp.MustCompile(`(?m)^([A-Z0-9_]+)=([^\s$(]+)\s*$`).FindAllStringSubmatch(s, -1) {
		out[m[1]] = m[2]
	}
	for _, m := range regexp.MustCompile(`(?m)^([A-Z0-9_]+)=\$\(\((\d+) \+ PORT_OFFSET\)\)\s*$`).FindAllStringSubmatch(s, -1) {
		out[m[1]] = m[2]
	}
	return out
}

// xmlProps are the <property><name>N</name><value>V</value></property> of s.
func xmlProps(s string) map[string]string {
	out := map[string]string{}
	for _, m := range regexp.MustCompile(`<name>([^<]+)</name><value>([^<]*)</value>`).FindAllStringSubmatch(s, -1) {
		out[m[1]] = m[2]
	}
	return out
}

// port is the port of a host:port or URL; "" when none.
func port(addr string) string {
	if u, err := url.Parse(addr); err == nil && u.Host != "" {
		return u.Port()
	}
	_, p, _ := net.SplitHostPort(addr)
	return p
}

// paths are the ports and paths of locations, without their hosts.
func paths(locs []string) []string {
	var out []string
	for _, l := range locs {
		u, _ := url.Parse(l)
		out = append(out, u.Scheme+":"+u.Port()+u.Path)
	}
	return out
}

func readFile(t *testing.T, p string) []byte {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func mustYAML(t *testing.T, b []byte, v any) {
	t.Helper()
	if err := yaml.Unmarshal(b, v); err != nil {
		t.Fatal(err)
	}
}
