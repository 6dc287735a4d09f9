// Command hivedr is disaster-recovery replication for Hive-style data
// warehouses: it tails a source Hive Metastore's notification log into
// Kafka, copies the data files it references, and replays it on a DR site.
//
// Usage:
//
//	hivedr <command> [flags]
//
// Each command is one process role or operator tool; see `hivedr help`.
package main

import (
	"fmt"
	"io"
	"os"
	"runtime/debug"
)

// command is one subcommand of hivedr.
type command struct {
	name, summary string
	run           func(args []string, stdout, stderr io.Writer) int
}

func commands() []command {
	return []command{
		{"apply", "apply the event topics to the DR metastore, in order, data before metadata (the applier daemon)", runApply},
		{"cat", "print records of hivedr topics as JSON, decoded with their schemas", runCat},
		{"copy", "copy a directory tree with copyd's engine, without Kafka", runCopy},
		{"copyd", "copy and verify the files copy tasks name (the copy daemon)", runCopyd},
		{"status", "show per database the DR position, halts, skipped events and the applier's lag", runStatus},
		{"tail", "publish the source notification log to Kafka (the tailer daemon)", runTail},
		{"version", "print the version of hivedr", runVersion},
	}
}

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] == "help" || args[0] == "-h" || args[0] == "--help" {
		usage(stdout)
		return 0
	}
	for _, c := range commands() {
		if c.name == args[0] {
			return c.run(args[1:], stdout, stderr)
		}
	}
	fmt.Fprintf(stderr, "hivedr: unknown command %q\n\n", args[0])
	usage(stderr)
	return 2
}

func usage(w io.Writer) {
	fmt.Fprintln(w, "hivedr: disaster-recovery replication for Hive warehouses over Kafka")
	fmt.Fprintln(w, "\nUsage: hivedr <command> [flags]\n\nCommands:")
	for _, c := range commands() {
		fmt.Fprintf(w, "  %-10s %s\n", c.name, c.summary)
	}
}

func runVersion(_ []string, stdout, _ io.Writer) int {
	v := "(devel)"
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" {
		v = bi.Main.Version
	}
	fmt.Fprintf(stdout, "hivedr %s\n", v)
	return 0
}
