//go:build soak

package e2e

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"path"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/beltran/gohive/hive_metastore"

	wl "github.com/hivedr/hivedr/e2e/workload"
	"github.com/hivedr/hivedr/internal/acid"
	"github.com/hivedr/hivedr/internal/drparam"
	"github.com/hivedr/hivedr/internal/fs"
	"github.com/hivedr/hivedr/internal/hms"
	"github.com/hivedr/hivedr/internal/location"
)

// The soak's model and checker. After each workload step the driver
// records the source events the step produced and the state of the
// objects of its database afterwards (names only: tables, partitions,
// data files, valid write IDs). While the chaos runs, the checker samples
// DR: a DR database at repl.last.id N must hold exactly the state the
// model recorded for the source after event N: no object or file a
// source state never had together (a hybrid), no file the source did not
// have (a ghost), no write a transaction had not committed.

// soakTableState is a table's state: its partitions' data files ("" is
// the table itself when unpartitioned), and for a transactional table the
// write IDs a reader sees as valid and only the files that reader sees.
type soakTableState struct {
	Parts map[string][]string
	Valid string
	// WriteIDs is the state Valid was read from (high-water mark, open
	// and aborted write IDs), and Stamps the objects' repl.last.id on DR
	// (the table's by "", a partition's by its values), for the report;
	// neither is compared.
	WriteIDs string
	Stamps   map[string]string
}

// String is the state for the report: its partitions' files, its write
// IDs and its objects' stamps.
func (t soakTableState) String() string {
	var parts []string
	for _, p := range slices.Sorted(maps.Keys(t.Parts)) {
		parts = append(parts, fmt.Sprintf("%q: %v", p, t.Parts[p]))
	}
	s := "partitions {" + strings.Join(parts, ", ") + "}"
	if t.WriteIDs != "" {
		s += ", write IDs " + t.WriteIDs
	}
	return s + fmt.Sprintf(", stamps %v", t.Stamps)
}

// aheadOf reports whether files (DR's) are want (the source's) and, for
// the rest, files ahead (copied before the event that names them is
// applied: data before metadata).
func aheadOf(want, files []string, ahead func(f string) bool) bool {
	for _, f := range want {
		if !slices.Contains(files, f) {
			return false
		}
	}
	for _, f := range files {
		if !slices.Contains(want, f) && !ahead(f) {
			return false
		}
	}
	return true
}

// soakState is a database's tables' states, by lower-case table name.
type soakState map[string]soakTableState

// soakLeeway is what the checker accepts as DR's state at event N
// beside the source's state after N exactly, each as the design allows
// it (docs/design.md, guarantee 4), counted rather
// than reported. A nil function accepts nothing.
type soakLeeway struct {
	// ahead tells whether a file DR has in a non-transactional table's
	// partition is one the source had there after N: data before
	// metadata, copy daemons put an event's files in place before the
	// applier applies the event. Counted in early.
	ahead func(table, part, file string) bool
	// gone tells whether an object or file DR lacks is one the source
	// removed after N (file "" for a table or partition): it could not
	// be copied (gone from the source first), and the applier leaves out
	// what a later event removes. Counted in late.
	gone func(table, part, file string) bool
	// later tells whether a DR table's state (nil: the table is not on
	// DR) is the source's state of that table after a step past N: at
	// most one plan of the applier is past the database's repl.last.id
	// (a run of events on its tables, or a table's create, applied
	// object by object, the watermark written last: in flight, or cut
	// short by a kill and replayed at the restart), and each object is
	// at its own event's state. Counted in past.
	later func(table string, st *soakTableState) bool
	// partAt tells whether a partition DR holds that the source's state
	// after N lacks is, with files, the partition the source had after
	// its stamp (the event DR wrote it for, past N): one object of the
	// one plan past the watermark, at its own event's state. Counted in
	// past.
	partAt func(table, part string, stamp int64, files []string) bool
	// reborn tells whether a file DR reads in a transactional table's
	// partition is one a later incarnation of the table has there: the
	// source dropped the table after N and made it again at the same
	// path, copy daemons put the new incarnation's files in place before
	// the applier applies the drop (data before metadata), and its write
	// IDs, counted from 1 again, may be valid ones of the table DR still
	// holds. Counted in early.
	reborn func(table, part, file string) bool
	// wrote tells the write IDs a transactional table's partition was
	// written under in the source's states up to N (its own deltas and
	// an overwrite's base; a compactor's output is no write): a
	// compaction merged rows of those only, so DR reading the merged
	// directories needs those (nil: every valid write ID).
	wrote             func(table, part string) []int64
	early, late, past int
	// leaving tells whether the one plan past the watermark is a
	// transactional table's removal from its name: db's next event
	// after N drops it (or renames it away), a plan of its own. The
	// DR metastore renames a transactional table in one alter_table
	// call whose write-ID bookkeeping move (NEXT_WRITE_ID,
	// TXN_TO_WRITE_ID, on its own connection: Hive 4.0.1's
	// AcidEventListener.onRename, a transactional listener, on the
	// txnhandler pool) commits before the table's rename does, and the
	// applier drops such a table by renaming it to a scratch name
	// first (docs/acid.md). A reader between the two commits, or after
	// a metastore that died between them and before the applier's
	// retry of the event renames the table away, sees the table under
	// its name, its partitions as at N, with no write ID at all
	// (withoutWriteIDs). The source passes through the same state when
	// Hive drops a transactional table: drop_table's write-ID cleanup
	// (AcidEventListener.onDropTable) commits on the txnhandler pool
	// before the drop does. A read during the move may also find the
	// table's high-water mark with no open or aborted write ID
	// (tornWriteIDs). Counted in past.
	leaving func(table string) bool
	// laterLess tells whether a DR table's state is a later one's (see
	// later) less files the source removed after N: a bootstrap's
	// snapshot reads each table at its stamp, past the cut DR's
	// repl.last.id shows until the catch-up passes it, and a file it
	// listed that the source removed before it was copied (a compaction's
	// cleaner, a drop) cannot be on DR. Counted in past.
	laterLess func(table string, st soakTableState) bool
}

