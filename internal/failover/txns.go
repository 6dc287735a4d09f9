package failover

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/beltran/gohive/hive_metastore"

	"github.com/hivedr/hivedr/internal/drparam"
)

// Replicated transactions left open.
//
// The applier replays each source transaction as a DR transaction of its
// own (REPL_CREATED, opened for the database's replication policy with
// the host drparam.ReplTxnAgent), open from the source's first write-ID
// allocation to its commit or abort. A source transaction that had not
// ended at the failover never will on DR: its DR transaction would stay
// open (replicated transactions never time out), its write IDs open to
// every reader, and compaction stuck below them. So the failover aborts,
// once it has marked the databases, the DR transactions the applier
// opened for them, and reports what it aborted. The source transaction's
// data, never committed, was never visible on DR; aborting it makes its
// write IDs aborted ones, as the source will when it times out.

// DRTxns is the part of the DR metastore's API the failover reads and
// aborts transactions with (*hms.Client).
type DRTxns interface {
	GetOpenTxnsInfo(ctx context.Context) (*hive_metastore.GetOpenTxnsInfoResponse, error)
	AbortTxns(ctx context.Context, req *hive_metastore.AbortTxnsRequest) error
}

// applierUser is the user the applier opens DR transactions as; one of
// its open transactions whose host names no database is an older
// applier's (it named none).
const applierUser = "hivedr"

// applierSettle is how long the failover waits before it looks for open
// replicated transactions a second time: an applier that has not yet
// read a database's failover mark (it re-reads a database's parameters
// at most a second old) may still open one after the first look.
const applierSettle = 2 * time.Second

// OpenReplTxns returns, by database of dbs, the DR transactions the
// applier opened for it that are open, in ID order; and those an older
// applier opened, whose host names no database.
func OpenReplTxns(ctx context.Context, dr DRTxns, dbs []string) (map[string][]int64, []int64, error) {
	info, err := dr.GetOpenTxnsInfo(ctx)
	if err != nil {
		return nil, nil, fmt.Errorf("get_open_txns_info on DR: %w", err)
	}
	byAgent := make(map[string]string, len(dbs))
	for _, db := range dbs {
		byAgent[drparam.ReplTxnAgent(db)] = db
	}
	out := map[string][]int64{}
	var legacy []int64
	for _, t := range info.OpenTxns {
		if t == nil || t.State != hive_metastore.TxnState_OPEN {
			continue
		}
		db, ok := byAgent[t.Hostname]
		if !ok {
			db, ok = byAgent[t.AgentInfo]
		}
		switch {
		case ok:
			out[db] = append(out[db], t.ID)
		case t.User == applierUser && !strings.HasPrefix(t.Hostname, drparam.ReplTxnAgentPrefix):
			legacy = append(legacy, t.ID)
		}
	}
	for _, ids := range out {
		slices.Sort(ids)
	}
	slices.Sort(legacy)
	return out, legacy, nil
}

// abortReplTxns aborts the open replicated transactions of dbs, looking
// twice (settle apart), and returns by database what it aborted
// and the note to make of an older applier's transactions it could not
// attribute.
func abortReplTxns(ctx context.Context, dr DRTxns, dbs []string, settle time.Duration) (map[string][]int64, string, error) {
	aborted := map[string][]int64{}
	var legacy []int64
	for pass := range 2 {
		if pass > 0 {
			select {
			case <-ctx.Done():
				return aborted, "", ctx.Err()
			case <-time.After(settle):
			}
		}
		open, old, err := OpenReplTxns(ctx, dr, dbs)
		if err != nil {
			return aborted, "", err
		}
		legacy = old
		for _, db := range dbs {
			ids := open[db]
			if len(ids) == 0 {
				continue
			}
			if err := dr.AbortTxns(ctx, &hive_metastore.AbortTxnsRequest{TxnIds: ids}); err != nil {
				return aborted, "", fmt.Errorf("abort DR transactions %v left open by source transactions of %s: %w", ids, db, err)
			}
			aborted[db] = append(aborted[db], ids...)
		}
	}
	note := ""
	if len(legacy) > 0 {
		note = fmt.Sprintf("DR transactions %v of user %s are open and their host names no database (an older applier's, or a client's): "+
			"if they stand for source transactions of the databases failed over, abort them (abort_txns)", legacy, applierUser)
	}
	return aborted, note, nil
}
