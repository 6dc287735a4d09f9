// Package docgen writes the configuration reference (docs/config-reference.md)
// from the configuration structs themselves: every YAML key by its dotted
// path, its type, its default (the value a configuration file that omits
// it gets) and the doc comment of its field, read from the Go source.
package docgen

import (
	"bytes"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"time"
)

// Key is one YAML key of the configuration.
type Key struct {
	// Path is the key's dotted path: copyd.preserve.owner,
	// filesystems.s3[].sse.
	Path string
	// Type is what the key's value is written as.
	Type string
	// Default is the key's default, as YAML writes it; "" for none.
	Default string
	// Doc is the field's doc comment, "" when it has none.
	Doc string
}

// Module is the import path of the module whose source Keys reads.
const Module = "github.com/hivedr/hivedr"

// durationName is the name of the configuration's duration type, a
// scalar written as "5s".
const durationName = "Duration"

// Keys lists the keys of defaults, a pointer to the configuration a file
// starts from, reading the fields' doc comments from the source of the
// module rooted at root. A key whose field has no doc comment has Doc "".
func Keys(defaults any, root string) ([]Key, error) {
	v := reflect.ValueOf(defaults)
	if v.Kind() == reflect.Pointer {
		v = v.Elem()
	}
	if v.Kind() != reflect.Struct {
		return nil, fmt.Errorf("docgen: %T is not a struct", defaults)
	}
	w := walker{root: root, docs: map[string]map[string]map[string]string{}}
	if err := w.walk(v, ""); err != nil {
		return nil, err
	}
	return w.keys, nil
}

// Undocumented names the keys without a doc comment.
func Undocumented(keys []Key) []string {
	var out []string
	for _, k := range keys {
		if k.Doc == "" {
			out = append(out, k.Path)
		}
	}
	return out
}

type walker struct {
	root string
	// docs: package path -> type name -> field name -> doc comment.
	docs map[string]map[string]map[string]string
	keys []Key
}

func (w *walker) walk(v reflect.Value, prefix string) error {
	t := v.Type()
	docs, err := w.typeDocs(t)
	if err != nil {
		return err
	}
	for i := range t.NumField() {
		f := t.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
		if !f.IsExported() || name == "-" {
			continue
		}
		if name == "" {
			name = strings.ToLower(f.Name)
		}
		path := name
		if prefix != "" {
			path = prefix + "." + name
		}
		fv := v.Field(i)
		ft := f.Type
		k := Key{Path: path, Type: typeName(ft), Default: format(fv), Doc: docs[f.Name]}
		w.keys = append(w.keys, k)
		switch {
		case isSection(ft):
			if err := w.walk(fv, path); err != nil {
				return err
			}
		case ft.Kind() == reflect.Slice && isSection(ft.Elem()):
			if err := w.walk(reflect.New(ft.Elem()).Elem(), path+"[]"); err != nil {
				return err
			}
		}
	}
	return nil
}

// isSection reports whether t is a mapping of keys of its own (a struct
// that is not a scalar like Duration).
func isSection(t reflect.Type) bool {
	return t.Kind() == reflect.Struct && t.Name() != durationName
}

// typeDocs returns the doc comments of struct type t's fields.
func (w *walker) typeDocs(t reflect.Type) (map[string]string, error) {
	pkg := t.PkgPath()
	if _, ok := w.docs[pkg]; !ok {
		d, err := parseDocs(filepath.Join(w.root, strings.TrimPrefix(strings.TrimPrefix(pkg, Module), "/")))
		if err != nil {
			return nil, fmt.Errorf("docgen: package %s: %w", pkg, err)
		}
		w.docs[pkg] = d
	}
	return w.docs[pkg][t.Name()], nil
}

