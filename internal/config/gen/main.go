// Command gen writes docs/config-reference.md, the configuration
// reference, from the configuration structs' doc comments and the file
// defaults. Run it with `go generate ./internal/config`.
package main

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/hivedr/hivedr/internal/config"
)

func main() {
	if err := run("../.."); err != nil {
		fmt.Fprintln(os.Stderr, "gen:", err)
		os.Exit(1)
	}
}

// run writes the reference of the module rooted at root.
func run(root string) error {
	b, err := config.Reference(root)
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(root, config.ReferencePath), b, 0o644)
}
