package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	wl "github.com/hivedr/hivedr/e2e/workload"
	"github.com/hivedr/hivedr/internal/drparam"
	"github.com/hivedr/hivedr/internal/hms"
	"github.com/hivedr/hivedr/internal/testenv"
)

// Helpers of the bootstrap tests and of `make bench-bootstrap`.

// populate builds (or reuses) a warehouse on the source metastore and
// HDFS, logging what it did.
func populate(t *testing.T, ctx context.Context, env *testenv.Env, spec wl.WarehouseSpec) wl.PopulateResult {
	t.Helper()
	spec.External, spec.Warehouse = env.Get(t, "HIVEDR_HMS_SRC_EXTERNAL"), env.Get(t, "HIVEDR_HMS_SRC_WAREHOUSE")
	addr := env.Get(t, "HIVEDR_HMS_SRC")
	dial := func(ctx context.Context) (*hms.Client, error) { return hms.Dial(ctx, addr, hms.Options{}) }
	res, err := wl.Populate(ctx, dial, wl.NativePut(env.HDFS(t, testenv.Source)), spec)
	if err != nil {
		t.Fatal(err)
	}
	if res.Reused {
		t.Logf("source database %s reused (%s matches): %d tables, %d partitions, %d files",
			spec.Database, wl.PopulatedParam, res.Tables, res.Partitions, res.Files)
		return res
	}
	t.Logf("source database %s populated: %d tables, %d partitions, %d files in %s (%.0f partitions/s)",
		spec.Database, res.Tables, res.Partitions, res.Files, res.Took.Round(time.Millisecond), float64(res.Partitions)/res.Took.Seconds())
	return res
}

// requestBootstrap runs `hivedr bootstrap -no-wait -json` on the
// pipeline's configuration for dbs (tables: only those of the one
// database): the command writes the request to the control topic and
// exits. It returns the request ID.
func (p *pipeline) requestBootstrap(dbs, tables []string) string {
	p.t.Helper()
	args := []string{"bootstrap", "-config", p.conf, "-no-wait", "-json", "-db", strings.Join(dbs, ",")}
	if len(tables) > 0 {
		args = append(args, "-tables", strings.Join(tables, ","))
	}
	cmd := exec.Command(hivedrBin(p.t), args...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		p.t.Fatalf("hivedr %s: %v\n%s%s", strings.Join(args, " "), err, out, stderr.String())
	}
	var res struct {
		RequestID string `json:"request_id"`
		Outcome   string `json:"outcome"`
	}
	if err := json.Unmarshal(out, &res); err != nil || res.RequestID == "" || res.Outcome != "written" {
		p.t.Fatalf("hivedr %s printed %s (%v), want a request written", strings.Join(args, " "), out, err)
	}
	return res.RequestID
}

// editConfig replaces the first old in the pipeline's configuration
// file with new, failing the test if old is not there.
func (p *pipeline) editConfig(old, new string) {
	p.t.Helper()
	y, err := os.ReadFile(p.conf)
	if err != nil {
		p.t.Fatal(err)
	}
	s := strings.Replace(string(y), old, new, 1)
	if s == string(y) {
		p.t.Fatalf("no %q in the pipeline's configuration", old)
	}
	if err := os.WriteFile(p.conf, []byte(s), 0o600); err != nil {
		p.t.Fatal(err)
	}
}

// withTailerMetrics makes the pipeline's tailer serve its metrics, and
// returns their URL.
func (p *pipeline) withTailerMetrics() string { p.t.Helper(); return p.withMetrics("copyd:") }

// withCopydMetrics makes the pipeline's copy daemon serve its metrics,
// and returns their URL (the same for a restarted daemon).
func (p *pipeline) withCopydMetrics() string { p.t.Helper(); return p.withMetrics("  cm_roots:") }

// withMetrics sets the empty metrics_addr the configuration's line next
// follows to a free port, and returns the metrics' URL.
func (p *pipeline) withMetrics(next string) string {
	p.t.Helper()
	addr := fmt.Sprintf("127.0.0.1:%d", freePort(p.t))
	p.editConfig("  metrics_addr: \"\"\n"+next, "  metrics_addr: \""+addr+"\"\n"+next)
	return "http://" + addr + "/metrics"
}

// withTailer adds a line (e.g. "bootstrap_page: 200") to the tailer
// section of the pipeline's configuration.
func (p *pipeline) withTailer(line string) {
	p.t.Helper()
	p.editConfig("\ntailer:\n", "\ntailer:\n  "+line+"\n")
}

