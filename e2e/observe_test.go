package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	wl "github.com/hivedr/hivedr/e2e/workload"
	"github.com/hivedr/hivedr/internal/config"
	"github.com/hivedr/hivedr/internal/testenv"
)

// observed is a pipeline whose three daemons serve metrics and health on
// ports of their own, and whose metastore connections (the tailer's
// source, the applier's DR) and the source NameNode's RPC go through
// proxies the test can cut.
type observed struct {
	*pipelineTest
	tailAddr, copydAddr        string
	srcProxy, drProxy, nnProxy *tcpProxy
}

func startObserved(t *testing.T, d time.Duration, dbs ...string) *observed {
	t.Helper()
	env := testenv.Require(t)
	o := &observed{tailAddr: fmt.Sprintf("127.0.0.1:%d", freePort(t)), copydAddr: fmt.Sprintf("127.0.0.1:%d", freePort(t))}
	o.srcProxy = newTCPProxy(t, env.Get(t, "HIVEDR_HMS_SRC"))
	o.drProxy = newTCPProxy(t, env.Get(t, "HIVEDR_HMS_DR"))
	srcNN := env.Get(t, "HIVEDR_HDFS_SRC_NAMENODE")
	o.nnProxy = newTCPProxy(t, srcNN)
	pt := &pipelineTest{ctx: ctxFor(t, d), src: env.HMS(t, testenv.Source), dr: env.HMS(t, testenv.DR)}
	pt.srcFS, pt.drFS = pipelineFS(t, env)
	pt.pipeline = newPipeline(t, env, dbs, currentEventID(t, pt.ctx, pt.src))
	// Metrics on every daemon, the metastores through the proxies.
	b, err := os.ReadFile(pt.conf)
	if err != nil {
		t.Fatal(err)
	}
	y := strings.Replace(string(b), `metrics_addr: ""`, `metrics_addr: "`+o.tailAddr+`"`, 1)
	y = strings.Replace(y, `metrics_addr: ""`, `metrics_addr: "`+o.copydAddr+`"`, 1)
	y = strings.Replace(y, "metastore: "+env.Get(t, "HIVEDR_HMS_SRC"), "metastore: "+o.srcProxy.addr, 1)
	y = strings.Replace(y, "metastore: "+env.Get(t, "HIVEDR_HMS_DR"), "metastore: "+o.drProxy.addr, 1)
	// Locations still name the NameNode as the metastore writes them.
	y = strings.Replace(y, "{namenodes: ["+srcNN+"]", "{authority: \""+srcNN+"\", namenodes: ["+o.nnProxy.addr+"]", 1)
	if err := os.WriteFile(pt.conf, []byte(y), 0o644); err != nil {
		t.Fatal(err)
	}
	if pt.cfg, err = config.Load(pt.conf); err != nil {
		t.Fatal(err)
	}
	if pt.cfg.Tailer.MetricsAddr != o.tailAddr || pt.cfg.Applier.Metastore != o.drProxy.addr || pt.cfg.Source.Metastore != o.srcProxy.addr ||
		pt.cfg.Filesystems.HDFS[0].NameNodes[0] != o.nnProxy.addr {
		t.Fatalf("config not rewritten:\n%s", y)
	}
	pt.startAll()
	pt.w = wl.NewSource(pt.src, pt.srcFS, env.Get(t, "HIVEDR_HMS_SRC_EXTERNAL"))
	o.pipelineTest = pt
	return o
}

