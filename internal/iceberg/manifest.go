package iceberg

import "fmt"

// Content kinds of manifests and of the files they name.
const (
	ContentData             = 0 // data files (a data manifest)
	ContentPositionDeletes  = 1 // position delete files (in a delete manifest, whose content is 1 too)
	ContentEqualityDeletes  = 2 // equality delete files
	manifestContentDeletes  = 1
	statusExisting          = 0
	statusAdded             = 1
	statusDeleted           = 2
	deleteFilePathField     = 2147483546 // the file_path column of position delete files
	boundsLower, boundsUppr = "lower_bounds", "upper_bounds"
)

// ManifestFile is one manifest as a manifest list names it.
type ManifestFile struct {
	Path            string
	Length          int64
	Content         int // 0 data, 1 deletes
	AddedSnapshotID int64
}

// DataFile is one data or delete file as a manifest names it.
type DataFile struct {
	// Status is 0 (existing), 1 (added by the manifest's snapshot) or 2
	// (deleted by it: no longer in the table).
	Status  int
	Content int // ContentData, ContentPositionDeletes or ContentEqualityDeletes
	Path    string
	Format  string // PARQUET, AVRO, ORC, PUFFIN
	Size    int64
	Records int64
}

// Kind is the kind of file the entry names.
func (f DataFile) Kind() Kind {
	switch f.Content {
	case ContentPositionDeletes:
		return KindPositionDeletes
	case ContentEqualityDeletes:
		return KindEqualityDeletes
	}
	return KindData
}

// ReadManifestList reads a snapshot's manifest list.
func ReadManifestList(b []byte) ([]ManifestFile, error) {
	c, err := readContainer(b)
	if err != nil {
		return nil, fmt.Errorf("manifest list: %w", err)
	}
	out := make([]ManifestFile, 0, len(c.records))
	for i, r := range c.records {
		rec, ok := r.(map[string]any)
		if !ok {
			return nil, fmt.Errorf("manifest list: record %d is a %T, not a record", i, r)
		}
		mf := ManifestFile{Path: str(rec["manifest_path"]), Length: num(rec["manifest_length"]),
			Content: int(num(rec["content"])), AddedSnapshotID: num(rec["added_snapshot_id"])}
		if mf.Path == "" {
			return nil, fmt.Errorf("manifest list: record %d names no manifest_path", i)
		}
		out = append(out, mf)
	}
	return out, nil
}

// ReadManifest reads a manifest's entries.
func ReadManifest(b []byte) ([]DataFile, error) {
	c, err := readContainer(b)
	if err != nil {
		return nil, fmt.Errorf("manifest: %w", err)
	}
	out := make([]DataFile, 0, len(c.records))
	for i, r := range c.records {
		rec, _ := r.(map[string]any)
		df, _ := rec["data_file"].(map[string]any)
		if df == nil {
			return nil, fmt.Errorf("manifest: entry %d has no data_file", i)
		}
		f := DataFile{Status: int(num(rec["status"])), Content: int(num(df["content"])), Path: str(df["file_path"]),
			Format: str(df["file_format"]), Size: num(df["file_size_in_bytes"]), Records: num(df["record_count"])}
		if f.Path == "" {
			return nil, fmt.Errorf("manifest: entry %d names no file_path", i)
		}
		out = append(out, f)
	}
	return out, nil
}

// RewriteManifestList is the manifest list b with every manifest_path
// moved by m and its manifest_length set to what length says the
// rewritten manifest's is.
func RewriteManifestList(b []byte, m PathMap, length func(src string) (int64, error)) ([]byte, error) {
	c, err := readContainer(b)
	if err != nil {
		return nil, fmt.Errorf("manifest list: %w", err)
	}
	for i, r := range c.records {
		rec, ok := r.(map[string]any)
		if !ok {
			return nil, fmt.Errorf("manifest list: record %d is a %T, not a record", i, r)
		}
		src := str(rec["manifest_path"])
		dst, err := m(src)
		if err != nil {
			return nil, fmt.Errorf("manifest list: manifest_path %q: %w", src, err)
		}
		n, err := length(src)
		if err != nil {
			return nil, fmt.Errorf("manifest list: length of the rewritten %s: %w", src, err)
		}
		rec["manifest_path"], rec["manifest_length"] = dst, n
	}
	out, err := c.bytes()
	if err != nil {
		return nil, fmt.Errorf("manifest list: %w", err)
	}
	return out, nil
}

