// Package iceberg reads and rewrites the metadata of Apache Iceberg
// tables for replication: which files a snapshot reaches, which a commit
// added, and the same metadata with every absolute path moved from the
// source's roots to DR's.
//
// An Iceberg table in the Hive Metastore is a pointer (the table's
// metadata_location parameter) to a metadata JSON file; it names manifest
// lists (Avro), one per snapshot; they name manifests (Avro), which name
// data files and delete files. Every one of those names is an absolute
// path, and position delete files (Parquet) hold the absolute paths of
// the data files whose rows they delete. A copy on DR under other roots
// therefore rewrites the metadata JSON, the manifest lists, the manifests
// and the position delete files; data files, equality delete files and
// statistics files hold no paths and are copied byte for byte.
//
// The format is the one of the Iceberg table specification, versions 1
// and 2. Version 3's deletion vectors (Puffin files naming the data file
// they belong to) are refused with an error, not copied wrong.
package iceberg

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
)

// Metadata is what replication reads from a table metadata file.
type Metadata struct {
	FormatVersion     int        `json:"format-version"`
	TableUUID         string     `json:"table-uuid"`
	Location          string     `json:"location"`
	CurrentSnapshotID *int64     `json:"current-snapshot-id"`
	Snapshots         []Snapshot `json:"snapshots"`
	Refs              map[string]struct {
		SnapshotID int64  `json:"snapshot-id"`
		Type       string `json:"type"`
	} `json:"refs"`
	MetadataLog []struct {
		File string `json:"metadata-file"`
	} `json:"metadata-log"`
	Statistics []struct {
		SnapshotID int64  `json:"snapshot-id"`
		Path       string `json:"statistics-path"`
	} `json:"statistics"`
	PartitionStatistics []struct {
		SnapshotID int64  `json:"snapshot-id"`
		Path       string `json:"statistics-path"`
	} `json:"partition-statistics"`
	Properties map[string]string `json:"properties"`
}

// Snapshot is one snapshot of a table.
type Snapshot struct {
	ID             int64  `json:"snapshot-id"`
	ParentID       *int64 `json:"parent-snapshot-id"`
	SequenceNumber int64  `json:"sequence-number"`
	TimestampMS    int64  `json:"timestamp-ms"`
	// ManifestList is the snapshot's manifest list (format version 2,
	// and version 1 as written by any recent writer).
	ManifestList string `json:"manifest-list"`
	// Manifests are a version 1 snapshot's manifests when it has no
	// manifest list.
	Manifests []string          `json:"manifests"`
	Summary   map[string]string `json:"summary"`
}

// ParseMetadata reads a table metadata file.
func ParseMetadata(b []byte) (*Metadata, error) {
	var m Metadata
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, fmt.Errorf("iceberg table metadata: %w", err)
	}
	if m.FormatVersion < 1 || m.FormatVersion > 2 {
		return nil, fmt.Errorf("iceberg table metadata: format-version %d: only versions 1 and 2 are replicated", m.FormatVersion)
	}
	if m.Location == "" {
		return nil, fmt.Errorf("iceberg table metadata: no location")
	}
	return &m, nil
}

// Current is the table's current snapshot (nil when it has none, as
// right after it was created).
func (m *Metadata) Current() *Snapshot {
	if m.CurrentSnapshotID == nil || *m.CurrentSnapshotID == -1 {
		return nil
	}
	return m.Snapshot(*m.CurrentSnapshotID)
}

// Snapshot is the snapshot with the given ID (nil if the metadata has
// none: expired, or never there).
func (m *Metadata) Snapshot(id int64) *Snapshot {
	for i := range m.Snapshots {
		if m.Snapshots[i].ID == id {
			return &m.Snapshots[i]
		}
	}
	return nil
}

// Live is the IDs of the snapshots a reader can still choose: every
// snapshot the metadata lists (a branch or tag names one of them).
func (m *Metadata) Live() map[int64]bool {
	ids := make(map[int64]bool, len(m.Snapshots))
	for _, s := range m.Snapshots {
		ids[s.ID] = true
	}
	return ids
}

// Parameters of an Iceberg table in the metastore.
const (
	// ParamTableType is ICEBERG on an Iceberg table (the metastore's own
	// table type says EXTERNAL_TABLE).
	ParamTableType = "table_type"
	// ParamMetadataLocation names the table's current metadata file.
	ParamMetadataLocation = "metadata_location"
	// ParamPreviousMetadataLocation names the one before it.
	ParamPreviousMetadataLocation = "previous_metadata_location"
)

// IsTable says whether a table's metastore parameters make it an Iceberg
// table.
func IsTable(params map[string]string) bool {
	return strings.EqualFold(params[ParamTableType], "ICEBERG")
}

// PathMap moves a source path to its DR path, or says why it cannot (a
// path outside the configured roots).
type PathMap func(src string) (string, error)

// pathProperties are table properties that name locations; a rewrite
// maps them as it maps the files.
var pathProperties = []string{"write.data.path", "write.metadata.path", "write.object-storage.path", "write.folder-storage.path"}

// RewriteMetadata is the metadata file b with every path moved by m: the
// table location, the manifest lists (or version 1 manifests), the
// metadata log, statistics files and the path properties. Numbers keep
// their exact text (snapshot IDs do not fit a float64). The output's keys
// are sorted, so the same input gives the same bytes.
func RewriteMetadata(b []byte, m PathMap) ([]byte, error) {
	if _, err := ParseMetadata(b); err != nil {
		return nil, err
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var doc map[string]any
	if err := dec.Decode(&doc); err != nil {
		return nil, fmt.Errorf("iceberg table metadata: %w", err)
	}
	var err error
	str := func(where string, v any) any {
		s, ok := v.(string)
		if !ok || err != nil {
			return v
		}
		t, e := m(s)
		if e != nil {
			err = fmt.Errorf("iceberg table metadata: %s %q: %w", where, s, e)
			return v
		}
		return t
	}
	each := func(key, field string) {
		list, _ := doc[key].([]any)
		for i, e := range list {
			if o, ok := e.(map[string]any); ok {
				if _, has := o[field]; has {
					o[field] = str(fmt.Sprintf("%s[%d].%s", key, i, field), o[field])
				}
			}
		}
	}
	doc["location"] = str("location", doc["location"])
	each("snapshots", "manifest-list")
	if snaps, ok := doc["snapshots"].([]any); ok {
		for i, s := range snaps {
			o, _ := s.(map[string]any)
			if ms, ok := o["manifests"].([]any); ok {
				for j := range ms {
					ms[j] = str(fmt.Sprintf("snapshots[%d].manifests[%d]", i, j), ms[j])
				}
			}
		}
	}
	each("metadata-log", "metadata-file")
	each("statistics", "statistics-path")
	each("partition-statistics", "statistics-path")
	if props, ok := doc["properties"].(map[string]any); ok {
		for _, k := range pathProperties {
			if v, has := props[k]; has {
				props[k] = str("properties."+k, v)
			}
		}
	}
	if err != nil {
		return nil, err
	}
	var out bytes.Buffer
	enc := json.NewEncoder(&out)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(doc); err != nil {
		return nil, fmt.Errorf("iceberg table metadata: %w", err)
	}
	return bytes.TrimSuffix(out.Bytes(), []byte("\n")), nil
}
