package acid

import (
	"context"
	"fmt"
	"math"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// Txns is a metastore's transaction list as a reader took it
// (get_open_txns): the transactions whose writes that reader may read.
type Txns struct {
	// HighWaterMark is the highest transaction ID the list knows.
	HighWaterMark int64
	// invalid are the open and aborted transactions below it.
	invalid map[int64]bool
}

// NewTxns is the transaction list with high-water mark hwm and the open
// or aborted transactions invalid below it.
func NewTxns(hwm int64, invalid ...int64) Txns {
	t := Txns{HighWaterMark: hwm, invalid: make(map[int64]bool, len(invalid))}
	for _, id := range invalid {
		t.invalid[id] = true
	}
	return t
}

// Committed reports whether transaction id had committed when the list
// was taken.
func (t Txns) Committed(id int64) bool { return id <= t.HighWaterMark && !t.invalid[id] }

// ReadSnapshot asks ms for the write-ID state of the tables ("db.table")
// as a reader starting now sees it (ReadWriteIDs), and the transaction
// list it read them with: one get_open_txns, then get_valid_write_ids.
func ReadSnapshot(ctx context.Context, ms Metastore, tables []string) (Txns, map[string]WriteIDs, error) {
	o, err := ms.GetOpenTxns(ctx)
	if err != nil {
		return Txns{}, nil, fmt.Errorf("get_open_txns: %w", err)
	}
	w, err := readValid(ctx, ms, tables, ValidTxnList(o))
	return NewTxns(o.TxnHighWaterMark, o.OpenTxns...), w, err
}

// visibility is the suffix the compactor gives the directories it
// writes: _v<transaction>, the compactor's own transaction, which must
// have committed for a reader to read the directory.
var visibility = regexp.MustCompile(`^(?:base|delta|delete_delta)_\d+(?:_\d+)?_v(\d+)$`)

// VisibleIn is Visible for a reader with write-ID state w and transaction
// list txns: a compactor's directory (base_N_vT, delta_A_B_vT) whose
// transaction T had not committed in txns (a compaction still running,
// or failed) is not read, so the directories it would replace are.
func VisibleIn(names []string, w WriteIDs, txns Txns) []string {
	kept := make([]string, 0, len(names))
	for _, n := range names {
		if m := visibility.FindStringSubmatch(n); m != nil {
			t, err := strconv.ParseInt(m[1], 10, 64)
			if err != nil || !txns.Committed(t) {
				continue
			}
		}
		kept = append(kept, n)
	}
	return Visible(kept, w)
}

// FormatValidWriteIDList writes a table's write-ID state as Hive's
// ValidReaderWriteIdList string, the form repl_tbl_writeid_state takes:
// db.table:highWaterMark:minOpenWriteId:open,...:aborted,... (the
// minimum open write ID is Long.MAX_VALUE when none is open).
func FormatValidWriteIDList(table string, w WriteIDs) string {
	minOpen := int64(math.MaxInt64)
	if len(w.Open) > 0 {
		minOpen = slices.Min(w.Open)
	}
	return fmt.Sprintf("%s:%d:%d:%s:%s", strings.ToLower(table), w.HighWaterMark, minOpen, joinIDs(w.Open), joinIDs(w.Aborted))
}

func joinIDs(ids []int64) string {
	s := make([]string, len(ids))
	for i, id := range ids {
		s[i] = strconv.FormatInt(id, 10)
	}
	return strings.Join(s, ",")
}
