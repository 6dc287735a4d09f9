package schemas

import (
	"embed"
	"encoding/json"
	"fmt"
	"io/fs"
	"slices"
	"strings"
	"sync"

	"github.com/linkedin/goavro/v2"
)

// The full names of the top-level records. Each is also the record's
// schema registry subject (the record-name strategy): one event topic
// carries both MetastoreEvent and Heartbeat records, and event topics are
// created per database, so topic-name subjects would not work.
const (
	NameMetastoreEvent   = "io.hivedr.MetastoreEvent"
	NameCopyTask         = "io.hivedr.CopyTask"
	NameCopyCompletion   = "io.hivedr.CopyCompletion"
	NameHeartbeat        = "io.hivedr.Heartbeat"
	NameTailerCheckpoint = "io.hivedr.TailerCheckpoint"
	NameBootstrapRequest = "io.hivedr.BootstrapRequest"
)

//go:embed *.avsc
var avscFiles embed.FS

// Schema is one of the current record schemas, parsed.
type Schema struct {
	// Name is the record's full name, e.g. io.hivedr.MetastoreEvent; it is
	// also the registry subject.
	Name string
	// File is the .avsc file the schema comes from.
	File string
	// Text is the schema exactly as in File.
	Text string
	// Codec encodes and decodes the record; it is safe for concurrent use.
	Codec *goavro.Codec
}

// parsed holds the embedded schemas, parsed on first use. It is never
// changed after that.
var parsed = sync.OnceValues(parseEmbedded)

// Schemas returns the current schemas, sorted by name. They are parsed
// once per process.
func Schemas() ([]Schema, error) {
	all, err := parsed()
	if err != nil {
		return nil, err
	}
	return slices.Clone(all), nil
}

// SchemaFor returns the current schema of the record with the given full
// name.
func SchemaFor(name string) (Schema, error) {
	all, err := parsed()
	if err != nil {
		return Schema{}, err
	}
	for _, s := range all {
		if s.Name == name {
			return s, nil
		}
	}
	return Schema{}, fmt.Errorf("no schema named %q", name)
}

func parseEmbedded() ([]Schema, error) {
	files, err := fs.Glob(avscFiles, "*.avsc")
	if err != nil {
		return nil, err
	}
	var all []Schema
	for _, f := range files {
		b, err := avscFiles.ReadFile(f)
		if err != nil {
			return nil, fmt.Errorf("read embedded %s: %w", f, err)
		}
		s, err := ParseSchema(string(b))
		if err != nil {
			return nil, fmt.Errorf("schema %s: %w", f, err)
		}
		s.File = f
		all = append(all, s)
	}
	slices.SortFunc(all, func(a, b Schema) int { return strings.Compare(a.Name, b.Name) })
	return all, nil
}

// ParseSchema parses the text of a record schema (a current one or one a
// writer used) and finds its full name.
func ParseSchema(text string) (Schema, error) {
	name, err := recordFullName(text)
	if err != nil {
		return Schema{}, err
	}
	codec, err := goavro.NewCodec(text)
	if err != nil {
		return Schema{}, fmt.Errorf("parse schema of %s: %w", name, err)
	}
	return Schema{Name: name, Text: text, Codec: codec}, nil
}

// recordFullName returns the full name of the top-level record a schema
// text defines.
func recordFullName(text string) (string, error) {
	var top struct {
		Type      any    `json:"type"`
		Name      string `json:"name"`
		Namespace string `json:"namespace"`
	}
	if err := json.Unmarshal([]byte(text), &top); err != nil {
		return "", fmt.Errorf("schema is not a JSON object: %w", err)
	}
	if top.Type != "record" {
		return "", fmt.Errorf("schema is not a record (type %v)", top.Type)
	}
	if top.Name == "" {
		return "", fmt.Errorf("record schema has no name")
	}
	if strings.Contains(top.Name, ".") || top.Namespace == "" {
		return top.Name, nil
	}
	return top.Namespace + "." + top.Name, nil
}
