// Command hivedr is disaster-recovery replication for Hive-style data
// warehouses: it tails a source Hive Metastore's notification log into
// Kafka, copies the data files it references, and replays it on a DR site.
//
// Usage:
//
//	hivedr <command> [flags] [arguments]
//	hivedr help [command]
//	hivedr <command> -h
//
// Each command is one process role or operator tool; see `hivedr help`.
// This package only parses flags, loads the configuration, wires the roles
// (producer, the tailer; copyd; applier) and tools (internal/status,
// internal/bootstrap, internal/failover, internal/drill, internal/verify,
// internal/replay, internal/cat, copyd.CopyTree) to their adapters, and
// turns the outcome into an exit code: 0 done (or stopped by
// SIGINT/SIGTERM, or help asked for with -h, -help or --help), 1 failed,
// 2 bad flags or configuration, 3 the tailer found the source log's chain
// broken.
//
// # Command line
//
// Flags are the standard library's flag package, read by internal/cli:
// -name value, -name=value, --name alike (a boolean flag takes no separate
// value: -json, -json=false); flags may come before, between or after
// positional arguments, and "--" ends them. An unknown flag is an
// error naming it, followed by the command's usage, exit 2. A flag that
// more than one command takes means the same on each, with one usage text
// (flags.go): -db is a database (a name; a glob where the command's usage
// says GLOB), repeatable and comma-separated on every command; -tables is
// table names, repeatable and comma-separated, on every command, and
// verify's regular expression is -tables-regex. Every flag of several
// values is a cli.List. -timeout and -sample default per command, as its
// -h shows.
//
// hivedr uses no CLI library. Those that give shell completion (cobra
// with pflag, urfave/cli) would remove about 150 lines (internal/cli,
// `hivedr completion` and the help plumbing here), not the commands' flag
// definitions, and cost hivedr's command line: pflag reads "-db" as the
// shorthands -d -b, so every script, runbook and test that writes
// hivedr's single-dash long flags would break or need a shim; urfave/cli
// (v2) keeps single-dash flags, being the flag package underneath, but
// stops at the first argument like it (urfave/cli#976). The standard
// library keeps the flags as they were, and the module's dependencies;
// `hivedr completion bash` prints a completion script made from the
// commands' own flag sets.
//
// Every command takes -config FILE ($HIVEDR_CONFIG). With no file at all,
// it runs on the local stack's defaults and says so once at start. With a
// file, the sections it reads (the needs of its entry in commands) must be
// in the file, or it exits 2 naming what is missing:
//
//	tail       source, kafka, schema_registry, replication, filesystems
//	copyd      kafka, schema_registry, replication, filesystems
//	apply      kafka, schema_registry, applier.metastore, replication, filesystems
//	drill      source, kafka, schema_registry, applier.metastore, replication, filesystems
//	failback   source, kafka, schema_registry, applier.metastore, replication
//	failover   source, kafka, schema_registry, applier.metastore, replication
//	status     source, kafka, schema_registry, applier.metastore
//	bootstrap  source, kafka, schema_registry, applier.metastore, replication
//	cat        kafka, schema_registry
//	copy       filesystems
//	verify     source, kafka, schema_registry, applier.metastore, replication, filesystems
//	replay     kafka, applier.metastore
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/hivedr/hivedr/internal/buildinfo"
	"github.com/hivedr/hivedr/internal/cli"
	"github.com/hivedr/hivedr/internal/config"
	"github.com/hivedr/hivedr/internal/hms"
	"github.com/hivedr/hivedr/internal/krb"
)

// Exit codes shared by the commands.
const (
	exitOK          = 0
	exitError       = 1
	exitUsage       = 2 // bad flags or configuration
	exitChainBroken = 3
)

// command is one subcommand of hivedr.
type command struct {
	name, summary string
	run           func(args []string, stdout, stderr io.Writer) int
	// needs are the sections and addresses the command reads that a
	// configuration file must give (config.Config.Require); with no file,
	// the local stack's defaults give them all.
	needs []config.Section
	// daemon: a long-running role, which logs what a tool prints.
	daemon bool
}

