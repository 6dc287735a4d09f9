package e2e

import (
	"fmt"
	"strings"
	"testing"
	"time"

	wl "github.com/hivedr/hivedr/e2e/workload"
	"github.com/hivedr/hivedr/internal/kafka"
	"github.com/hivedr/hivedr/internal/testenv"
	"github.com/hivedr/hivedr/schemas"
)

// TestBootstrapExternalData: two databases of the same layout (external
// tables partitioned and not, with files, and a managed table), one with
// policy external_data: metadata_only, the other with the default
// with_data, bootstrapped by one request. The with_data database equals
// the source, files included. The metadata_only one has every table and
// partition on DR as on the source, the managed table's files too, and
// none of the external tables' files: no copy task of its bootstrap
// targets them, and the only differences with the source are those files
// missing on DR.
func TestBootstrapExternalData(t *testing.T) {
	u := uniq(t)
	meta, data := "bxm_"+u, "bxd_"+u
	env := testenv.Require(t)
	pt := &pipelineTest{ctx: ctxFor(t, 10*time.Minute), src: env.HMS(t, testenv.Source), dr: env.HMS(t, testenv.DR)}
	pt.srcFS, pt.drFS = pipelineFS(t, env)
	pt.w = wl.NewSource(pt.src, pt.srcFS, env.Get(t, "HIVEDR_HMS_SRC_EXTERNAL"))
	bootstrapSource(t, env, pt, meta, 12)
	bootstrapSource(t, env, pt, data, 12)
	var extFiles int
	for _, f := range pt.w.LiveFiles() {
		if strings.Contains(f.Location, "/"+meta+".db/") && !strings.Contains(f.Location, "/managed/") {
			extFiles++
		}
	}
	pt.pipeline = newPipeline(t, env, []string{meta, data}, currentEventID(t, pt.ctx, pt.src))
	pt.editConfig(fmt.Sprintf(`- {name: %s, exclude_tables: ["tmp_.*"]}`, meta),
		fmt.Sprintf(`- {name: %s, exclude_tables: ["tmp_.*"], external_data: metadata_only}`, meta))
	pt.startAll()
	requestBootstrap(t, pt.pipeline, schemas.BootstrapRequest{RequestID: "r-" + u, Databases: []string{meta, data}})
	eventually(t, 5*time.Minute, "both bootstraps done on DR", func() bool {
		pt.checkAlive()
		return bootstrapDone(pt.ctx, pt.dr, meta) != "" && bootstrapDone(pt.ctx, pt.dr, data) != ""
	})

	// with_data: DR equals the source, files included.
	all := pt.dbs
	pt.dbs = []string{data}
	pt.converge(pt.ctx, pt.src, pt.dr, pt.srcFS, pt.drFS, 3*time.Minute)
	pt.dbs = all

	// metadata_only: the external tables' files are the only differences.
	var diffs []wl.Diff
	eventually(t, 3*time.Minute, "the managed table's files on DR", func() bool {
		pt.checkAlive()
		var err error
		if diffs, err = wl.Compare(pt.ctx, pt.src, pt.dr, pt.srcFS, pt.drFS, []string{meta}, pt.mapLocation); err != nil {
			t.Logf("compare: %v", err)
			return false
		}
		for _, d := range diffs {
			if strings.HasPrefix(d.Object, meta+".managed") {
				return false
			}
		}
		return true
	})
	files := 0
	for _, d := range diffs {
		if !strings.Contains(d.Object, " file ") || d.Detail != "missing on DR" || strings.HasPrefix(d.Object, meta+".managed") {
			t.Errorf("metadata_only: %s", d)
			continue
		}
		files++
	}
	if files != extFiles {
		t.Errorf("metadata_only: %d external files missing on DR, want all %d (and no other difference)", files, extFiles)
	}
	id := bootstrapDone(pt.ctx, pt.dr, meta)
	tasks := 0
	for _, d := range readTopic(t, env, serde(t, env), kafka.Topics{Prefix: pt.prefix}.Manifests()) {
		task, ok := d.value.(*schemas.CopyTask)
		if !ok || !strings.HasPrefix(task.TaskID, id+"-s") {
			continue
		}
		tasks++
		if task.Table != "managed" {
			t.Errorf("metadata_only bootstrap %s copies %s of table %s", id, task.SourceURI, task.Table)
		}
	}
	t.Logf("metadata_only: %d external files left on the source only, %d copy tasks (the managed table's)", files, tasks)
	if tasks == 0 {
		t.Error("the metadata_only bootstrap copied not even the managed table's files")
	}
}
