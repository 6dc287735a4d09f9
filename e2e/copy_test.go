package e2e

import (
	"bytes"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/hivedr/hivedr/internal/testenv"
)

// TestCopyCommand runs `hivedr copy` (copyd.CopyTree with the engine; what
// e2e/bench/bench-copy.sh measures) from a source HDFS directory to the DR
// HDFS: every file of the tree, nested ones and an empty one included,
// arrives whole at its path below the target, and the summary counts
// them; run again, every file is skipped as identical.
func TestCopyCommand(t *testing.T) {
	env := testenv.Require(t)
	u := uniq(t)
	conf := copydConf{prefix: "copy" + u}.write(t, env)
	srcFS, drFS := env.HDFS(t, testenv.Source), env.HDFS(t, testenv.DR)
	srcDir, dstDir := "/copytest/"+u+"/tree", "/copytest/"+u+"/copy"
	files := map[string][]byte{
		"a":            randomBytes(t, 1<<20+7),
		"d/b":          randomBytes(t, 100),
		"d/e/f/c":      randomBytes(t, 3<<20),
		"empty":        nil,
		"dt=1/part-00": randomBytes(t, 4096),
	}
	for name, b := range files {
		testenv.WriteHDFS(t, srcFS, srcDir+"/"+name, b)
	}
	// Spelled as an operator may write it: what the walk lists is
	// canonical, and the targets are still the same paths below dst.
	src := "hdfs://" + env.Get(t, "HIVEDR_HDFS_SRC_NAMENODE") + strings.Replace(srcDir, "/tree", "//tree/", 1)
	dst := "hdfs://" + env.Get(t, "HIVEDR_HDFS_DR_NAMENODE") + dstDir + "/"

	run := func(want string) {
		t.Helper()
		p := startHivedr(t, "copy", "copy", "-config", conf, "-workers", "3", src, dst)
		if code := p.wait(t, 3*time.Minute); code != 0 {
			t.Fatalf("hivedr copy exited %d:\n%s", code, p.out.String())
		}
		if out := p.out.String(); !strings.Contains(out, want) {
			t.Fatalf("hivedr copy printed no %q:\n%s", want, out)
		}
	}
	run(fmt.Sprintf("copied %d files", len(files)))
	for name, want := range files {
		got, err := drFS.ReadFile(dstDir + "/" + name)
		if err != nil || !bytes.Equal(got, want) {
			t.Errorf("%s on the DR: %d bytes (%v), want the source's %d", name, len(got), err, len(want))
		}
	}
	run(fmt.Sprintf("(SKIPPED_IDENTICAL=%d)", len(files)))
}
