package config

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"reflect"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
)

// decode reads the one YAML document b holds into c, over what c holds.
// It first walks the document against c's yaml tags (check), so that an
// unknown key or a value of the wrong type is named by its key path and
// line, e.g. `kafka.topic_prefx: unknown key, did you mean topic_prefix?
// (line 4)`, rather than by yaml.v3's Go type names; before that, ${NAME}
// in values is expanded with lookup (expandEnv). It returns the
// top-level keys the document gives a value other than null.
func decode(b []byte, c *Config, lookup func(string) (string, bool)) (map[string]bool, error) {
	given := map[string]bool{}
	dec := yaml.NewDecoder(bytes.NewReader(b))
	var doc yaml.Node
	if err := dec.Decode(&doc); errors.Is(err, io.EOF) {
		return given, nil // an empty file
	} else if err != nil {
		return nil, err // syntax: yaml.v3 names the line
	}
	var next yaml.Node
	if err := dec.Decode(&next); err == nil {
		return nil, fmt.Errorf("line %d: a second YAML document; give every section in one", next.Line)
	} else if !errors.Is(err, io.EOF) {
		return nil, err
	}
	root := &doc
	if root.Kind == yaml.DocumentNode && len(root.Content) == 1 {
		root = root.Content[0]
	}
	if isNull(root) {
		return given, nil
	}
	if root.Kind != yaml.MappingNode {
		return nil, fmt.Errorf("line %d: the file is %s; want a mapping of sections (source:, kafka:, ...)", root.Line, describe(root))
	}
	if err := expandEnv(root, lookup); err != nil {
		return nil, err
	}
	if err := check(root, reflect.TypeOf(*c), ""); err != nil {
		return nil, err
	}
	for i := 0; i+1 < len(root.Content); i += 2 {
		if !isNull(root.Content[i+1]) {
			given[root.Content[i].Value] = true
		}
	}
	return given, root.Decode(c)
}

var (
	durationType = reflect.TypeOf(Duration{})
	registryType = reflect.TypeOf(SchemaRegistry{})
)

// check reports the first key under n that t has no field for, or whose
// value cannot be decoded into its field, named by its path from key.
// Null values pass: they leave the default.
func check(n *yaml.Node, t reflect.Type, key string) error {
	if n.Kind == yaml.AliasNode {
		n = n.Alias
	}
	if isNull(n) {
		return nil
	}
	switch {
	case t == durationType:
		if n.Kind == yaml.ScalarNode {
			if _, err := time.ParseDuration(n.Value); err == nil {
				return nil
			}
		}
		return errAt(n, key, "%s is not a duration like 5s or 2m", describe(n))
	case t == registryType && n.Kind == yaml.ScalarNode:
		// schema_registry: URL, short for schema_registry: {url: URL}.
		return check(n, reflect.TypeOf(""), key)
	case t.Kind() == reflect.Struct:
		if n.Kind != yaml.MappingNode {
			return errAt(n, key, "%s, want a mapping of keys", describe(n))
		}
		fields := yamlFields(t)
		seen := map[string]int{}
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := n.Content[i], n.Content[i+1]
			if k.Value == "<<" && k.ShortTag() == "!!merge" {
				if err := checkMerge(v, t, key); err != nil {
					return err
				}
				continue
			}
			sub := join(key, k.Value)
			if line, dup := seen[k.Value]; dup {
				return errAt(k, sub, "given twice (first on line %d)", line)
			}
			seen[k.Value] = k.Line
			f, ok := fields[k.Value]
			if !ok {
				return errAt(k, sub, "unknown key%s", suggest(k.Value, fields))
			}
			if err := check(v, f, sub); err != nil {
				return err
			}
		}
		return nil
	case t.Kind() == reflect.Map:
		if n.Kind != yaml.MappingNode {
			return errAt(n, key, "%s, want a mapping of names", describe(n))
		}
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := n.Content[i], n.Content[i+1]
			if err := check(k, t.Key(), key); err != nil {
				return err
			}
			if err := check(v, t.Elem(), join(key, k.Value)); err != nil {
				return err
			}
		}
		return nil
	case t.Kind() == reflect.Slice:
		if n.Kind != yaml.SequenceNode {
			return errAt(n, key, "%s, want a list", describe(n))
		}
		for i, item := range n.Content {
			if err := check(item, t.Elem(), fmt.Sprintf("%s[%d]", key, i)); err != nil {
				return err
			}
		}
		return nil
	}
	if n.Kind != yaml.ScalarNode {
		return errAt(n, key, "%s, want %s", describe(n), want(t))
	}
	if isInt(t) && n.ShortTag() == "!!float" {
		// yaml.v3 truncates 1.5 into an integer field.
		if f, err := strconv.ParseFloat(n.Value, 64); err != nil || f != math.Trunc(f) {
			return errAt(n, key, "%q is not an integer", n.Value)
		}
	}
	if n.Decode(reflect.New(t).Interface()) == nil {
		return nil
	}
	if n.Style&(yaml.DoubleQuotedStyle|yaml.SingleQuotedStyle) != 0 {
		plain := *n
		plain.Style, plain.Tag = 0, ""
		if plain.Decode(reflect.New(t).Interface()) == nil {
			return errAt(n, key, "%q is quoted, so a string; want %s: write it without quotes", n.Value, want(t))
		}
	}
	if _, err := strconv.ParseInt(n.Value, 0, 64); err == nil && isInt(t) {
		return errAt(n, key, "%s is out of range", n.Value)
	}
	return errAt(n, key, "%q is not %s", n.Value, want(t))
}

