package main

import (
	"flag"
	"fmt"
	"io"

	"github.com/hivedr/hivedr/internal/cli"
)

const completionSummary = "Usage: hivedr completion bash\n\n" +
	"Print a bash completion script of hivedr's commands and each command's flags, made from\n" +
	"the commands' own flag sets. Load it with: source <(hivedr completion bash)"

// runCompletion is `hivedr completion bash`.
func runCompletion(args []string, stdout, stderr io.Writer) int {
	fl := flag.NewFlagSet("completion", flag.ContinueOnError)
	if err := parseFlags(fl, completionSummary, args, stdout, stderr); err != nil {
		return exitCode(err)
	}
	if fl.NArg() != 1 || fl.Arg(0) != "bash" {
		fmt.Fprintf(stderr, "hivedr completion: want the shell, bash; got %q\n", fl.Args())
		return exitUsage
	}
	flags := map[string][]string{}
	for name, fs := range commandFlags() {
		var names []string
		fs.VisitAll(func(f *flag.Flag) { names = append(names, f.Name) })
		flags[name] = names
	}
	fmt.Fprint(stdout, cli.BashCompletion("hivedr", flags, "help"))
	return exitOK
}
