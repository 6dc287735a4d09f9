package config

import (
	"bytes"
	"regexp"
	"strings"

	"go.yaml.in/yaml/v3"
)

// Masked is what MaskedYAML writes in place of a secret.
const Masked = "***"

// MaskedYAML returns c as YAML, every key with the value in effect, with
// secrets replaced by Masked: the values of keys whose name holds
// "password", "passwd", "secret" or "token" (filesystems.s3[].secret_key,
// kafka.sasl.password), but not the paths of the files that hold them
// (password_file), and passwords inside URLs and DSNs anywhere
// (postgres://hive:***@host/db, password=*** in key=value DSNs).
func (c *Config) MaskedYAML() ([]byte, error) {
	var n yaml.Node
	if err := n.Encode(c); err != nil {
		return nil, err
	}
	mask(&n)
	var b bytes.Buffer
	enc := yaml.NewEncoder(&b)
	enc.SetIndent(2)
	if err := enc.Encode(&n); err != nil {
		return nil, err
	}
	if err := enc.Close(); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

// mask replaces the secrets under n (see MaskedYAML).
func mask(n *yaml.Node) {
	switch n.Kind {
	case yaml.MappingNode:
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := n.Content[i], n.Content[i+1]
			if secretKey(k.Value) && v.Kind == yaml.ScalarNode && v.Value != "" {
				v.Value, v.Tag, v.Style = Masked, "!!str", 0
				continue
			}
			mask(v)
		}
	case yaml.SequenceNode, yaml.DocumentNode:
		for _, c := range n.Content {
			mask(c)
		}
	case yaml.ScalarNode:
		n.Value = MaskSecrets(n.Value)
	}
}

func secretKey(k string) bool {
	k = strings.ToLower(k)
	if strings.HasSuffix(k, "_file") {
		return false // the path of a secret (password_file), not the secret
	}
	for _, s := range []string{"password", "passwd", "secret", "token"} {
		if strings.Contains(k, s) {
			return true
		}
	}
	return false
}

var (
	// scheme://user:PASSWORD@, up to the last @ before the path (a
	// password written with an unescaped @ is still all masked).
	urlPassword = regexp.MustCompile(`([A-Za-z][A-Za-z0-9+.-]*://[^/@:\s]*:)[^/\s]*@`)
	// password=PASSWORD in key=value DSNs (libpq allows spaces around
	// the =, and a quoted value with \' and \\ escapes) and URL queries.
	kvPassword = regexp.MustCompile(`(?i)\b(password|passwd|pwd|secret|token)\s*=\s*('(?:[^'\\]|\\.)*'|[^\s&']*)`)
)

// MaskSecrets replaces the passwords inside URLs and DSNs in s with
// Masked.
func MaskSecrets(s string) string {
	s = urlPassword.ReplaceAllString(s, "${1}"+Masked+"@")
	return kvPassword.ReplaceAllString(s, "${1}="+Masked)
}
