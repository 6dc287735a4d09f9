package e2e

import (
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// statusJSON is the part of `hivedr status -json` the tests read.
type statusJSON struct {
	Tailer struct {
		State             string  `json:"state"`
		CheckpointEventID int64   `json:"checkpoint_event_id"`
		CheckpointState   string  `json:"checkpoint_state"`
		CheckpointAge     float64 `json:"checkpoint_age_seconds"`
		SourceHead        int64   `json:"source_head_event_id"`
		LagEvents         int64   `json:"lag_events"`
		CaughtUp          bool    `json:"caught_up"`
	} `json:"tailer"`
	Databases []statusDB         `json:"databases"`
	CaughtUp  bool               `json:"caught_up"`
	Errors    []string           `json:"errors"`
	Phases    map[string]float64 `json:"phases_seconds"`
}

// statusDB is one database of statusJSON.
type statusDB struct {
	Database           string   `json:"database"`
	ReplLastID         int64    `json:"repl_last_id"`
	LagEvents          int64    `json:"lag_events"`
	UncommittedRecords int64    `json:"uncommitted_records"`
	Age                *float64 `json:"age_seconds"`
	RPO                float64  `json:"rpo_seconds"`
	Halted             string   `json:"halted"`
	State              string   `json:"state"`
	TopicExists        bool     `json:"topic_exists"`
	// Bootstrap is a bootstrap in progress (state bootstrapping).
	Bootstrap *struct {
		BootstrapID         string `json:"bootstrap_id"`
		Phase               string `json:"phase"`
		TablesTotal         int64  `json:"tables_total"`
		PartitionsPublished int64  `json:"partitions_published"`
		FilesPublished      int64  `json:"files_published"`
		// Rates since the bootstrap started, with ETAs.
		Rates []statusRate `json:"rates"`
	} `json:"bootstrap"`
}

// runStatus runs `hivedr status args...` and returns its output and exit code.
func runStatus(t *testing.T, args ...string) (string, int) {
	t.Helper()
	out, err := exec.Command(hivedrBin(t), append([]string{"status"}, args...)...).CombinedOutput()
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		return string(out), ee.ExitCode()
	case err != nil:
		t.Fatalf("hivedr status: %v\n%s", err, out)
	}
	return string(out), 0
}

// waitStatus polls `hivedr status args...` until it exits want, and
// returns that output.
func waitStatus(t *testing.T, p *pipeline, d time.Duration, want int, args ...string) string {
	t.Helper()
	deadline := time.Now().Add(d)
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for ; ; <-tick.C {
		p.checkAlive()
		out, code := runStatus(t, args...)
		if code == want {
			return out
		}
		if code == 2 {
			t.Fatalf("hivedr status %q exited 2:\n%s", args, out)
		}
		if time.Now().After(deadline) {
			logs := ""
			for _, pr := range []*proc{p.tail, p.copyd, p.apply} {
				if pr != nil {
					logs += "\n" + pr.name + ":\n" + tail(pr.out.String(), 20)
				}
			}
			t.Fatalf("hivedr status %q did not exit %d in %s; last (exit %d):\n%s%s", args, want, d, code, out, logs)
		}
	}
}

