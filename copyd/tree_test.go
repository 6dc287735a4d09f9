package copyd

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/hivedr/hivedr/schemas"
)

// memWalker lists a memFS's files under a directory, in lexical order, as
// fs.Router.Walk does; err, when set, ends the walk after the files.
type memWalker struct {
	m   *memFS
	err error
}

func (w memWalker) Walk(ctx context.Context, dir string, fn func(string, int64) error) error {
	w.m.mu.Lock()
	var names []string
	for p := range w.m.files {
		if strings.HasPrefix(p, strings.TrimSuffix(dir, "/")+"/") {
			names = append(names, p)
		}
	}
	slices.Sort(names)
	w.m.mu.Unlock()
	for _, p := range names {
		if err := ctx.Err(); err != nil {
			return err
		}
		b, _ := w.m.get(p)
		if err := fn(p, int64(len(b))); err != nil {
			return err
		}
	}
	return w.err
}

// lockedBuffer is a bytes.Buffer that a test may read while CopyTree
// writes to it.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// TestCopyTree copies a tree with the real engine: each file arrives at
// its path below the target, an identical target is skipped, and a file
// that cannot be read is counted as failed and reported by name; the
// summary counts all of it.
func TestCopyTree(t *testing.T) {
	const src, dst = srcNN + "/warehouse/big", drNN + "/warehouse/copy"
	f := newFixture(t, func(c *EngineConfig) {
		c.SourceRoots, c.TargetRoots, c.Retries = []string{src}, []string{dst}, 0
	})
	files := map[string][]byte{"a": []byte("aaa"), "d/b": []byte("bbbbb"), "d/e/c": randomBytes(70_000), "same": []byte("ss"), "bad": []byte("x")}
	for name, b := range files {
		f.src.put(src+"/"+name, b)
	}
	f.src.put(srcNN+"/warehouse/bigger/not-in-tree", []byte("no"))
	f.dr.put(dst+"/same", files["same"])
	f.src.fault("open", syscall.EACCES) // "a" is opened first: the walk is in lexical order
	var report lockedBuffer
	sum, err := CopyTree(context.Background(), f.e, memWalker{m: f.src}, TreeConfig{Source: src + "/", Target: dst, Workers: 1, Report: &report})
	if err != nil {
		t.Fatal(err)
	}
	want := TreeSummary{Listed: 5, Done: 5, Failed: 1, Bytes: int64(len(files["d/b"]) + len(files["d/e/c"]) + len(files["same"]) + len(files["bad"])),
		Statuses: map[schemas.CopyStatus]int64{schemas.StatusCopied: 3, schemas.StatusSkippedIdentical: 1, schemas.StatusFailed: 1}}
	if sum.Elapsed <= 0 {
		t.Errorf("Elapsed %v", sum.Elapsed)
	}
	sum.Elapsed = 0
	if fmt.Sprint(sum) != fmt.Sprint(want) {
		t.Errorf("summary %+v\nwant    %+v", sum, want)
	}
	for name, b := range files {
		if got, ok := f.dr.get(dst + "/" + name); name != "a" && (!ok || !bytes.Equal(got, b)) {
			t.Errorf("%s: target holds %d bytes, want %d", name, len(got), len(b))
		}
	}
	if _, ok := f.dr.get(dst + "/a"); ok {
		t.Error("the file that could not be read has a target")
	}
	if _, ok := f.dr.get(drNN + "/warehouse/copyer/not-in-tree"); ok || len(f.dr.files) != 4 {
		t.Errorf("the target store holds %d files, want the 3 copied and the one there before", len(f.dr.files))
	}
	out := report.String()
	for _, w := range []string{"FAILED " + src + "/a: ", "permission denied", "copied 5 files", "COPIED=3 FAILED=1 SKIPPED_IDENTICAL=1"} {
		if !strings.Contains(out, w) {
			t.Errorf("report lacks %q:\n%s", w, out)
		}
	}
}

