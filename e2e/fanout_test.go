package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/beltran/gohive/hive_metastore"
	"github.com/twmb/franz-go/pkg/kadm"

	wl "github.com/hivedr/hivedr/e2e/workload"
	"github.com/hivedr/hivedr/internal/fs"
	"github.com/hivedr/hivedr/internal/kafka"
	"github.com/hivedr/hivedr/internal/testenv"
)

// westSite is the configuration of a second DR site, west: the stack's
// second DR metastore (hms-dr2) and HDFS cluster (dr2), the source's
// paths mapped under <dr2>/site-west, replicating the databases dbs; and
// that root.
func westSite(t *testing.T, env *testenv.Env, dbs ...string) (func(*pipelineConf), string) {
	srcRoot := "hdfs://" + env.Get(t, "HIVEDR_HDFS_SRC_NAMENODE")
	westRoot := "hdfs://" + env.Get(t, "HIVEDR_HDFS_DR2_NAMENODE") + "/site-west"
	westHDFS := fmt.Sprintf("{namenodes: [%s], webhdfs: %s, user: hivedr}", env.Get(t, "HIVEDR_HDFS_DR2_NAMENODE"), env.Get(t, "HIVEDR_HDFS_DR2_HTTP"))
	var names []string
	for _, db := range dbs {
		names = append(names, "{name: "+db+"}")
	}
	return func(c *pipelineConf) {
		c.moreFilesystems = []string{westHDFS}
		c.extra = strings.NewReplacer("$HMSDR2", env.Get(t, "HIVEDR_HMS_DR2"), "$SRC", srcRoot, "$WEST", westRoot, "$DBS", strings.Join(names, ", ")).Replace(`
sites:
  - name: west
    applier: {metastore: "$HMSDR2", halt_after: 30s, metrics_addr: ""}
    copyd: {workers: 4, retries: 2, metrics_addr: "", cm_roots: ["$SRC/cmroot/"]}
    replication:
      databases: [$DBS]
      path_mappings: [{source: "$SRC/", target: "$WEST/"}]
`)
	}, westRoot
}

// startWest starts site west's copy daemon and applier (westSite).
func (p *pipeline) startWest() (copyd, apply *proc) {
	copyd = startHivedr(p.t, "copyd-west", "copyd", "-config", p.conf, "-site", "west", "-state-dir", filepath.Join(p.state, "copyd-west"))
	apply = startHivedr(p.t, "apply-west", "apply", "-config", p.conf, "-site", "west", "-state-dir", filepath.Join(p.state, "applier-west"))
	return copyd, apply
}