// diff describes how s (DR's) differs from want (the model's), "" when
// it does not, beside what lee accepts.
func (s soakState) diff(want soakState, lee *soakLeeway) string {
	accept := func(f func(table, part, file string) bool, n *int, table, part, file string) bool {
		if f != nil && f(table, part, file) {
			*n++
			return true
		}
		return false
	}
	var out []string
	for _, name := range unionKeysOf(s, want) {
		a, inDR := s[name]
		b, inModel := want[name]
		if lee.later != nil && !(inDR && inModel && a.equal(b)) {
			st := &a
			if !inDR {
				st = nil
			}
			if lee.later(name, st) || inDR && lee.laterLess != nil && lee.laterLess(name, a) {
				lee.past++
				continue
			}
		}
		switch {
		case !inModel:
			out = append(out, fmt.Sprintf("table %s on DR (%s), not in the source state", name, a))
			continue
		case !inDR:
			if !accept(lee.gone, &lee.late, name, "", "") {
				out = append(out, fmt.Sprintf("table %s missing on DR", name))
			}
			continue
		}
		if lee.leaving != nil && (a.withoutWriteIDs(b) || a.tornWriteIDs(b)) && lee.leaving(name) {
			lee.past++
			continue
		}
		if a.Valid != b.Valid {
			out = append(out, fmt.Sprintf("table %s: valid write IDs on DR %s (%s), source %s (%s)", name, a.Valid, a.WriteIDs, b.Valid, b.WriteIDs))
		}
		for _, p := range unionKeysOf(a.Parts, b.Parts) {
			fa, inDR := a.Parts[p]
			fb, inModel := b.Parts[p]
			switch {
			case !inModel:
				if st, err := strconv.ParseInt(a.Stamps[p], 10, 64); err == nil && lee.partAt != nil && lee.partAt(name, p, st, fa) {
					lee.past++
					continue
				}
				out = append(out, fmt.Sprintf("%s partition %q on DR (stamp %s; the table's %s; files %v), not in the source state", name, p, a.Stamps[p], a.Stamps[""], fa))
			case !inDR:
				if !accept(lee.gone, &lee.late, name, p, "") {
					out = append(out, fmt.Sprintf("%s partition %q missing on DR", name, p))
				}
			case !slices.Equal(fa, fb):
				drFiles, srcFiles := fa, fb
				fa = slices.DeleteFunc(slices.Clone(fa), func(f string) bool {
					switch {
					case slices.Contains(fb, f):
						return false
					case b.Valid == "":
						return accept(lee.ahead, &lee.early, name, p, f)
					}
					return accept(lee.reborn, &lee.early, name, p, f)
				})
				// What the source removed after N may be missing on DR.
				var goneFiles []string
				fb = slices.DeleteFunc(slices.Clone(fb), func(f string) bool {
					if !slices.Contains(fa, f) && accept(lee.gone, &lee.late, name, p, f) {
						goneFiles = append(goneFiles, f)
						return true
					}
					return false
				})
				var wrote []int64
				if b.Valid != "" {
					if lee.wrote != nil {
						wrote = lee.wrote(name, p)
					}
					// Whether DR's directories cover the output's rows is
					// asked of what DR holds as read (drFiles): a merged
					// delta another leeway took already (a later
					// incarnation's of the same name) still holds them.
					fa = slices.DeleteFunc(fa, func(f string) bool {
						if !slices.Contains(fb, f) && compactionLeftOut(f, drFiles, goneFiles, b.Valid, wrote) {
							lee.late++
							return true
						}
						return false
					})
				}
				if !slices.Equal(fa, fb) {
					out = append(out, filesDiff(name, p, drFiles, srcFiles, goneFiles, wrote, a, b))
				}
			}
		}
	}
	return strings.Join(out, "; ")
}

// filesDiff describes a partition whose files on DR (dr) are no state
// the source had (src, the model's files after N): both as read, the
// source's that the leeway took as removed after N (gone), and, when
// those are a compaction's output and DR reads the directories it merged,
// the valid write IDs the output held (of those the partition was written
// under, wrote; nil: every one) that no directory on DR holds: rows DR's
// readers miss.
func filesDiff(table, part string, dr, src, gone []string, wrote []int64, a, b soakTableState) string {
	s := fmt.Sprintf("%s partition %q: files on DR %v, source %v", table, part, dr, src)
	if len(gone) > 0 {
		s += fmt.Sprintf(" (of the source's, %v are gone from its later states)", gone)
	}
	if b.Valid == "" {
		return s
	}
	names := map[acid.Dir]string{}
	for _, f := range gone {
		top, _, _ := strings.Cut(f, "/")
		if d, ok := acid.ParseDir(top); ok {
			names[d] = top
		}
	}
	for _, g := range slices.Compact(compactorDirs(gone)) {
		lo := g.Min
		if g.Kind == acid.Base {
			lo = 1
		}
		if miss := uncovered(dr, g.Kind, lo, g.Max, b.Valid, wrote); len(miss) > 0 {
			s += fmt.Sprintf("; DR's directories lack valid write IDs %v that the gone %s held", miss, names[g])
		}
	}
	return s + fmt.Sprintf(" (write IDs on DR %s, source %s)", a.WriteIDs, b.WriteIDs)
}