// TestCopyTreeProgress: while copies run, a progress line counts what was
// listed and done; workers copy at once, and every file gets a distinct
// task.
func TestCopyTreeProgress(t *testing.T) {
	m := newMemFS()
	for i := range 6 {
		m.put(fmt.Sprintf("%s/t/f%d", srcNN, i), []byte("12345"))
	}
	cp := newFakeCopier()
	gate := cp.gate("copy-1")
	var report lockedBuffer
	type result struct {
		sum TreeSummary
		err error
	}
	res := make(chan result, 1)
	go func() {
		sum, err := CopyTree(context.Background(), cp, memWalker{m: m}, TreeConfig{Source: srcNN + "/t", Target: drNN + "/u",
			Workers: 3, Report: &report, ProgressInterval: time.Millisecond})
		res <- result{sum, err}
	}()
	// copy-1 holds one worker; the other two copy the other five files.
	waitFor(t, 10*time.Second, "a progress line with 6 listed and 5 done", func() bool {
		return strings.Contains(report.String(), "progress: 6 listed, 5 done, 0.0 MB\n")
	})
	close(gate)
	r := <-res
	if r.err != nil || r.sum.Listed != 6 || r.sum.Done != 6 || r.sum.Failed != 0 || r.sum.Bytes != 6 {
		t.Fatalf("CopyTree = %+v, %v; want 6 listed and done, 6 bytes (1 per fake copy)", r.sum, r.err)
	}
	calls, _, _ := cp.snapshot()
	for i := range 6 {
		if id := fmt.Sprintf("copy-%d", i+1); calls[id] != 1 {
			t.Errorf("task %s copied %d times", id, calls[id])
		}
	}
	if got := cp.order[drNN+"/u/f3"]; len(got) != 1 || got[0].SourceURI != srcNN+"/t/f3" {
		t.Errorf("tasks for target f3: %+v", got)
	}
}

// TestCopyTreeCancel: cancelling the context cancels the copies running,
// starts no other, and returns the context's error with what was done.
func TestCopyTreeCancel(t *testing.T) {
	m := newMemFS()
	for i := range 10 {
		m.put(fmt.Sprintf("%s/t/f%02d", srcNN, i), []byte("x"))
	}
	cp := newFakeCopier()
	cp.gate("copy-1")
	cp.gate("copy-2")
	ctx, cancel := context.WithCancel(context.Background())
	var report lockedBuffer
	done := make(chan struct{})
	var sum TreeSummary
	var err error
	go func() {
		defer close(done)
		sum, err = CopyTree(ctx, cp, memWalker{m: m}, TreeConfig{Source: srcNN + "/t", Target: drNN + "/u", Workers: 2, Report: &report})
	}()
	waitFor(t, 10*time.Second, "both workers copying", func() bool {
		calls, _, _ := cp.snapshot()
		return calls["copy-1"] == 1 && calls["copy-2"] == 1
	})
	cancel()
	<-done
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("CopyTree error %v; want context.Canceled", err)
	}
	calls, cancelled, _ := cp.snapshot()
	if len(calls) > 3 || cancelled["copy-1"] != 1 || cancelled["copy-2"] != 1 {
		t.Errorf("copies started %v, cancelled %v; want the two running cancelled and at most one more started", calls, cancelled)
	}
	if sum.Done != int64(len(calls)) || sum.Failed < 2 || sum.Listed > 3 {
		t.Errorf("summary %+v after %d copies", sum, len(calls))
	}
	if out := report.String(); strings.Contains(out, "interrupted") || !strings.Contains(out, "copied ") {
		t.Errorf("report: want the summary and no line per cancelled file:\n%s", out)
	}
}

// TestCopyTreeWalkFails: a source that cannot be listed is the error,
// after the files listed before it were copied.
func TestCopyTreeWalkFails(t *testing.T) {
	m := newMemFS()
	m.put(srcNN+"/t/f", []byte("x"))
	cp := newFakeCopier()
	broken := errors.New("walk: NameNode went away")
	sum, err := CopyTree(context.Background(), cp, memWalker{m: m, err: broken}, TreeConfig{Source: srcNN + "/t", Target: drNN + "/u"})
	if !errors.Is(err, broken) || sum.Done != 1 {
		t.Fatalf("CopyTree = %+v, %v; want the walk's error after 1 copy", sum, err)
	}
	if _, err := CopyTree(context.Background(), cp, memWalker{m: m}, TreeConfig{Source: "relative/dir", Target: drNN + "/u"}); err == nil ||
		!strings.Contains(err.Error(), "source directory relative/dir") {
		t.Errorf("relative source: %v", err)
	}
}
