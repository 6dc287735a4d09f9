// Package acid knows the layout and the write-ID state of Hive's
// transactional (ACID) tables, as the applier, `hivedr verify` and the
// e2e workload need them: the names of the base_N and delta_A_B
// directories writes leave under a table or partition directory, a
// table's write-ID state as get_valid_write_ids gives it, and which of
// those directories a reader with that state reads.
package acid

import (
	"cmp"
	"context"
	"fmt"
	"math"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/beltran/gohive/hive_metastore"
)

// The kinds of ACID directory.
const (
	Base        = "base"
	Delta       = "delta"
	DeleteDelta = "delete_delta"
)

// Dir is the name of an ACID directory, parsed: base_N (a compactor's
// base_N_vT), delta_A_B[_S] (delta_A_B[_S]_vT) or delete_delta_A_B[...].
type Dir struct {
	Kind string
	// Min and Max are the write IDs it covers; a base's Min is 0.
	Min, Max int64
	// Stmt is a delta's statement ID, -1 when its name has none.
	Stmt int64
	// Visibility is the T of a compactor's _vT suffix: the directory
	// exists for a reader only once transaction T is committed in its
	// view. 0 when the name has none.
	Visibility int64
}

var dirName = regexp.MustCompile(`^(base|delta|delete_delta)_(\d+)(?:_(\d+))?(?:_(\d+))?(?:_v(\d+))?$`)

// ParseDir parses an ACID directory's name; ok is false for any other.
func ParseDir(name string) (d Dir, ok bool) {
	m := dirName.FindStringSubmatch(name)
	if m == nil {
		return Dir{}, false
	}
	num := func(s string) int64 {
		if s == "" {
			return -1
		}
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			ok = false
		}
		return n
	}
	ok = true
	lo, hi, stmt, vis := num(m[2]), num(m[3]), num(m[4]), num(m[5])
	if !ok {
		return Dir{}, false
	}
	d = Dir{Kind: m[1], Min: lo, Max: hi, Stmt: stmt, Visibility: max(vis, 0)}
	if d.Kind == Base {
		if hi >= 0 || stmt >= 0 {
			return Dir{}, false
		}
		d.Min, d.Max, d.Stmt = 0, lo, -1
		return d, true
	}
	if hi < 0 {
		return Dir{}, false
	}
	return d, true
}

func (d Dir) String() string {
	return fmt.Sprintf("{%s %d %d}", d.Kind, d.Min, d.Max)
}

// ReplicaName is the name a directory of a source table gets on DR: its
// name without a compactor's visibility suffix. The suffix names a
// transaction of the source, which means nothing to the DR metastore (a
// DR reader would see the directory or not by whatever DR transaction
// has that number); without it the directory's write IDs alone decide,
// and the compactor's _metadata_acid file in it (copied with it) marks
// a base as compacted, as Hive's readers check.
func ReplicaName(name string) string {
	d, ok := ParseDir(name)
	if !ok || d.Visibility == 0 {
		return name
	}
	return name[:strings.LastIndex(name, "_v")]
}

// ReplicaPath is path (a location) with every compactor directory in it
// named by its ReplicaName: where a file copied from the source as it is
// (a bootstrap's) lies on DR.
func ReplicaPath(path string) string {
	if !strings.Contains(path, "_v") {
		return path
	}
	segs := strings.Split(path, "/")
	for i, s := range segs {
		segs[i] = ReplicaName(s)
	}
	return strings.Join(segs, "/")
}

// StagingName is the hidden name under which the directory name a
// compactor wrote is copied to DR before it is published (renamed to its
// ReplicaName in one step): Hive's readers skip names starting with a dot,
// so no reader sees a compaction's output half copied.
func StagingName(name string) string { return ".hivedr-compacted." + name }

// CompactionTarget is where a file of a compaction's directory dir (its
// name, e.g. base_0000005_v0000123) is copied on DR, mapped being the
// file's DR path: under the directory's hidden staging name, from which
// the applier publishes it whole once every file is there (StagingName).
// mapped is returned as it is when it has no dir segment.
func CompactionTarget(mapped, dir string) string {
	seg := "/" + dir + "/"
	i := strings.LastIndex(mapped, seg)
	if dir == "" || i < 0 {
		return mapped
	}
	return mapped[:i] + "/" + StagingName(dir) + "/" + mapped[i+len(seg):]
}

