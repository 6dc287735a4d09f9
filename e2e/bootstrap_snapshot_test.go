package e2e

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/colinmarc/hdfs/v2"

	wl "github.com/hivedr/hivedr/e2e/workload"
	"github.com/hivedr/hivedr/internal/kafka"
	"github.com/hivedr/hivedr/internal/location"
	"github.com/hivedr/hivedr/internal/testenv"
	"github.com/hivedr/hivedr/internal/webhdfs"
	"github.com/hivedr/hivedr/schemas"
)

// snapshotsOf lists the names of the snapshots of the HDFS directory dir
// (a path) with the given prefix.
func snapshotsOf(t *testing.T, web *webhdfs.Client, dir, prefix string) []string {
	t.Helper()
	snaps, err := web.GetSnapshotList(ctxFor(t, time.Minute), dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, s := range snaps {
		if strings.HasPrefix(s.Name, prefix) && !s.Deleted {
			out = append(out, s.Name)
		}
	}
	return out
}

// TestBootstrapHDFSSnapshot: the directory of a database's external
// tables is snapshottable (allowSnapshot by the HDFS superuser). The
// tailer, started with a snapshot of its own prefix that no checkpoint
// knows on that directory, releases it at start; the bootstrap snapshots
// the directory at its cut. Once the bootstrap record of table accounts
// is published (copyd not running), accounts's file is overwritten on
// the source (INSERT OVERWRITE, same name, other bytes) and the tailer is
// killed (-9) with the bootstrap holding its snapshot, then restarted,
// then copyd started: the bootstrap's copy of the file reads the
// snapshot and brings the cut's bytes (its completion's CRC32C), the
// overwrite's event then the new ones, and DR equals the source. Once
// every copy task of the bootstrap completed, the restarted tailer
// releases the snapshot.
func TestBootstrapHDFSSnapshot(t *testing.T) {
	u := uniq(t)
	db := "bsn_sales_" + u
	env := testenv.Require(t)
	pt := &pipelineTest{ctx: ctxFor(t, 12*time.Minute), src: env.HMS(t, testenv.Source), dr: env.HMS(t, testenv.DR)}
	pt.srcFS, pt.drFS = pipelineFS(t, env)
	root := env.Get(t, "HIVEDR_HMS_SRC_EXTERNAL")
	pt.w = wl.NewSource(pt.src, pt.srcFS, root)
	bootstrapSource(t, env, pt, db, 40)
	dirLoc, err := location.Parse(root + "/" + db + ".db")
	if err != nil {
		t.Fatal(err)
	}
	dir := dirLoc.Path
	web := env.WebHDFS(t, testenv.Source) // as the superuser
	if err := web.AllowSnapshot(pt.ctx, dir); err != nil {
		t.Fatal(err)
	}
	// As an operator would: the tailer's HDFS user owns the directory
	// (HDFS lets only an owner or a superuser snapshot it).
	su, err := hdfs.NewClient(hdfs.ClientOptions{Addresses: []string{env.Get(t, "HIVEDR_HDFS_SRC_NAMENODE")}, User: env.HDFSSuperuser()})
	if err != nil {
		t.Fatal(err)
	}
	defer su.Close()
	if err := su.Chown(dir, "hivedr", ""); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		for _, n := range snapshotsOf(t, web, dir, "") {
			_ = web.DeleteSnapshot(context.Background(), dir, n)
		}
	})
	var cutFile wl.File
	for _, f := range pt.w.LiveFiles() {
		if strings.Contains(f.Location, "/accounts/") {
			cutFile = f
		}
	}
	if cutFile.Location == "" {
		t.Fatal("no file of accounts on the source")
	}

	pt.pipeline = newPipeline(t, env, []string{db}, currentEventID(t, pt.ctx, pt.src))
	pt.setTailer(t, "bootstrap_page: 5")
	prefix := "hivedr-bootstrap." + pt.cfg.Source.Name + "."
	orphan := prefix + db + "-1-1"
	if _, err := web.CreateSnapshot(pt.ctx, dir, orphan); err != nil {
		t.Fatal(err)
	}
	pt.startTail()
	pt.startApply()
	s := serde(t, env)
	topics := kafka.Topics{Prefix: pt.prefix}
	requestBootstrap(t, pt.pipeline, schemas.BootstrapRequest{RequestID: "r-" + u, Databases: []string{db}})

	// Observed progress: the bootstrap's snapshot taken, and accounts's
	// record (listed from it) published.
	var taken []string
	poll(t, 3*time.Minute, 100*time.Millisecond, "the bootstrap's snapshot and accounts's record", func() bool {
		pt.checkAlive()
		taken = snapshotsOf(t, web, dir, prefix+db+"-")
		if len(taken) != 1 || taken[0] == orphan {
			return false
		}
		for _, e := range events(readTopic(t, env, s, topics.Events(db))) {
			if e.EventType == schemas.EventSnapshotTable && e.Table == "accounts" {
				return true
			}
		}
		return false
	})
	if slices.Contains(snapshotsOf(t, web, dir, prefix), orphan) {
		t.Errorf("the snapshot %s, of a bootstrap no checkpoint knows, is still there", orphan)
	}
	after, err := pt.w.InsertOverwrite(pt.ctx, db, "accounts", nil, 9)
	if err != nil {
		t.Fatal(err)
	}
	if after.Location != cutFile.Location || after.CRC32C == cutFile.CRC32C {
		t.Fatalf("the overwrite wrote %+v over %+v; want other bytes under the same name", after, cutFile)
	}
	cp := newestCheckpoint(t, pt.pipeline, s, pt.cfg.Source.Name)
	pt.tail.kill9()
	held := 0
	for _, r := range cp.SnapshotReleases {
		held += len(r.HDFSSnapshots)
	}
	t.Logf("tailer killed: bootstrap %+v, snapshots held %d", bootstrapOf(cp, db), held)
	if held != 1 {
		t.Fatalf("the checkpoint at the kill holds %d snapshots, want the bootstrap's", held)
	}
	metricsAddr := fmt.Sprintf("127.0.0.1:%d", freePort(t))
	pt.tail = startHivedr(t, "tail", "tail", "-config", pt.conf, "-metrics-addr", metricsAddr)
	pt.startCopyd()

	eventually(t, 6*time.Minute, db+"'s bootstrap done on DR", func() bool {
		pt.checkAlive()
		return bootstrapDone(pt.ctx, pt.dr, db) != ""
	})
	pt.converge(pt.ctx, pt.src, pt.dr, pt.srcFS, pt.drFS, 5*time.Minute)

	// The bootstrap's copy of accounts's file came from the snapshot, with
	// the cut's bytes.
	id := bootstrapDone(pt.ctx, pt.dr, db)
	var found *schemas.CopyCompletion
	for _, d := range readTopic(t, env, s, topics.Completions()) {
		if c, ok := d.value.(*schemas.CopyCompletion); ok && strings.HasPrefix(c.TaskID, id+"-s") && strings.HasSuffix(c.TargetURI, "/accounts/000000_0") {
			found = c
		}
	}
	switch {
	case found == nil:
		t.Errorf("no completion of bootstrap %s's copy of accounts/000000_0", id)
	case found.Status != schemas.StatusCopied || !strings.Contains(found.SourceURI, "/.snapshot/"+taken[0]+"/") ||
		found.CRC32C == nil || *found.CRC32C != cutFile.CRC32C:
		t.Errorf("bootstrap copy of accounts: %s from %s, crc %v; want COPIED from snapshot %s with the cut's crc %08x (the overwrite's is %08x)",
			found.Status, found.SourceURI, found.CRC32C, taken[0], cutFile.CRC32C, after.CRC32C)
	default:
		t.Logf("bootstrap copy of accounts: %s from %s, crc %08x (the cut's); DR now holds the overwrite's %08x", found.Status, found.SourceURI, *found.CRC32C, after.CRC32C)
	}

	// Released once every copy task of the bootstrap completed.
	start := time.Now()
	eventually(t, 2*time.Minute, "the bootstrap's snapshot released", func() bool {
		pt.checkAlive()
		return len(snapshotsOf(t, web, dir, prefix)) == 0
	})
	t.Logf("snapshot released %s after the bootstrap was done on DR", time.Since(start).Round(time.Millisecond))
	// The tailer counts the release once its checkpoint says so, after
	// the snapshot is gone: wait for the count, then check it.
	var m map[string]float64
	eventually(t, time.Minute, "the tailer's metrics counting the release", func() bool {
		pt.checkAlive()
		var ok bool
		m, ok = scrape("http://" + metricsAddr + "/metrics")
		return ok && metricSum(m, "hivedr_tailer_bootstrap_snapshots_released_total") >= 1 && metricSum(m, "hivedr_tailer_bootstrap_snapshots_held") == 0
	})
	// (Plus the orphan, when the first tailer was killed before it got
	// to it: the restarted one logs releasing it.)
	want := 1 + strings.Count(pt.tail.out.String(), "released the HDFS snapshot of a bootstrap the checkpoint does not know")
	if n := metricSum(m, "hivedr_tailer_bootstrap_snapshots_released_total"); n != float64(want) {
		t.Errorf("the restarted tailer released %v snapshots, want %d (the bootstrap's, and the orphans it logged)", n, want)
	}
}
