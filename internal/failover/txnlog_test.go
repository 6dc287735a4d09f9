package failover

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/hivedr/hivedr/internal/hmslog"
	"github.com/hivedr/hivedr/schemas"
)

// capturedACID reads the transaction events the stack's metastore logged
// (internal/hmsevent/testdata/acid, made by its capture program), in log order.
func capturedACID(t *testing.T) []hmslog.RawEvent {
	t.Helper()
	files, err := filepath.Glob("../../internal/hmsevent/testdata/acid/*.json")
	if err != nil || len(files) == 0 {
		t.Fatalf("captured events: %v (%d files)", err, len(files))
	}
	var out []hmslog.RawEvent
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var e struct {
			EventID       int64  `json:"eventId"`
			EventTime     int64  `json:"eventTime"`
			EventType     string `json:"eventType"`
			DBName        string `json:"dbName"`
			TableName     string `json:"tableName"`
			MessageFormat string `json:"messageFormat"`
			Message       string `json:"message"`
		}
		if err := json.Unmarshal(b, &e); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		out = append(out, hmslog.RawEvent{EventID: e.EventID, EventTime: e.EventTime, EventType: schemas.EventType(e.EventType),
			Database: e.DBName, Table: e.TableName, MessageFormat: e.MessageFormat, Message: e.Message})
	}
	return out
}

// TestTxnEventsCounted: Hive logs COMMIT_TXN and ABORT_TXN with no
// database. They count for the databases and tables their transaction
// allocated write IDs in, whether or not the listener added the writes to
// the commit, also when the allocation is before the event a database
// reached (DR applied it; the commit is what it lacks).
func TestTxnEventsCounted(t *testing.T) {
	evs := capturedACID(t)
	byType := map[schemas.EventType]int{}
	for _, e := range evs {
		byType[e.EventType]++
		if (e.EventType == schemas.EventCommitTxn || e.EventType == schemas.EventAbortTxn) && e.Database != "" {
			t.Fatalf("captured %s event %d names database %q: the fixture no longer shows Hive's empty name", e.EventType, e.EventID, e.Database)
		}
	}
	if byType[schemas.EventCommitTxn] == 0 || byType[schemas.EventAbortTxn] == 0 {
		t.Fatalf("captured events lack a commit or an abort: %v", byType)
	}
	// The first commit (txn 240) wrote cap_acid.orders, cap_acid.events
	// and cap_acid_other.ledger; its allocations are events 2..4 before
	// it in the capture. Counted after the last allocation: only
	// transaction events and what follows.
	// Up to the first abort: no later event of these tables (an
	// allocation, a compaction) names them with a database of its own.
	for i, e := range evs {
		if e.EventType == schemas.EventAbortTxn {
			evs = evs[:i+1]
			break
		}
	}
	var alloc, commit int64
	for _, e := range evs {
		if e.EventType == schemas.EventAllocWriteID && commit == 0 {
			alloc = e.EventID
		}
		if e.EventType == schemas.EventCommitTxn && commit == 0 {
			commit = e.EventID
		}
	}
	for _, bare := range []bool{false, true} {
		in := evs
		if bare {
			// Hive's stock listener: a commit without its writes.
			in = make([]hmslog.RawEvent, len(evs))
			for i, e := range evs {
				in[i] = e
				if e.EventType == schemas.EventCommitTxn {
					in[i].MessageFormat, in[i].Message = "json-0.2", `{"txnid":`+txnOf(t, e)+`}`
				}
			}
		}
		lt := newLogTables()
		touched := lt.touched(in)
		acid, other := map[string]int{}, map[string]int{}
		changed(acid, in, touched, "cap_acid", alloc)
		changed(other, in, touched, "cap_acid_other", alloc)
		if _, ok := acid["orders"]; !ok {
			t.Errorf("bare=%v: cap_acid after event %d: %v, want orders (the commit %d and later ones)", bare, alloc, acid, commit)
		}
		if _, ok := acid["events"]; !ok {
			t.Errorf("bare=%v: cap_acid after event %d: %v, want events (written by the commit %d)", bare, alloc, acid, commit)
		}
		if _, ok := other["ledger"]; !ok {
			t.Errorf("bare=%v: cap_acid_other after event %d: %v, want ledger (written by the commit %d)", bare, alloc, other, commit)
		}
		// Alone, without its allocations before it, a bare commit names
		// no table: hence scans start before them (scanFrom).
		i := commit - in[0].EventID
		alone := newLogTables().touched(in[i : i+1])[0]
		if bare && len(alone) != 0 {
			t.Errorf("a bare commit alone touched %v, want nothing", alone)
		}
		if !bare && len(alone) != 3 {
			t.Errorf("a commit with its writes alone touched %v, want its 3 tables", alone)
		}
	}
}

func txnOf(t *testing.T, e hmslog.RawEvent) string {
	t.Helper()
	m, ok := readTxnMessage(e)
	if !ok || m.TxnID == nil {
		t.Fatalf("event %d: no txnid", e.EventID)
	}
	b, _ := json.Marshal(*m.TxnID)
	return string(b)
}

// TestScanFrom: a scan after event 100 starts before the first allocation
// of the transactions the tailer's checkpoint had open.
func TestScanFrom(t *testing.T) {
	cp := &schemas.TailerCheckpoint{OpenTxns: []schemas.OpenTxn{{TxnID: 7, FirstEventID: 60}, {TxnID: 9, FirstEventID: 90}}}
	for _, c := range []struct {
		after int64
		cp    *schemas.TailerCheckpoint
		want  int64
	}{{100, nil, 100}, {100, cp, 59}, {50, cp, 50}, {100, &schemas.TailerCheckpoint{}, 100}} {
		if got := scanFrom(c.after, c.cp); got != c.want {
			t.Errorf("scanFrom(%d, %v) = %d, want %d", c.after, c.cp, got, c.want)
		}
	}
}
