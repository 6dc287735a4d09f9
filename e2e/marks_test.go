package e2e

import (
	"fmt"
	"testing"
	"time"

	wl "github.com/hivedr/hivedr/e2e/workload"
	"github.com/hivedr/hivedr/internal/kafka"
	"github.com/hivedr/hivedr/internal/testenv"
	"github.com/hivedr/hivedr/schemas"
)

// TestCopydMarksEvents: every file copyd writes on the DR cluster carries
// the ID of the event its copy was made for (fs.EventMarkAttr, an HDFS
// extended attribute set on the staging file before the rename), checked
// on the real DR NameNode against the completions topic. An earlier
// event's prune keeps a file so marked by a later event, even before the
// applier has read its completion (TestPruneKeepsFilesMarkedLater).
func TestCopydMarksEvents(t *testing.T) {
	env := testenv.Require(t)
	db := "marks_" + uniq(t)
	p := startPipeline(t, 5*time.Minute, db)
	if err := p.w.CreateDatabase(p.ctx, db); err != nil {
		t.Fatal(err)
	}
	spec := wl.TableSpec{Columns: []string{"id bigint"}, PartitionKeys: []string{"dt"}}
	if err := p.w.CreateTable(p.ctx, db, "t", spec); err != nil {
		t.Fatal(err)
	}
	if _, err := p.w.AddPartitions(p.ctx, db, "t", [][]string{{"2025-01-01"}}, 1); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		if _, err := p.w.Insert(p.ctx, db, "t", []string{"2025-01-01"}, 2); err != nil {
			t.Fatal(err)
		}
	}
	p.converge(p.ctx, p.src, p.dr, p.srcFS, p.drFS, 3*time.Minute)

	// The newest event whose copy wrote each file, or found it there
	// identical (an external partition's files are listed when the tailer
	// publishes an event, so an earlier event of it may name a file a
	// later insert wrote: the later one's copy moves the mark on).
	// DR holds a file once copyd renamed it into place, a moment before
	// the transaction with its completion commits: the completions are
	// waited for, not read once.
	var newest map[string]int64
	var seen []string
	defer func() {
		if t.Failed() {
			t.Logf("completions of %s: %v", db, seen)
		}
	}()
	eventually(t, time.Minute, "a completion of each of the partition's 4 files", func() bool {
		newest, seen = map[string]int64{}, nil
		for _, d := range readTopic(t, env, serde(t, env), kafka.Topics{Prefix: p.prefix}.Completions()) {
			c, ok := d.value.(*schemas.CopyCompletion)
			if !ok || c.Database != db {
				continue
			}
			seen = append(seen, fmt.Sprintf("%s %d %s", c.TargetURI, c.EventID, c.Status))
			if c.Status == schemas.StatusCopied || c.Status == schemas.StatusSkippedIdentical {
				newest[c.TargetURI] = max(newest[c.TargetURI], c.EventID)
			}
		}
		return len(newest) >= 4
	})
	for target, want := range newest {
		id, marked, err := p.drFS.EventMark(p.ctx, target)
		if err != nil || !marked || id != want {
			t.Errorf("%s: event mark %d (marked %v, %v), want %d, the newest event a copy of it was made for", target, id, marked, err, want)
		}
	}
	if len(newest) < 4 {
		t.Fatalf("%d files of %s copied, want the partition's and the 3 inserts' files", len(newest), db)
	}
	checked := len(newest)
	t.Logf("%d files on DR carry their event's mark", checked)
}
