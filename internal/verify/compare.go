package verify

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/beltran/gohive/hive_metastore"

	"github.com/hivedr/hivedr/internal/location"
	"github.com/hivedr/hivedr/schemas"
)

// IgnoredParameter reports whether verify ignores the database, table or
// partition parameter key because it legitimately differs between a
// source and its replica. This is the one list of them:
//
//   - keys starting with "repl." or "hivedr.": the replication bookkeeping
//     the applier keeps on DR objects (repl.last.id, repl.target.for,
//     hivedr.halted, hivedr.skipped.*, bootstrap keys);
//   - transient_lastDdlTime: set by each metastore when it writes;
//   - numFiles, numFilesErasureCoded, totalSize, numRows, rawDataSize,
//     COLUMN_STATS_ACCURATE, STATS_GENERATED,
//     STATS_GENERATED_VIA_STATS_TASK: statistics each side keeps itself
//     (the files are compared directly);
//   - last_modified_by, last_modified_time: set by the client that alters.
func IgnoredParameter(key string) bool {
	switch key {
	case "transient_lastDdlTime",
		"numFiles", "numFilesErasureCoded", "totalSize", "numRows", "rawDataSize",
		"COLUMN_STATS_ACCURATE", "STATS_GENERATED", "STATS_GENERATED_VIA_STATS_TASK",
		"last_modified_by", "last_modified_time":
		return true
	}
	return strings.HasPrefix(key, "repl.") || strings.HasPrefix(key, "hivedr.")
}

// findings collects the differences of one table (or database).
type findings []Finding

func (fs *findings) add(obj, format string, args ...any) {
	*fs = append(*fs, Finding{Object: obj, Detail: fmt.Sprintf(format, args...)})
}

// presence records an object on one side only and reports whether it is
// on both.
func (fs *findings) presence(obj string, onSource, onDR bool) bool {
	switch {
	case onSource && !onDR:
		fs.add(obj, "missing on DR")
	case !onSource && onDR:
		fs.add(obj, "only on DR")
	}
	return onSource && onDR
}

// tableDef compares what defines a table: type, columns, partition keys,
// formats, SerDe, location and parameters.
func (fs *findings) tableDef(obj string, a, b *hive_metastore.Table, mapLocation func(string) (string, error)) {
	fs.value(obj, "table type", a.TableType, b.TableType)
	fs.columns(obj, "partition key", a.PartitionKeys, b.PartitionKeys)
	fs.storage(obj, a.Sd, b.Sd, mapLocation)
	fs.params(obj, a.Parameters, b.Parameters)
	fs.value(obj, "view text", a.ViewExpandedText, b.ViewExpandedText)
}

// partitionDef compares a partition's columns, formats, location and
// parameters.
func (fs *findings) partitionDef(obj string, a, b *hive_metastore.Partition, mapLocation func(string) (string, error)) {
	fs.storage(obj, a.Sd, b.Sd, mapLocation)
	fs.params(obj, a.Parameters, b.Parameters)
}

func (fs *findings) storage(obj string, a, b *hive_metastore.StorageDescriptor, mapLocation func(string) (string, error)) {
	if a == nil || b == nil {
		if (a == nil) != (b == nil) {
			fs.add(obj, "storage descriptor on one side only (source %v, DR %v)", a != nil, b != nil)
		}
		return
	}
	fs.columns(obj, "column", a.Cols, b.Cols)
	fs.value(obj, "input format", a.InputFormat, b.InputFormat)
	fs.value(obj, "output format", a.OutputFormat, b.OutputFormat)
	if a.SerdeInfo != nil && b.SerdeInfo != nil {
		fs.value(obj, "serde", a.SerdeInfo.SerializationLib, b.SerdeInfo.SerializationLib)
	}
	fs.location(obj, a.Location, b.Location, mapLocation)
}

func (fs *findings) value(obj, what, a, b string) {
	if a != b {
		fs.add(obj, "%s %q on source, %q on DR", what, a, b)
	}
}

// columns compares column lists: type changes one by one when the names
// match in order, else the whole lists.
func (fs *findings) columns(obj, what string, a, b []*hive_metastore.FieldSchema) {
	ca, cb := columnList(a), columnList(b)
	if slices.Equal(ca, cb) {
		return
	}
	sameNames := len(a) == len(b)
	for i := 0; sameNames && i < len(a); i++ {
		sameNames = strings.EqualFold(a[i].Name, b[i].Name)
	}
	if !sameNames {
		fs.add(obj, "%ss (%s) on source, (%s) on DR", what, strings.Join(ca, ", "), strings.Join(cb, ", "))
		return
	}
	for i := range a {
		if !strings.EqualFold(a[i].Type, b[i].Type) {
			fs.add(obj, "%s %s: type %s on source, %s on DR", what, a[i].Name, a[i].Type, b[i].Type)
		}
	}
}

func columnList(cs []*hive_metastore.FieldSchema) []string {
	out := make([]string, len(cs))
	for i, c := range cs {
		out[i] = strings.ToLower(c.Name + " " + c.Type)
	}
	return out
}

func (fs *findings) location(obj, a, b string, mapLocation func(string) (string, error)) {
	if a == "" && b == "" {
		return
	}
	want, err := mapLocation(a)
	if err != nil {
		fs.add(obj, "source location %s does not map: %v", a, err)
		return
	}
	if !location.Same(want, b) {
		fs.add(obj, "location %s on DR, want %s (source %s)", b, want, a)
	}
}

func (fs *findings) params(obj string, a, b map[string]string) {
	for _, k := range unionKeys(a, b) {
		if IgnoredParameter(k) {
			continue
		}
		va, okA := a[k]
		vb, okB := b[k]
		switch {
		case okA && !okB:
			fs.add(obj, "parameter %s=%q missing on DR", k, va)
		case !okA && okB:
			fs.add(obj, "parameter %s=%q only on DR", k, vb)
		case va != vb:
			fs.add(obj, "parameter %s: %q on source, %q on DR", k, va, vb)
		}
	}
}

// merge walks two sorted lists of names in step, calling fn with each
// name of either and which sides have it, until fn returns false.
func merge(a, b []string, fn func(name string, inA, inB bool) bool) {
	i, j := 0, 0
	for i < len(a) || j < len(b) {
		var ok bool
		switch {
		case j >= len(b) || i < len(a) && a[i] < b[j]:
			ok = fn(a[i], true, false)
			i++
		case i >= len(a) || b[j] < a[i]:
			ok = fn(b[j], false, true)
			j++
		default:
			ok = fn(a[i], true, true)
			i, j = i+1, j+1
		}
		if !ok {
			return
		}
	}
}

// unionKeys returns the keys of a and b, sorted.
func unionKeys[V any](a, b map[string]V) []string {
	keys := slices.Collect(maps.Keys(a))
	for k := range b {
		if _, ok := a[k]; !ok {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	return keys
}

// partitionValues parses a partition name as the metastore lists it
// (k1=v1/k2=v2, values escaped as %XX) into its values.
func partitionValues(name string) []string { return schemas.PartitionValues(name) }

// valuesKey is a map key of a partition's values.
func valuesKey(vals []string) string { return strings.Join(vals, "\x00") }
