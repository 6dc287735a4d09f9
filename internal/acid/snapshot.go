package acid

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
)

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
