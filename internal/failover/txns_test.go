package failover

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/beltran/gohive/hive_metastore"

	"github.com/hivedr/hivedr/internal/drparam"
)

// fakeDR is a DR metastore's open transactions; opens are added after
// each get_open_txns_info (an applier that has not seen the mark yet).
type fakeDR struct {
	txns    []*hive_metastore.TxnInfo
	opens   [][]*hive_metastore.TxnInfo
	aborted [][]int64
}

func (f *fakeDR) GetOpenTxnsInfo(context.Context) (*hive_metastore.GetOpenTxnsInfoResponse, error) {
	var open []*hive_metastore.TxnInfo
	for _, t := range f.txns {
		if t.State == hive_metastore.TxnState_OPEN {
			open = append(open, t)
		}
	}
	if len(f.opens) > 0 {
		f.txns, f.opens = append(f.txns, f.opens[0]...), f.opens[1:]
	}
	return &hive_metastore.GetOpenTxnsInfoResponse{OpenTxns: open}, nil
}

func (f *fakeDR) AbortTxns(_ context.Context, req *hive_metastore.AbortTxnsRequest) error {
	f.aborted = append(f.aborted, req.TxnIds)
	for _, t := range f.txns {
		if slices.Contains(req.TxnIds, t.ID) {
			t.State = hive_metastore.TxnState_ABORTED
		}
	}
	return nil
}

func txn(id int64, host string) *hive_metastore.TxnInfo {
	return &hive_metastore.TxnInfo{ID: id, State: hive_metastore.TxnState_OPEN, User: "hivedr", Hostname: host}
}

// TestAbortReplTxns: the failover aborts the open DR transactions the
// applier opened for the databases it fails over, those opened between
// its two looks too, and no other's; an older applier's are noted.
func TestAbortReplTxns(t *testing.T) {
	dr := &fakeDR{
		txns: []*hive_metastore.TxnInfo{
			txn(7, drparam.ReplTxnAgent("sales")), txn(8, drparam.ReplTxnAgent("hr")), txn(9, drparam.ReplTxnAgent("other")),
			{ID: 10, State: hive_metastore.TxnState_OPEN, User: "etl", Hostname: "hive-cli"}, txn(11, "vm"),
		},
		opens: [][]*hive_metastore.TxnInfo{{txn(12, drparam.ReplTxnAgent("sales"))}},
	}
	aborted, note, err := abortReplTxns(context.Background(), dr, []string{"hr", "sales"}, 0)
	if err != nil {
		t.Fatal(err)
	}
	if got := fmt.Sprint(aborted); got != "map[hr:[8] sales:[7 12]]" {
		t.Errorf("aborted %s", got)
	}
	if got := fmt.Sprint(dr.aborted); got != "[[8] [7] [12]]" {
		t.Errorf("abort_txns calls %s", got)
	}
	if !strings.Contains(note, "[11]") {
		t.Errorf("note %q does not name the older applier's transaction 11", note)
	}
	open, _, err := OpenReplTxns(context.Background(), dr, []string{"other"})
	if err != nil || fmt.Sprint(open) != "map[other:[9]]" {
		t.Errorf("other's open transactions %v (%v), want [9] untouched", open, err)
	}
}