// CopyTargets are the DR paths a copy task of a file may name, mapped
// being the file's DR path (its source path through the path mappings)
// and subdir the task's directory within its object: the file's DR path
// itself, under the name a replicated compaction gives a compactor's
// directory (ReplicaPath), or under a compaction's staging name
// (CompactionTarget). The tailer makes its tasks' targets so, and copyd
// refuses a task whose target is none of them.
func CopyTargets(mapped, subdir string) []string {
	return []string{mapped, ReplicaPath(mapped), CompactionTarget(mapped, subdir)}
}

// MetadataFile is the file a compactor leaves in the directories it
// writes, saying what they hold; a base with it is a compacted one, read
// as soon as every write ID up to it is decided.
const MetadataFile = "_metadata_acid"

// IsMetadata reports whether rel, a path below a table or partition
// directory, is the MetadataFile of an ACID directory there: hidden, yet
// part of what a reader reads (it tells a compacted base from an
// overwrite's), so listings that skip hidden names keep it.
func IsMetadata(rel string) bool {
	dir, name, ok := strings.Cut(rel, "/")
	return ok && name == MetadataFile && IsDir(dir)
}

// Compacted returns, for the paths below one table or partition directory
// (rel), a Compacted predicate for View: the directories holding a
// MetadataFile.
func Compacted(rels []string) func(name string) bool {
	set := map[string]bool{}
	for _, rel := range rels {
		if IsMetadata(rel) {
			dir, _, _ := strings.Cut(rel, "/")
			set[dir] = true
		}
	}
	return func(name string) bool { return set[name] }
}

// Obsolete reports whether the ACID directory name is covered by a base
// of write ID base (and is not that base itself): a delta whose write IDs
// all lie at or below it, or an older base.
func Obsolete(name string, base int64) bool {
	d, ok := ParseDir(name)
	switch {
	case !ok:
		return false
	case d.Kind == Base:
		return d.Max < base
	}
	return d.Max <= base
}

// ObsoleteAfter reports whether the ACID directory name is made obsolete
// by a directory a compaction wrote, by: for a base, what Obsolete says;
// for a delta (a minor compaction's), a delta of the same kind whose
// write IDs lie within by's and that is not by itself. Visibility
// suffixes are ignored: a directory is compared by its replica name.
func ObsoleteAfter(name string, by Dir) bool {
	d, ok := ParseDir(name)
	if !ok {
		return false
	}
	if by.Kind == Base {
		return Obsolete(name, by.Max)
	}
	if d.Kind != by.Kind || d.Min < by.Min || d.Max > by.Max {
		return false
	}
	return d.Min != by.Min || d.Max != by.Max || d.Stmt >= 0
}

// WriteIDs is a table's write-ID state as get_valid_write_ids tells it,
// in a form two metastores' answers compare by: the high-water mark and
// the open and the aborted write IDs below it, sorted.
type WriteIDs struct {
	HighWaterMark int64
	Open, Aborted []int64
}

func (w WriteIDs) String() string {
	return fmt.Sprintf("hwm=%d open=%v aborted=%v", w.HighWaterMark, w.Open, w.Aborted)
}

// WithAllocated is w, read with get_valid_write_ids, made whole with the
// highest write ID allocated under the table's name (maxAllocated, from
// get_max_allocated_table_write_id, read before w). When no row of the
// table is a committed transaction's, the metastore reports the lowest
// invalid write ID as the high-water mark and only it as invalid (its
// rule for compacted tables): a table whose write IDs 1 and 2 were both
// aborted reads "hwm=1 aborted=[1]". Its readers see the same either way,
// but a copy of that state would forget write ID 2, and once write ID 3
// commits the source reads "hwm=3 aborted=[1 2]" while the copy, its
// allocation jumping from 1 to 3, took 2 for committed. So in that shape
// the write IDs above the mark up to maxAllocated are invalid too (none
// of them can be a committed transaction's: its row would be there), and
// WithAllocated counts them aborted: right where no transaction that
// could hold one is open (DR's own state between plans). A source
// table's state is read with ReadTableState, which tells the open ones.
// Any other state is returned as it is.
func (w WriteIDs) WithAllocated(maxAllocated int64) WriteIDs {
	return w.withHidden(maxAllocated, func(int64) bool { return false })
}