// parseDocs reads the doc comments of the struct fields declared in the
// non-test Go files of dir.
func parseDocs(dir string) (map[string]map[string]string, error) {
	files, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		return nil, err
	}
	out := map[string]map[string]string{}
	fset := token.NewFileSet()
	for _, p := range files {
		if strings.HasSuffix(p, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, p, nil, parser.ParseComments)
		if err != nil {
			return nil, err
		}
		ast.Inspect(f, func(n ast.Node) bool {
			ts, ok := n.(*ast.TypeSpec)
			if !ok {
				return true
			}
			st, ok := ts.Type.(*ast.StructType)
			if !ok {
				return true
			}
			fields := map[string]string{}
			for _, fl := range st.Fields.List {
				doc := strings.TrimSpace(fl.Doc.Text())
				for _, n := range fl.Names {
					fields[n.Name] = doc
				}
			}
			out[ts.Name.Name] = fields
			return true
		})
	}
	return out, nil
}

// typeName names what a value of type t is written as.
func typeName(t reflect.Type) string {
	switch {
	case t.Name() == durationName:
		return "duration"
	case isSection(t):
		return "mapping"
	}
	switch t.Kind() {
	case reflect.Bool:
		return "bool"
	case reflect.String:
		return "string"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "integer"
	case reflect.Slice:
		if isSection(t.Elem()) {
			return "list of mappings"
		}
		return "list of " + typeName(t.Elem()) + "s"
	case reflect.Map:
		return "mapping of " + typeName(t.Key()) + " to " + typeName(t.Elem())
	}
	return t.String()
}

// format writes v's value as YAML would, "" for a zero value or a
// section.
func format(v reflect.Value) string {
	if v.IsZero() || isSection(v.Type()) {
		return ""
	}
	if v.Type().Name() == durationName {
		return formatDuration(v.Field(0).Interface().(time.Duration))
	}
	switch v.Kind() {
	case reflect.Slice:
		var parts []string
		for i := range v.Len() {
			parts = append(parts, format(v.Index(i)))
		}
		return "[" + strings.Join(parts, ", ") + "]"
	case reflect.Map:
		keys := v.MapKeys()
		var parts []string
		for _, k := range keys {
			parts = append(parts, format(k)+": "+format(v.MapIndex(k)))
		}
		sort.Strings(parts)
		return "{" + strings.Join(parts, ", ") + "}"
	}
	return fmt.Sprint(v.Interface())
}

// formatDuration writes d without zero minutes and seconds after larger
// units, as the configuration's YAML does: 168h, 2m, 1m30s.
func formatDuration(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}

// Render writes the reference: a heading, how to read it, and one
// section per top-level key with a table of its keys.
func Render(keys []Key) []byte {
	var b bytes.Buffer
	b.WriteString("# Configuration reference\n\n")
	b.WriteString("<!-- Generated by `go generate ./internal/config` from the doc comments of\n")
	b.WriteString("the configuration structs; do not edit by hand. -->\n\n")
	b.WriteString("Every key of hivedr's YAML configuration file, by its dotted path (`[]`\n")
	b.WriteString("stands for each item of a list), with its type, the default a file that\n")
	b.WriteString("omits it gets (blank: none, or derived as its description says) and its\n")
	b.WriteString("description. Without a file, hivedr uses the local stack's values instead\n")
	b.WriteString("(see [the configuration guide](configuration.md)).\n")
	for _, k := range keys {
		if !strings.Contains(k.Path, ".") {
			fmt.Fprintf(&b, "\n## `%s`\n\n%s\n\n", k.Path, paragraph(k.Doc))
			b.WriteString("| Key | Type | Default | Description |\n|---|---|---|---|\n")
			continue
		}
		def := ""
		if k.Default != "" {
			def = "`" + k.Default + "`"
		}
		fmt.Fprintf(&b, "| `%s` | %s | %s | %s |\n", k.Path, k.Type, def, cell(k.Doc))
	}
	return b.Bytes()
}

// paragraph joins a doc comment's lines into one paragraph, with < and >
// escaped (Markdown would take <prefix> for HTML).
func paragraph(doc string) string {
	return strings.NewReplacer("<", "&lt;", ">", "&gt;").Replace(strings.Join(strings.Fields(doc), " "))
}

// cell is doc as a table cell: one line, pipes escaped.
func cell(doc string) string { return strings.ReplaceAll(paragraph(doc), "|", `\|`) }