// compactionLeftOut reports whether f, a file DR shows in a
// transactional table's partition (dr) that the source's state lacks, is
// one a compaction merged whose output the source removed after N
// (gone): the tailer or copyd found the output gone, the applier left the
// compaction out, and DR still reads the directories it merged. That is
// the same rows only when DR's directories cover every write ID the
// output held that valid (the source's valid write IDs, as ranges) names
// and the partition was written under (wrote; nil: all of them);
// otherwise rows are missing and f is not accepted.
func compactionLeftOut(f string, dr, gone []string, valid string, wrote []int64) bool {
	top, _, _ := strings.Cut(f, "/")
	d, ok := acid.ParseDir(top)
	if !ok {
		return false
	}
	for _, g := range compactorDirs(gone) {
		covers := g.Max >= d.Max && (g.Kind == acid.Base || (g.Kind == d.Kind && d.Min >= g.Min))
		if !covers {
			continue
		}
		lo := g.Min
		if g.Kind == acid.Base {
			lo = 1
		}
		if coveredBy(dr, g.Kind, lo, g.Max, valid, wrote) {
			return true
		}
	}
	return false
}

// compactorDirs are the directories among files (paths below a table or
// partition) a compactor wrote: a base with a compactor's metadata file,
// or a delta without a statement ID (the merged one of a minor
// compaction).
func compactorDirs(files []string) []acid.Dir {
	var out []acid.Dir
	for _, f := range files {
		top, rest, _ := strings.Cut(f, "/")
		d, ok := acid.ParseDir(top)
		switch {
		case !ok:
		case d.Kind == acid.Base && rest == acid.MetadataFile, d.Kind != acid.Base && d.Stmt < 0:
			out = append(out, d)
		}
	}
	return out
}

// coveredBy reports whether every write ID in lo..hi that valid names
// (and wrote, when not nil) is in a directory of files of kind (a base's
// rows are in bases and deltas).
func coveredBy(files []string, kind string, lo, hi int64, valid string, wrote []int64) bool {
	return len(uncovered(files, kind, lo, hi, valid, wrote)) == 0
}

// uncovered are the write IDs in lo..hi that valid names (and wrote, when
// not nil) that no directory of files of kind holds (coveredBy).
func uncovered(files []string, kind string, lo, hi int64, valid string, wrote []int64) []int64 {
	var dirs []acid.Dir
	for _, f := range files {
		top, _, _ := strings.Cut(f, "/")
		if d, ok := acid.ParseDir(top); ok && (d.Kind == kind || kind == acid.Base && d.Kind != acid.DeleteDelta) {
			dirs = append(dirs, d)
		}
	}
	var miss []int64
	for id := lo; id <= hi; id++ {
		if !inRanges(valid, id) || wrote != nil && !slices.Contains(wrote, id) {
			continue
		}
		if !slices.ContainsFunc(dirs, func(d acid.Dir) bool { return d.Min <= id && id <= d.Max }) {
			miss = append(miss, id)
		}
	}
	return miss
}

// inRanges reports whether id is in ranges as validRanges spells them.
func inRanges(ranges string, id int64) bool {
	for _, r := range strings.Split(ranges, ",") {
		a, b, ok := strings.Cut(r, "-")
		if !ok {
			b = a
		}
		lo, err1 := strconv.ParseInt(a, 10, 64)
		hi, err2 := strconv.ParseInt(b, 10, 64)
		if err1 == nil && err2 == nil && lo <= id && id <= hi {
			return true
		}
	}
	return false
}

// equal reports whether two states of a table are the same.
func (t soakTableState) equal(u soakTableState) bool {
	return t.Valid == u.Valid && maps.EqualFunc(t.Parts, u.Parts, func(a, b []string) bool { return slices.Equal(a, b) })
}

// withoutWriteIDs reports whether t (DR's state of a transactional
// table) is u (the source's, with valid write IDs) with no write-ID state
// under its name at all: no write ID ever allocated as a reader sees it
// (high-water mark 0, none open or aborted), so no file visible, in
// exactly u's partitions, or in none when u has some (the table read
// before its rename committed, its partitions after: the metastore lists
// none under a name no table has).
func (t soakTableState) withoutWriteIDs(u soakTableState) bool {
	if u.Valid == "" || u.Valid == "none" || t.Valid != "none" || t.WriteIDs != (acid.WriteIDs{}).String() ||
		len(t.Parts) != 0 && len(t.Parts) != len(u.Parts) {
		return false
	}
	for p, files := range t.Parts {
		if _, ok := u.Parts[p]; !ok || len(files) > 0 {
			return false
		}
	}
	return true
}