// probe returns the status code and body of GET http://addr/path.
func probe(addr, path string) (int, string) {
	c := http.Client{Timeout: 10 * time.Second}
	resp, err := c.Get("http://" + addr + path)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// waitProbe waits until GET addr/path answers code with a body containing want.
func (o *observed) waitProbe(role, addr, path string, code int, want string) {
	o.t.Helper()
	var got int
	var body string
	poll(o.t, 90*time.Second, 200*time.Millisecond, fmt.Sprintf("%s %s: %d with %q", role, path, code, want), func() bool {
		o.checkAlive()
		got, body = probe(addr, path)
		return got == code && strings.Contains(body, want)
	})
	o.t.Logf("%s %s: %d %s", role, path, got, strings.ReplaceAll(strings.TrimSpace(body), "\n", "; "))
}

// TestHealthProbes runs the three daemons on the stack and checks their
// probes: /healthz always, /readyz ready once started, failing (503,
// naming the check) while the role's metastore (tail, apply) or NameNode
// (copyd) is cut off, ready again
// when it is back, and failing on the applier while a database is halted,
// the other roles staying ready.
func TestHealthProbes(t *testing.T) {
	u := uniq(t)
	bad, good := "hp_bad_"+u, "hp_good_"+u
	o := startObserved(t, 6*time.Minute, bad, good)
	roles := map[string]string{"tail": o.tailAddr, "copyd": o.copydAddr, "apply": o.metrics}
	for role, addr := range roles {
		o.waitProbe(role, addr, "/healthz", 200, "ok")
		o.waitProbe(role, addr, "/readyz", 200, "ok kafka")
	}
	_, body := probe(o.tailAddr, "/readyz")
	if !strings.Contains(body, "ok source") || !strings.Contains(body, "ok running") {
		t.Errorf("tailer /readyz: %q", body)
	}
	// Each metrics address also serves the Go runtime's and the process's
	// collectors and the build, labelled with the role; every series of
	// each carries the pipeline (the topic prefix).
	for role, addr := range roles {
		m, ok := scrape("http://" + addr + "/metrics")
		if !ok {
			t.Fatalf("%s /metrics does not answer", role)
		}
		for _, l := range strings.Split(httpGet(t, "http://"+addr+"/metrics"), "\n") {
			if l != "" && !strings.HasPrefix(l, "#") && !strings.Contains(l, `pipeline="`+o.prefix+`"`) {
				t.Errorf("%s /metrics: %s lacks pipeline=%q", role, l, o.prefix)
			}
		}
		for _, name := range []string{"go_goroutines", "go_memstats_heap_alloc_bytes", "go_gc_duration_seconds_count",
			"process_cpu_seconds_total", "process_resident_memory_bytes", "process_open_fds", "process_start_time_seconds"} {
			if v, ok := m[name]; !ok || (v <= 0 && name != "go_gc_duration_seconds_count") {
				t.Errorf("%s /metrics: %s = %v (exposed %v), want a positive value", role, name, v, ok)
			}
		}
		var build []string
		for series, v := range m {
			if strings.HasPrefix(series, "hivedr_build_info{") && v == 1 && strings.Contains(series, `role="`+role+`"`) {
				build = append(build, series)
			}
		}
		if len(build) != 1 || !strings.Contains(build[0], `goversion="go`) {
			t.Errorf("%s /metrics: hivedr_build_info %v, want one series of role %s with its Go version", role, build, role)
		}
	}

	// The applier loses the DR metastore, the tailer its source.
	o.drProxy.stop()
	o.waitProbe("apply", o.metrics, "/readyz", 503, "fail dr_metastore")
	o.srcProxy.stop()
	o.waitProbe("tail", o.tailAddr, "/readyz", 503, "fail source")
	if code, _ := probe(o.metrics, "/healthz"); code != 200 {
		t.Errorf("applier /healthz %d while its metastore is away: liveness must not fail on a dependency", code)
	}
	// copyd loses a NameNode.
	o.nnProxy.stop()
	o.waitProbe("copyd", o.copydAddr, "/readyz", 503, "fail filesystems: no HDFS NameNode of ["+o.nnProxy.addr+"] accepts connections")
	o.nnProxy.start()
	o.drProxy.start()
	o.srcProxy.start()
	o.waitProbe("copyd", o.copydAddr, "/readyz", 200, "ok filesystems")
	o.waitProbe("apply", o.metrics, "/readyz", 200, "ok dr_metastore")
	o.waitProbe("tail", o.tailAddr, "/readyz", 200, "ok source")

	// A database halts: the applier's readiness names it and stays 200 (a
	// halt is an alert, not an unready daemon); the others are ready.
	ctx := o.ctx
	spec := wl.TableSpec{Columns: []string{"id bigint"}}
	if err := errors.Join(o.w.CreateDatabase(ctx, bad), o.w.CreateDatabase(ctx, good)); err != nil {
		t.Fatal(err)
	}
	outside := "hdfs://" + o.env.Get(t, "HIVEDR_HDFS_SRC_NAMENODE") + "/elsewhere/" + u + "/t_out"
	if err := o.w.CreateTable(ctx, bad, "t_out", wl.TableSpec{Columns: spec.Columns, Location: outside}); err != nil {
		t.Fatal(err)
	}
	o.waitProbe("apply", o.metrics, "/readyz", 200, "warn not_halted: 1 databases halted: db="+bad+" pipeline="+o.prefix+" reason=path_outside_roots")
	for _, role := range []string{"tail", "copyd"} {
		if code, body := probe(roles[role], "/readyz"); code != 200 {
			t.Errorf("%s /readyz %d while a database is halted: %q", role, code, body)
		}
	}
}

// TestDashboardQueriesOnPrometheus runs a real Prometheus (Debian's
// package) scraping the three daemons on the stack with hivedr's alert
// rules loaded, drives a workload with files and a database that halts,
// and checks that HivedrDatabaseHalted fires for that database and that
// every query of the Grafana dashboard returns a series.
func TestDashboardQueriesOnPrometheus(t *testing.T) {
	promBin, err := exec.LookPath("prometheus")
	if err != nil {
		t.Fatal("prometheus not found: run `make tools` (deploy/tools.sh)")
	}
	u := uniq(t)
	bad, good := "pd_bad_"+u, "pd_good_"+u
	o := startObserved(t, 8*time.Minute, bad, good)
	prom := startPrometheus(t, promBin, map[string]string{"hivedr-tail": o.tailAddr, "hivedr-copyd": o.copydAddr, "hivedr-apply": o.metrics})

	ctx := o.ctx
	spec := wl.TableSpec{Columns: []string{"id bigint"}, PartitionKeys: []string{"day"}}
	if err := errors.Join(o.w.CreateDatabase(ctx, bad), o.w.CreateDatabase(ctx, good)); err != nil {
		t.Fatal(err)
	}
	if err := o.w.CreateTable(ctx, good, "t", spec); err != nil {
		t.Fatal(err)
	}
	if _, err := o.w.AddPartitions(ctx, good, "t", [][]string{{"d1"}, {"d2"}}, 500); err != nil {
		t.Fatal(err)
	}
	outside := "hdfs://" + o.env.Get(t, "HIVEDR_HDFS_SRC_NAMENODE") + "/elsewhere/" + u + "/t_out"
	if err := o.w.CreateTable(ctx, bad, "t_out", wl.TableSpec{Columns: []string{"id bigint"}, Location: outside}); err != nil {
		t.Fatal(err)
	}

	// The halt alert fires, for that database.
	poll(t, 3*time.Minute, time.Second, "HivedrDatabaseHalted firing for "+bad, func() bool {
		o.checkAlive()
		var r struct {
			Data struct {
				Alerts []struct {
					Labels map[string]string
					State  string
				}
			}
		}
		if prom.get("/api/v1/alerts", &r) != nil {
			return false
		}
		for _, a := range r.Data.Alerts {
			if a.Labels["alertname"] == "HivedrDatabaseHalted" && a.Labels["db"] == bad && a.State == "firing" {
				if a.Labels["reason"] != "path_outside_roots" {
					t.Errorf("alert reason %q", a.Labels["reason"])
				}
				return true
			}
		}
		return false
	})
	// Events of the good database applied, files copied: every panel has data.
	poll(t, 2*time.Minute, time.Second, "files copied, seen by Prometheus", func() bool {
		n, _ := prom.query(`sum(hivedr_copyd_files_total{status=~"COPIED|SKIPPED_IDENTICAL"})`)
		return n > 0
	})
	// A database waiting for its files: copyd stopped, a partition with a
	// file added; Prometheus sees the wait; copyd back.
	o.copyd.stop(t)
	if _, err := o.w.AddPartitions(ctx, good, "t", [][]string{{"d3"}}, 100); err != nil {
		t.Fatal(err)
	}
	poll(t, 2*time.Minute, time.Second, "the applier waiting for files, seen by Prometheus", func() bool {
		n, _ := prom.query(`hivedr_applier_waiting{db="` + good + `",reason="waiting_for_files"} * on(db) hivedr_applier_waiting_files`)
		return n > 0
	})
	o.startCopyd()
	// A bootstrap of the good database, applied.
	o.requestBootstrap([]string{good}, nil)
	eventually(t, 3*time.Minute, "the bootstrap applied", func() bool {
		o.checkAlive()
		return bootstrapDone(ctx, o.dr, good) != ""
	})
	poll(t, time.Minute, time.Second, "the bootstrap's counts seen by Prometheus", func() bool {
		n, _ := prom.query(`hivedr_applier_bootstrap_applied_total{db="` + good + `"}`)
		return n > 0
	})
	var dash struct {
		Panels []struct {
			Title   string
			Targets []struct{ Expr string }
		}
	}
	b, err := os.ReadFile("../deploy/grafana/hivedr-dashboard.json")
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &dash); err != nil {
		t.Fatal(err)
	}
	// Each query returns a series, and each hivedr metric it names has
	// had series in the test's window: a query ending in "or vector(0)"
	// returns one even when its metric is missing (renamed, never
	// exposed), so its metrics are checked on their own.
	queries, fallbacks := 0, 0
	metric := regexp.MustCompile(`hivedr_[a-z_]+`)
	for _, p := range dash.Panels {
		for _, tg := range p.Targets {
			q := strings.NewReplacer(`$db`, ".*", `$pipeline`, o.prefix, `$job`, ".*", `$namespace`, ".*", "$__rate_interval", "1m").Replace(tg.Expr)
			var series int
			poll(t, time.Minute, time.Second, fmt.Sprintf("panel %q query %s returns a series", p.Title, q), func() bool {
				var err error
				series, err = prom.query(q)
				return err == nil && series > 0
			})
			queries++
			if strings.Contains(q, "or vector(0)") {
				fallbacks++
			}
			names := metric.FindAllString(q, -1)
			if len(names) == 0 {
				t.Errorf("panel %q query %s names no hivedr metric", p.Title, q)
			}
			for _, name := range names {
				n, err := prom.query(`count_over_time({__name__="` + name + `"}[15m])`)
				if err != nil || n == 0 {
					t.Errorf("panel %q query %s: its metric %s has had no series (%v)", p.Title, q, name, err)
				}
			}
		}
	}
	t.Logf("%d dashboard queries, each with a series and each metric it names exposed (%d end in \"or vector(0)\")", queries, fallbacks)
	// Only the halted database alerts; the daemons are all there.
	firing := prom.firing(t)
	for _, not := range []string{"db:" + good, "HivedrApplierGroupEmpty", "HivedrCopydGroupEmpty", "HivedrTailerStalled"} {
		if strings.Contains(firing, not) {
			t.Errorf("alerts firing with %s: %s", not, firing)
		}
	}
	t.Logf("firing: %s", firing)
}

