package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path"
	"time"

	"github.com/hivedr/hivedr/internal/config"
	"github.com/hivedr/hivedr/internal/connect"
	"github.com/hivedr/hivedr/internal/verify"
)

// runVerify is `hivedr verify`: flags and wiring of internal/verify, the
// findings printed as they come, then the summary.
func runVerify(args []string, stdout, stderr io.Writer) int {
	fl, cf := newFlagSet("verify", "Usage: hivedr verify [flags] [-db GLOB ...] [-tables NAME ... | -tables-regex REGEXP]\n\n"+
		"Compare the replicated databases of the source metastore with their replicas on the DR\n"+
		"metastore: databases, tables, columns, partition keys, partitions, the parameters that\n"+
		"matter, locations after path mapping, data files by name and length, and the checksums of\n"+
		"a sample of the files (-sample, default 0: lengths only). -db takes globs (path.Match),\n"+
		"default every replicated database; -tables names the tables to compare in each of them,\n"+
		"-tables-regex matches them by a regular expression, whole. (-tables was that expression\n"+
		"once: a plain name means the same as it did; a pattern is refused, naming -tables-regex.)\n\n"+
		"A difference on an object that an event not yet applied touches is IN_FLIGHT: lag, not\n"+
		"divergence, with the event named. Not yet applied: the event is in the database's topic\n"+
		"after the applier group's committed offset, or in the source log above the tailer's\n"+
		"newest checkpoint (not published yet), or held back by a bootstrap of the database in\n"+
		"progress. Every other difference is DIVERGED.\n\n"+
		"Output: one line per difference, then a summary (with -json: one JSON object per line,\n"+
		"\"type\" finding or summary). Progress goes to stderr when it is a terminal.\n\n"+
		"Exit status: 0 nothing diverged (differences in flight may remain), 1 something diverged\n"+
		"or a system could not be read, 2 bad flags or configuration.", stdout, stderr)
	dbs := dbFlag(fl)
	tables := tablesFlag(fl)
	tablesRegex := fl.String("tables-regex", "", "compare only tables whose names this regular expression matches whole")
	sample := sampleFlag(fl, 0)
	seed := fl.Uint64("seed", 0, "picks the -sample files (0: a new pick each run, printed in the summary)")
	pageSize := fl.Int("page-size", 500, "partitions read per metastore call (1 to 32767)")
	asJSON := jsonFlag(fl)
	conf, _, err := setup(fl, cf, args)
	if err != nil {
		return exitCode(err)
	}
	if fl.NArg() > 0 {
		fmt.Fprintf(stderr, "hivedr verify: unexpected arguments %q\n", fl.Args())
		return exitUsage
	}
	opts := verify.Options{Databases: *dbs, Sample: *sample, Seed: *seed, PageSize: *pageSize}
	if *pageSize < 1 || *pageSize > 32767 {
		fmt.Fprintf(stderr, "hivedr verify: -page-size %d is not between 1 and 32767\n", *pageSize)
		return exitUsage
	}
	if *sample < 0 || *sample > 1 {
		fmt.Fprintf(stderr, "hivedr verify: -sample %v is not a fraction between 0 and 1\n", *sample)
		return exitUsage
	}
	if opts.Tables, err = tablesRegexp(*tables, *tablesRegex); err != nil {
		fmt.Fprintf(stderr, "hivedr verify: %v\n", err)
		return exitUsage
	}
	if opts.Seed == 0 {
		opts.Seed = uint64(time.Now().UnixNano())
	}
	if conf.Source.Metastore == "" {
		fmt.Fprintln(stderr, "hivedr verify: config: source.metastore (the source's Thrift address) is required")
		return exitUsage
	}
	for _, p := range *dbs {
		if _, err := path.Match(p, ""); err != nil {
			fmt.Fprintf(stderr, "hivedr verify: -db %q: %v\n", p, err)
			return exitUsage
		}
	}
	if isTerminal(stderr) {
		opts.Progress = func(p verify.Progress) {
			fmt.Fprintf(stderr, "\r\033[K%s.%s: %d tables, %d partitions, %d files, %d diverged, %d in flight",
				p.Database, p.Table, p.Tables, p.Partitions, p.Files, p.Diverged, p.InFlight)
		}
	}
	ctx, stop := signalContext()
	defer stop()
	sum, err := verifyReplica(ctx, conf, opts, func(f verify.Finding) {
		if *asJSON {
			writeJSONLine(stdout, struct {
				Type string `json:"type"`
				verify.Finding
			}{"finding", f})
			return
		}
		fmt.Fprintln(stdout, f)
	})
	if opts.Progress != nil {
		fmt.Fprint(stderr, "\r\033[K")
	}
	if *asJSON {
		out := struct {
			Type string `json:"type"`
			verify.Summary
			Clean bool   `json:"clean"`
			Seed  uint64 `json:"seed"`
			Error string `json:"error,omitempty"`
		}{Type: "summary", Summary: sum, Clean: sum.Clean() && err == nil, Seed: opts.Seed}
		if err != nil {
			out.Error = err.Error()
		}
		writeJSONLine(stdout, out)
	} else {
		verdict := "clean"
		if !sum.Clean() {
			verdict = "DIVERGED"
		}
		full := ""
		if sum.ListedInFull > 0 {
			full = fmt.Sprintf(", %d partitioned tables listed in full", sum.ListedInFull)
		}
		fmt.Fprintf(stdout, "%s: %d databases, %d tables, %d partitions, %d files (%d bytes), %d checksummed (-sample %v, -seed %d) in %.1fs: %d diverged, %d in flight (%d events not applied yet, %d not published yet)%s\n",
			verdict, sum.Databases, sum.Tables, sum.Partitions, sum.Files, sum.Bytes, sum.Sampled, *sample, opts.Seed,
			sum.Seconds, sum.Diverged, sum.InFlight, sum.PendingEvents, sum.Unpublished, full)
	}
	if err != nil {
		fmt.Fprintf(stderr, "hivedr verify: %v\n", connect.Explain(conf, err))
		return exitError
	}
	if !sum.Clean() {
		return exitError
	}
	return exitOK
}

// verifyReplica connects to what the configuration names and runs
// verify.Run.
func verifyReplica(ctx context.Context, conf *config.Config, opts verify.Options, sink verify.Sink) (verify.Summary, error) {
	cfg, closeAll, err := verify.Open(ctx, conf)
	if err != nil {
		return verify.Summary{}, err
	}
	defer closeAll()
	return verify.Run(ctx, cfg, opts, sink)
}

func writeJSONLine(w io.Writer, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		b = []byte(fmt.Sprintf(`{"type":"error","error":%q}`, err.Error()))
	}
	fmt.Fprintf(w, "%s\n", b)
}

// isTerminal reports whether w is a character device (a terminal).
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}