func commands() []command {
	return []command{
		{name: "acls", summary: "print the Kafka ACLs each role needs under this configuration; -apply creates them",
			run: runACLs},
		{name: "apply", summary: "apply the event topics to the DR metastore, in order, data before metadata (the applier daemon)",
			run: runApply, daemon: true, needs: []config.Section{config.SectionKafka, config.SectionSchemaRegistry,
				config.SectionDRMetastore, config.SectionReplication, config.SectionFilesystems}},
		{name: "bootstrap", summary: "bring existing databases to DR (or repair a broken chain) and follow it to the end",
			run: runBootstrap, needs: []config.Section{config.SectionSource, config.SectionKafka, config.SectionSchemaRegistry,
				config.SectionDRMetastore, config.SectionReplication}},
		{name: "cat", summary: "print records of hivedr topics as JSON, decoded with their schemas",
			run: runCat, needs: []config.Section{config.SectionKafka, config.SectionSchemaRegistry}},
		{name: "completion", summary: "print a bash completion script of the commands and their flags",
			run: runCompletion},
		{name: "config", summary: "check a configuration file; print it with every default filled and secrets masked",
			run: runConfig},
		{name: "copy", summary: "copy a directory tree with copyd's engine, without Kafka",
			run: runCopy, needs: []config.Section{config.SectionFilesystems}},
		{name: "copyd", summary: "copy and verify the files copy tasks name (the copy daemon)",
			run: runCopyd, daemon: true, needs: []config.Section{config.SectionKafka, config.SectionSchemaRegistry,
				config.SectionReplication, config.SectionFilesystems}},
		{name: "drill", summary: "rehearse failover and failback on a scratch database (RPO, RTO, steps); -dry-run checks a database's readiness",
			run: runDrill, needs: []config.Section{config.SectionSource, config.SectionKafka, config.SectionSchemaRegistry,
				config.SectionDRMetastore, config.SectionReplication, config.SectionFilesystems}},
		{name: "failback", summary: "make the old primary the replica of the failed-over DR databases, moving only the tables changed since",
			run: runFailback, needs: []config.Section{config.SectionSource, config.SectionKafka, config.SectionSchemaRegistry,
				config.SectionDRMetastore, config.SectionReplication}},
		{name: "failover", summary: "make DR databases the primary, planned or unplanned, recording the cut and the RPO achieved",
			run: runFailover, needs: []config.Section{config.SectionSource, config.SectionKafka, config.SectionSchemaRegistry,
				config.SectionDRMetastore, config.SectionReplication}},
		{name: "replay", summary: "re-drive a database's topic from an event (or skip to its end); skip an event on the running applier",
			run: runReplay, needs: []config.Section{config.SectionKafka, config.SectionDRMetastore}},
		{name: "status", summary: "show per database the DR position, halts, skipped events and the applier's lag",
			run: runStatus, needs: []config.Section{config.SectionSource, config.SectionKafka, config.SectionSchemaRegistry,
				config.SectionDRMetastore}},
		{name: "tail", summary: "publish the source notification log to Kafka (the tailer daemon)",
			run: runTail, daemon: true, needs: []config.Section{config.SectionSource, config.SectionKafka,
				config.SectionSchemaRegistry, config.SectionReplication, config.SectionFilesystems}},
		{name: "verify", summary: "compare the source's replicated databases with the DR: in_flight (lag) or diverged",
			run: runVerify, needs: []config.Section{config.SectionSource, config.SectionKafka, config.SectionSchemaRegistry,
				config.SectionDRMetastore, config.SectionReplication, config.SectionFilesystems}},
		{name: "version", summary: "print the version of hivedr", run: runVersion},
	}
}

