// Package cli is what hivedr's commands share in reading a command line,
// on top of the standard library's flag package: flags before, between
// and after positional arguments, "--" to end the flags, and List, the
// one flag type of every flag that takes several values.
package cli

import (
	"flag"
	"slices"
	"strings"
)

// Parse parses args into fl with flags and positional arguments in any
// order: "copy a b -workers 3" sets -workers like "copy -workers 3 a b".
// "--" ends the flags: every argument after it is positional, and so is
// "-" alone. A flag that takes a value takes the next argument unless it
// is written -name=value. Afterwards fl.Args() are the positional
// arguments, in order.
//
// The errors are flag.FlagSet.Parse's, naming the flag at fault;
// flag.ErrHelp for -h, -help or --help when fl defines no such flag.
func Parse(fl *flag.FlagSet, args []string) error {
	var pos []string
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			pos = append(pos, args[i+1:]...)
			break
		}
		if len(a) < 2 || a[0] != '-' {
			pos = append(pos, a)
			continue
		}
		n := 1
		if takesValue(fl, a) && i+1 < len(args) {
			n = 2
		}
		if err := fl.Parse(args[i : i+n]); err != nil {
			return err
		}
		i += n - 1
	}
	return fl.Parse(append([]string{"--"}, pos...))
}

// takesValue reports whether the flag argument a (-name or --name) names
// a flag of fl that takes its value from the next argument.
func takesValue(fl *flag.FlagSet, a string) bool {
	name := strings.TrimPrefix(a[1:], "-")
	if strings.Contains(name, "=") {
		return false
	}
	f := fl.Lookup(name)
	if f == nil {
		return false
	}
	b, ok := f.Value.(interface{ IsBoolFlag() bool })
	return !ok || !b.IsBoolFlag()
}

// IsHelp reports whether a asks for help: -h, -help, --h or --help.
func IsHelp(a string) bool {
	switch a {
	case "-h", "-help", "--h", "--help":
		return true
	}
	return false
}

// List is a flag of several values: repeatable, and each value may be a
// comma-separated list, so "-db a -db b,c" and "-db a,b,c" are a, b, c.
// Blanks around values are trimmed; empty values and repeats dropped.
type List []string

// String returns the values comma-separated.
func (l *List) String() string {
	if l == nil {
		return ""
	}
	return strings.Join(*l, ",")
}

// Set adds the values of v, a comma-separated list.
func (l *List) Set(v string) error {
	for _, s := range strings.Split(v, ",") {
		if s = strings.TrimSpace(s); s != "" && !slices.Contains(*l, s) {
			*l = append(*l, s)
		}
	}
	return nil
}
