package verify

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/beltran/gohive/hive_metastore"

	"github.com/hivedr/hivedr/internal/fs"
	"github.com/hivedr/hivedr/internal/iceberg"
	"github.com/hivedr/hivedr/internal/location"
)

// icebergPointers are the parameters of an Iceberg table that name its
// metadata files: compared as locations (DR's name DR's rewritten
// copies), not as values.
var icebergPointers = []string{iceberg.ParamMetadataLocation, iceberg.ParamPreviousMetadataLocation}

// withoutPointers is t with its Iceberg pointer parameters left out.
func withoutPointers(t *hive_metastore.Table) *hive_metastore.Table {
	c := *t
	c.Parameters = maps.Clone(t.Parameters)
	for _, k := range icebergPointers {
		delete(c.Parameters, k)
	}
	return &c
}

// iceberg compares an Iceberg table by its snapshots instead of its
// directory (DR's metadata files, manifest lists, manifests and position
// delete files are rewrites of the source's, for DR's paths): both
// pointers map to DR's, the current snapshot and the set of snapshots
// are the same, and of the current snapshot the data and delete files
// are the same (DR paths of the source's, with the same record counts;
// data and equality delete files with the same sizes), so are its
// record counts, every file it names is on DR's file system with the
// size its manifest records, and the sampled data files have the same
// CRC32C on both sides.
func (r *run) iceberg(ctx context.Context, found *Diffs, obj string, a, b *hive_metastore.Table) error {
	for _, k := range icebergPointers {
		found.Location(obj+" "+k, a.Parameters[k], b.Parameters[k], r.cfg.MapLocation)
	}
	srcPtr, drPtr := a.Parameters[iceberg.ParamMetadataLocation], b.Parameters[iceberg.ParamMetadataLocation]
	src, err := readMetadata(ctx, r.cfg.SourceFiles, srcPtr)
	if err != nil {
		found.Add(obj, "source metadata %s: %v", srcPtr, err)
		return nil
	}
	dr, err := readMetadata(ctx, r.cfg.DRFiles, drPtr)
	if err != nil {
		found.Add(obj, "DR metadata %s: %v", drPtr, err)
		return nil
	}
	cs, cd := src.Current(), dr.Current()
	found.Value(obj, "current snapshot", snapshotID(cs), snapshotID(cd))
	found.Value(obj, "snapshots", snapshotIDs(src), snapshotIDs(dr))
	if cs == nil || cd == nil || cs.ID != cd.ID {
		return nil
	}
	srcFiles, err := iceberg.SnapshotFiles(ctx, cs, reader(r.cfg.SourceFiles))
	if err != nil {
		found.Add(obj, "source snapshot %d: %v", cs.ID, err)
		return nil
	}
	drFiles, err := iceberg.SnapshotFiles(ctx, cd, reader(r.cfg.DRFiles))
	if err != nil {
		found.Add(obj, "DR snapshot %d: %v", cd.ID, err)
		return nil
	}
	snap := fmt.Sprintf("snapshot %d", cs.ID)
	for _, k := range []iceberg.Kind{iceberg.KindData, iceberg.KindPositionDeletes, iceberg.KindEqualityDeletes} {
		found.Value(obj, snap+" records of "+k.String()+" files", records(srcFiles, k), records(drFiles, k))
	}

	want := map[string]iceberg.DataFile{} // by DR path
	for _, f := range srcFiles {
		p, err := r.cfg.MapLocation(f.Path)
		if err != nil {
			found.Add(obj, "%s names %s, which does not map: %v", snap, f.Path, err)
			continue
		}
		want[p] = f
	}
	got := map[string]iceberg.DataFile{}
	for _, f := range drFiles {
		got[f.Path] = f
	}
	onDisk, err := listFiles(ctx, r.cfg.DRFiles, dr.Location)
	if err != nil {
		return fmt.Errorf("DR files of %s: %w", obj, err)
	}
	sizes := make(map[string]int64, len(onDisk))
	for _, fi := range onDisk {
		sizes[fi.loc] = fi.size
	}
	for _, p := range UnionKeys(want, got) {
		fa, okA := want[p]
		fb, okB := got[p]
		rel, ok := location.Below(strings.TrimSuffix(dr.Location, "/"), p)
		if !ok {
			rel = p
		}
		fobj := obj + " file " + rel
		if okA {
			r.sum.Files++
			r.sum.Bytes += fa.Size
		}
		if !found.Presence(fobj, okA, okB) {
			continue
		}
		if fa.Kind() != fb.Kind() || fa.Records != fb.Records {
			found.Add(fobj, "%s of %d records on source, %s of %d on DR", fa.Kind(), fa.Records, fb.Kind(), fb.Records)
			continue
		}
		if fa.Kind() != iceberg.KindPositionDeletes && fa.Size != fb.Size {
			found.Add(fobj, "%d bytes on source, %d on DR", fa.Size, fb.Size)
			continue
		}
		n, there := sizes[p]
		if !there {
			if n, err = fileSize(ctx, r.cfg.DRFiles, p); errors.Is(err, fs.ErrNotExist) {
				found.Add(fobj, "named by DR's %s but not on DR's file system", snap)
				continue
			} else if err != nil {
				return fmt.Errorf("DR file %s: %w", p, err)
			}
		}
		if n != fb.Size {
			found.Add(fobj, "%d bytes on DR's file system, %d in DR's manifest", n, fb.Size)
			continue
		}
		if fa.Kind() == iceberg.KindPositionDeletes || !r.sampled(fa.Path) {
			continue // a position delete file is a rewrite: its bytes differ by design
		}
		r.sum.Sampled++
		ca, how, err := r.cfg.SourceFiles.CRC32C(ctx, fa.Path)
		if err != nil {
			return fmt.Errorf("checksum of source file %s: %w", fa.Path, err)
		}
		cb, howB, err := r.cfg.DRFiles.CRC32C(ctx, p)
		if err != nil {
			return fmt.Errorf("checksum of DR file %s: %w", p, err)
		}
		if ca != cb {
			found.Add(fobj, "CRC32C %08x on source (%s), %08x on DR (%s), same length %d", ca, how, cb, howB, fa.Size)
		}
	}
	return nil
}

