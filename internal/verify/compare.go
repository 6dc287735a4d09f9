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

// Diff is one difference between a source object and its replica.
type Diff struct {
	// Object names what differs: "db", "db.table", "db.table partition
	// k=v", each possibly followed by " file <relative name>".
	Object string
	// Detail says how, e.g. "missing on DR".
	Detail string
}

func (d Diff) String() string { return d.Object + ": " + d.Detail }

// Diffs collects differences between source objects and their replicas.
// Its methods are the one comparison `hivedr verify` (Run) and the
// end-to-end tests' snapshots (e2e/workload) share: each records what
// differs in one aspect of an object, worded the same for both.
type Diffs []Diff

// Add records a difference of obj.
func (ds *Diffs) Add(obj, format string, args ...any) {
	*ds = append(*ds, Diff{Object: obj, Detail: fmt.Sprintf(format, args...)})
}

// Presence records an object on one side only and reports whether it is
// on both.
func (ds *Diffs) Presence(obj string, onSource, onDR bool) bool {
	switch {
	case onSource && !onDR:
		ds.Add(obj, "missing on DR")
	case !onSource && onDR:
		ds.Add(obj, "only on DR")
	}
	return onSource && onDR
}

// Value records a difference in a string-valued aspect (what) of obj.
func (ds *Diffs) Value(obj, what, a, b string) {
	if a != b {
		ds.Add(obj, "%s %q on source, %q on DR", what, a, b)
	}
}

// Column is a column or partition key: its name and type.
type Column struct{ Name, Type string }

func (c Column) String() string { return c.Name + " " + c.Type }

// Columns is the metastore's field schemas as Columns.
func Columns(fs []*hive_metastore.FieldSchema) []Column {
	var cs []Column
	for _, f := range fs {
		cs = append(cs, Column{f.Name, f.Type})
	}
	return cs
}

// Columns compares column lists (what: "column", "partition key"),
// ignoring case as the metastore does: type changes one by one when the
// names match in order, else the whole lists.
func (ds *Diffs) Columns(obj, what string, a, b []Column) {
	ca, cb := columnList(a), columnList(b)
	if slices.Equal(ca, cb) {
		return
	}
	sameNames := len(a) == len(b)
	for i := 0; sameNames && i < len(a); i++ {
		sameNames = strings.EqualFold(a[i].Name, b[i].Name)
	}
	if !sameNames {
		ds.Add(obj, "%ss (%s) on source, (%s) on DR", what, strings.Join(ca, ", "), strings.Join(cb, ", "))
		return
	}
	for i := range a {
		if !strings.EqualFold(a[i].Type, b[i].Type) {
			ds.Add(obj, "%s %s: type %s on source, %s on DR", what, a[i].Name, a[i].Type, b[i].Type)
		}
	}
}

func columnList(cs []Column) []string {
	out := make([]string, len(cs))
	for i, c := range cs {
		out[i] = strings.ToLower(c.String())
	}
	return out
}

// Location records a DR location b that is not where mapLocation puts
// the source location a.
func (ds *Diffs) Location(obj, a, b string, mapLocation func(string) (string, error)) {
	if a == "" && b == "" {
		return
	}
	want, err := mapLocation(a)
	if err != nil {
		ds.Add(obj, "source location %s does not map: %v", a, err)
		return
	}
	if !location.Same(want, b) {
		ds.Add(obj, "location %s on DR, want %s (source %s)", b, want, a)
	}
}

// Params records the parameters that differ, but for those
// IgnoredParameter names.
func (ds *Diffs) Params(obj string, a, b map[string]string) {
	for _, k := range UnionKeys(a, b) {
		if IgnoredParameter(k) {
			continue
		}
		va, okA := a[k]
		vb, okB := b[k]
		switch {
		case okA && !okB:
			ds.Add(obj, "parameter %s=%q missing on DR", k, va)
		case !okA && okB:
			ds.Add(obj, "parameter %s=%q only on DR", k, vb)
		case va != vb:
			ds.Add(obj, "parameter %s: %q on source, %q on DR", k, va, vb)
		}
	}
}

// tableDef compares what defines a table: type, columns, partition keys,
// formats, SerDe, location and parameters.
func (ds *Diffs) tableDef(obj string, a, b *hive_metastore.Table, mapLocation func(string) (string, error)) {
	ds.Value(obj, "table type", a.TableType, b.TableType)
	ds.Columns(obj, "partition key", Columns(a.PartitionKeys), Columns(b.PartitionKeys))
	ds.storage(obj, a.Sd, b.Sd, mapLocation)
	ds.Params(obj, a.Parameters, b.Parameters)
	ds.Value(obj, "view text", a.ViewExpandedText, b.ViewExpandedText)
}

// partitionDef compares a partition's columns, formats, location and
// parameters.
func (ds *Diffs) partitionDef(obj string, a, b *hive_metastore.Partition, mapLocation func(string) (string, error)) {
	ds.storage(obj, a.Sd, b.Sd, mapLocation)
	ds.Params(obj, a.Parameters, b.Parameters)
}

func (ds *Diffs) storage(obj string, a, b *hive_metastore.StorageDescriptor, mapLocation func(string) (string, error)) {
	if a == nil || b == nil {
		if (a == nil) != (b == nil) {
			ds.Add(obj, "storage descriptor on one side only (source %v, DR %v)", a != nil, b != nil)
		}
		return
	}
	ds.Columns(obj, "column", Columns(a.Cols), Columns(b.Cols))
	ds.Value(obj, "input format", a.InputFormat, b.InputFormat)
	ds.Value(obj, "output format", a.OutputFormat, b.OutputFormat)
	if a.SerdeInfo != nil && b.SerdeInfo != nil {
		ds.Value(obj, "serde", a.SerdeInfo.SerializationLib, b.SerdeInfo.SerializationLib)
	}
	ds.Location(obj, a.Location, b.Location, mapLocation)
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

// UnionKeys returns the keys of a and b, sorted.
func UnionKeys[V any](a, b map[string]V) []string {
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