// bootstrapDone returns the DR database's hivedr.bootstrap.done ("" while
// none finished or the database does not exist).
func bootstrapDone(ctx context.Context, dr *hms.Client, db string) string {
	d, err := dr.GetDatabase(ctx, db)
	if err != nil {
		return ""
	}
	return d.Parameters[drparam.BootstrapDone]
}

// failIfHalted fails the test at once when the applier halted DR
// database db (a wait for it to converge would only run out).
func failIfHalted(t *testing.T, ctx context.Context, dr *hms.Client, db string) {
	t.Helper()
	if d, err := dr.GetDatabase(ctx, db); err == nil && d.Parameters[drparam.Halted] != "" {
		t.Fatalf("the applier halted DR database %s: %s", db, d.Parameters[drparam.Halted])
	}
}

// dropDR drops a database and its data on a metastore if it exists, so
// that a run starts from nothing.
func dropDB(t *testing.T, ctx context.Context, c *hms.Client, db string) {
	t.Helper()
	if _, err := c.GetDatabase(ctx, db); err != nil {
		return
	}
	start := time.Now()
	if err := c.DropDatabase(ctx, db, true, true); err != nil {
		t.Fatalf("drop database %s on %s: %v", db, c.Addr(), err)
	}
	t.Logf("dropped %s on %s in %s", db, c.Addr(), time.Since(start).Round(time.Millisecond))
}

// peakRSS is the process's peak resident set in bytes: rusage maxrss once
// it has exited, else VmHWM from /proc (the peak so far).
func (p *proc) peakRSS() int64 {
	if p.exited() && p.cmd.ProcessState != nil {
		if ru, ok := p.cmd.ProcessState.SysUsage().(*syscall.Rusage); ok {
			return ru.Maxrss << 10 // KiB on Linux
		}
	}
	return vmHWM(p.cmd.Process.Pid)
}

// vmHWM reads the VmHWM line of /proc/<pid>/status (the peak resident
// set so far) in bytes (0 if gone).
func vmHWM(pid int) int64 { return procStatusBytes(pid, "VmHWM") }

// vmRSS reads the VmRSS line of /proc/<pid>/status (the resident set now)
// in bytes (0 if gone).
func vmRSS(pid int) int64 { return procStatusBytes(pid, "VmRSS") }

func procStatusBytes(pid int, field string) int64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, field+":"); ok {
			n, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return n << 10
		}
	}
	return 0
}

// cpuTime is the CPU time (user and system) a running process has used,
// from /proc/<pid>/stat (0 if gone).
func cpuTime(pid int) time.Duration {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	// The fields after the command name, which is in parentheses and may
	// hold spaces: utime and stime are the 12th and 13th of them, in
	// clock ticks of 1/100 s (USER_HZ on Linux).
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	if len(f) < 13 {
		return 0
	}
	u, _ := strconv.ParseInt(f[11], 10, 64)
	k, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(u+k) * 10 * time.Millisecond
}

// processStopped reports whether process pid is stopped by a signal
// (state T in /proc/<pid>/stat).
func processStopped(t *testing.T, pid int) bool {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		t.Fatalf("state of process %d: %v", pid, err)
	}
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	return len(f) > 0 && f[0] == "T"
}

func mib(b int64) float64 { return float64(b) / (1 << 20) }

// benchEnvInt is the whole number in the environment variable key, or
// def when it is unset (the benchmarks' knobs).
func benchEnvInt(t *testing.T, key string, def int) int {
	t.Helper()
	v := os.Getenv(key)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 0 {
		t.Fatalf("%s=%q: want a whole number", key, v)
	}
	return n
}

// loadAverage is /proc/loadavg's three load averages.
func loadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "?"
	}
	return strings.Join(f[:3], "/")
}

// eventsApplied is how many events an applier's metrics count as
// handled, heartbeats aside.
func eventsApplied(m map[string]float64) float64 {
	var n float64
	for series, v := range m {
		if strings.HasPrefix(series, "hivedr_applier_events_total{") && !strings.Contains(series, `type="HEARTBEAT"`) {
			n += v
		}
	}
	return n
}

// userDefaults sets the pipeline's tailer and copyd back to their
// defaults, as a user runs them (the tests' configuration polls faster).
func (p *pipeline) userDefaults() {
	p.editConfig("  poll_interval: 200ms\n", "  poll_interval: 1s\n")
	p.editConfig("  heartbeat_interval: 2s\n", "  heartbeat_interval: 5s\n")
	p.editConfig("  batch_size: 200\n", "  batch_size: 1000\n")
	p.editConfig("  workers: 4\n", "  workers: 8\n")
}
