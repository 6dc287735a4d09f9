package verify

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/hivedr/hivedr/internal/acid"
)

// Transactional tables.
//
// A transactional table's files are not what a reader sees: writes of
// open and aborted transactions lie beside the committed ones (hivedr
// never copies them; the source keeps them until its cleaner runs), and
// a base makes the deltas below it obsolete (the source's cleaner and
// hivedr's prune remove them at different times). What must agree is
// the write-ID state (get_valid_write_ids) and the files a reader with
// that state reads: the newest valid base and the valid deltas above it.
// So for a table transactional on both sides verify compares:
//
//   - the write-ID high-water mark and the open write IDs, which must be
//     equal, and the aborted ones: a write ID aborted on the source must
//     be aborted on DR (DR may keep aborted ones the source's cleaner has
//     forgotten: no data is visible under them on either side);
//   - under the table's or each partition's directory, the files of the
//     directories each side's state makes visible, by name below the
//     directory, length and (sampled) checksum; a file directly under
//     the directory (written before the table was transactional) as for
//     any table.
//
// A difference is in flight while a transaction event of the database is
// pending (see pending).

// writeIDStates are a transactional table's write-ID states on both
// sides.
type writeIDStates struct{ src, dr acid.WriteIDs }

// writeIDs reads a transactional table's write-ID states and records how
// they differ.
func (r *run) writeIDs(ctx context.Context, found *Diffs, obj, db, table string) (*writeIDStates, error) {
	full := strings.ToLower(db + "." + table)
	a, err := acid.ReadWriteIDs(ctx, r.cfg.Source, []string{full})
	if err != nil {
		return nil, fmt.Errorf("source write IDs of %s: %w", obj, err)
	}
	b, err := acid.ReadWriteIDs(ctx, r.cfg.DR, []string{full})
	if err != nil {
		return nil, fmt.Errorf("DR write IDs of %s: %w", obj, err)
	}
	st := &writeIDStates{src: a[full], dr: b[full]}
	found.writeIDs(obj, st.src, st.dr)
	return st, nil
}

func (ds *Diffs) writeIDs(obj string, a, b acid.WriteIDs) {
	if a.HighWaterMark != b.HighWaterMark {
		ds.Add(obj, "write-ID high-water mark %d on source, %d on DR", a.HighWaterMark, b.HighWaterMark)
	}
	if !slices.Equal(a.Open, b.Open) {
		ds.Add(obj, "open write IDs %v on source, %v on DR", a.Open, b.Open)
	}
	var notAborted []int64
	for _, id := range a.Aborted {
		if !slices.Contains(b.Aborted, id) {
			notAborted = append(notAborted, id)
		}
	}
	if len(notAborted) > 0 {
		ds.Add(obj, "write IDs %v aborted on source, not on DR", notAborted)
	}
}

// visibleFiles keeps, of a transactional table's or partition's files
// (by name below its directory), those a reader with state w reads, named
// as DR names them (acid.ReplicaName: a compactor's directory without its
// visibility suffix), so the two sides compare by name.
func visibleFiles(files map[string]fileInfo, w acid.WriteIDs) map[string]fileInfo {
	var dirs, rels []string
	for rel := range files {
		if top, _, nested := strings.Cut(rel, "/"); nested {
			dirs = append(dirs, top)
			rels = append(rels, rel)
		}
	}
	visible := acid.VisibleIn(dirs, w, acid.View{Compacted: acid.Compacted(rels)})
	out := make(map[string]fileInfo, len(files))
	for rel, f := range files {
		top, rest, nested := strings.Cut(rel, "/")
		switch _, ok := slices.BinarySearch(visible, top); {
		case !nested:
			out[rel] = f
		case ok:
			out[acid.ReplicaName(top)+"/"+rest] = f
		}
	}
	return out
}