// TestStatus runs a pipeline through a few workload steps and checks that
// `hivedr status` waits correctly: it exits 0 once both databases are
// applied to their topics' ends, naming them with lag 0 and their DR
// repl.last.id; it exits 1 with the database lagging while the applier is
// stopped and events arrive; and 0 again once it runs.
func TestStatus(t *testing.T) {
	u := uniq(t)
	db1, db2 := "st_sales_"+u, "st_archive_"+u
	p := startPipeline(t, 6*time.Minute, db1, db2)
	ctx, env, src, w, start := p.ctx, p.env, p.src, p.w, p.start
	steps := scenario(db1, db2)
	p.runSteps(steps[:4], nil) // databases, tables, partitions with files, inserts
	head := currentEventID(t, ctx, src)
	waitStatus(t, p.pipeline, 3*time.Minute, 0, "-config", p.conf)

	// The table names both databases, caught up, with their DR positions.
	// A run right after one that exited 0 exits 0 too: heartbeats the
	// applier has not committed yet (it commits every second) are not lag.
	out, code := runStatus(t, "-config", p.conf)
	if code != 0 {
		t.Errorf("status right after it exited 0 exited %d:\n%s", code, out)
	}
	t.Logf("hivedr status:\n%s", out)
	for _, db := range []string{db1, db2} {
		line := lineWith(out, db+" ")
		f := strings.Fields(line)
		if len(f) < 7 || f[1] == "-" || f[1] == "0" || f[2] != "0" || f[len(f)-1] != "ok" {
			t.Errorf("status line of %s: %q; want repl.last.id > 0, lag 0, ok\n%s", db, line, out)
		}
	}
	if !strings.Contains(out, ": caught up") || !strings.Contains(out, "applier (group "+p.prefix+"-applier): 1 member") {
		t.Errorf("status output:\n%s", out)
	}

	js := waitStatus(t, p.pipeline, time.Minute, 0, "-config", p.conf, "-json")
	var st statusJSON
	if err := json.Unmarshal([]byte(js), &st); err != nil {
		t.Fatalf("status -json: %v\n%s", err, js)
	}
	if !st.CaughtUp || !st.Tailer.CaughtUp || st.Tailer.CheckpointEventID < head || len(st.Errors) > 0 || len(st.Databases) != 2 {
		t.Fatalf("status -json: %+v; want caught up, tailer past event %d, two databases", st, head)
	}
	for _, d := range st.Databases {
		// Other tests share the source log, so head bounds the IDs only.
		if d.LagEvents != 0 || d.ReplLastID <= start || d.ReplLastID > head || d.State != "ok" || d.Halted != "" || !d.TopicExists ||
			d.Age == nil || *d.Age > d.RPO || d.RPO != 300 {
			t.Errorf("status -json database %+v: want lag 0, %d < repl.last.id <= %d, age within the default RPO of 5m, ok", d, start, head)
		}
	}

	// With the applier stopped, new events lag and status says so.
	p.apply.stop(t)
	p.apply = nil // stopped on purpose: checkAlive skips it

	// The excluded table churns (events on db1's topic), then an insert overwrite.
	if err := steps[4].run(ctx, w); err != nil {
		t.Fatal(err)
	}
	if err := steps[5].run(ctx, w); err != nil {
		t.Fatal(err)
	}
	out = waitStatus(t, p.pipeline, time.Minute, 1, "-config", p.conf, "-db", db1)
	if f := strings.Fields(lineWith(out, db1+" ")); len(f) < 3 || f[2] == "0" || !strings.Contains(out, "lagging") ||
		!strings.Contains(out, "NOT caught up") || !strings.Contains(out, "no members") || strings.Contains(out, db2) {
		t.Errorf("status -db %s with the applier stopped:\n%s", db1, out)
	}
	t.Logf("hivedr status -db %s, applier stopped:\n%s", db1, out)
	p.startApply()
	waitStatus(t, p.pipeline, 2*time.Minute, 0, "-config", p.conf, "-db", db1)

	// Bad flags exit 2; an unreachable DR metastore is named, exit 1.
	if _, code := runStatus(t, "-config", p.conf, "-no-such-flag"); code != 2 {
		t.Errorf("status with a bad flag exited %d, want 2", code)
	}
	y, err := os.ReadFile(p.conf)
	if err != nil {
		t.Fatal(err)
	}
	bad := strings.Replace(string(y), "metastore: "+env.Get(t, "HIVEDR_HMS_DR"), "metastore: 127.0.0.1:1", 1)
	out, code = runStatus(t, "-config", writeFile(t, "bad-dr.yaml", bad), "-timeout", "20s")
	if code != 1 || !strings.Contains(out, "DR metastore 127.0.0.1:1:") || !strings.Contains(out, "unknown") {
		t.Errorf("status with an unreachable DR metastore exited %d:\n%s", code, out)
	}
}

// lineWith returns the first line of s that contains sub.
func lineWith(s, sub string) string {
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			return l
		}
	}
	return ""
}