// TestFanOutTwoSites runs one tailer and two DR sites reading its topics:
// the top-level site (the stack's DR metastore and HDFS) replicating two
// databases, and site west (the stack's second DR metastore, hms-dr2, and
// HDFS cluster dr2, under its own path mapping) replicating one of them.
// Each site has its own copy daemon and applier (-site west), groups and
// completions topic. After the pipeline scenario both sites equal the
// source for their scope, and west holds nothing of the other database.
// Then west's applier is stopped while more of the workload runs: the
// top-level site catches up meanwhile, west's group lags, and once
// restarted west catches up too. `hivedr status` shows both sites side
// by side, and a planned failover of the database on west marks it
// writable there and leaves the top-level site's replica as it is.
func TestFanOutTwoSites(t *testing.T) {
	env := testenv.Require(t)
	u := uniq(t)
	db1, db2 := "fo_sales_"+u, "fo_archive_"+u
	ctx := ctxFor(t, 10*time.Minute)
	src, dr, west := env.HMS(t, testenv.Source), env.HMS(t, testenv.DR), env.HMS(t, testenv.DR2)
	srcFS, drFS := pipelineFS(t, env)
	westFS, err := fs.NewHDFS(env.HDFSConfig(t, testenv.DR2, nil))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { westFS.Close() })

	withWest, westRoot := westSite(t, env, db1)
	p := newPipeline(t, env, []string{db1, db2}, currentEventID(t, ctx, src), withWest)
	westConf, err := p.cfg.ForSite("west")
	if err != nil {
		t.Fatal(err)
	}
	westGroup := westConf.Applier.Group
	p.startAll()
	westCopyd, westApply := p.startWest()
	alive := func() {
		t.Helper()
		p.checkAlive()
		for _, pr := range []*proc{westCopyd, westApply} {
			if pr.exited() {
				t.Fatalf("%s exited early:\n%s", pr.name, tail(pr.out.String(), 60))
			}
		}
	}
	w := wl.NewSource(src, srcFS, env.Get(t, "HIVEDR_HMS_SRC_EXTERNAL"))
	steps := scenario(db1, db2)
	half := len(steps) / 2
	for _, st := range steps[:half] {
		if err := st.run(ctx, w); err != nil {
			t.Fatalf("workload step %q: %v", st.name, err)
		}
	}
	mapWest := func(s string) (string, error) { return westConf.Replication.MapPath(s) }
	convergeWest := func(d time.Duration) {
		t.Helper()
		var last []wl.Diff
		defer func() {
			if t.Failed() {
				t.Logf("site west's last differences: %v", last)
			}
		}()
		poll(t, d, time.Second, "site west equal to the source for "+db1, func() bool {
			alive()
			diffs, err := wl.Compare(ctx, src, west, srcFS, westFS, []string{db1}, mapWest)
			if err != nil {
				t.Logf("compare with west: %v", err)
				return false
			}
			last = diffs
			return len(diffs) == 0
		})
	}
	p.converge(ctx, src, dr, srcFS, drFS, 3*time.Minute)
	convergeWest(3 * time.Minute)

	// West's applier stopped: the top-level site keeps up with the rest
	// of the workload, west's group falls behind, then catches up.
	westApply.stop(t)
	for _, st := range steps[half:] {
		if err := st.run(ctx, w); err != nil {
			t.Fatalf("workload step %q: %v", st.name, err)
		}
	}
	p.converge(ctx, src, dr, srcFS, drFS, 3*time.Minute)
	eventually(t, time.Minute, "the top-level site's applier group at the end of the topics", func() bool { return p.caughtUp(ctx) })
	if lag := groupLag(t, ctx, env.KafkaAdmin(t), westGroup, kafka.Topics{Prefix: p.prefix}.Events(db1)); lag <= 0 {
		t.Errorf("west's applier is stopped, yet its group lags %d records on %s", lag, db1)
	} else {
		t.Logf("with west's applier stopped the top-level site caught up; west's group lags %d records", lag)
	}
	westApply = startHivedr(t, "apply-west", "apply", "-config", p.conf, "-site", "west", "-state-dir", filepath.Join(p.state, "applier-west"))
	convergeWest(3 * time.Minute)

	// West holds nothing of the database outside its scope.
	var nso *hive_metastore.NoSuchObjectException
	if _, err := west.GetDatabase(ctx, db2); !errors.As(err, &nso) {
		t.Errorf("site west: get_database %s (outside its scope): %v; want NoSuchObjectException", db2, err)
	}
	westFiles := 0
	if err := westFS.Walk(ctx, westRoot, func(loc string, _ int64) error {
		if strings.Contains(loc, db1) {
			westFiles++
		}
		if strings.Contains(loc, db2) {
			t.Errorf("site west holds %s of %s, outside its scope", loc, db2)
		}
		return nil
	}); err != nil {
		t.Fatalf("list site west's files: %v", err)
	}
	t.Logf("site west holds %d files of %s under %s and none of %s", westFiles, db1, westRoot, db2)

	// Status: both sites, side by side, caught up.
	var rep sitesStatusJSON
	poll(t, time.Minute, time.Second, "hivedr status: every site caught up", func() bool {
		out, err := exec.CommandContext(ctx, hivedrBin(t), "status", "-config", p.conf, "-json").Output()
		if jerr := json.Unmarshal(out, &rep); jerr != nil {
			t.Fatalf("hivedr status -json: %v (%v):\n%s", jerr, err, out)
		}
		return err == nil && rep.CaughtUp
	})
	if rep.Site != "dr" || len(rep.Sites) != 1 || rep.Sites[0].Site != "west" || rep.Sites[0].Applier.Group != westGroup {
		t.Fatalf("status sites: %q then %+v", rep.Site, rep.Sites)
	}
	if got := dbNamesOf(rep.Sites[0].Databases); got != db1 {
		t.Errorf("west's databases in status: %s, want %s", got, db1)
	}
	if got := dbNamesOf(rep.Databases); got != strings.Join(sortedPair(db1, db2), " ") {
		t.Errorf("the top-level site's databases in status: %s", got)
	}
	text, err := exec.CommandContext(ctx, hivedrBin(t), "status", "-config", p.conf).Output()
	if err != nil || !strings.Contains(string(text), "==== site west") || !strings.Contains(string(text), "SITE ") {
		t.Errorf("hivedr status (%v):\n%s", err, text)
	}

	// Failover chooses a site: db1 becomes writable on west only.
	out, err := exec.CommandContext(ctx, hivedrBin(t), "failover", "-config", p.conf, "-site", "west", "-db", db1, "-timeout", "2m").CombinedOutput()
	if err != nil {
		t.Fatalf("hivedr failover -site west: %v\n%s", err, out)
	}
	t.Logf("hivedr failover -site west -db %s:\n%s", db1, tail(string(out), 6))
	wd, err := west.GetDatabase(ctx, db1)
	if err != nil {
		t.Fatal(err)
	}
	dd, err := dr.GetDatabase(ctx, db1)
	if err != nil {
		t.Fatal(err)
	}
	if wd.Parameters["repl.target.for"] != "" || wd.Parameters["hivedr.failover.at"] == "" {
		t.Errorf("west's %s after its failover: %v; want writable, with hivedr.failover.at", db1, wd.Parameters)
	}
	if dd.Parameters["repl.target.for"] == "" || dd.Parameters["hivedr.failover.at"] != "" {
		t.Errorf("the top-level site's %s after west's failover: %v; want still a replica", db1, dd.Parameters)
	}
}

// sitesStatusJSON is what TestFanOutTwoSites reads of `hivedr status -json`.
type sitesStatusJSON struct {
	Site      string `json:"site"`
	CaughtUp  bool   `json:"caught_up"`
	Applier   struct{ Group string }
	Databases []struct {
		Database string `json:"database"`
	} `json:"databases"`
	Sites []sitesStatusJSON `json:"sites"`
}

func dbNamesOf(ds []struct {
	Database string `json:"database"`
}) string {
	var names []string
	for _, d := range ds {
		names = append(names, d.Database)
	}
	return strings.Join(names, " ")
}

// groupLag is how many records of topic group has not committed.
func groupLag(t *testing.T, ctx context.Context, adm *kadm.Client, group, topic string) int64 {
	t.Helper()
	lag, err := adm.Lag(ctx, group)
	if err != nil {
		t.Fatal(err)
	}
	ends, err := adm.ListEndOffsets(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	var n int64
	ends.Each(func(o kadm.ListedOffset) {
		at := int64(0)
		if c, ok := lag[group].Lag.Lookup(o.Topic, o.Partition); ok && c.Commit.At > 0 {
			at = c.Commit.At
		}
		n += o.Offset - at
	})
	return n
}
