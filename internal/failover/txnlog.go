package failover

import (
	"encoding/json"
	"slices"
	"strings"

	"github.com/hivedr/hivedr/internal/hms"
	"github.com/hivedr/hivedr/internal/hmslog"
	"github.com/hivedr/hivedr/schemas"
)

// Transactions in a log the failover and failback count.
//
// Hive logs a transaction's COMMIT_TXN and ABORT_TXN with no database
// (DB_NAME is empty: a transaction may write several databases), while
// each write-ID allocation of the transaction (ALLOC_WRITE_ID_EVENT)
// names its table. So the tables a commit or an abort concerns are those
// its transaction allocated write IDs in: logTables follows the
// allocations in log order and gives each event the tables it touches. A
// commit of a transaction that allocated before the failover's event
// (DR applied the allocation; its DR transaction is aborted at the
// failover) and committed after it is a lost event (or, on the old
// primary after the failover, a late write whose table must move back):
// the scan starts early enough to see such allocations (scanFrom).

// tableRef is a table of a database, lower case ("" table: the database).
type tableRef struct{ db, table string }

// logTables follows one scan of a log.
type logTables struct {
	// txns are the tables each transaction allocated write IDs in, in the
	// order of their first allocation.
	txns map[int64][]tableRef
}

func newLogTables() *logTables { return &logTables{txns: map[int64][]tableRef{}} }

// txnMessage is what logTables reads of a transaction event's message.
type txnMessage struct {
	TxnID      *int64   `json:"txnid"`
	TxnIDList  []int64  `json:"txnIdList"`
	DBName     string   `json:"dbName"`
	TableName  string   `json:"tableName"`
	DBsUpdated []string `json:"dbsUpdated"`
	Databases  []string `json:"databases"`
	Tables     []string `json:"tables"`
}

func readTxnMessage(e hmslog.RawEvent) (txnMessage, bool) {
	var m txnMessage
	b, err := hms.MessageJSON(e.MessageFormat, e.Message)
	if err != nil || json.Unmarshal(b, &m) != nil {
		return txnMessage{}, false
	}
	return m, true
}

// touched returns, for each event of evs in order, the tables it touches:
// its own database and table; for an allocation, its table, remembered
// for its transactions; for a commit or an abort, the tables its
// transaction allocated in (and those the message itself names: a
// listener that adds the writes to COMMIT_TXN, Hive 4's dbsUpdated of an
// ABORT_TXN). A transaction event that names nothing known touches
// nothing.
func (l *logTables) touched(evs []hmslog.RawEvent) [][]tableRef {
	out := make([][]tableRef, len(evs))
	for i, e := range evs {
		switch e.EventType.Canonical() {
		case schemas.EventAllocWriteID:
			ref := tableRef{strings.ToLower(e.Database), strings.ToLower(e.Table)}
			if m, ok := readTxnMessage(e); ok {
				if ref.db == "" {
					ref.db = strings.ToLower(m.DBName)
				}
				if ref.table == "" {
					ref.table = strings.ToLower(m.TableName)
				}
				for _, id := range m.TxnIDList {
					if !slices.Contains(l.txns[id], ref) {
						l.txns[id] = append(l.txns[id], ref)
					}
				}
			}
			out[i] = []tableRef{ref}
		case schemas.EventCommitTxn, schemas.EventAbortTxn:
			m, ok := readTxnMessage(e)
			if !ok || m.TxnID == nil {
				continue
			}
			refs := slices.Clone(l.txns[*m.TxnID])
			for j := range m.Databases {
				if j < len(m.Tables) {
					refs = appendNew(refs, tableRef{strings.ToLower(m.Databases[j]), strings.ToLower(m.Tables[j])})
				}
			}
			for _, db := range m.DBsUpdated {
				if !slices.ContainsFunc(refs, func(r tableRef) bool { return r.db == strings.ToLower(db) }) {
					refs = append(refs, tableRef{db: strings.ToLower(db)})
				}
			}
			delete(l.txns, *m.TxnID)
			out[i] = refs
		default:
			if e.Database != "" {
				out[i] = []tableRef{{strings.ToLower(e.Database), strings.ToLower(e.Table)}}
			}
		}
	}
	return out
}

func appendNew(refs []tableRef, r tableRef) []tableRef {
	if slices.Contains(refs, r) {
		return refs
	}
	return append(refs, r)
}

// countTouched counts into, by table of db, the events after event after
// among evs (touched: logTables.touched of evs) that touch db: an event
// counts once, under the first of its tables in db; its other tables
// there are listed with no count of their own (they changed too).
func countTouched(into map[string]int, evs []hmslog.RawEvent, touched [][]tableRef, db string, after int64, keep func(hmslog.RawEvent) bool) {
	db = strings.ToLower(db)
	for i, e := range evs {
		if e.EventID <= after || (keep != nil && !keep(e)) {
			continue
		}
		first := true
		for _, r := range touched[i] {
			if r.db != db {
				continue
			}
			if first {
				into[r.table]++
				first = false
			} else if _, ok := into[r.table]; !ok {
				into[r.table] = 0
			}
		}
	}
}

// scanFrom is where a scan for the events after after must start so that
// it sees the allocations of the transactions cp says were open (their
// commits may come after after): before the oldest one's first
// allocation. cp nil: at after.
func scanFrom(after int64, cp *schemas.TailerCheckpoint) int64 {
	from := after
	if cp == nil {
		return from
	}
	for _, t := range cp.OpenTxns {
		if t.FirstEventID > 0 && t.FirstEventID-1 < from {
			from = t.FirstEventID - 1
		}
	}
	return max(from, 0)
}
