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

// MaxFile bounds a metadata file, manifest list or manifest hivedr
// reads whole (they are kilobytes to a few megabytes).
const MaxFile = 256 << 20

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
		mfs, err := manifestsOf(ctx, &s, read)
		if err != nil {
			return nil, err
		}
		if s.ManifestList != "" {
			add(&lists, File{Path: s.ManifestList, Kind: KindManifestList, Size: -1})
		}
		for _, mf := range mfs {
			if (prev != nil && !newSnap[mf.AddedSnapshotID]) || seen[mf.Path] {
				continue // written by a snapshot prev already had
			}
			entries, err := liveEntries(ctx, &s, mf, read)
			if err != nil {
				return nil, err
			}
			add(&manifests, File{Path: mf.Path, Kind: KindManifest, Size: mf.Length})
			for _, e := range entries {
				add(&files, File{Path: e.Path, Kind: e.Kind(), Size: e.Size})
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

// manifestsOf is the manifests of snapshot s: its manifest list's
// entries, or (format version 1 without a list) the manifests it names.
func manifestsOf(ctx context.Context, s *Snapshot, read ReadFile) ([]ManifestFile, error) {
	if s.ManifestList == "" {
		mfs := make([]ManifestFile, 0, len(s.Manifests))
		for _, p := range s.Manifests {
			mfs = append(mfs, ManifestFile{Path: p, Length: -1, AddedSnapshotID: s.ID})
		}
		return mfs, nil
	}
	b, err := read(ctx, s.ManifestList)
	if err != nil {
		return nil, fmt.Errorf("snapshot %d: manifest list %s: %w", s.ID, s.ManifestList, err)
	}
	mfs, err := ReadManifestList(b)
	if err != nil {
		return nil, fmt.Errorf("snapshot %d: %s: %w", s.ID, s.ManifestList, err)
	}
	return mfs, nil
}

// liveEntries is the entries of manifest mf (of snapshot s) a reader of
// s reads: added and existing, not deleted. A deletion vector (format
// version 3) is refused.
func liveEntries(ctx context.Context, s *Snapshot, mf ManifestFile, read ReadFile) ([]DataFile, error) {
	b, err := read(ctx, mf.Path)
	if err != nil {
		return nil, fmt.Errorf("snapshot %d: manifest %s: %w", s.ID, mf.Path, err)
	}
	entries, err := ReadManifest(b)
	if err != nil {
		return nil, fmt.Errorf("snapshot %d: %s: %w", s.ID, mf.Path, err)
	}
	live := entries[:0]
	for _, e := range entries {
		if e.Status == statusDeleted {
			continue // gone from this snapshot; an older one that had it brought it
		}
		if e.Content == ContentPositionDeletes && e.Format == "PUFFIN" {
			return nil, fmt.Errorf("snapshot %d: %s: %s is a deletion vector (format version 3): not replicated", s.ID, mf.Path, e.Path)
		}
		live = append(live, e)
	}
	return live, nil
}

// SnapshotFiles is the data and delete files a reader of snapshot s
// reads: the live entries of all its manifests.
func SnapshotFiles(ctx context.Context, s *Snapshot, read ReadFile) ([]DataFile, error) {
	mfs, err := manifestsOf(ctx, s, read)
	if err != nil {
		return nil, err
	}
	var files []DataFile
	for _, mf := range mfs {
		entries, err := liveEntries(ctx, s, mf, read)
		if err != nil {
			return nil, err
		}
		files = append(files, entries...)
	}
	return files, nil
}

// Expired is what prev's snapshots reached that next's do not: when a
// commit expired snapshots (next lacks some of prev's), the manifest
// lists, manifests, data and delete files and statistics files that only
// the expired snapshots reached, which a reader of next never reads. It
// is empty when next keeps every snapshot of prev.
//
// Everything next reaches is read (it must all be there). Of the expired
// snapshots, a manifest list or manifest already gone is passed over
// (a removal that stopped half-way, run again), so what it alone named
// is not listed (gone says whether read's error is that of a missing
// file). The order is the reverse of Added's: data, delete and
// statistics files, then manifests, then manifest lists, so a removal in
// that order that stops half-way leaves the names that lead to what is
// left.
func Expired(ctx context.Context, prev, next *Metadata, read ReadFile, gone func(error) bool) ([]File, error) {
	kept := next.Live()
	var expired []*Snapshot
	for i := range prev.Snapshots {
		if !kept[prev.Snapshots[i].ID] {
			expired = append(expired, &prev.Snapshots[i])
		}
	}
	if len(expired) == 0 {
		return nil, nil
	}
	reached, err := Added(ctx, nil, next, read)
	if err != nil {
		return nil, fmt.Errorf("what the new metadata reaches: %w", err)
	}
	keep := make(map[string]bool, len(reached))
	for _, f := range reached {
		keep[f.Path] = true
	}
	var files, manifests, lists []File
	add := func(to *[]File, f File) {
		if !keep[f.Path] {
			keep[f.Path] = true // listed once
			*to = append(*to, f)
		}
	}
	for _, s := range expired {
		mfs, err := manifestsOf(ctx, s, read)
		if err != nil && gone(err) {
			continue
		}
		if err != nil {
			return nil, err
		}
		for _, mf := range mfs {
			entries, err := liveEntries(ctx, s, mf, read)
			if err != nil && gone(err) {
				continue
			}
			if err != nil {
				return nil, err
			}
			for _, e := range entries {
				add(&files, File{Path: e.Path, Kind: e.Kind(), Size: e.Size})
			}
			add(&manifests, File{Path: mf.Path, Kind: KindManifest, Size: mf.Length})
		}
		if s.ManifestList != "" {
			add(&lists, File{Path: s.ManifestList, Kind: KindManifestList, Size: -1})
		}
	}
	for _, st := range prev.Statistics {
		add(&files, File{Path: st.Path, Kind: KindStatistics, Size: -1})
	}
	for _, st := range prev.PartitionStatistics {
		add(&files, File{Path: st.Path, Kind: KindStatistics, Size: -1})
	}
	return append(append(files, manifests...), lists...), nil
}
