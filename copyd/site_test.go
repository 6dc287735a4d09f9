package copyd

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/hivedr/hivedr/internal/acid"
	"github.com/hivedr/hivedr/internal/kafka"
	"github.com/hivedr/hivedr/schemas"
)

// prefixMap maps a location under from to the same place under to.
func prefixMap(from, to string) func(string) (string, error) {
	return func(src string) (string, error) {
		rel, ok := strings.CutPrefix(src, from)
		if !ok {
			return "", fmt.Errorf("no path mapping covers %s", src)
		}
		return to + rel, nil
	}
}

func testSite() *Site {
	return &Site{Name: "west", InScope: func(db, _ string) bool { return db == "sales" },
		TailerMap: prefixMap("hdfs://src:8020/", "hdfs://dr:8020/"),
		SiteMap:   prefixMap("hdfs://src:8020/", "hdfs://west:8020/site/")}
}

func TestSiteTarget(t *testing.T) {
	s := testSite()
	const src = "hdfs://src:8020/w/sales.db/t/delta_0000003_0000003/bucket_00000"
	for _, tc := range []struct {
		name, source, target, subdir, want, err string
	}{
		{name: "the file's DR path", source: src, target: "hdfs://dr:8020/w/sales.db/t/delta_0000003_0000003/bucket_00000",
			want: "hdfs://west:8020/site/w/sales.db/t/delta_0000003_0000003/bucket_00000"},
		{name: "a compaction's name", source: src, subdir: "delta_0000003_0000003",
			target: acid.CopyTargets("hdfs://dr:8020/w/sales.db/t/delta_0000003_0000003/bucket_00000", "delta_0000003_0000003")[2],
			want:   acid.CopyTargets("hdfs://west:8020/site/w/sales.db/t/delta_0000003_0000003/bucket_00000", "delta_0000003_0000003")[2]},
		{name: "a snapshot's copy goes where the live file does", source: "hdfs://src:8020/w/.snapshot/s1/sales.db/t/f",
			target: "hdfs://dr:8020/w/sales.db/t/f", want: "hdfs://west:8020/site/w/sales.db/t/f"},
		{name: "not the tailer's target", source: src, target: "hdfs://dr:8020/elsewhere/f", err: "is not the tailer's DR path"},
		{name: "no mapping on the site", source: "hdfs://other:8020/f", target: "hdfs://dr:8020/f", err: "no path mapping covers"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := s.Target(&schemas.CopyTask{TaskID: "9-0", SourceURI: tc.source, TargetURI: tc.target, Subdir: tc.subdir})
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) || !strings.Contains(err.Error(), "site west") {
					t.Fatalf("got %q, %v; want an error naming the site and %q", got, err, tc.err)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("got %q, %v; want %q", got, err, tc.want)
			}
		})
	}
}

// A further site's daemon copies the tasks of its databases to its own
// targets, completes them on its own completions topic, and passes over
// the others: no copy, no completion, and its offsets still move past
// them. A task it cannot place completes FAILED, saying why.
func TestDaemonSite(t *testing.T) {
	topics := kafka.Topics{Prefix: "t", Site: "west"}
	k := newKFixtureFor(t, 2, topics)
	var in, out []schemas.CopyTask
	for i := range 40 {
		db := []string{"sales", "hr"}[i%2]
		task := schemas.CopyTask{TaskID: fmt.Sprintf("%d-0", i), EventID: int64(i), Database: db, Table: "t",
			SourceURI: fmt.Sprintf("hdfs://src:8020/w/%s.db/t/f%d", db, i), TargetURI: fmt.Sprintf("hdfs://dr:8020/w/%s.db/t/f%d", db, i)}
		if i == 38 {
			task.TargetURI = "hdfs://dr:8020/elsewhere/f" // not the tailer's: FAILED
		}
		k.publishTask(int32(i%2), task)
		if db == "sales" {
			in = append(in, task)
		} else {
			out = append(out, task)
		}
	}
	cp := newFakeCopier()
	d := k.start("a", cp, func(c *DaemonConfig) { c.Site = testSite() })
	var got map[string][]*schemas.CopyCompletion
	waitFor(t, 30*time.Second, fmt.Sprintf("%d completions", len(in)), func() bool {
		got = k.completions()
		return len(got) >= len(in)
	})
	waitFor(t, 30*time.Second, "the group's offsets at the ends", func() bool {
		offs := k.groupOffsets("copyd")
		return offs[0] == 20 && offs[1] == 20
	})
	if err := d.stop(); err != nil {
		t.Fatal(err)
	}
	calls, _, _ := cp.snapshot()
	if len(got) != len(in) {
		t.Errorf("completions of %d tasks, want %d (the site's)", len(got), len(in))
	}
	for _, task := range in {
		cs := got[task.TaskID]
		if len(cs) != 1 {
			t.Errorf("task %s: %d completions, want 1", task.TaskID, len(cs))
			continue
		}
		want := strings.Replace(task.TargetURI, "hdfs://dr:8020/", "hdfs://west:8020/site/", 1)
		switch {
		case task.EventID == 38:
			if cs[0].Status != schemas.StatusFailed || !strings.Contains(cs[0].Error, "not the tailer's DR path") || calls[task.TaskID] != 0 {
				t.Errorf("task %s: %s %q, copied %d times; want FAILED naming the target, no copy", task.TaskID, cs[0].Status, cs[0].Error, calls[task.TaskID])
			}
		case cs[0].Status != schemas.StatusCopied || cs[0].TargetURI != want:
			t.Errorf("task %s: %s to %s, want COPIED to %s", task.TaskID, cs[0].Status, cs[0].TargetURI, want)
		}
	}
	for _, task := range out {
		if len(got[task.TaskID]) != 0 || calls[task.TaskID] != 0 {
			t.Errorf("task %s of a database outside the site: %d completions, %d copies; want none", task.TaskID, len(got[task.TaskID]), calls[task.TaskID])
		}
	}
}
