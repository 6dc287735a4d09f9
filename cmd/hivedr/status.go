package main

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/hivedr/hivedr/internal/status"
)

// runStatus is `hivedr status`: it parses the flags, loads the
// configuration, gathers the report (internal/status) and prints it. The
// exit decision is the report's verdict, status.Report.CaughtUp.
func runStatus(args []string, stdout, stderr io.Writer) int {
	fl, cf := newFlagSet("status", "Usage: hivedr status [flags]\n\n"+
		"Show, per replicated database (the <prefix>.events.<db> topics in Kafka and the names in\n"+
		"replication.databases): the DR database's repl.last.id, the events of its topic not applied\n"+
		"yet, the replica's age against the database's rpo, whether its applier worker halted and\n"+
		"why (hivedr.halted), events skipped by operators (hivedr.skipped.*), and the tailer's\n"+
		"checkpoint: its age, its state (CHAIN_BROKEN) and how far it is from the source log's head.\n"+
		"Status only reads: it registers no schema and commits no offset, and logs nothing. -db limits\n"+
		"it to those databases, each of which must have its topic and its DR database to count as\n"+
		"caught up; -json prints the report as one JSON object instead of a table; -timeout bounds\n"+
		"the whole run, unreachable systems included.\n\n"+
		"Columns: REPL.LAST.ID the last source event applied to the DR database (- when it is not\n"+
		"on the DR); LAG events of the topic not applied yet (heartbeats and transaction markers are\n"+
		"not lag); RECORDS records the applier group has not committed (it commits every second);\n"+
		"BEHIND how long ago the oldest unapplied event was published; AGE the replica's age, now\n"+
		"minus the source time up to which the DR database is complete (kept current by heartbeats;\n"+
		"it grows while the tailer is down); RPO replication.databases[].rpo; NEWEST RECORD the age\n"+
		"of the topic's newest event or heartbeat; SKIPPED events skipped with apply -skip-event;\n"+
		"STATE chain_broken, unknown, halted, bootstrapping, rpo_breached (AGE over RPO), tailer_down\n"+
		"(no tailer checkpoint for max(3 x (tailer.heartbeat_interval + tailer.poll_interval), 15s)),\n"+
		"tailer_behind (the source head not published within -tailer-wait), no_topic, lagging,\n"+
		"not_on_dr, not_a_target (a DR database without repl.target.for), ok; -json spells them the\n"+
		"same.\n\n"+
		"Exit status: 0 when the tailer is running and has published the source log as it was when\n"+
		"status started, and every database is ok; 1 when something lags, is halted, is over its\n"+
		"RPO, the tailer is down, behind or stopped on a broken chain, or a system could not be\n"+
		"reached; 2 on bad flags or configuration. So a script can wait with:\n"+
		"until hivedr status -db finance >/dev/null; do sleep 2; done", stdout, stderr)
	asJSON := jsonFlag(fl)
	dbList := dbFlag(fl)
	tailerWait := fl.Duration("tailer-wait", 5*time.Second, "how long to wait for the tailer's checkpoint to reach the source log's head before calling it behind (at least tailer.poll_interval + 1s)")
	timeout := timeoutFlag(fl, 30*time.Second)
	conf, _, err := setup(fl, cf, args)
	if err != nil {
		return exitCode(err)
	}
	if fl.NArg() > 0 {
		fmt.Fprintf(stderr, "hivedr status: unexpected arguments %q\n", fl.Args())
		return exitUsage
	}
	dbs, err := dbNames("status", *dbList)
	if err != nil {
		fmt.Fprintf(stderr, "hivedr status: %v\n", err)
		return exitUsage
	}
	if *timeout <= 0 || *tailerWait < 0 {
		fmt.Fprintln(stderr, "hivedr status: -timeout must be positive and -tailer-wait not negative")
		return exitUsage
	}
	ctx, stop := signalContext()
	defer stop()
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	rep := status.Gather(ctx, conf, dbs, *tailerWait)
	write := rep.WriteText
	if *asJSON {
		write = rep.WriteJSON
	}
	if err := write(stdout); err != nil {
		fmt.Fprintf(stderr, "hivedr status: %v\n", err)
		return exitError
	}
	if !rep.CaughtUp {
		return exitError
	}
	return exitOK
}