// checkMerge checks the mapping (or list of mappings) a `<<` merge key
// brings into a mapping of type t.
func checkMerge(v *yaml.Node, t reflect.Type, key string) error {
	if v.Kind == yaml.AliasNode {
		v = v.Alias
	}
	if v.Kind == yaml.SequenceNode {
		for _, m := range v.Content {
			if err := check(m, t, key); err != nil {
				return err
			}
		}
		return nil
	}
	return check(v, t, key)
}

// yamlFields maps the keys of struct type t to their fields' types, as
// yaml.v3 names them (the tag's name, else the lower-cased field name).
func yamlFields(t reflect.Type) map[string]reflect.Type {
	out := map[string]reflect.Type{}
	for i := range t.NumField() {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		name, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
		if name == "-" {
			continue
		}
		if name == "" {
			name = strings.ToLower(f.Name)
		}
		out[name] = f.Type
	}
	return out
}

// suggest returns ", did you mean K?" for the known key K closest to k,
// when one is within two edits of it.
func suggest(k string, fields map[string]reflect.Type) string {
	best, bestD := "", 3
	for f := range fields {
		if d := editDistance(k, f); d < bestD || (d == bestD && f < best) {
			best, bestD = f, d
		}
	}
	if best == "" {
		return ""
	}
	return ", did you mean " + best + "?"
}

// editDistance is the Levenshtein distance between a and b.
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur := make([]int, len(b)+1)
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev = cur
	}
	return prev[len(b)]
}

func join(key, name string) string {
	if key == "" {
		return name
	}
	return key + "." + name
}

func isNull(n *yaml.Node) bool { return n.Kind == yaml.ScalarNode && n.ShortTag() == "!!null" }

// describe names what a node is, for errors: a quoted scalar, a list, a
// mapping.
func describe(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	}
	return strconv.Quote(n.Value)
}

// want names what a value of type t is written as.
func want(t reflect.Type) string {
	switch t.Kind() {
	case reflect.Bool:
		return "true or false"
	case reflect.String:
		return "a string"
	case reflect.Float32, reflect.Float64:
		return "a number"
	}
	if isInt(t) {
		return "an integer"
	}
	return "a " + t.String()
}

func isInt(t reflect.Type) bool {
	switch t.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return true
	}
	return false
}

func errAt(n *yaml.Node, key, format string, args ...any) error {
	return fmt.Errorf("%s: %s (line %d)", key, fmt.Sprintf(format, args...), n.Line)
}