// promServer is a Prometheus the test started.
type promServer struct {
	addr string
}

// startPrometheus runs Prometheus on a loopback port of its own, scraping
// targets (job -> address) every second and evaluating hivedr's alert
// rules every second; it is stopped when the test ends.
func startPrometheus(t *testing.T, bin string, targets map[string]string) *promServer {
	t.Helper()
	dir := t.TempDir()
	rules, err := filepath.Abs("../deploy/prometheus/hivedr-alerts.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var jobs strings.Builder
	for job, addr := range targets {
		fmt.Fprintf(&jobs, "  - job_name: %s\n    static_configs: [{targets: [%q]}]\n", job, addr)
	}
	conf := writeFile(t, "prometheus.yaml", fmt.Sprintf("global: {scrape_interval: 1s, evaluation_interval: 1s}\nrule_files: [%q]\nscrape_configs:\n%s", rules, jobs.String()))
	p := &promServer{addr: fmt.Sprintf("127.0.0.1:%d", freePort(t))}
	cmd := exec.Command(bin, "--config.file="+conf, "--storage.tsdb.path="+filepath.Join(dir, "data"),
		"--web.listen-address="+p.addr, "--storage.tsdb.retention.time=1h", "--log.level=warn")
	out := &syncBuffer{}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
		if t.Failed() {
			t.Logf("prometheus output:\n%s", tail(out.String(), 30))
		}
	})
	poll(t, time.Minute, 200*time.Millisecond, "prometheus scraping every target", func() bool {
		var r struct {
			Data struct {
				ActiveTargets []struct{ Health string }
			}
		}
		if p.get("/api/v1/targets", &r) != nil || len(r.Data.ActiveTargets) != len(targets) {
			return false
		}
		for _, tg := range r.Data.ActiveTargets {
			if tg.Health != "up" {
				return false
			}
		}
		return true
	})
	return p
}