// hides reports whether w is the metastore's shape for a table with no
// committed row hiding write IDs allocated above its mark.
func (w WriteIDs) hides(maxAllocated int64) bool {
	invalid := len(w.Open) + len(w.Aborted)
	return maxAllocated > w.HighWaterMark && invalid == 1 && slices.Contains(append(slices.Clone(w.Open), w.Aborted...), w.HighWaterMark)
}

// withHidden is w with the write IDs its shape hides (hides) added, open
// where open says so, else aborted.
func (w WriteIDs) withHidden(maxAllocated int64, open func(id int64) bool) WriteIDs {
	if !w.hides(maxAllocated) {
		return w
	}
	out := WriteIDs{HighWaterMark: maxAllocated, Open: slices.Clone(w.Open), Aborted: slices.Clone(w.Aborted)}
	for id := w.HighWaterMark + 1; id <= maxAllocated; id++ {
		if open(id) {
			out.Open = append(out.Open, id)
		} else {
			out.Aborted = append(out.Aborted, id)
		}
	}
	return out
}

// ReadTableState reads the write-ID state of the table name (db.table)
// whole: get_open_txns, get_valid_write_ids under that transaction list,
// and, where the metastore's reading hides write IDs above its mark (see
// WithAllocated; maxAllocated read before this call, so each of them is
// a transaction's that the list knows) while some transaction is open,
// get_valid_write_ids again with the open transactions taken for
// committed: the hidden write IDs valid in that reading are the open
// transactions', the others aborted. It returns the transaction view the
// state was read with.
func ReadTableState(ctx context.Context, ms Metastore, name string, maxAllocated int64) (WriteIDs, Txns, error) {
	name = strings.ToLower(name)
	o, err := ms.GetOpenTxns(ctx)
	if err != nil {
		return WriteIDs{}, Txns{}, fmt.Errorf("get_open_txns: %w", err)
	}
	view := txnView(o)
	w, err := validWriteIDs(ctx, ms, name, ValidTxnList(o))
	if err != nil || !w.hides(maxAllocated) {
		return w, view, err
	}
	if !view.AnyOpen {
		return w.WithAllocated(maxAllocated), view, nil
	}
	committed := *o
	committed.OpenTxns, committed.AbortedBits, committed.MinOpenTxn = nil, nil, nil
	for i, id := range o.OpenTxns {
		if bit(o.AbortedBits, i) {
			committed.OpenTxns = append(committed.OpenTxns, id)
		}
	}
	committed.AbortedBits = make([]byte, (len(committed.OpenTxns)+7)/8)
	for i := range committed.OpenTxns {
		committed.AbortedBits[i/8] |= 1 << (uint(i) % 8)
	}
	asIf, err := validWriteIDs(ctx, ms, name, ValidTxnList(&committed))
	if err != nil {
		return WriteIDs{}, Txns{}, err
	}
	return w.withHidden(maxAllocated, asIf.Valid), view, nil
}

// validWriteIDs is get_valid_write_ids of one table under the transaction
// list txns.
func validWriteIDs(ctx context.Context, ms Metastore, name, txns string) (WriteIDs, error) {
	r, err := ms.GetValidWriteIds(ctx, &hive_metastore.GetValidWriteIdsRequest{FullTableNames: []string{name}, ValidTxnList: &txns})
	if err != nil {
		return WriteIDs{}, fmt.Errorf("get_valid_write_ids %s: %w", name, err)
	}
	states := writeIDStates(r)
	w, ok := states[name]
	if !ok {
		return WriteIDs{}, fmt.Errorf("get_valid_write_ids %s: no state for it in the answer", name)
	}
	return w, nil
}

// Valid reports whether a reader of this state sees write ID id.
func (w WriteIDs) Valid(id int64) bool {
	return id <= w.HighWaterMark && !slices.Contains(w.Open, id) && !slices.Contains(w.Aborted, id)
}

// decidedBelow reports whether no write ID below n is open (a base is
// read only then).
func (w WriteIDs) decidedBelow(n int64) bool {
	return !slices.ContainsFunc(w.Open, func(id int64) bool { return id < n })
}

