// Package acid knows the layout and the write-ID state of Hive's
// transactional (ACID) tables, as the applier, `hivedr verify` and the
// e2e workload need them: the names of the base_N and delta_A_B
// directories writes leave under a table or partition directory, a
// table's write-ID state as get_valid_write_ids gives it, and which of
// those directories a reader with that state reads.
package acid

import (
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
// base_N_vT), delta_A_B[_S] (delta_A_B_vT) or delete_delta_A_B[...].
type Dir struct {
	Kind string
	// Min and Max are the write IDs it covers; a base's Min is 0.
	Min, Max int64
}

var dirName = regexp.MustCompile(`^(base|delta|delete_delta)_(\d+)(?:_(\d+))?(?:_v?\d+)?$`)

// ParseDir parses an ACID directory's name; ok is false for any other.
func ParseDir(name string) (d Dir, ok bool) {
	m := dirName.FindStringSubmatch(name)
	if m == nil {
		return Dir{}, false
	}
	lo, err := strconv.ParseInt(m[2], 10, 64)
	if err != nil {
		return Dir{}, false
	}
	if m[1] == Base {
		return Dir{Kind: Base, Max: lo}, true
	}
	if m[3] == "" {
		return Dir{}, false
	}
	hi, err := strconv.ParseInt(m[3], 10, 64)
	if err != nil {
		return Dir{}, false
	}
	return Dir{Kind: m[1], Min: lo, Max: hi}, true
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

// Valid reports whether a reader of this state sees write ID id.
func (w WriteIDs) Valid(id int64) bool {
	return id <= w.HighWaterMark && !slices.Contains(w.Open, id) && !slices.Contains(w.Aborted, id)
}

// decidedBelow reports whether no write ID below n is open (a base is
// read only then).
func (w WriteIDs) decidedBelow(n int64) bool {
	return !slices.ContainsFunc(w.Open, func(id int64) bool { return id < n })
}

func (w WriteIDs) allValid(lo, hi int64) bool {
	for id := lo; id <= hi; id++ {
		if !w.Valid(id) {
			return false
		}
	}
	return true
}

// Visible returns, of the names of the directories under one table or
// partition directory, the ACID ones a reader with state w reads, sorted:
// the newest base whose write ID is valid with none below it open, and
// the deltas above it all of whose write IDs are valid.
func Visible(names []string, w WriteIDs) []string {
	var base int64 = -1
	for _, n := range names {
		if d, ok := ParseDir(n); ok && d.Kind == Base && d.Max > base && w.Valid(d.Max) && w.decidedBelow(d.Max) {
			base = d.Max
		}
	}
	var out []string
	for _, n := range names {
		d, ok := ParseDir(n)
		switch {
		case !ok:
		case d.Kind == Base:
			if d.Max == base {
				out = append(out, n)
			}
		case d.Min > base && w.allValid(d.Min, d.Max):
			out = append(out, n)
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
	o, err := ms.GetOpenTxns(ctx)
	if err != nil {
		return nil, fmt.Errorf("get_open_txns: %w", err)
	}
	return readValid(ctx, ms, tables, ValidTxnList(o))
}

// readValid asks ms for the tables' write-ID states under the
// ValidTxnList txns.
func readValid(ctx context.Context, ms Metastore, tables []string, txns string) (map[string]WriteIDs, error) {
	r, err := ms.GetValidWriteIds(ctx, &hive_metastore.GetValidWriteIdsRequest{FullTableNames: tables, ValidTxnList: &txns})
	if err != nil {
		return nil, fmt.Errorf("get_valid_write_ids %v: %w", tables, err)
	}
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
	return out, nil
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
