package acid

import (
	"context"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/beltran/gohive/hive_metastore"
)

// ruleMS models one table's transactions as the Hive 4 metastore reads
// them (measured on the stack): a write ID is valid when its transaction
// is at or below the list's high-water mark and not in its open or
// aborted lists; with no valid write ID the reading is the lowest
// invalid one as the mark and only it as invalid; else the mark is the
// highest write ID and the invalid ones below it are listed.
type ruleMS struct {
	txns  map[int64]string // transaction -> "open", "aborted", "committed"
	write map[int64]int64  // write ID -> its transaction
	calls int
}

func (m *ruleMS) GetOpenTxns(context.Context) (*hive_metastore.GetOpenTxnsResponse, error) {
	o := &hive_metastore.GetOpenTxnsResponse{TxnHighWaterMark: 100}
	var ids []int64
	for id, st := range m.txns {
		if st != "committed" {
			ids = append(ids, id)
		}
	}
	slices.Sort(ids)
	o.AbortedBits = make([]byte, (len(ids)+7)/8)
	for i, id := range ids {
		o.OpenTxns = append(o.OpenTxns, id)
		if m.txns[id] == "aborted" {
			o.AbortedBits[i/8] |= 1 << (uint(i) % 8)
		} else if o.MinOpenTxn == nil {
			v := id
			o.MinOpenTxn = &v
		}
	}
	return o, nil
}

func (m *ruleMS) GetValidWriteIds(_ context.Context, req *hive_metastore.GetValidWriteIdsRequest) (*hive_metastore.GetValidWriteIdsResponse, error) {
	m.calls++
	parts := strings.Split(*req.ValidTxnList, ":")
	hwm, _ := strconv.ParseInt(parts[0], 10, 64)
	state := map[int64]string{}
	for i, kind := range map[int]string{2: "open", 3: "aborted"} {
		for _, s := range strings.Split(parts[i], ",") {
			if id, err := strconv.ParseInt(s, 10, 64); err == nil {
				state[id] = kind
			}
		}
	}
	var writes []int64
	for w := range m.write {
		writes = append(writes, w)
	}
	slices.Sort(writes)
	invalid := func(w int64) (bool, bool) {
		tx := m.write[w]
		st, ok := state[tx]
		if tx > hwm {
			return true, false
		}
		return ok, st == "aborted"
	}
	t := &hive_metastore.TableValidWriteIds{FullTableName: req.FullTableNames[0]}
	anyValid := false
	for _, w := range writes {
		if bad, _ := invalid(w); !bad {
			anyValid = true
		}
	}
	add := func(w int64) {
		_, aborted := invalid(w)
		i := len(t.InvalidWriteIds)
		t.InvalidWriteIds = append(t.InvalidWriteIds, w)
		for len(t.AbortedBits) <= i/8 {
			t.AbortedBits = append(t.AbortedBits, 0)
		}
		if aborted {
			t.AbortedBits[i/8] |= 1 << (uint(i) % 8)
		}
	}
	switch {
	case len(writes) == 0:
	case !anyValid:
		t.WriteIdHighWaterMark = writes[0]
		add(writes[0])
	default:
		t.WriteIdHighWaterMark = writes[len(writes)-1]
		for _, w := range writes {
			if bad, _ := invalid(w); bad {
				add(w)
			}
		}
	}
	return &hive_metastore.GetValidWriteIdsResponse{TblValidWriteIds: []*hive_metastore.TableValidWriteIds{t}}, nil
}

// TestReadTableState: what the metastore's reading of a table with no
// committed write hides above its mark is read whole, each hidden write
// ID open or aborted as its transaction is; a second reading is made only
// when something is hidden while a transaction is open.
func TestReadTableState(t *testing.T) {
	for _, c := range []struct {
		name  string
		txns  map[int64]string
		write map[int64]int64
		want  string
		calls int
	}{
		{name: "two aborted, nothing open", txns: map[int64]string{10: "aborted", 11: "aborted"}, write: map[int64]int64{1: 10, 2: 11},
			want: "hwm=2 open=[] aborted=[1 2]", calls: 1},
		{name: "one aborted, one open above it", txns: map[int64]string{10: "aborted", 11: "open"}, write: map[int64]int64{1: 10, 2: 11},
			want: "hwm=2 open=[2] aborted=[1]", calls: 2},
		{name: "two aborted while another table's transaction is open", txns: map[int64]string{10: "aborted", 11: "aborted", 12: "open"},
			write: map[int64]int64{1: 10, 2: 11}, want: "hwm=2 open=[] aborted=[1 2]", calls: 2},
		{name: "open first, then aborted, then open", txns: map[int64]string{10: "open", 11: "aborted", 12: "open"},
			write: map[int64]int64{1: 10, 2: 11, 3: 12}, want: "hwm=3 open=[1 3] aborted=[2]", calls: 2},
		{name: "a committed write: read as it is", txns: map[int64]string{10: "aborted", 11: "committed", 12: "open"},
			write: map[int64]int64{1: 10, 2: 11, 3: 12}, want: "hwm=3 open=[3] aborted=[1]", calls: 1},
	} {
		t.Run(c.name, func(t *testing.T) {
			ms := &ruleMS{txns: c.txns, write: c.write}
			w, _, err := ReadTableState(context.Background(), ms, "Sales.Orders", int64(len(c.write)))
			if err != nil {
				t.Fatal(err)
			}
			if got := w.String(); got != c.want || ms.calls != c.calls {
				t.Errorf("got %s in %d readings, want %s in %d", got, ms.calls, c.want, c.calls)
			}
		})
	}
}