// tornWriteIDs reports whether t (DR's state of a transactional table)
// is u read while the DR metastore moves the table's write-ID bookkeeping
// away with a rename: Hive 4.0.1's get_valid_write_ids reads the
// high-water mark and then, in a statement of its own, the write IDs
// below it that are open or aborted, so a move between the two leaves
// the mark with none of them (seen on the stack: 2 reads in 3,000 made
// while the table was renamed back and forth 82 times). Every write ID up
// to u's mark then reads valid; no file of an open or aborted write is
// ever on DR, so a reader still sees u's files: t holds u's partitions
// with u's files, or none (listed after the rename committed).
func (t soakTableState) tornWriteIDs(u soakTableState) bool {
	var hwm int64
	if _, err := fmt.Sscanf(u.WriteIDs, "hwm=%d", &hwm); err != nil || hwm <= 0 || u.WriteIDs == t.WriteIDs ||
		t.WriteIDs != (acid.WriteIDs{HighWaterMark: hwm}).String() ||
		len(t.Parts) != 0 && len(t.Parts) != len(u.Parts) {
		return false
	}
	for p, files := range t.Parts {
		if want, ok := u.Parts[p]; !ok || !slices.Equal(files, want) {
			return false
		}
	}
	return true
}

// partOf reports whether t is u part way through being made: the same
// valid write IDs, and each of t's partitions one of u's with the same
// files (a run of events that creates a table and adds its partitions is
// applied object by object).
func (t soakTableState) partOf(u soakTableState) bool {
	return t.partOfAhead(u, func(string, string) bool { return false })
}

// partOfAhead is partOf, but for t's files beyond u's that ahead accepts.
func (t soakTableState) partOfAhead(u soakTableState, ahead func(part, file string) bool) bool {
	if t.Valid != u.Valid {
		return false
	}
	for p, files := range t.Parts {
		want, ok := u.Parts[p]
		if !ok || !aheadOf(want, files, func(f string) bool { return ahead(p, f) }) {
			return false
		}
	}
	return true
}

