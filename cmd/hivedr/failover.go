package main

import (
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/hivedr/hivedr/internal/connect"
	"github.com/hivedr/hivedr/internal/failover"
)

func runFailover(args []string, stdout, stderr io.Writer) int {
	fl, cf := newFlagSet("failover", "Usage: hivedr failover [flags] (-db NAME ... | -all) [-planned | -unplanned]\n\n"+
		"Make DR databases the primary. Planned (the default; the source is reachable): wait until the\n"+
		"tailer published the source log's head and the applier applied every topic to its end, then\n"+
		"mark each database. Unplanned (the source is gone): wait only until the applier applied what\n"+
		"Kafka holds. Marking a database records on it the source event and time it reflects, the RPO\n"+
		"achieved, the consistent cut of the set and the DR log's head (hivedr.failover.*), and removes\n"+
		"repl.target.for: it is writable, and the applier refuses to write into it (failed_over).\n"+
		"A database failed over already is refused; nothing changes unless every database can be.\n"+
		"-all takes every database in the replication scope with an events topic, leaving out drills'\n"+
		"scratch databases (hivedr_drill_*) and databases not on DR whose topic is applied to the end\n"+
		"(dropped on the source). -dry-run checks all of that (and, planned, reads the source's head)\n"+
		"and changes nothing: no wait, no mark. -timeout bounds the wait for the tailer and the applier.\n\n"+
		"Exit status: 0 failed over (-dry-run: could be); 1 refused, timed out (planned: nothing changed) or a system could\n"+
		"not be reached; 2 on bad flags or configuration.", stdout, stderr)
	dbs := dbFlag(fl)
	all := allFlag(fl)
	planned := fl.Bool("planned", false, "the source is reachable (the default)")
	unplanned := fl.Bool("unplanned", false, "the source is gone: apply what Kafka holds, then fail over")
	timeout := timeoutFlag(fl, 5*time.Minute)
	dryRun := dryRunFlag(fl)
	resume := fl.Bool("resume", false, "finish a failover cut short after it marked a database and before it recorded the figures (run it when no other failover of the database runs)")
	asJSON := jsonFlag(fl)
	conf, log, err := setup(fl, cf, args)
	if err != nil {
		return exitCode(err)
	}
	names, err := dbNames("failover", *dbs)
	switch {
	case err != nil:
		fmt.Fprintf(stderr, "hivedr failover: %v\n", err)
		return exitUsage
	case fl.NArg() > 0:
		fmt.Fprintf(stderr, "hivedr failover: unexpected arguments %q\n", fl.Args())
		return exitUsage
	case *planned && *unplanned:
		fmt.Fprintln(stderr, "hivedr failover: -planned and -unplanned exclude each other")
		return exitUsage
	case (len(names) > 0) == *all:
		fmt.Fprintln(stderr, "hivedr failover: give -db NAME ... or -all")
		return exitUsage
	}
	mode := failover.Planned
	if *unplanned {
		mode = failover.Unplanned
	}
	ctx, stop := signalContext()
	defer stop()
	rep, err := failover.Run(ctx, conf, failover.Options{Databases: names, All: *all, Mode: mode, Timeout: *timeout, DryRun: *dryRun, Resume: *resume, Log: log})
	if err != nil {
		fmt.Fprintf(stderr, "hivedr failover: %v\n", connect.Explain(conf, err))
		if errors.Is(err, failover.ErrTimeout) {
			fmt.Fprintln(stderr, "hivedr failover: raise -timeout, or fail over -unplanned to accept what DR has")
		}
		return exitError
	}
	if !writeReport(stdout, stderr, "failover", *asJSON, rep) {
		return exitError
	}
	return exitOK
}

// report is what failover, failback and drill print.
type report interface {
	WriteJSON(w io.Writer) error
	WriteText(w io.Writer) error
}

// writeReport prints rep on stdout, as JSON or text; false (after saying
// why on stderr) when it could not.
func writeReport(stdout, stderr io.Writer, cmd string, asJSON bool, rep report) bool {
	write := rep.WriteText
	if asJSON {
		write = rep.WriteJSON
	}
	if err := write(stdout); err != nil {
		fmt.Fprintf(stderr, "hivedr %s: %v\n", cmd, err)
		return false
	}
	return true
}
