package main

import (
	"fmt"
	"io"
	"time"

	"github.com/hivedr/hivedr/internal/drill"
	"github.com/hivedr/hivedr/internal/failover"
)

func runDrill(args []string, stdout, stderr io.Writer) int {
	fl, cf := newFlagSet("drill", "Usage: hivedr drill [flags] [-reverse-config FILE] | -dry-run -db NAME\n\n"+
		"Rehearse a failover and failback end to end on a scratch database, hivedr_drill_<time>, that\n"+
		"the drill creates on the source (replication.databases must hold it, e.g. {name: hivedr_drill_*})\n"+
		"while the pipeline runs: drop the leftovers of this pipeline's killed drills, create it (a\n"+
		"partitioned table, partitions each with a data file), wait until it is replicated and verify\n"+
		"is clean with every file checksummed, write one more partition with a file and fail over at\n"+
		"once (planned), verify, write a table with a file on DR, fail back through the reverse\n"+
		"pipeline (-reverse-config; its daemons run, started before or after the failback) and verify\n"+
		"the old primary; then drop the scratch database on both sites and wait until the appliers\n"+
		"went past its drop (none stays halted on it). Reports RPO, RTO and each step's duration.\n"+
		"Without -reverse-config the failback steps are not run and the verdict is INCOMPLETE.\n\n"+
		"-dry-run -db NAME checks a real database's readiness without changing anything: DR reachable,\n"+
		"no halt, the replica's age within the database's RPO, verify clean on a sample of files\n"+
		"(-sample; the drill itself checksums every file). -timeout bounds each waiting step.\n\n"+
		"Exit status: 0 PASSED (every step ran and passed); 1 FAILED, or INCOMPLETE (failback not run);\n"+
		"2 on bad flags or configuration.", stdout, stderr)
	dryRun := dryRunFlag(fl)
	dbs := dbFlag(fl)
	revFile := reverseConfigFlag(fl)
	timeout := timeoutFlag(fl, 5*time.Minute)
	sample := sampleFlag(fl, 0.05)
	prefix := fl.String("scratch-prefix", failover.DrillPrefix, "the scratch database's name prefix (it must begin with "+failover.DrillPrefix+")")
	asJSON := jsonFlag(fl)
	conf, log, err := setup(fl, cf, args)
	if err != nil {
		return exitCode(err)
	}
	db, err := oneDB("drill", "-dry-run checks", *dbs)
	if err != nil {
		fmt.Fprintf(stderr, "hivedr drill: %v\n", err)
		return exitUsage
	}
	if fl.NArg() > 0 || *dryRun != (db != "") {
		fmt.Fprintln(stderr, "hivedr drill: -db goes with -dry-run (a drill makes its own database)")
		return exitUsage
	}
	opts := drill.Options{Conf: conf, Timeout: *timeout, Sample: *sample, By: operator(), Log: log}
	if *revFile != "" {
		if opts.Rev, err = loadReverse("hivedr drill -reverse-config", *revFile, log); err != nil {
			fmt.Fprintf(stderr, "hivedr drill: -reverse-config: %v\n", err)
			return exitUsage
		}
	}
	name, err := drill.Name(*prefix, time.Now())
	if err != nil {
		fmt.Fprintf(stderr, "hivedr drill: -%v\n", err)
		return exitUsage
	}
	ctx, stop := signalContext()
	defer stop()
	var rep *drill.Report
	if *dryRun {
		rep = drill.DryRun(ctx, opts, db)
	} else {
		rep = drill.Run(ctx, opts, name)
	}
	if !writeReport(stdout, stderr, "drill", *asJSON, rep) {
		return exitError
	}
	if !rep.OK {
		return exitError
	}
	return exitOK
}
