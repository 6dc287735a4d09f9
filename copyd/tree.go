package copyd

import (
	"context"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/hivedr/hivedr/internal/location"
	"github.com/hivedr/hivedr/schemas"
)

// Walker lists the files of a directory tree (fs.Router.Walk: HDFS, S3
// and local).
type Walker interface {
	Walk(ctx context.Context, dir string, fn func(location string, size int64) error) error
}

// TreeConfig configures CopyTree.
type TreeConfig struct {
	// Source and Target are directories: each file under Source is copied
	// to the same path below Target.
	Source, Target string
	// Workers is how many files are copied at once. Default 16.
	Workers int
	// Report, when set, gets a line for each file that is not in place
	// (its status and error), a progress line every ProgressInterval, and
	// the summary (TreeSummary.String) at the end.
	Report io.Writer
	// ProgressInterval defaults to 5s.
	ProgressInterval time.Duration
}

// TreeSummary counts what CopyTree did.
type TreeSummary struct {
	// Listed is how many files the walk found under the source.
	Listed int64
	// Done is how many of them were copied, whatever the outcome.
	Done int64
	// Bytes is the length of the files that are in place: COPIED and
	// SKIPPED_IDENTICAL.
	Bytes int64
	// Failed is how many are not in place: FAILED, SOURCE_GONE.
	Failed int64
	// Statuses counts the completions by status.
	Statuses map[schemas.CopyStatus]int64
	// Elapsed is how long the whole copy took.
	Elapsed time.Duration
}

// String is the summary line: files, bytes, rates and statuses.
func (s TreeSummary) String() string {
	secs := s.Elapsed.Seconds()
	mb := float64(s.Bytes) / 1e6
	var parts []string
	for _, st := range slices.Sorted(maps.Keys(s.Statuses)) {
		parts = append(parts, fmt.Sprintf("%s=%d", st, s.Statuses[st]))
	}
	return fmt.Sprintf("copied %d files, %.1f MB in %.2f s: %.1f MB/s, %.1f files/s (%s)",
		s.Done, mb, secs, mb/secs, float64(s.Done)/secs, strings.Join(parts, " "))
}

// DefaultTreeWorkers is TreeConfig.Workers's default.
const DefaultTreeWorkers = 16

// CopyTree copies every file under cfg.Source to the same path below
// cfg.Target with c (an Engine whose roots are the two directories), up
// to cfg.Workers files at once, as each is listed: without Kafka, for
// bootstraps and benchmarks. It returns what it did; a file that did not
// copy is counted in TreeSummary.Failed, not returned as an error. The
// error is the walk's (a source that cannot be listed), or ctx's when it
// was cancelled: then no further file is started and the copies running
// are cancelled.
func CopyTree(ctx context.Context, c Copier, w Walker, cfg TreeConfig) (TreeSummary, error) {
	src, err := location.Parse(cfg.Source)
	if err != nil {
		return TreeSummary{}, fmt.Errorf("source directory %s: %w", cfg.Source, err)
	}
	dst, err := location.Parse(cfg.Target)
	if err != nil {
		return TreeSummary{}, fmt.Errorf("target directory %s: %w", cfg.Target, err)
	}
	if cfg.Workers <= 0 {
		cfg.Workers = DefaultTreeWorkers
	}
	if cfg.ProgressInterval <= 0 {
		cfg.ProgressInterval = 5 * time.Second
	}
	t := &treeCopy{report: cfg.Report, sum: TreeSummary{Statuses: map[schemas.CopyStatus]int64{}}}
	start := time.Now()

	tasks := make(chan schemas.CopyTask)
	var wg sync.WaitGroup
	for range cfg.Workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for task := range tasks {
				t.done(ctx, task, c.Copy(ctx, task))
			}
		}()
	}
	stopProgress := t.progress(cfg.ProgressInterval)

	walkErr := w.Walk(ctx, src.String(), func(loc string, _ int64) error {
		if err := ctx.Err(); err != nil {
			return err
		}
		l, err := location.Parse(loc)
		if err != nil {
			return fmt.Errorf("walk %s: %w", src, err)
		}
		rel, ok := l.Rel(src)
		if !ok {
			return fmt.Errorf("walk %s: listed %s, which is not under it", src, loc)
		}
		task := schemas.CopyTask{TaskID: fmt.Sprintf("copy-%d", t.listed()), SourceURI: l.String(),
			TargetURI: location.Append(dst.String(), rel)}
		select {
		case tasks <- task:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	})
	close(tasks)
	wg.Wait()
	stopProgress()

	t.mu.Lock()
	defer t.mu.Unlock()
	t.sum.Elapsed = time.Since(start)
	t.printf("%s\n", t.sum)
	if err := ctx.Err(); err != nil {
		return t.sum, fmt.Errorf("copy %s to %s interrupted: %w", src, dst, err)
	}
	if walkErr != nil {
		return t.sum, walkErr
	}
	return t.sum, nil
}

// treeCopy is the state of one CopyTree: the counts and the report, which
// workers, the walk and the progress ticker share.
type treeCopy struct {
	mu     sync.Mutex
	sum    TreeSummary
	report io.Writer
}

// listed counts one more file listed and returns its number, from 1.
func (t *treeCopy) listed() int64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.sum.Listed++
	return t.sum.Listed
}

// done counts a finished copy, and reports it if the file is not in
// place (unless the copy was cancelled with the whole tree: that is said
// once, by CopyTree's error).
func (t *treeCopy) done(ctx context.Context, task schemas.CopyTask, c schemas.CopyCompletion) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.sum.Done++
	t.sum.Statuses[c.Status]++
	if c.Status == schemas.StatusCopied || c.Status == schemas.StatusSkippedIdentical {
		t.sum.Bytes += max(c.Length, 0)
		return
	}
	t.sum.Failed++
	if ctx.Err() == nil {
		t.printf("%s %s: %s%s\n", c.Status, task.SourceURI, c.Error, c.Evidence)
	}
}

// progress prints a progress line every interval until the returned
// function is called.
func (t *treeCopy) progress(interval time.Duration) (stop func()) {
	quit, exited := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(exited)
		tick := time.NewTicker(interval)
		defer tick.Stop()
		for {
			select {
			case <-quit:
				return
			case <-tick.C:
				t.mu.Lock()
				t.printf("progress: %d listed, %d done, %.1f MB\n", t.sum.Listed, t.sum.Done, float64(t.sum.Bytes)/1e6)
				t.mu.Unlock()
			}
		}
	}()
	return func() { close(quit); <-exited }
}

// printf writes to the report, if any; t.mu is held.
func (t *treeCopy) printf(format string, args ...any) {
	if t.report != nil {
		fmt.Fprintf(t.report, format, args...)
	}
}