func unionKeysOf[V any](a, b map[string]V) []string {
	keys := slices.Collect(maps.Keys(a))
	for k := range b {
		if _, ok := a[k]; !ok {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	return keys
}

// scratchPrefix starts the name the applier gives a DR transactional
// table it drops (docs/acid.md).
const scratchPrefix = "hivedr_dropped_"

// acidClient is what a reader of transactional tables announces.
var acidClient = &hive_metastore.ClientCapabilities{Values: []hive_metastore.ClientCapability{hive_metastore.ClientCapability_INSERT_ONLY_TABLES}}

// captureSoakTables reads the state of the tables of db named (all of
// them when names is nil) from a metastore and its files. A table not
// there is left out.
func captureSoakTables(ctx context.Context, c *hms.Client, files wl.Files, db string, names []string) (soakState, error) {
	return captureTables(ctx, c, files, db, names, false)
}

// errTornRead is a table that changed while it was read (see
// captureTables).
var errTornRead = errors.New("a table changed while it was read")

// captureTables is captureSoakTables; with whole, each table is read
// again after its files were listed, and a table that is not the same
// one any more (its ID, its stamp, its valid write IDs) fails the read
// with errTornRead: the applier replaced it in between (a drop and a
// re-creation in one plan past repl.last.id, which the watermark guard
// does not see), and the old table's write IDs with the new one's files
// are no state DR ever held.
func captureTables(ctx context.Context, c *hms.Client, files wl.Files, db string, names []string, whole bool) (soakState, error) {
	if names == nil {
		all, err := c.GetAllTables(ctx, db)
		if err != nil {
			return nil, fmt.Errorf("tables of %s: %w", db, err)
		}
		names = all
	}
	out := soakState{}
	for _, name := range names {
		if strings.HasPrefix(strings.ToLower(name), scratchPrefix) {
			continue // the applier's name for a DR table it is dropping; the final comparison counts one left
		}
		res, err := c.GetTableReq(ctx, &hive_metastore.GetTableRequest{DbName: db, TblName: name, Capabilities: acidClient})
		if err != nil {
			if isNoSuchObject(err) {
				continue
			}
			return nil, fmt.Errorf("table %s.%s: %w", db, name, err)
		}
		t := res.Table
		st := soakTableState{Parts: map[string][]string{}, Stamps: map[string]string{"": t.Parameters[drparam.LastID]}}
		var w *wl.WriteIDs
		if acid.Transactional(t.Parameters) {
			full := strings.ToLower(db + "." + t.TableName)
			ws, err := wl.ValidWriteIDs(ctx, c, []string{full})
			if err != nil {
				return nil, err
			}
			v := ws[full]
			w = &v
			st.Valid, st.WriteIDs = validRanges(v), v.String()
		}
		dirs := map[string]string{}
		if len(t.PartitionKeys) == 0 {
			dirs[""] = t.Sd.Location
		} else {
			parts, err := c.GetPartitions(ctx, db, t.TableName, -1)
			if err != nil {
				if isNoSuchObject(err) {
					continue
				}
				return nil, fmt.Errorf("partitions of %s.%s: %w", db, name, err)
			}
			for _, p := range parts {
				dirs[strings.Join(p.Values, "/")] = p.Sd.Location
				st.Stamps[strings.Join(p.Values, "/")] = p.Parameters[drparam.LastID]
			}
		}
		for key, dir := range dirs {
			names, err := soakFileNames(ctx, files, dir, w)
			if err != nil {
				return nil, fmt.Errorf("files of %s.%s %q: %w", db, name, key, err)
			}
			st.Parts[key] = names
		}
		if whole {
			again, err := c.GetTableReq(ctx, &hive_metastore.GetTableRequest{DbName: db, TblName: name, Capabilities: acidClient})
			if err != nil && !isNoSuchObject(err) {
				return nil, fmt.Errorf("table %s.%s: %w", db, name, err)
			}
			same := err == nil && again.Table.GetID() == t.GetID() && again.Table.Parameters[drparam.LastID] == t.Parameters[drparam.LastID]
			if same && w != nil {
				full := strings.ToLower(db + "." + t.TableName)
				ws, err := wl.ValidWriteIDs(ctx, c, []string{full})
				if err != nil {
					return nil, err
				}
				same = validRanges(ws[full]) == st.Valid
			}
			if !same {
				return nil, fmt.Errorf("%s.%s: %w", db, name, errTornRead)
			}
		}
		out[strings.ToLower(t.TableName)] = st
	}
	return out, nil
}

// validRanges spells the write IDs a reader of w sees as valid, as
// ranges ("1-3,5"; "none"): two metastores may tell the same state with
// different high-water marks (one counting a trailing open write ID, one
// not).
func validRanges(w wl.WriteIDs) string {
	var out []string
	for id := int64(1); id <= w.HighWaterMark; id++ {
		if !w.Valid(id) {
			continue
		}
		hi := id
		for hi+1 <= w.HighWaterMark && w.Valid(hi+1) {
			hi++
		}
		if hi == id {
			out = append(out, fmt.Sprint(id))
		} else {
			out = append(out, fmt.Sprintf("%d-%d", id, hi))
		}
		id = hi
	}
	if len(out) == 0 {
		return "none"
	}
	return strings.Join(out, ",")
}

// soakFileNames lists the data files under dir by their path below it,
// sorted, leaving out hidden and staging files; with write-ID state w
// (a transactional table) only those a reader of w sees, their
// directories named as DR names them.
func soakFileNames(ctx context.Context, files wl.Files, dir string, w *wl.WriteIDs) ([]string, error) {
	dir = strings.TrimSuffix(dir, "/")
	var rels []string
	err := files.Walk(ctx, dir, func(loc string, _ int64) error {
		rel, ok := location.Below(dir, loc)
		if !ok || fs.IsStagingName(path.Base(rel)) || (location.Hidden(rel) && (w == nil || !acid.IsMetadata(rel))) {
			return nil
		}
		rels = append(rels, rel)
		return nil
	})
	if errors.Is(err, fs.ErrNotExist) {
		return []string{}, nil
	}
	if err != nil {
		return nil, err
	}
	if w != nil {
		byDir := map[string][]string{}
		for _, rel := range rels {
			if top, _, nested := strings.Cut(rel, "/"); nested {
				byDir[top] = append(byDir[top], rel)
			}
		}
		var seen []string
		for _, top := range acid.VisibleIn(slices.Collect(maps.Keys(byDir)), *w, acid.View{Compacted: acid.Compacted(rels)}) {
			for _, rel := range byDir[top] {
				_, rest, _ := strings.Cut(rel, "/")
				seen = append(seen, acid.ReplicaName(top)+"/"+rest)
			}
		}
		rels = seen
	}
	sort.Strings(rels)
	return append([]string{}, rels...), nil
}

func isNoSuchObject(err error) bool {
	var nso *hive_metastore.NoSuchObjectException
	return errors.As(err, &nso) || strings.Contains(err.Error(), "NoSuchObjectException")
}

// soakStep is one workload step as the model recorded it.
type soakStep struct {
	n        int
	db, what string
	// before is the source's log head before the step; last the highest
	// of its events for its database (before when it made none); after
	// the head after it.
	before, last, after int64
	done                bool
	state               soakState // the database's state after the step
	absent              []string  // tables (lower case) it removed and made again
	renamed             [2]string // a table's old and new name (lower case), when it renamed one
	replaced            [2]string // the table (lower case) and partition an INSERT OVERWRITE of it replaced
}

func (s *soakStep) String() string {
	if !s.done {
		return fmt.Sprintf("step %d %s: %s (after event %d, unfinished)", s.n, s.db, s.what, s.before)
	}
	return fmt.Sprintf("step %d %s: %s (events %d..%d, its database's last %d)", s.n, s.db, s.what, s.before+1, s.after, s.last)
}

// soakModel is the workload's record of the source: by database, the
// steps in order.
type soakModel struct {
	mu    sync.Mutex
	steps map[string][]*soakStep
	all   []*soakStep
}

func newSoakModel() *soakModel { return &soakModel{steps: map[string][]*soakStep{}} }

// begin records that a step on db starts after source event before.
func (m *soakModel) begin(db, what string, before int64) *soakStep {
	m.mu.Lock()
	defer m.mu.Unlock()
	s := &soakStep{n: len(m.all) + 1, db: db, what: what, before: before, last: before}
	m.steps[db] = append(m.steps[db], s)
	m.all = append(m.all, s)
	return s
}

// finish records the step's end: its events and the state after it.
// touched are the tables it may have changed; the others keep the state
// of the database's previous step.
func (m *soakModel) finish(s *soakStep, res soakStepResult, last, after int64, touched soakState, names []string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	st := soakState{}
	steps := m.steps[s.db]
	if i := slices.Index(steps, s); i > 0 {
		maps.Copy(st, steps[i-1].state)
	}
	for _, n := range names {
		delete(st, strings.ToLower(n))
	}
	maps.Copy(st, touched)
	for _, n := range res.absent {
		s.absent = append(s.absent, strings.ToLower(n))
	}
	if res.renamed[0] != "" {
		s.renamed = [2]string{strings.ToLower(res.renamed[0]), strings.ToLower(res.renamed[1])}
	}
	if res.replaced[0] != "" {
		s.replaced = [2]string{strings.ToLower(res.replaced[0]), res.replaced[1]}
	}
	s.what, s.last, s.after, s.state, s.done = res.what, last, after, st, true
}

// previous is the state after db's last finished step.
func (m *soakModel) previous(db string) soakState {
	m.mu.Lock()
	defer m.mu.Unlock()
	steps := m.steps[db]
	for i := len(steps) - 1; i >= 0; i-- {
		if steps[i].done {
			return steps[i].state
		}
	}
	return soakState{}
}

// at is the state of db after source event n, and the step that made
// it; ok is false when n falls inside a step (DR may hold part of it) or
// before the database's first step.
func (m *soakModel) at(db string, n int64) (soakState, *soakStep, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.atLocked(db, n)
}

// atLocked is at, the lock held by the caller.
func (m *soakModel) atLocked(db string, n int64) (soakState, *soakStep, bool) {
	steps := m.steps[db]
	i := sort.Search(len(steps), func(i int) bool { return steps[i].before >= n }) - 1
	if i < 0 {
		return nil, nil, false
	}
	s := steps[i]
	if !s.done || n < s.last {
		return nil, s, false
	}
	return s.state, s, true
}

// later reports whether a state of db the model recorded after event n
// has file in table's partition part, following the table's renames.
func (m *soakModel) later(db string, n int64, table, part, file string) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.laterLocked(db, n, table, part, file)
}

// laterLocked is later with m.mu held.
func (m *soakModel) laterLocked(db string, n int64, table, part, file string) bool {
	// The table by every name it has after n: the workload's plain
	// tables are external, and a renamed one keeps its directory, where
	// the copies of its later events land under the new name's events.
	names := []string{table}
	for _, s := range m.steps[db] {
		if !s.done || s.before < n {
			continue
		}
		for _, name := range names {
			if slices.Contains(s.state[name].Parts[part], file) {
				return true
			}
		}
		if s.renamed[0] != "" && slices.Contains(names, s.renamed[0]) && !slices.Contains(names, s.renamed[1]) {
			names = append(names, s.renamed[1])
		}
	}
	return false
}

// removedLater reports whether a state of db the model recorded after
// event n lacks table's partition part (part "" and file "": the table;
// file "": the partition) or its file, or a step after n overwrote the
// partition.
func (m *soakModel) removedLater(db string, n int64, table, part, file string) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	// A partition whose files after n are all gone from it in a later
	// state was replaced as a whole (an INSERT OVERWRITE): the applier
	// leaves out an event of it whose files could not be copied.
	var had []string
	if part != "" && file == "" {
		if at, _, ok := m.atLocked(db, n); ok {
			had = at[table].Parts[part]
		}
	}
	for _, s := range m.steps[db] {
		if !s.done || s.before < n {
			continue
		}
		t, ok := s.state[table]
		if !ok {
			return true
		}
		if part == "" && file == "" {
			continue
		}
		if s.replaced == [2]string{table, part} {
			// An INSERT OVERWRITE replaced the partition's files (maybe
			// under the same names).
			return true
		}
		files, ok := t.Parts[part]
		if !ok || (file != "" && !slices.Contains(files, file)) {
			return true
		}
		if len(had) > 0 && !slices.ContainsFunc(had, func(f string) bool { return slices.Contains(files, f) }) {
			return true
		}
	}
	return false
}

