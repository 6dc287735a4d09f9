package main

import (
	"fmt"
	"io"
	"slices"

	"github.com/hivedr/hivedr/internal/cli"
)

// runConfig is `hivedr config check`: it loads the configuration as every
// command does, optionally requires what the -for commands need, and
// prints the effective configuration (every key, defaults filled) with its
// secrets masked. Exit 0 when valid, 2 with the error when not.
func runConfig(args []string, stdout, stderr io.Writer) int {
	const summary = "Usage: hivedr config check [flags]\n\n" +
		"Check a configuration file as every command loads it (unknown keys, types, values,\n" +
		"filesystems) and print the configuration in effect as YAML: every key, with the\n" +
		"defaults filled and secrets masked (secret_key, passwords in DSNs, keys named\n" +
		"*password*, *secret*, *token*). With -for, also require what those commands need.\n" +
		"With no file, it checks and prints the local stack's defaults.\n\n" +
		"Exit status: 0 valid, 2 invalid (the error on stderr)."
	switch {
	case len(args) > 0 && args[0] == "check":
		args = args[1:]
	case slices.ContainsFunc(args, cli.IsHelp): // hivedr config -h: config check's help
		args = []string{"-h"}
	default:
		fmt.Fprintf(stderr, "%s\n\nhivedr config: want the subcommand check\n", summary)
		return exitUsage
	}
	fl, cf := newFlagSet("config check", summary, stdout, stderr)
	var forList cli.List
	fl.Var(&forList, "for", "also require what these commands need from the file (e.g. tail,apply); repeatable, or comma-separated")
	conf, _, err := setup(fl, cf, args)
	if err != nil {
		return exitCode(err)
	}
	if fl.NArg() > 0 {
		fmt.Fprintf(stderr, "hivedr config check: unexpected arguments %q\n", fl.Args())
		return exitUsage
	}
	for _, name := range forList {
		c := lookup(name)
		if c.run == nil {
			fmt.Fprintf(stderr, "hivedr config check: -for: %q is not a hivedr command\n", name)
			return exitUsage
		}
		if err := conf.Require("hivedr "+name, c.needs...); err != nil {
			fmt.Fprintf(stderr, "hivedr config check: %v\n", err)
			return exitUsage
		}
	}
	y, err := conf.MaskedYAML()
	if err != nil {
		fmt.Fprintf(stderr, "hivedr config check: %v\n", err)
		return exitError
	}
	from := "the local stack's defaults (no config file)"
	if conf.File() != "" {
		from = conf.File()
	}
	fmt.Fprintf(stdout, "# %s: valid. Every key with the value in effect; secrets masked.\n", from)
	if _, err := stdout.Write(y); err != nil {
		return exitError
	}
	return exitOK
}