func (p *promServer) get(path string, v any) error {
	c := http.Client{Timeout: 10 * time.Second}
	resp, err := c.Get("http://" + p.addr + path)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		b, _ := io.ReadAll(resp.Body)
		return fmt.Errorf("%s: %s %s", path, resp.Status, b)
	}
	return json.NewDecoder(resp.Body).Decode(v)
}

// query runs an instant query and returns how many series it gave; for
// a scalar result, 1 when its value is not zero.
func (p *promServer) query(q string) (int, error) {
	var r struct {
		Status string
		Data   struct {
			ResultType string
			Result     json.RawMessage
		}
	}
	if err := p.get("/api/v1/query?query="+url.QueryEscape(q), &r); err != nil {
		return 0, err
	}
	var series []json.RawMessage
	if err := json.Unmarshal(r.Data.Result, &series); err != nil {
		return 0, fmt.Errorf("query %s: %s result %s", q, r.Data.ResultType, r.Data.Result)
	}
	return len(series), nil
}

// firing lists the alerts firing, for messages.
func (p *promServer) firing(t *testing.T) string {
	var r struct {
		Data struct {
			Alerts []struct {
				Labels map[string]string
				State  string
			}
		}
	}
	if err := p.get("/api/v1/alerts", &r); err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, a := range r.Data.Alerts {
		if a.State == "firing" {
			out = append(out, fmt.Sprint(a.Labels))
		}
	}
	return strings.Join(out, "; ")
}