// wroteIDs are the write IDs table's partition part (in db) was written
// under in the model's states up to event n, since the table was last
// made anew: its deltas of one write (delta_N_N_SSSS) and a base without
// a compactor's metadata file (an INSERT OVERWRITE's); a compactor's
// output merges those.
func (m *soakModel) wroteIDs(db string, n int64, table, part string) []int64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	var ids []int64
	for _, s := range m.steps[db] {
		if !s.done || s.last > n {
			break
		}
		if slices.Contains(s.absent, table) {
			ids = nil
		}
		files := s.state[table].Parts[part]
		compactor := compactorDirs(files)
		for _, f := range files {
			top, _, _ := strings.Cut(f, "/")
			d, ok := acid.ParseDir(top)
			if !ok || slices.ContainsFunc(compactor, func(c acid.Dir) bool { return c == d }) {
				continue
			}
			for id := max(d.Min, 1); id <= d.Max; id++ {
				if d.Kind != acid.Base || id == d.Max {
					ids = append(ids, id)
				}
			}
		}
	}
	slices.Sort(ids)
	return slices.Compact(ids)
}

// reborn reports whether a state of db the model recorded after event n,
// at or after a step that made table anew (dropped and created again at
// its path), has file in table's partition part: a file of a later
// incarnation of the table.
func (m *soakModel) reborn(db string, n int64, table, part, file string) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	anew := false
	for _, s := range m.steps[db] {
		if !s.done || s.before < n {
			continue
		}
		anew = anew || slices.Contains(s.absent, table)
		if anew && slices.Contains(s.state[table].Parts[part], file) {
			return true
		}
	}
	return false
}

// partAtStamp reports whether files, DR's in table's partition part
// stamped with event stamp past n, are the partition as the source had
// it after stamp, with the leeways a state at stamp has: files of later
// events already copied (later), and files the source removed after
// stamp missing (removedLater: a run past the watermark adds the
// partition without a file a later event removes or replaces).
func (m *soakModel) partAtStamp(db string, n int64, table, part string, stamp int64, files []string) bool {
	if stamp <= n {
		return false
	}
	at, _, ok := m.at(db, stamp)
	if !ok {
		return false
	}
	want, ok := at[table].Parts[part]
	if !ok {
		return false
	}
	want = slices.DeleteFunc(slices.Clone(want), func(f string) bool {
		return !slices.Contains(files, f) && m.removedLater(db, stamp, table, part, f)
	})
	return aheadOf(want, files, func(f string) bool { return m.later(db, stamp, table, part, f) })
}

