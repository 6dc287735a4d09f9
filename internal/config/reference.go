package config

//go:generate go run ./gen

import (
	"fmt"
	"strings"

	"github.com/hivedr/hivedr/internal/config/internal/docgen"
)

// ReferencePath is where the configuration reference is, from the
// module's root.
const ReferencePath = "docs/config-reference.md"

// Reference returns the configuration reference (ReferencePath): every
// key of the file with its type, its default (fileDefaults) and its
// field's doc comment, read from the Go source of the module rooted at
// root. It fails naming the keys whose field has no doc comment.
func Reference(root string) ([]byte, error) {
	keys, err := docgen.Keys(fileDefaults(), root)
	if err != nil {
		return nil, err
	}
	if missing := docgen.Undocumented(keys); len(missing) > 0 {
		return nil, fmt.Errorf("config: keys without a doc comment: %s", strings.Join(missing, ", "))
	}
	return docgen.Render(keys), nil
}
