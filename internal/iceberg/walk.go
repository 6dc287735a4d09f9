package iceberg

import (
	"context"
	"fmt"
)

// Kind is what a file is to a table.
type Kind int

// The kinds of files a table's metadata names.
const (
	KindMetadata Kind = iota
	KindManifestList
	KindManifest
	KindData
	KindPositionDeletes
	KindEqualityDeletes
	KindStatistics
)

var kindNames = [...]string{"metadata", "manifest list", "manifest", "data", "position deletes", "equality deletes", "statistics"}

func (k Kind) String() string {
	if int(k) < len(kindNames) {
		return kindNames[k]
	}
	return fmt.Sprintf("Kind(%d)", int(k))
}

// Rewritten says whether a copy of a file of this kind under other roots
// is rewritten (it holds absolute paths) rather than copied byte for
// byte.
func (k Kind) Rewritten() bool {
	switch k {
	case KindMetadata, KindManifestList, KindManifest, KindPositionDeletes:
		return true
	}
	return false
}

// File is one file a table's metadata names.
type File struct {
	Path string
	Kind Kind
	// Size is the size the metadata records (manifests, data and delete
	// files), -1 where it records none.
	Size int64
}

// ReadFile reads a whole file.
type ReadFile func(ctx context.Context, path string) ([]byte, error)

// Added is what next's snapshots reach that prev's did not: the
// manifest lists of the snapshots next has and prev has not, the
// manifests those snapshots added (a manifest list entry's
// added_snapshot_id names one of them), the files those manifests name
// as added or existing, and statistics files prev did not name. With
// prev nil it is everything next's snapshots reach (a bootstrap). The
// metadata file itself is the caller's: metadata does not name its own
// path.
//
// Files are listed once each, the ones that name others after those
// they name (data and delete files, then manifests, then manifest
// lists), so a copy in that order never leaves a name pointing nowhere.
func Added(ctx context.Context, prev, next *Metadata, read ReadFile) ([]File, error) {
	old := map[int64]bool{}
	oldStats := map[string]bool{}
	if prev != nil {
		old = prev.Live()
		for _, s := range prev.Statistics {
			oldStats[s.Path] = true
		}
		for _, s := range prev.PartitionStatistics {
			oldStats[s.Path] = true
		}
	}
	var files, manifests, lists []File
	seen := map[string]bool{}
	add := func(to *[]File, f File) {
		if !seen[f.Path] {
			seen[f.Path] = true
			*to = append(*to, f)
		}
	}
	newSnap := map[int64]bool{}
	for _, s := range next.Snapshots {
		if !old[s.ID] {
			newSnap[s.ID] = true
		}
	}
	for _, s := range next.Snapshots {
		if !newSnap[s.ID] {
			continue
		}
		var mfs []ManifestFile
		if s.ManifestList != "" {
			b, err := read(ctx, s.ManifestList)
			if err != nil {
				return nil, fmt.Errorf("snapshot %d: manifest list %s: %w", s.ID, s.ManifestList, err)
			}
			if mfs, err = ReadManifestList(b); err != nil {
				return nil, fmt.Errorf("snapshot %d: %s: %w", s.ID, s.ManifestList, err)
			}
			add(&lists, File{Path: s.ManifestList, Kind: KindManifestList, Size: -1})
		} else {
			// Version 1 without a manifest list: every manifest is the
			// snapshot's to check.
			for _, p := range s.Manifests {
				mfs = append(mfs, ManifestFile{Path: p, Length: -1, AddedSnapshotID: s.ID})
			}
		}
		for _, mf := range mfs {
			if (prev != nil && !newSnap[mf.AddedSnapshotID]) || seen[mf.Path] {
				continue // written by a snapshot prev already had
			}
			b, err := read(ctx, mf.Path)
			if err != nil {
				return nil, fmt.Errorf("snapshot %d: manifest %s: %w", s.ID, mf.Path, err)
			}
			entries, err := ReadManifest(b)
			if err != nil {
				return nil, fmt.Errorf("snapshot %d: %s: %w", s.ID, mf.Path, err)
			}
			add(&manifests, File{Path: mf.Path, Kind: KindManifest, Size: mf.Length})
			for _, e := range entries {
				if e.Status == statusDeleted {
					continue // gone from this snapshot; an older one that had it brought it
				}
				k := KindData
				switch e.Content {
				case ContentPositionDeletes:
					k = KindPositionDeletes
					if e.Format == "PUFFIN" {
						return nil, fmt.Errorf("snapshot %d: %s: %s is a deletion vector (format version 3): not replicated", s.ID, mf.Path, e.Path)
					}
				case ContentEqualityDeletes:
					k = KindEqualityDeletes
				}
				add(&files, File{Path: e.Path, Kind: k, Size: e.Size})
			}
		}
	}
	for _, s := range next.Statistics {
		if !oldStats[s.Path] {
			add(&files, File{Path: s.Path, Kind: KindStatistics, Size: -1})
		}
	}
	for _, s := range next.PartitionStatistics {
		if !oldStats[s.Path] {
			add(&files, File{Path: s.Path, Kind: KindStatistics, Size: -1})
		}
	}
	return append(append(files, manifests...), lists...), nil
}