// tableLater reports whether a state of db the model recorded after
// event n has table in state st, or st part way to it (partOf) (nil:
// without the table, also between the events of a step that removed it
// and made it again).
func (m *soakModel) tableLater(db string, n int64, table string, st *soakTableState) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, s := range m.steps[db] {
		if !s.done || s.before < n {
			continue
		}
		if st == nil && slices.Contains(s.absent, table) {
			return true
		}
		t, ok := s.state[table]
		if st == nil && !ok || st != nil && ok && st.partOf(t) {
			return true
		}
		// A plain table's files beyond that state's, each one a later
		// state has there: data ahead of metadata, or a stale file of a
		// name a later event writes, which the applier's prune keeps for
		// that event's copy (keepLaterCopies).
		if st != nil && ok && st.Valid == "" && st.partOfAhead(t, func(part, f string) bool { return m.laterLocked(db, n, table, part, f) }) {
			return true
		}
	}
	return false
}

// laterLess reports whether st is table's state in a state of db the
// model recorded after event n with the same valid write IDs, less files
// (or partitions) the source removed after n: DR holds no file the
// later state lacks, and every one of its files DR lacks is gone from
// the source since (removedLater).
func (m *soakModel) laterLess(db string, n int64, table string, st soakTableState) bool {
	m.mu.Lock()
	var cands []soakTableState
	for _, s := range m.steps[db] {
		if !s.done || s.before < n {
			continue
		}
		if t, ok := s.state[table]; ok && t.Valid == st.Valid {
			cands = append(cands, t)
		}
	}
	m.mu.Unlock()
	for _, t := range cands {
		if m.lessGone(db, n, table, st, t) {
			return true
		}
	}
	return false
}

// lessGone reports whether DR's table dr is t less what the source
// removed after n.
func (m *soakModel) lessGone(db string, n int64, table string, dr, t soakTableState) bool {
	for _, p := range unionKeysOf(dr.Parts, t.Parts) {
		df, inDR := dr.Parts[p]
		sf, inState := t.Parts[p]
		switch {
		case !inState:
			return false
		case !inDR:
			if !m.removedLater(db, n, table, p, "") {
				return false
			}
			continue
		}
		for _, f := range df {
			if !slices.Contains(sf, f) {
				return false
			}
		}
		for _, f := range sf {
			if !slices.Contains(df, f) && !m.removedLater(db, n, table, p, f) {
				return false
			}
		}
	}
	return true
}

// leavesName reports whether db's first step with events after event n
// removes table from its name (drops it, drops it and makes it again, or
// renames it away). The workload's steps do that with their first
// event, and a drop or a rename is a plan of its own on DR, so DR at
// repl.last.id n is then applying exactly that removal.
func (m *soakModel) leavesName(db string, n int64, table string) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, s := range m.steps[db] {
		switch {
		case s.before < n:
			continue
		case !s.done:
			return false // its events are not known yet
		case s.last == s.before:
			continue // no event of db
		}
		_, kept := s.state[table]
		return !kept || slices.Contains(s.absent, table) || s.renamed[0] == table
	}
	return false
}

// history is the workload's steps up to and including step upTo, the last
// limit of them.
func (m *soakModel) history(upTo, limit int) []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []string
	for _, s := range m.all[max(0, min(upTo, len(m.all))-limit):min(upTo, len(m.all))] {
		out = append(out, s.String())
	}
	return out
}

// stepLast is the highest event in (before, after] of the source's log
// that concerns db: one naming it, or a transaction's commit or abort
// (the step's own: the workload alone writes the source).
func stepLast(ctx context.Context, c *hms.Client, db string, before, after int64) (int64, error) {
	last := before
	for from := before; from < after; {
		n := int32(min(after-from, 500))
		resp, err := c.GetNextNotification(ctx, &hive_metastore.NotificationEventRequest{LastEvent: from, MaxEvents: &n})
		if err != nil {
			return 0, fmt.Errorf("notifications after %d: %w", from, err)
		}
		if len(resp.Events) == 0 {
			break
		}
		for _, e := range resp.Events {
			if e.EventId > after {
				return last, nil
			}
			if strings.EqualFold(e.GetDbName(), db) || e.EventType == "COMMIT_TXN" || e.EventType == "ABORT_TXN" {
				last = e.EventId
			}
			from = e.EventId
		}
	}
	return last, nil
}

// soakChecker samples DR's databases while the soak runs and judges each
// sample against the model.
type soakChecker struct {
	dr      *hms.Client // its own connection, dialed again after an error
	drAddr  string
	drFS    wl.Files
	model   *soakModel
	rng     *rand.Rand
	mu      sync.Mutex
	skip    map[string]bool // databases no longer judged (failed over)
	sampled int             // samples read with repl.last.id unmoved
	judged  int             // of those, at a step boundary of the model
	early   int             // files of external tables seen copied ahead of their event
	late    int             // objects and files missing on DR that the source removed after the sample's event
	ahead   int             // tables seen at a later state than the sample's event (the plan past the watermark)
	wrong   []string        // the failures, with their history
	seen    map[string]int  // how often each failure was seen (by database, N and difference)
}

