package cli

import (
	"fmt"
	"maps"
	"slices"
	"strings"
)

// BashCompletion returns a bash completion script for prog: the first
// word completes to a command of flags (command name → its flag names,
// without dashes) or to extra (words such as help that take no flags);
// after `prog help` a command; after a command, a word that starts with
// "-" to one of its flags, any other word to a file name.
func BashCompletion(prog string, flags map[string][]string, extra ...string) string {
	names := slices.Sorted(maps.Keys(flags))
	fn := "_" + strings.NewReplacer("-", "_", ".", "_").Replace(prog)
	var b strings.Builder
	fmt.Fprintf(&b, "# bash completion for %s: source it, or put it in /etc/bash_completion.d/%s\n", prog, prog)
	fmt.Fprintf(&b, "%s() {\n", fn)
	b.WriteString("\tlocal cur=${COMP_WORDS[COMP_CWORD]} words\n")
	b.WriteString("\tif [ \"$COMP_CWORD\" -eq 1 ]; then\n")
	fmt.Fprintf(&b, "\t\twords=%q\n", strings.Join(append(slices.Clone(names), extra...), " "))
	b.WriteString("\telse\n\t\tcase ${COMP_WORDS[1]} in\n")
	fmt.Fprintf(&b, "\t\thelp) words=%q ;;\n", strings.Join(names, " "))
	for _, n := range names {
		fs := make([]string, len(flags[n]))
		for i, f := range flags[n] {
			fs[i] = "-" + f
		}
		fmt.Fprintf(&b, "\t\t%s) [[ $cur == -* ]] && words=%q ;;\n", n, strings.Join(fs, " "))
	}
	b.WriteString("\t\tesac\n\tfi\n")
	b.WriteString("\t[ -n \"$words\" ] && COMPREPLY=($(compgen -W \"$words\" -- \"$cur\"))\n")
	b.WriteString("}\n")
	fmt.Fprintf(&b, "complete -o default -F %s %s\n", fn, prog)
	return b.String()
}
