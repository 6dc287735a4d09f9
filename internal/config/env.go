package config

import (
	"fmt"
	"os"
	"regexp"

	"go.yaml.in/yaml/v3"
)

// envRef is a reference to an environment variable in a configuration
// file: ${NAME}, NAME of capitals, digits and underscores. Nothing else
// with a $ is touched, so a regex's $ anchor stays as written.
var envRef = regexp.MustCompile(`\$\{([A-Z_][A-Z0-9_]*)\}`)

// expandEnv replaces every ${NAME} in the scalar values of a parsed
// configuration file with the variable's value, so secrets can come from
// the environment (a Kubernetes Secret) while the file (a ConfigMap)
// holds none:
//
//	s3: [{endpoint: "https://s3.example", access_key: "${S3_ACCESS_KEY}", secret_key: "${S3_SECRET_KEY}"}]
//
// It works on values after YAML has parsed the file, never on its text,
// so a value is taken whole whatever it holds (" #", quotes, a newline,
// ": "): a variable cannot change the file's structure or cut a value
// short. Keys and comments are not expanded. A plain (unquoted) value is
// typed by what it expands to (port: ${PORT} is a number), a quoted one
// stays a string. A variable that is not set is an error naming it and
// its line; set it to "" for an empty value.
func expandEnv(n *yaml.Node, lookup func(string) (string, bool)) error {
	switch n.Kind {
	case yaml.ScalarNode:
		if !envRef.MatchString(n.Value) {
			return nil
		}
		var err error
		n.Value = envRef.ReplaceAllStringFunc(n.Value, func(ref string) string {
			name := ref[2 : len(ref)-1]
			v, ok := lookup(name)
			if !ok && err == nil {
				err = fmt.Errorf("${%s}: environment variable not set (line %d)", name, n.Line)
			}
			return v
		})
		if n.Style == 0 {
			n.Tag = "" // resolved again from the expanded value
		}
		return err
	case yaml.MappingNode:
		for i := 1; i < len(n.Content); i += 2 { // values only
			if err := expandEnv(n.Content[i], lookup); err != nil {
				return err
			}
		}
		return nil
	}
	for _, c := range n.Content {
		if err := expandEnv(c, lookup); err != nil {
			return err
		}
	}
	return nil
}

// osLookup is the process environment.
func osLookup(name string) (string, bool) { return os.LookupEnv(name) }