// exclude stops judging db.
func (c *soakChecker) exclude(db string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.skip[db] = true
}

func (c *soakChecker) counts() (sampled, judged, early, late, ahead, wrongSamples int, wrong []string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, n := range c.seen {
		wrongSamples += n
	}
	return c.sampled, c.judged, c.early, c.late, c.ahead, wrongSamples, slices.Clone(c.wrong)
}

// lastID reads db's repl.last.id on DR; ok is false when the database is
// not there, has none, or a bootstrap is being applied to it.
func (c *soakChecker) lastID(ctx context.Context, db string) (int64, bool, error) {
	d, err := c.dr.GetDatabase(ctx, db)
	if err != nil {
		if isNoSuchObject(err) {
			return 0, false, nil
		}
		return 0, false, err
	}
	p := d.Parameters
	n, err := strconv.ParseInt(p[drparam.LastID], 10, 64)
	if err != nil || p[drparam.BootstrapID] != "" || p[drparam.Halted] != "" {
		return 0, false, nil
	}
	return n, true, nil
}

// sample reads one database's DR state and judges it; an error is DR's
// metastore or files not answering (the chaos restarts them).
func (c *soakChecker) sample(ctx context.Context, dbs []string) error {
	db := dbs[c.rng.IntN(len(dbs))]
	c.mu.Lock()
	skip := c.skip[db]
	c.mu.Unlock()
	if skip {
		return nil
	}
	n1, ok, err := c.lastID(ctx, db)
	if err != nil || !ok {
		return err
	}
	st, err := captureTables(ctx, c.dr, c.drFS, db, nil, true)
	if err != nil {
		return err
	}
	n2, ok, err := c.lastID(ctx, db)
	if err != nil || !ok || n2 != n1 {
		return err
	}
	want, step, ok := c.model.at(db, n1)
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.skip[db] {
		return nil
	}
	c.sampled++
	if !ok {
		return nil
	}
	c.judged++
	lee := soakLeeway{
		ahead: func(table, part, file string) bool { return c.model.later(db, n1, table, part, file) },
		gone:  func(table, part, file string) bool { return c.model.removedLater(db, n1, table, part, file) },
		later: func(table string, st *soakTableState) bool { return c.model.tableLater(db, n1, table, st) },
		wrote: func(table, part string) []int64 { return c.model.wroteIDs(db, n1, table, part) },
		partAt: func(table, part string, stamp int64, files []string) bool {
			return c.model.partAtStamp(db, n1, table, part, stamp, files)
		},
		reborn:  func(table, part, file string) bool { return c.model.reborn(db, n1, table, part, file) },
		leaving: func(table string) bool { return c.model.leavesName(db, n1, table) },
		laterLess: func(table string, st soakTableState) bool {
			return c.model.laterLess(db, n1, table, st)
		},
	}
	d := st.diff(want, &lee)
	c.early += lee.early
	c.late += lee.late
	c.ahead += lee.past
	if d != "" {
		key := fmt.Sprintf("%s %d %s", db, n1, d)
		if c.seen[key]++; c.seen[key] > 1 {
			return nil // the same wrong state, sampled again
		}
		c.wrong = append(c.wrong, fmt.Sprintf("DR %s at repl.last.id %d is no state the source had (the source after %s): %s\n      history:\n        %s",
			db, n1, step, d, strings.Join(c.model.history(step.n+1, 12), "\n        ")))
	}
	return nil
}

// run samples until ctx ends, pacing itself.
func (c *soakChecker) run(ctx context.Context, dbs []string, errs func(error)) {
	for ctx.Err() == nil {
		if err := c.sample(ctx, dbs); err != nil && ctx.Err() == nil {
			errs(err)
			// The metastore may have restarted: a connection that failed
			// mid-call is not used again.
			if d, err := hms.Dial(ctx, c.drAddr, hms.Options{}); err == nil {
				c.dr.Close()
				c.dr = d
			}
		}
		select {
		case <-ctx.Done():
		case <-time.After(300 * time.Millisecond): // pacing, on a shared machine
		}
	}
}

// soakDiffs compares databases dbs of a source and its replica: every
// difference wl.Compare finds, except in the files of transactional
// tables, which are compared as a reader sees them (the files of the
// valid write IDs, by name) with the write IDs themselves, as the
// checker compares them.
func soakDiffs(ctx context.Context, src, dr *hms.Client, srcFS, drFS wl.Files, dbs []string, mapLocation func(string) (string, error)) ([]string, error) {
	diffs, err := wl.Compare(ctx, src, dr, srcFS, drFS, dbs, mapLocation)
	if err != nil {
		return nil, err
	}
	var out []string
	transactional := map[string]bool{}
	for _, db := range dbs {
		a, err := captureSoakTables(ctx, src, srcFS, db, nil)
		if err != nil {
			return nil, fmt.Errorf("source: %w", err)
		}
		b, err := captureSoakTables(ctx, dr, drFS, db, nil)
		if err != nil {
			return nil, fmt.Errorf("DR: %w", err)
		}
		if d := b.diff(a, &soakLeeway{}); d != "" {
			out = append(out, db+": "+d)
		}
		for name, st := range a {
			if st.Valid != "" {
				transactional[db+"."+name] = true
			}
		}
	}
	for _, d := range diffs {
		table, _, _ := strings.Cut(d.Object, " ")
		if transactional[table] && strings.Contains(d.Object, " file ") {
			continue
		}
		out = append(out, d.String())
	}
	return out, nil
}
