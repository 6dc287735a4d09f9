package config

import (
	"bytes"
	"fmt"
	"os"
	"regexp"
)

// envRef is a reference to an environment variable in a configuration
// file: ${NAME}, NAME of capitals, digits and underscores. Nothing else
// with a $ is touched, so a regex's $ anchor stays as written.
var envRef = regexp.MustCompile(`\$\{([A-Z_][A-Z0-9_]*)\}`)

// expandEnv replaces every ${NAME} in a configuration file's text with
// the variable's value, so secrets can come from the environment (a
// Kubernetes Secret) while the file (a ConfigMap) holds none:
//
//	s3: [{endpoint: "https://s3.example", access_key: "${S3_ACCESS_KEY}", secret_key: "${S3_SECRET_KEY}"}]
//
// A variable that is not set is an error naming it and its line; set it
// to "" for an empty value.
func expandEnv(b []byte, lookup func(string) (string, bool)) ([]byte, error) {
	var err error
	out := envRef.ReplaceAllFunc(b, func(ref []byte) []byte {
		name := string(ref[2 : len(ref)-1])
		v, ok := lookup(name)
		if !ok && err == nil {
			line := 1 + bytes.Count(b[:bytes.Index(b, ref)], []byte("\n"))
			err = fmt.Errorf("${%s}: environment variable not set (line %d)", name, line)
		}
		return []byte(v)
	})
	return out, err
}

// osLookup is the process environment.
func osLookup(name string) (string, bool) { return os.LookupEnv(name) }