// tcpProxy forwards a loopback port to a target address until stopped;
// stopping closes the listener and every open connection, as a machine
// going away would.
type tcpProxy struct {
	t      *testing.T
	addr   string
	target string

	mu    sync.Mutex
	ln    net.Listener
	conns map[net.Conn]struct{}
}

func newTCPProxy(t *testing.T, target string) *tcpProxy {
	p := &tcpProxy{t: t, addr: fmt.Sprintf("127.0.0.1:%d", freePort(t)), target: target}
	p.start()
	t.Cleanup(p.stop)
	return p
}

func (p *tcpProxy) start() {
	p.t.Helper()
	var ln net.Listener
	var err error
	// The port was ours a moment ago; TIME_WAIT may need a retry.
	poll(p.t, 10*time.Second, 50*time.Millisecond, "listen on "+p.addr, func() bool {
		ln, err = net.Listen("tcp", p.addr)
		return err == nil
	})
	p.mu.Lock()
	p.ln, p.conns = ln, map[net.Conn]struct{}{}
	p.mu.Unlock()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go p.forward(c)
		}
	}()
}

func (p *tcpProxy) forward(c net.Conn) {
	d := net.Dialer{Timeout: 5 * time.Second}
	up, err := d.DialContext(context.Background(), "tcp", p.target)
	if err != nil {
		c.Close()
		return
	}
	p.mu.Lock()
	if p.conns == nil {
		p.mu.Unlock()
		c.Close()
		up.Close()
		return
	}
	p.conns[c], p.conns[up] = struct{}{}, struct{}{}
	p.mu.Unlock()
	go func() { io.Copy(up, c); up.Close() }()
	io.Copy(c, up)
	c.Close()
}

func (p *tcpProxy) stop() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ln != nil {
		p.ln.Close()
		p.ln = nil
	}
	for c := range p.conns {
		c.Close()
	}
	p.conns = nil
}
