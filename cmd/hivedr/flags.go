package main

import (
	"flag"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/hivedr/hivedr/internal/cli"
)

// The flags more than one command takes are defined here, once each, so
// that a flag means the same on every command that takes it: one type,
// one usage text, one default (TestCLIFlagMeaningsAgree). A flag whose
// usage ends in ownDefault defaults per command, and the command's -h
// shows its default. Every flag of several values is a cli.List:
// repeatable, and comma-separated.

// ownDefault ends the usage of a flag whose default is per command.
const ownDefault = "; each command has its own default"

// dbFlag is -db: databases by name (by glob where the command's usage
// line says GLOB: bootstrap and verify).
func dbFlag(fl *flag.FlagSet) *cli.List {
	l := new(cli.List)
	fl.Var(l, "db", "a database, by name (by glob, path.Match, where the command's usage says GLOB); repeatable, or comma-separated")
	return l
}

// tablesFlag is -tables: table names, never patterns (verify's regular
// expression is -tables-regex).
func tablesFlag(fl *flag.FlagSet) *cli.List {
	l := new(cli.List)
	fl.Var(l, "tables", "only these tables, by name (not patterns); repeatable, or comma-separated")
	return l
}

func allFlag(fl *flag.FlagSet) *bool {
	return fl.Bool("all", false, "every database in the replication scope")
}

func jsonFlag(fl *flag.FlagSet) *bool {
	return fl.Bool("json", false, "print the outcome as JSON on stdout instead of text")
}

func dryRunFlag(fl *flag.FlagSet) *bool {
	return fl.Bool("dry-run", false, "check, and change nothing (the command's help says what it checks)")
}

func timeoutFlag(fl *flag.FlagSet, def time.Duration) *time.Duration {
	return fl.Duration("timeout", def, "how long to wait before giving up (the command's help says on what)"+ownDefault)
}

func sampleFlag(fl *flag.FlagSet, def float64) *float64 {
	return fl.Float64("sample", def, "the fraction of data files (0 to 1) whose checksums are compared besides their lengths (1: every file)"+ownDefault)
}

func reverseConfigFlag(fl *flag.FlagSet) *string {
	return fl.String("reverse-config", "", "the reverse pipeline's configuration file (the old primary as the replica)")
}

func metricsAddrFlag(fl *flag.FlagSet) *string {
	return fl.String("metrics-addr", "", "serve /metrics, /healthz and /readyz here (host:port), overriding the role's metrics_addr (tailer, copyd or applier section)")
}

func stateDirFlag(fl *flag.FlagSet) *string {
	return fl.String("state-dir", "", "the role's Pebble state directory (default: $XDG_STATE_HOME or ~/.local/state, then hivedr/applier or hivedr/copyd-<instance>, with -site-<site> added for a further site)")
}

func skipEventFlag(fl *flag.FlagSet) *skipFlags {
	s := new(skipFlags)
	fl.Var(s, "skip-event", "skip exactly this event, as <database>:<event ID> (repeatable); recorded on the DR database with who and when")
	return s
}

// dbNames returns the databases -db names, lower-cased, for a command
// (cmd) that takes names, not globs, each once.
func dbNames(cmd string, dbs cli.List) ([]string, error) {
	out := make([]string, 0, len(dbs))
	for _, d := range dbs {
		if strings.ContainsAny(d, `*?[\`) {
			return nil, fmt.Errorf("-db %q: hivedr %s takes database names, not globs", d, cmd)
		}
		if d = strings.ToLower(d); !slices.Contains(out, d) {
			out = append(out, d)
		}
	}
	return out, nil
}

// oneDB returns the one database -db names, for a command (cmd, doing
// what) that acts on one; "" when -db is not given.
func oneDB(cmd, what string, dbs cli.List) (string, error) {
	names, err := dbNames(cmd, dbs)
	switch {
	case err != nil:
		return "", err
	case len(names) > 1:
		return "", fmt.Errorf("-db: hivedr %s %s one database, got %q", cmd, what, names)
	case len(names) == 1:
		return names[0], nil
	}
	return "", nil
}

// tablesRegexp is the regular expression that matches whole the table
// names -tables gives (lower-cased) or, with -tables-regex, that
// expression whole; nil for neither.
func tablesRegexp(tables cli.List, expr string) (*regexp.Regexp, error) {
	switch {
	case len(tables) > 0 && expr != "":
		return nil, fmt.Errorf("give -tables (names) or -tables-regex (a regular expression), not both")
	case expr != "":
		re, err := regexp.Compile("^(?:" + expr + ")$")
		if err != nil {
			return nil, fmt.Errorf("-tables-regex: %w", err)
		}
		return re, nil
	case len(tables) == 0:
		return nil, nil
	}
	quoted := make([]string, len(tables))
	for i, t := range tables {
		if strings.ContainsAny(t, `*?[]()|+{}^$.\ `) {
			return nil, fmt.Errorf("-tables %q: table names are names, not patterns (a regular expression is -tables-regex)", t)
		}
		quoted[i] = regexp.QuoteMeta(strings.ToLower(t))
	}
	return regexp.MustCompile("^(?:" + strings.Join(quoted, "|") + ")$"), nil
}
