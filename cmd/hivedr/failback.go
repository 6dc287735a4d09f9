package main

import (
	"fmt"
	"io"

	"github.com/hivedr/hivedr/internal/connect"
	"github.com/hivedr/hivedr/internal/failover"
)

func runFailback(args []string, stdout, stderr io.Writer) int {
	fl, cf := newFlagSet("failback", "Usage: hivedr failback [flags] -reverse-config FILE -db NAME ...\n\n"+
		"Make the old primary the replica of the new one (the failed-over DR databases) through the\n"+
		"reverse pipeline: a configuration you write with the roles swapped (its source the forward DR\n"+
		"metastore, its applier the old primary's, its own source.name and topic prefix, paths mapped\n"+
		"back, tailer.start_event_id the DR log head the failover recorded). The command checks it,\n"+
		"reads both logs after the failover (tables changed on the old primary after the event DR\n"+
		"reflected, tables changed on DR since the failover), marks each old-primary database as the\n"+
		"reverse pipeline's replica at the DR log head, and requests a table-scoped bootstrap of the\n"+
		"changed tables on the reverse control topic; the other tables resume incrementally. Start\n"+
		"the reverse daemons (tail, copyd, apply -config FILE) to carry it out. A failback runs once: a\n"+
		"database the reverse pipeline's replica already is refused unless -again.\n\n"+
		"Exit status: 0 the requests are written; 1 refused or a system could not be reached; 2 on\n"+
		"bad flags or configuration.", stdout, stderr)
	dbs := dbFlag(fl)
	revFile := reverseConfigFlag(fl)
	again := fl.Bool("again", false, "fail back databases an earlier failback finished already (mark them and request their tables again); a failback cut short resumes without it")
	asJSON := jsonFlag(fl)
	conf, log, err := setup(fl, cf, args)
	if err != nil {
		return exitCode(err)
	}
	names, err := dbNames("failback", *dbs)
	if err != nil {
		fmt.Fprintf(stderr, "hivedr failback: %v\n", err)
		return exitUsage
	}
	if fl.NArg() > 0 || len(names) == 0 || *revFile == "" {
		fmt.Fprintln(stderr, "hivedr failback: give -reverse-config FILE and -db NAME ...")
		return exitUsage
	}
	rev, err := loadReverse("hivedr failback -reverse-config", *revFile, log)
	if err != nil {
		fmt.Fprintf(stderr, "hivedr failback: %v\n", err)
		return exitUsage
	}
	ctx, stop := signalContext()
	defer stop()
	rep, err := failover.Failback(ctx, conf, rev, failover.BackOptions{Databases: names, Again: *again, Log: log})
	if err != nil {
		fmt.Fprintf(stderr, "hivedr failback: %v\n", connect.Explain(conf, err))
		return exitError
	}
	if !writeReport(stdout, stderr, "failback", *asJSON, rep) {
		return exitError
	}
	return exitOK
}