// anyValid reports whether a write ID in lo..hi is valid.
func (w WriteIDs) anyValid(lo, hi int64) bool {
	for id := lo; id <= min(hi, w.HighWaterMark); id++ {
		if w.Valid(id) {
			return true
		}
	}
	return false
}

// Txns is a reader's view of transactions, from get_open_txns: a
// transaction is committed in it when it is at or below HighWaterMark and
// not among Invalid (open or aborted). The zero Txns knows nothing and
// takes every transaction as committed.
type Txns struct {
	HighWaterMark int64
	Invalid       []int64
	// AnyOpen: some of Invalid are open, not aborted.
	AnyOpen bool
}

// Committed reports whether transaction id is committed in the view.
func (t Txns) Committed(id int64) bool {
	if t.HighWaterMark == 0 {
		return true
	}
	return id <= t.HighWaterMark && !slices.Contains(t.Invalid, id)
}

// View is what a reader knows beyond a table's write IDs.
type View struct {
	// Txns decides which compactor directories (_vT) exist for it.
	Txns Txns
	// Compacted reports whether a base directory without a visibility
	// suffix holds a compactor's output (it has MetadataFile); nil: none
	// does.
	Compacted func(name string) bool
}

// Visible returns, of the names of the directories under one table or
// partition directory, the ACID ones a reader with state w reads, sorted
// (VisibleIn with a zero View).
func Visible(names []string, w WriteIDs) []string { return VisibleIn(names, w, View{}) }