// lookup returns the command called name (the zero command if none is).
func lookup(name string) command {
	for _, c := range commands() {
		if c.name == name {
			return c
		}
	}
	return command{}
}

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		usage(stdout)
		return exitOK
	}
	switch name := args[0]; {
	case name == "help" || cli.IsHelp(name):
		return runHelp(args[1:], stdout, stderr)
	case name == "-version" || name == "--version":
		return runVersion(args[1:], stdout, stderr)
	default:
		if c := lookup(name); c.run != nil {
			return c.run(args[1:], stdout, stderr)
		}
	}
	fmt.Fprintf(stderr, "hivedr: unknown command %q\n\n", args[0])
	usage(stderr)
	return exitUsage
}

// runHelp is `hivedr help [COMMAND]`: the list of commands, or the
// command's help as its -h prints it.
func runHelp(args []string, stdout, stderr io.Writer) int {
	switch {
	case len(args) == 0:
		usage(stdout)
		return exitOK
	case len(args) > 1:
		fmt.Fprintf(stderr, "hivedr help: want one command, got %q\n", args)
		return exitUsage
	}
	c := lookup(args[0])
	if c.run == nil {
		fmt.Fprintf(stderr, "hivedr help: unknown command %q\n\n", args[0])
		usage(stderr)
		return exitUsage
	}
	return c.run([]string{"-h"}, stdout, stderr)
}

func usage(w io.Writer) {
	fmt.Fprintln(w, "hivedr: disaster-recovery replication for Hive warehouses over Kafka")
	fmt.Fprintln(w, "\nUsage: hivedr <command> [flags] [arguments]\n\nCommands:")
	for _, c := range commands() {
		fmt.Fprintf(w, "  %-10s %s\n", c.name, c.summary)
	}
	fmt.Fprintln(w, "\nFlags may follow arguments; -- ends them. A command's flags: hivedr help <command>, or hivedr <command> -h.")
}

// runVersion prints the build: version, commit, build date (stamped by
// the Makefile's -ldflags; see internal/buildinfo) and Go version.
func runVersion(args []string, stdout, stderr io.Writer) int {
	fl := flag.NewFlagSet("version", flag.ContinueOnError)
	if err := parseFlags(fl, versionSummary, args, stdout, stderr); err != nil {
		return exitCode(err)
	}
	if fl.NArg() > 0 {
		fmt.Fprintf(stderr, "hivedr version: unexpected arguments %q\n", fl.Args())
		return exitUsage
	}
	fmt.Fprintln(stdout, buildinfo.Get())
	return exitOK
}

const versionSummary = "Usage: hivedr version (or hivedr -version, hivedr --version)\n\n" +
	"Print the version of hivedr, the commit and date it was built from, and the Go version."

// commonFlags are the flags every command takes, with what its help
// says and where it writes.
type commonFlags struct {
	config    string
	site      string
	logLevel  string
	logFormat string

	summary        string // the help above the flags
	stdout, stderr io.Writer
}

func (c *commonFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&c.config, "config", os.Getenv("HIVEDR_CONFIG"),
		"YAML configuration file ($HIVEDR_CONFIG); with neither, the local stack's defaults")
	fs.StringVar(&c.site, "site", os.Getenv("HIVEDR_SITE"),
		"the DR site to serve ($HIVEDR_SITE): a name in the configuration's sites, or its top-level site's; default the top-level site (the tailer serves every site)")
	fs.StringVar(&c.logLevel, "log-level", "info", "log level: debug, info, warn, error")
	fs.StringVar(&c.logFormat, "log-format", "text", "log format: text (key=value) or json (one object per line)")
}

func (c *commonFlags) logger(stderr io.Writer) (*slog.Logger, error) {
	var lvl slog.Level
	if err := lvl.UnmarshalText([]byte(c.logLevel)); err != nil {
		return nil, fmt.Errorf("-log-level: %q is not debug, info, warn or error", c.logLevel)
	}
	opts := &slog.HandlerOptions{Level: lvl}
	switch c.logFormat {
	case "text":
		return slog.New(slog.NewTextHandler(stderr, opts)), nil
	case "json":
		return slog.New(slog.NewJSONHandler(stderr, opts)), nil
	}
	return nil, fmt.Errorf("-log-format: %q is not text or json", c.logFormat)
}

