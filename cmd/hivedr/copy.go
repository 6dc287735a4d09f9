package main

import (
	"context"
	"fmt"
	"io"

	"github.com/hivedr/hivedr/copyd"
	"github.com/hivedr/hivedr/internal/config"
)

func runCopy(args []string, stdout, stderr io.Writer) int {
	fl, cf := newFlagSet("copy", "Usage: hivedr copy [flags] SOURCE_DIR TARGET_DIR\n\nCopy a directory tree with copyd's engine (CRC32C verified, atomic, skipping\n"+
		"identical files), without Kafka: for bootstraps and benchmarks. The directories may be\n"+
		"on HDFS, S3 or local. Prints a line per file that did not copy, progress every 5 s and\n"+
		"a summary. Exits 1 if any file failed.", stdout, stderr)
	workers := fl.Int("workers", copyd.DefaultTreeWorkers, "files copied at once")
	bps := fl.Int64("bytes-per-second", 0, "bandwidth limit; 0 is unlimited")
	conf, _, err := setup(fl, cf, args)
	if err != nil {
		return exitCode(err)
	}
	if fl.NArg() != 2 {
		fmt.Fprintf(stderr, "hivedr copy: want SOURCE_DIR and TARGET_DIR, got %q\n\n", fl.Args())
		fl.Usage()
		return exitUsage
	}
	ctx, stop := signalContext()
	defer stop()
	sum, err := copyTree(ctx, conf, fl.Arg(0), fl.Arg(1), *workers, *bps, stdout)
	if err != nil {
		fmt.Fprintln(stderr, "hivedr copy:", err)
		return exitError
	}
	if sum.Failed > 0 {
		return exitError
	}
	return exitOK
}

// copyTree wires copyd.CopyTree: the configured filesystems, and an
// engine confined to the two directories.
func copyTree(ctx context.Context, conf *config.Config, src, dst string, workers int, bps int64, out io.Writer) (copyd.TreeSummary, error) {
	router, err := newRouter(conf)
	if err != nil {
		return copyd.TreeSummary{}, err
	}
	defer router.Close()
	eng, err := copyd.NewEngine(copyd.EngineConfig{
		SourceRoots: []string{src}, TargetRoots: []string{dst}, Retries: conf.Copyd.Retries, BytesPerSecond: bps,
		SplitSize: conf.Copyd.SplitSize, SplitWorkers: conf.Copyd.SplitWorkers, Preserve: preserve(conf.Copyd.Preserve),
	}, router, nil)
	if err != nil {
		return copyd.TreeSummary{}, err
	}
	return copyd.CopyTree(ctx, eng, router, copyd.TreeConfig{Source: src, Target: dst, Workers: workers, Report: out})
}
