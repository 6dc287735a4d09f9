package main

import (
	"context"
	"fmt"
	"io"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hivedr/hivedr/copyd"
	"github.com/hivedr/hivedr/internal/config"
	"github.com/hivedr/hivedr/schemas"
)

// walker is implemented by stores that can list a directory tree.
type walker interface {
	Walk(ctx context.Context, loc string, fn func(location string, size int64) error) error
}

func runCopy(args []string, stdout, stderr io.Writer) int {
	fl, cf := newFlagSet("copy", "Usage: hivedr copy [flags] SOURCE_DIR TARGET_DIR\n\nCopy a directory tree with copyd's engine (CRC32C verified, atomic, skipping\n"+
		"identical files), without Kafka: for bootstraps and benchmarks. SOURCE_DIR must be\n"+
		"on HDFS. Exits 1 if any file failed.", stderr)
	workers := fl.Int("workers", 16, "files copied at once")
	bps := fl.Int64("bytes-per-second", 0, "bandwidth limit; 0 is unlimited")
	conf, _, ok := setup(fl, cf, args, stderr)
	if !ok {
		return exitUsage
	}
	if fl.NArg() != 2 {
		fl.Usage()
		return exitUsage
	}
	ctx, stop := signalContext()
	defer stop()
	ok, err := copyTree(ctx, conf, fl.Arg(0), fl.Arg(1), *workers, *bps, stdout)
	if err != nil {
		fmt.Fprintln(stderr, "hivedr copy:", err)
		return exitError
	}
	if !ok {
		return exitError
	}
	return exitOK
}

func copyTree(ctx context.Context, conf *config.Config, src, dst string, workers int, bps int64, out io.Writer) (bool, error) {
	src, dst = strings.TrimRight(src, "/"), strings.TrimRight(dst, "/")
	router, err := newRouter(conf)
	if err != nil {
		return false, err
	}
	defer router.Close()
	sfs, _, err := router.Split(src)
	if err != nil {
		return false, err
	}
	w, ok := sfs.(walker)
	if !ok {
		return false, fmt.Errorf("%s: listing a tree is supported on HDFS only", src)
	}
	eng, err := copyd.NewEngine(copyd.EngineConfig{
		SourceRoots: []string{src}, TargetRoots: []string{dst}, Retries: conf.Copyd.Retries, BytesPerSecond: bps,
		SplitSize: conf.Copyd.SplitSize, SplitWorkers: conf.Copyd.SplitWorkers,
	}, router, nil)
	if err != nil {
		return false, err
	}
	start := time.Now()
	tasks := make(chan schemas.CopyTask)
	var (
		files, bytes, failed atomic.Int64
		statuses             sync.Map
		wg                   sync.WaitGroup
	)
	for range max(1, workers) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for task := range tasks {
				c := eng.Copy(ctx, task)
				files.Add(1)
				if c.Status == schemas.StatusCopied || c.Status == schemas.StatusSkippedIdentical {
					bytes.Add(max(c.Length, 0))
				} else {
					failed.Add(1)
					fmt.Fprintf(out, "%s %s: %s%s\n", c.Status, task.SourceURI, c.Error, c.Evidence)
				}
				n, _ := statuses.LoadOrStore(c.Status, new(atomic.Int64))
				n.(*atomic.Int64).Add(1)
			}
		}()
	}
	progress := time.NewTicker(5 * time.Second)
	defer progress.Stop()
	listed := 0
	walkErr := w.Walk(ctx, src, func(loc string, size int64) error {
		select {
		case <-progress.C:
			fmt.Fprintf(out, "progress: %d listed, %d done, %.1f MB\n", listed, files.Load(), float64(bytes.Load())/1e6)
		default:
		}
		listed++
		tasks <- schemas.CopyTask{
			TaskID: fmt.Sprintf("copy-%d", listed), SourceURI: loc, TargetURI: dst + strings.TrimPrefix(loc, src),
		}
		return nil
	})
	close(tasks)
	wg.Wait()
	secs := time.Since(start).Seconds()
	var parts []string
	statuses.Range(func(k, v any) bool {
		parts = append(parts, fmt.Sprintf("%s=%d", k, v.(*atomic.Int64).Load()))
		return true
	})
	fmt.Fprintf(out, "copied %d files, %.1f MB in %.2f s: %.1f MB/s, %.1f files/s (%s)\n",
		files.Load(), float64(bytes.Load())/1e6, secs, float64(bytes.Load())/1e6/secs, float64(files.Load())/secs, strings.Join(parts, " "))
	if walkErr != nil {
		return false, walkErr
	}
	return failed.Load() == 0, nil
}