// newFlagSet makes a subcommand's flag set with the common flags and a
// help text: summary, what a configuration file must give it, then the
// flags. Its Usage prints that help on stderr.
func newFlagSet(name, summary string, stdout, stderr io.Writer) (*flag.FlagSet, *commonFlags) {
	fl := flag.NewFlagSet(name, flag.ContinueOnError)
	cf := &commonFlags{summary: summary, stdout: stdout, stderr: stderr}
	cf.register(fl)
	fl.Usage = func() { printUsage(stderr, fl, summary) }
	return fl, cf
}

// printUsage prints a command's help on w: summary, what a configuration
// file must give the command, then its flags.
func printUsage(w io.Writer, fl *flag.FlagSet, summary string) {
	fmt.Fprintf(w, "%s\n", summary)
	if needs := lookup(fl.Name()).needs; len(needs) > 0 {
		fmt.Fprintf(w, "\nA configuration file must give: %s.\n", joinSections(needs))
	}
	n := 0
	fl.VisitAll(func(*flag.Flag) { n++ })
	if n > 0 {
		fmt.Fprintf(w, "\nFlags (before, between or after arguments; -- ends them):\n")
		fl.SetOutput(w)
		fl.PrintDefaults()
	}
}

// parseFlags parses args into fl (cli.Parse). For -h, -help or --help it
// prints the command's help on stdout and returns flag.ErrHelp; for a bad
// flag, a line naming it (prefixed "hivedr name:") and the help on
// stderr, and the error.
func parseFlags(fl *flag.FlagSet, summary string, args []string, stdout, stderr io.Writer) error {
	usage := fl.Usage
	fl.Usage = func() {}
	fl.SetOutput(io.Discard) // the flag package's own messages; ours follow
	err := cli.Parse(fl, args)
	fl.Usage = usage
	switch {
	case errors.Is(err, flag.ErrHelp):
		printUsage(stdout, fl, summary)
		if s, ok := stdout.(flagSetSink); ok {
			s.flagSet(fl)
		}
	case err != nil:
		fmt.Fprintf(stderr, "hivedr %s: %v\n\n", fl.Name(), err)
		printUsage(stderr, fl, summary)
	}
	return err
}

// exitCode is the exit code of a command that setup or parseFlags
// stopped with err: 0 for help, 2 otherwise.
func exitCode(err error) int {
	if errors.Is(err, flag.ErrHelp) {
		return exitOK
	}
	return exitUsage
}

// flagSetSink is a writer for a command's help that also takes the flag
// set the help shows (commandFlags).
type flagSetSink interface {
	io.Writer
	flagSet(*flag.FlagSet)
}

// flagCollector is the flagSetSink of commandFlags.
type flagCollector struct {
	io.Writer
	last *flag.FlagSet
}

func (c *flagCollector) flagSet(fl *flag.FlagSet) { c.last = fl }

// commandFlags returns each command's flag set by its name, as its -h
// shows it: the flags are defined where each command runs.
func commandFlags() map[string]*flag.FlagSet {
	sets := map[string]*flag.FlagSet{}
	for _, c := range commands() {
		col := &flagCollector{Writer: io.Discard}
		c.run([]string{"-h"}, col, io.Discard)
		if col.last != nil {
			sets[c.name] = col.last
		}
	}
	return sets
}

func joinSections(s []config.Section) string {
	names := make([]string, len(s))
	for i, x := range s {
		names[i] = string(x)
	}
	return strings.Join(names, ", ")
}

// withTimeouts returns o with the given connect and socket timeouts.
func withTimeouts(o hms.Options, connect, socket time.Duration) hms.Options {
	o.ConnectTimeout, o.SocketTimeout = connect, socket
	return o
}