// RewriteManifest is the manifest b with every file_path moved by m.
// Position delete files are rewritten too (their rows name data files),
// so their file_size_in_bytes becomes what size says the rewritten file's
// is; and the bounds of their file_path column, which hold (a prefix of)
// source paths, are moved when they name one whole path and dropped
// otherwise (a reader then applies the delete file without skipping by
// path: slower, never wrong). A version 3 deletion vector (a Puffin
// delete file) is refused.
func RewriteManifest(b []byte, m PathMap, size func(src string) (int64, error)) ([]byte, error) {
	c, err := readContainer(b)
	if err != nil {
		return nil, fmt.Errorf("manifest: %w", err)
	}
	for i, r := range c.records {
		rec, _ := r.(map[string]any)
		df, _ := rec["data_file"].(map[string]any)
		if df == nil {
			return nil, fmt.Errorf("manifest: entry %d has no data_file", i)
		}
		src := str(df["file_path"])
		dst, err := m(src)
		if err != nil {
			return nil, fmt.Errorf("manifest: entry %d: file_path %q: %w", i, src, err)
		}
		df["file_path"] = dst
		if ref, ok := union(df["referenced_data_file"]); ok {
			to, err := m(str(ref))
			if err != nil {
				return nil, fmt.Errorf("manifest: entry %d: referenced_data_file %q: %w", i, str(ref), err)
			}
			df["referenced_data_file"] = map[string]any{"string": to}
		}
		if int(num(df["content"])) != ContentPositionDeletes {
			continue
		}
		if str(df["file_format"]) == "PUFFIN" {
			return nil, fmt.Errorf("manifest: entry %d: %s is a deletion vector (format version 3): not replicated", i, src)
		}
		if int(num(rec["status"])) != statusDeleted {
			n, err := size(src)
			if err != nil {
				return nil, fmt.Errorf("manifest: size of the rewritten %s: %w", src, err)
			}
			df["file_size_in_bytes"] = n
		}
		if err := rewriteBounds(df, m); err != nil {
			return nil, fmt.Errorf("manifest: entry %d (%s): %w", i, src, err)
		}
	}
	out, err := c.bytes()
	if err != nil {
		return nil, fmt.Errorf("manifest: %w", err)
	}
	return out, nil
}

// rewriteBounds moves the file_path column's bounds of a position delete
// file when both name the same whole path, and drops them otherwise.
func rewriteBounds(df map[string]any, m PathMap) error {
	lower, upper := bound(df, boundsLower), bound(df, boundsUppr)
	if lower == nil && upper == nil {
		return nil
	}
	if lower != nil && upper != nil && string(lower) == string(upper) {
		if to, err := m(string(lower)); err == nil {
			setBound(df, boundsLower, []byte(to))
			setBound(df, boundsUppr, []byte(to))
			return nil
		}
	}
	setBound(df, boundsLower, nil)
	setBound(df, boundsUppr, nil)
	return nil
}

// boundEntries is the key/value list of a bounds field (nil when the
// field is null).
func boundEntries(df map[string]any, field string) []any {
	v, ok := union(df[field])
	if !ok {
		return nil
	}
	list, _ := v.([]any)
	return list
}

// bound is the file_path column's value in a bounds field.
func bound(df map[string]any, field string) []byte {
	for _, e := range boundEntries(df, field) {
		kv, _ := e.(map[string]any)
		if num(kv["key"]) == deleteFilePathField {
			b, _ := kv["value"].([]byte)
			return b
		}
	}
	return nil
}

// setBound replaces (or, given nil, removes) the file_path column's
// value in a bounds field.
func setBound(df map[string]any, field string, to []byte) {
	list := boundEntries(df, field)
	if list == nil {
		return
	}
	kept := list[:0]
	for _, e := range list {
		kv, _ := e.(map[string]any)
		if num(kv["key"]) == deleteFilePathField {
			if to == nil {
				continue
			}
			kv["value"] = to
		}
		kept = append(kept, e)
	}
	df[field] = map[string]any{"array": kept}
}

// union is the value of a goavro union (nil, or a map of one branch
// name to the value), and whether it is not null. A value that is not a
// union is returned as it is.
func union(v any) (any, bool) {
	if v == nil {
		return nil, false
	}
	if m, ok := v.(map[string]any); ok && len(m) == 1 {
		for _, x := range m {
			return x, x != nil
		}
	}
	return v, true
}

// num is an Avro int or long (possibly in a union) as an int64; 0 when
// absent or null.
func num(v any) int64 {
	v, _ = union(v)
	switch n := v.(type) {
	case int32:
		return int64(n)
	case int64:
		return n
	case int:
		return int64(n)
	}
	return 0
}

// str is an Avro string (possibly in a union); "" when absent or null.
func str(v any) string {
	v, _ = union(v)
	s, _ := v.(string)
	return s
}
