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
//	tail    source, kafka, schema_registry, replication, filesystems
//	copyd   kafka, schema_registry, replication, filesystems
//	apply   kafka, schema_registry, applier.metastore, replication, filesystems
//	status  source, kafka, schema_registry, applier.metastore
//	cat     kafka, schema_registry
//	copy    filesystems
package main

import (
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"runtime/debug"
	"strings"

	"github.com/hivedr/hivedr/internal/config"
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
		{name: "apply", summary: "apply the event topics to the DR metastore, in order, data before metadata (the applier daemon)",
			run: runApply, daemon: true, needs: []config.Section{config.SectionKafka, config.SectionSchemaRegistry,
				config.SectionDRMetastore, config.SectionReplication, config.SectionFilesystems}},
		{name: "cat", summary: "print records of hivedr topics as JSON, decoded with their schemas",
			run: runCat, needs: []config.Section{config.SectionKafka, config.SectionSchemaRegistry}},
		{name: "config", summary: "check a configuration file; print it with every default filled and secrets masked",
			run: runConfig},
		{name: "copy", summary: "copy a directory tree with copyd's engine, without Kafka",
			run: runCopy, needs: []config.Section{config.SectionFilesystems}},
		{name: "copyd", summary: "copy and verify the files copy tasks name (the copy daemon)",
			run: runCopyd, daemon: true, needs: []config.Section{config.SectionKafka, config.SectionSchemaRegistry,
				config.SectionReplication, config.SectionFilesystems}},
		{name: "status", summary: "show per database the DR position, halts, skipped events and the applier's lag",
			run: runStatus, needs: []config.Section{config.SectionSource, config.SectionKafka, config.SectionSchemaRegistry,
				config.SectionDRMetastore}},
		{name: "tail", summary: "publish the source notification log to Kafka (the tailer daemon)",
			run: runTail, daemon: true, needs: []config.Section{config.SectionSource, config.SectionKafka,
				config.SectionSchemaRegistry, config.SectionReplication, config.SectionFilesystems}},
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

func runVersion(_ []string, stdout, _ io.Writer) int {
	v := "(devel)"
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" {
		v = bi.Main.Version
	}
	fmt.Fprintf(stdout, "hivedr %s\n", v)
	return 0
}

// commonFlags are the flags every command takes.
type commonFlags struct {
	config   string
	logLevel string
}

func (c *commonFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&c.config, "config", os.Getenv("HIVEDR_CONFIG"),
		"YAML configuration file ($HIVEDR_CONFIG); with neither, the local stack's defaults")
	fs.StringVar(&c.logLevel, "log-level", "info", "log level: debug, info, warn, error")
}

func (c *commonFlags) logger(stderr io.Writer) (*slog.Logger, error) {
	var lvl slog.Level
	if err := lvl.UnmarshalText([]byte(c.logLevel)); err != nil {
		return nil, fmt.Errorf("-log-level: %q is not debug, info, warn or error", c.logLevel)
	}
	return slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: lvl})), nil
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
