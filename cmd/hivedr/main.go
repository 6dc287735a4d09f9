// Command hivedr is disaster-recovery replication for Hive-style data
// warehouses: it tails a source Hive Metastore's notification log into
// Kafka, copies the data files it references, and replays it on a DR site.
//
// Usage:
//
//	hivedr <command> [flags]
//
// Each command is one process role or operator tool; see `hivedr help`.
// This package only parses flags, loads the configuration, wires the roles
// (producer, copyd, applier) and tools (internal/status, internal/cat,
// copyd.CopyTree) to their adapters, and turns the outcome into an exit
// code: 0 done (or stopped by SIGINT/SIGTERM), 1 failed, 2 bad flags or
// configuration, 3 the tailer found the source log's chain broken.
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
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/hivedr/hivedr/internal/buildinfo"
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
	if len(args) == 0 || args[0] == "help" || args[0] == "-h" || args[0] == "--help" {
		usage(stdout)
		return 0
	}
	if c := lookup(args[0]); c.run != nil {
		return c.run(args[1:], stdout, stderr)
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

// runVersion prints the build: version, commit, build date (stamped by
// the Makefile's -ldflags; see internal/buildinfo) and Go version.
func runVersion(_ []string, stdout, _ io.Writer) int {
	fmt.Fprintln(stdout, buildinfo.Get())
	return 0
}

// commonFlags are the flags every command takes.
type commonFlags struct {
	config    string
	logLevel  string
	logFormat string
}

func (c *commonFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&c.config, "config", os.Getenv("HIVEDR_CONFIG"),
		"YAML configuration file ($HIVEDR_CONFIG); with neither, the local stack's defaults")
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
// usage text (summary, what a configuration file must give it, then the
// flags).
func newFlagSet(name, summary string, stderr io.Writer) (*flag.FlagSet, *commonFlags) {
	fl := flag.NewFlagSet(name, flag.ContinueOnError)
	fl.SetOutput(stderr)
	cf := &commonFlags{}
	cf.register(fl)
	fl.Usage = func() {
		fmt.Fprintf(stderr, "%s\n", summary)
		if needs := lookup(name).needs; len(needs) > 0 {
			fmt.Fprintf(stderr, "\nA configuration file must give: %s.\n", joinSections(needs))
		}
		fmt.Fprintf(stderr, "\nFlags:\n")
		fl.PrintDefaults()
	}
	return fl, cf
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
// gives conf the logged-in client.
func login(conf *config.Config, log *slog.Logger) error {
	if !conf.Kerberos.Enabled() {
		return nil
	}
	kc, err := krb.Login(conf.Kerberos, log)
	if err != nil {
		return err
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
		err = login(rev, log)
	}
	if err != nil {
		return nil, err
	}
	return rev, nil
}

// noConfigFile is what a command says once at start when it runs on the
// local stack's defaults.
const noConfigFile = "no config file (-config, $HIVEDR_CONFIG): using the local stack's defaults (" + config.LocalStack + ")"

// setup parses args and loads the logger and the configuration, which
// must give what the command needs (its entry in commands), printing what
// is wrong (prefixed "hivedr name:") when it fails. With no configuration
// file it says so: a log line for a daemon, a line on stderr for a tool.
func setup(fl *flag.FlagSet, cf *commonFlags, args []string, stderr io.Writer) (*config.Config, *slog.Logger, bool) {
	if err := fl.Parse(args); err != nil {
		return nil, nil, false
	}
	cmd := lookup(fl.Name())
	log, err := cf.logger(stderr)
	if err == nil {
		var conf *config.Config
		if conf, err = config.Load(cf.config); err == nil {
			err = conf.Require("hivedr "+fl.Name(), cmd.needs...)
		}
		if err == nil && !strings.HasPrefix(fl.Name(), "config") { // config check reads no keytab
			err = login(conf, log)
		}
		if err == nil {
			if conf.File() == "" {
				if cmd.daemon {
					log.Info(noConfigFile)
				} else {
					fmt.Fprintf(stderr, "hivedr %s: %s\n", fl.Name(), noConfigFile)
				}
			}
			return conf, log, true
		}
	}
	fmt.Fprintf(stderr, "hivedr %s: %v\n", fl.Name(), err)
	return nil, nil, false
}
