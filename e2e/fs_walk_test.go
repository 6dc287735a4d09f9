package e2e

import (
	"context"
	"fmt"
	"path"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hivedr/hivedr/internal/fs"
	"github.com/hivedr/hivedr/internal/testenv"
)

// TestWalkWhileWriting: listing an HDFS directory that a writer keeps
// adding files to (each written under a staging name, then renamed) and
// removing files from never fails and never loses a file that stays put.
// HDFS lists a directory, then looks each entry up on its own: an entry
// gone in between ended the whole walk with "not found", which the
// tailer's bootstrap read as an empty partition, so a partition being
// loaded during a bootstrap came to DR without its files.
func TestWalkWhileWriting(t *testing.T) {
	env := testenv.Require(t)
	ctx := ctxFor(t, 5*time.Minute)
	src, _ := pipelineFS(t, env)
	dir := env.Get(t, "HIVEDR_HMS_SRC_EXTERNAL") + "/walkrace_" + uniq(t)
	keep := dir + "/000000_0"
	if _, err := fs.WriteFile(ctx, src, keep, []byte("stays\n")); err != nil {
		t.Fatal(err)
	}
	// The writer: a file written (staging name, then renamed) and the
	// one written ten steps before removed, as fast as HDFS lets it.
	var written atomic.Int64
	wctx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() {
		var err error
		for i := 0; wctx.Err() == nil && err == nil; i++ {
			if _, err = fs.WriteFile(wctx, src, fmt.Sprintf("%s/f_%05d", dir, i), []byte("x\n")); err == nil {
				written.Add(1)
				if i >= 10 {
					err = src.Remove(wctx, fmt.Sprintf("%s/f_%05d", dir, i-10))
				}
			}
		}
		if wctx.Err() != nil {
			err = nil
		}
		done <- err
	}()
	// Walks until the writer has written 300 files while they ran.
	walks := 0
	start := written.Load()
	for written.Load()-start < 300 {
		found := false
		err := src.Walk(ctx, dir, func(loc string, _ int64) error {
			if path.Base(loc) == "000000_0" {
				found = true
			}
			return nil
		})
		walks++
		if err != nil {
			stop()
			t.Fatalf("walk %d of %s while the writer ran (%d files written): %v", walks, dir, written.Load()-start, err)
		}
		if !found {
			stop()
			t.Fatalf("walk %d of %s did not list %s", walks, dir, keep)
		}
	}
	stop()
	if err := <-done; err != nil {
		t.Fatalf("writer: %v", err)
	}
	t.Logf("%d walks while the writer wrote %d files and removed as many", walks, written.Load()-start)
}
