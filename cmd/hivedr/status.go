package main

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/hivedr/hivedr/internal/status"
)

// runStatus is `hivedr status`: it parses the flags, loads the
// configuration, gathers the report (internal/status) and prints it. The
// exit decision is the report's verdict, status.Report.CaughtUp.
func runStatus(args []string, stdout, stderr io.Writer) int {
	fl, cf := newFlagSet("status", "Usage: hivedr status [flags]\n\n"+
		"Show, per replicated database (the <prefix>.events.<db> topics in Kafka and the names in\n"+
		"replication.databases): the DR database's repl.last.id, whether its applier worker halted\n"+
		"and why (hivedr.halted), events skipped by operators (hivedr.skipped.*), and the applier\n"+
		"group's lag on the database's topic, with the tailer's checkpoint against the source log.\n\n"+
		"Columns: REPL.LAST.ID the last source event applied to the DR database (- when it is not\n"+
		"on the DR); LAG records (events, heartbeats, transaction markers) of the topic the\n"+
		"applier group has not committed, up to the last stable offset; BEHIND how long ago the\n"+
		"oldest of them was published; NEWEST RECORD the age of the topic's newest event or\n"+
		"heartbeat; SKIPPED events skipped with apply -skip-event; STATE ok, lagging, HALTED,\n"+
		"no topic, not on DR, not a target (a DR database without repl.target.for), unknown.\n\n"+
		"Exit status: 0 when the tailer has published the source log as it was when status\n"+
		"started and every database is applied to its topic's end with none halted; 1 when some\n"+
		"lag, halted, or a system could not be reached; 2 on bad flags or configuration. So a\n"+
		"script can wait with: until hivedr status -db finance >/dev/null; do sleep 2; done", stderr)
	asJSON := fl.Bool("json", false, "print the report as one JSON object instead of a table")
	dbList := fl.String("db", "", "only these databases, comma-separated; each must have its topic and its DR database to count as caught up")
	tailerWait := fl.Duration("tailer-wait", 5*time.Second, "how long to wait for the tailer's checkpoint to reach the source log's head before calling it behind")
	timeout := fl.Duration("timeout", 30*time.Second, "give up on unreachable systems after this long in all")
	fl.Lookup("log-level").Usage = "accepted like every command's; status logs nothing"
	conf, _, ok := setup(fl, cf, args, stderr)
	if !ok {
		return exitUsage
	}
	if fl.NArg() > 0 {
		fmt.Fprintf(stderr, "hivedr status: unexpected arguments %q\n", fl.Args())
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
	rep := status.Gather(ctx, conf, splitList(*dbList), *tailerWait)
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

// splitList parses -db: comma-separated names, lower-cased, without
// blanks or repeats.
func splitList(s string) []string {
	var out []string
	for _, d := range strings.Split(s, ",") {
		if d = strings.ToLower(strings.TrimSpace(d)); d != "" && !slices.Contains(out, d) {
			out = append(out, d)
		}
	}
	return out
}