// VisibleIn returns, of the names of the directories under one table or
// partition directory, the ACID ones a reader with state w and view v
// reads, sorted, choosing as Hive's readers do (AcidUtils.getAcidState):
//
//   - a directory a compactor wrote (_vT) exists only once T is committed
//     in the reader's view;
//   - the base is the newest usable one: a compacted base once no write
//     ID up to it is open, any other base (an INSERT OVERWRITE's) once its
//     own write ID is valid;
//   - above it, deltas in order of their lowest write ID (the widest
//     first): one whose write IDs all lie within what was already chosen
//     is covered (a minor compaction's delta covers the deltas it
//     merged), one with a valid write ID of its own above what was
//     chosen is read, as is another statement of the last write chosen. Deltas and
//     delete deltas are chosen each on their own.
func VisibleIn(names []string, w WriteIDs, v View) []string {
	type named struct {
		name      string
		d         Dir
		compacted bool
	}
	var (
		base   = named{d: Dir{Max: -1}}
		deltas = map[string][]named{}
	)
	for _, n := range names {
		d, ok := ParseDir(n)
		if !ok || (d.Visibility > 0 && !v.Txns.Committed(d.Visibility)) {
			continue
		}
		if d.Kind != Base {
			deltas[d.Kind] = append(deltas[d.Kind], named{name: n, d: d})
			continue
		}
		compacted := d.Visibility > 0 || (v.Compacted != nil && v.Compacted(n))
		usable := w.Valid(d.Max) && w.decidedBelow(d.Max)
		if compacted {
			usable = d.Max <= w.HighWaterMark && w.decidedBelow(d.Max+1)
		}
		// Of two bases of one write ID (an overwrite's and a
		// compactor's), the compactor's.
		if usable && (d.Max > base.d.Max || d.Max == base.d.Max && compacted && !base.compacted) {
			base = named{name: n, d: d, compacted: compacted}
		}
	}
	var out []string
	if base.name != "" {
		out = append(out, base.name)
	}
	for _, ds := range deltas {
		slices.SortFunc(ds, func(a, b named) int {
			if a.d.Min != b.d.Min {
				return cmp.Compare(a.d.Min, b.d.Min)
			}
			if a.d.Max != b.d.Max {
				return cmp.Compare(b.d.Max, a.d.Max)
			}
			return cmp.Compare(a.d.Stmt, b.d.Stmt)
		})
		current, lastStmt := max(base.d.Max, 0), int64(-1)
		for _, x := range ds {
			switch {
			case x.d.Max > current:
				// Hive lists a delta when a write ID above what was chosen
				// is valid; one of aborted or open writes only holds no
				// row a reader sees, and is not counted as read here.
				if w.anyValid(max(current+1, x.d.Min), x.d.Max) {
					out = append(out, x.name)
					current, lastStmt = x.d.Max, x.d.Stmt
				}
			case x.d.Max == current && lastStmt >= 0 && x.d.Stmt >= 0 && x.d.Min == x.d.Max:
				out = append(out, x.name) // another statement of the same write
			}
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// Metastore is what reading write-ID states needs of a metastore
// (*hms.Client).
type Metastore interface {
	GetOpenTxns(ctx context.Context) (*hive_metastore.GetOpenTxnsResponse, error)
	GetValidWriteIds(ctx context.Context, req *hive_metastore.GetValidWriteIdsRequest) (*hive_metastore.GetValidWriteIdsResponse, error)
}

// ReadWriteIDs asks ms for the write-ID state of the tables ("db.table")
// as a reader starting now sees it; the answer is keyed by the lower-case
// name.
func ReadWriteIDs(ctx context.Context, ms Metastore, tables []string) (map[string]WriteIDs, error) {
	w, _, err := ReadState(ctx, ms, tables)
	return w, err
}

// ReadState is ReadWriteIDs, also returning the reader's view of
// transactions the states were read with.
func ReadState(ctx context.Context, ms Metastore, tables []string) (map[string]WriteIDs, Txns, error) {
	o, err := ms.GetOpenTxns(ctx)
	if err != nil {
		return nil, Txns{}, fmt.Errorf("get_open_txns: %w", err)
	}
	txns := ValidTxnList(o)
	r, err := ms.GetValidWriteIds(ctx, &hive_metastore.GetValidWriteIdsRequest{FullTableNames: tables, ValidTxnList: &txns})
	if err != nil {
		return nil, Txns{}, fmt.Errorf("get_valid_write_ids %v: %w", tables, err)
	}
	return writeIDStates(r), txnView(o), nil
}

// txnView is the reader's view of transactions get_open_txns answered.
func txnView(o *hive_metastore.GetOpenTxnsResponse) Txns {
	view := Txns{HighWaterMark: o.TxnHighWaterMark, Invalid: slices.Clone(o.OpenTxns)}
	for i := range o.OpenTxns {
		if !bit(o.AbortedBits, i) {
			view.AnyOpen = true
		}
	}
	return view
}

// writeIDStates are the tables' states get_valid_write_ids answered, by
// lower-case full name.
func writeIDStates(r *hive_metastore.GetValidWriteIdsResponse) map[string]WriteIDs {
	out := map[string]WriteIDs{}
	for _, t := range r.TblValidWriteIds {
		w := WriteIDs{HighWaterMark: t.WriteIdHighWaterMark}
		for i, id := range t.InvalidWriteIds {
			if bit(t.AbortedBits, i) {
				w.Aborted = append(w.Aborted, id)
			} else {
				w.Open = append(w.Open, id)
			}
		}
		slices.Sort(w.Open)
		slices.Sort(w.Aborted)
		out[strings.ToLower(t.FullTableName)] = w
	}
	return out
}

func bit(bits []byte, i int) bool { return i/8 < len(bits) && bits[i/8]&(1<<(uint(i)%8)) != 0 }

// ValidTxnList is the ValidTxnList string a reader sends with
// get_valid_write_ids, from get_open_txns:
// highWatermark:minOpenTxn:open,...:aborted,...
func ValidTxnList(o *hive_metastore.GetOpenTxnsResponse) string {
	low := int64(math.MaxInt64)
	if o.MinOpenTxn != nil {
		low = *o.MinOpenTxn
	}
	var open, aborted []string
	for i, id := range o.OpenTxns {
		if bit(o.AbortedBits, i) {
			aborted = append(aborted, strconv.FormatInt(id, 10))
		} else {
			open = append(open, strconv.FormatInt(id, 10))
		}
	}
	return fmt.Sprintf("%d:%d:%s:%s", o.TxnHighWaterMark, low, strings.Join(open, ","), strings.Join(aborted, ","))
}

// Transactional reports whether a table's parameters make it a
// transactional one (full ACID or insert-only).
func Transactional(params map[string]string) bool {
	return strings.EqualFold(params["transactional"], "true")
}

// IsDir reports whether name is an ACID directory's name.
func IsDir(name string) bool {
	_, ok := ParseDir(name)
	return ok
}