// login logs in as conf's kerberos principal, when it names one, and
// gives conf the client. A tool fails when the login does, and so does a
// daemon (retry) whose identity is refused (krb.ErrRefused: a keytab
// without the principal's keys, a key or principal the KDC does not
// take); a daemon whose keytab or krb5.conf cannot be read yet, or whose
// KDC does not answer, starts anyway, saying so: its client logs in at
// the next use, with a backoff, so it needs no restart once they can.
func login(conf *config.Config, log *slog.Logger, retry bool) error {
	if !conf.Kerberos.Enabled() {
		return nil
	}
	if !retry {
		kc, err := krb.Login(conf.Kerberos, log)
		if err != nil {
			return err
		}
		conf.SetKerberos(kc)
		return nil
	}
	kc, err := krb.New(conf.Kerberos, log)
	if err != nil {
		return err
	}
	if _, _, err := kc.Current(); errors.Is(err, krb.ErrRefused) {
		kc.Close()
		return err
	} else if err != nil {
		log.Error("kerberos: not logged in; trying again at the next use", "err", err)
	}
	conf.SetKerberos(kc)
	return nil
}

// loadReverse loads the reverse pipeline's configuration of a failback or
// a drill (flag names its flag), which must give what a failback reads,
// and logs in as its kerberos principal, if it names one: the reverse
// pipeline's metastores are the forward one's, kerberized alike.
func loadReverse(flag, path string, log *slog.Logger) (*config.Config, error) {
	rev, err := config.Load(path)
	if err == nil {
		err = rev.Require(flag, config.SectionSource, config.SectionKafka, config.SectionSchemaRegistry,
			config.SectionDRMetastore, config.SectionReplication)
	}
	if err == nil {
		err = login(rev, log, false)
	}
	if err != nil {
		return nil, err
	}
	return rev, nil
}

// forSite returns conf as the site named site serves it (-site). The
// tailer publishes once for every site, so it takes none.
func forSite(conf *config.Config, cmd, site string) (*config.Config, error) {
	if site == "" {
		return conf, nil
	}
	if cmd == "tail" {
		return nil, fmt.Errorf("-site %s: the tailer publishes once for every site (sites in the configuration); run it without -site", site)
	}
	return conf.ForSite(site)
}

// noConfigFile is what a command says once at start when it runs on the
// local stack's defaults.
const noConfigFile = "no config file (-config, $HIVEDR_CONFIG): using the local stack's defaults (" + config.LocalStack + ")"

// setup parses args (parseFlags) and loads the logger and the
// configuration, which must give what the command needs (its entry in
// commands), printing what is wrong (prefixed "hivedr name:") when it
// fails; the caller exits with exitCode(err). With no configuration file
// it says so: a log line for a daemon, a line on stderr for a tool.
func setup(fl *flag.FlagSet, cf *commonFlags, args []string) (*config.Config, *slog.Logger, error) {
	stderr := cf.stderr
	if err := parseFlags(fl, cf.summary, args, cf.stdout, stderr); err != nil {
		return nil, nil, err
	}
	cmd := lookup(fl.Name())
	log, err := cf.logger(stderr)
	if err == nil {
		var conf *config.Config
		if conf, err = config.Load(cf.config); err == nil {
			conf, err = forSite(conf, fl.Name(), cf.site)
		}
		if err == nil {
			err = conf.Require("hivedr "+fl.Name(), cmd.needs...)
		}
		if err == nil && !strings.HasPrefix(fl.Name(), "config") { // config check reads no keytab
			err = login(conf, log, cmd.daemon)
		}
		if err == nil {
			if conf.File() == "" {
				if cmd.daemon {
					log.Info(noConfigFile)
				} else {
					fmt.Fprintf(stderr, "hivedr %s: %s\n", fl.Name(), noConfigFile)
				}
			}
			return conf, log, nil
		}
	}
	fmt.Fprintf(stderr, "hivedr %s: %v\n", fl.Name(), err)
	return nil, nil, err
}