// readMetadata reads and parses an Iceberg metadata file.
func readMetadata(ctx context.Context, files Files, loc string) (*iceberg.Metadata, error) {
	if loc == "" {
		return nil, errors.New("the table names no metadata_location")
	}
	b, err := files.ReadFile(ctx, loc, iceberg.MaxFile)
	if err != nil {
		return nil, err
	}
	return iceberg.ParseMetadata(b)
}

func reader(files Files) iceberg.ReadFile {
	return func(ctx context.Context, p string) ([]byte, error) { return files.ReadFile(ctx, p, iceberg.MaxFile) }
}

// fileSize is the size of a file outside its table's location (Iceberg
// allows one), by listing its directory.
func fileSize(ctx context.Context, files Files, loc string) (int64, error) {
	dir := loc[:strings.LastIndex(loc, "/")]
	n := int64(-1)
	err := files.Walk(ctx, dir, func(l string, size int64) error {
		if l == loc {
			n = size
		}
		return nil
	})
	if err == nil && n < 0 {
		err = fmt.Errorf("%s: %w", loc, fs.ErrNotExist)
	}
	return n, err
}

func snapshotID(s *iceberg.Snapshot) string {
	if s == nil {
		return "none"
	}
	return strconv.FormatInt(s.ID, 10)
}

func snapshotIDs(m *iceberg.Metadata) string {
	ids := make([]int64, 0, len(m.Snapshots))
	for _, s := range m.Snapshots {
		ids = append(ids, s.ID)
	}
	slices.Sort(ids)
	return fmt.Sprint(ids)
}

func records(files []iceberg.DataFile, k iceberg.Kind) string {
	var n int64
	for _, f := range files {
		if f.Kind() == k {
			n += f.Records
		}
	}
	return strconv.FormatInt(n, 10)
}
