package producer

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/hivedr/hivedr/internal/config"
	"github.com/hivedr/hivedr/internal/hmslog"
	"github.com/hivedr/hivedr/schemas"
)

// fakeTxns is a source metastore's write-notification log.
type fakeTxns struct {
	writes map[int64][]TxnWrite
	hwm    int64
	err    error
	reads  []int64
}

func (f *fakeTxns) TxnWrites(_ context.Context, id int64) ([]TxnWrite, error) {
	f.reads = append(f.reads, id)
	return f.writes[id], f.err
}

func (f *fakeTxns) TxnHighWaterMark(context.Context) (int64, error) { return f.hwm, f.err }

func txnTailer(t *testing.T, src hmslog.Source, txns TxnWrites) *Tailer {
	t.Helper()
	c := config.Default()
	c.Replication = *testPolicy(t)
	cfg := withConf(c, Config{Source: src, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if txns != nil {
		cfg.Txns = txns
	}
	return &Tailer{cfg: cfg, conf: &sections{Source: c.Source, Kafka: c.Kafka, Tailer: c.Tailer, Replication: c.Replication}, m: NewMetrics(), log: cfg.Logger, warned: map[string]bool{}}
}

func allocEvent(id int64, db, table string, txns ...int64) schemas.Event {
	a := &schemas.WriteIDAllocation{Database: db, Table: table}
	for i, x := range txns {
		a.Allocations = append(a.Allocations, schemas.TxnWriteID{TxnID: x, WriteID: int64(i + 1)})
	}
	return schemas.Event{EventID: id, EventType: schemas.EventAllocWriteID, Database: db, Table: table, Databases: []string{db}, Payload: a}
}

func commitEvent(id, txn int64, writes ...schemas.TableWriteID) schemas.Event {
	ev := schemas.Event{EventID: id, EventType: schemas.EventCommitTxn, Payload: &schemas.Transaction{TxnIDs: []int64{txn}, WriteIDs: writes}}
	for _, w := range writes {
		ev.Databases = append(ev.Databases, w.Database)
	}
	return ev
}

// logWith is a notification log holding the events with these IDs.
func logWith(ids ...int64) *memSource {
	s := &memSource{}
	for _, id := range ids {
		s.evs = append(s.evs, hmslog.RawEvent{EventID: id})
	}
	return s
}

const ordersFile = "hdfs://src:8020/warehouse/sales.db/orders/delta_0000001_0000001_0000/bucket_00000"

// TestCompleteTxns: commits and aborts reach every database their
// transaction allocated in; a commit that names no writes gets them from
// the source when its transaction allocated in scope (or may have,
// before tracking began), with WRITES_UNAVAILABLE when its first
// allocation has left the log.
func TestCompleteTxns(t *testing.T) {
	orders := TxnWrite{Database: "sales", Table: "orders", WriteID: 1, Files: ordersFile + "#c1##delta_0000001_0000001_0000"}
	for _, tc := range []struct {
		name  string
		log   *memSource
		txns  *fakeTxns // nil: no source metastore
		above int64
		evs   []schemas.Event
		// want, for the last event: its databases, its writes
		// (db.table/writeID), its files, whether it was read from the
		// source, its error kind.
		dbs      []string
		writes   []string
		files    []string
		read     bool
		errKind  schemas.EventErrorKind
		wantOpen []int64
	}{
		{name: "a commit reaches a database it only allocated in",
			evs: []schemas.Event{allocEvent(5, "finance", "ledger", 10), allocEvent(6, "sales", "orders", 10),
				commitEvent(7, 10, schemas.TableWriteID{Database: "sales", Table: "orders", WriteID: 1})},
			dbs: []string{"finance", "sales"}, writes: []string{"sales.orders/1"}},
		{name: "an abort reaches every database it allocated in",
			evs: []schemas.Event{allocEvent(5, "finance", "ledger", 10), allocEvent(6, "sales", "orders", 10),
				{EventID: 7, EventType: schemas.EventAbortTxn, Payload: &schemas.Transaction{TxnIDs: []int64{10}}}},
			dbs: []string{"finance", "sales"}},
		{name: "a commit naming no writes gets them from the source",
			log: logWith(5, 6), txns: &fakeTxns{writes: map[int64][]TxnWrite{10: {orders}}},
			evs: []schemas.Event{allocEvent(5, "sales", "orders", 10), commitEvent(6, 10)},
			dbs: []string{"sales"}, writes: []string{"sales.orders/1"}, files: []string{ordersFile}, read: true},
		{name: "an allocation out of scope is not read",
			txns: &fakeTxns{writes: map[int64][]TxnWrite{10: {orders}}},
			evs:  []schemas.Event{allocEvent(5, "hr", "people", 10), commitEvent(6, 10)},
			dbs:  []string{"hr"}},
		{name: "a transaction tracked whole that allocated nothing is not read",
			txns: &fakeTxns{writes: map[int64][]TxnWrite{10: {orders}}},
			evs:  []schemas.Event{commitEvent(6, 10)}},
		{name: "a transaction opened before tracking began is read",
			above: 10, txns: &fakeTxns{writes: map[int64][]TxnWrite{10: {orders}}},
			evs: []schemas.Event{commitEvent(6, 10)},
			dbs: []string{"sales"}, writes: []string{"sales.orders/1"}, files: []string{ordersFile}, read: true},
		{name: "a commit whose first allocation aged out is unavailable",
			log: logWith(6, 7), txns: &fakeTxns{writes: map[int64][]TxnWrite{10: {orders}}},
			evs: []schemas.Event{allocEvent(5, "sales", "orders", 10), commitEvent(7, 10)},
			dbs: []string{"sales"}, writes: []string{"sales.orders/1"}, files: []string{ordersFile}, read: true, errKind: schemas.ErrWritesUnavailable},
		{name: "no source metastore: a commit that allocated in scope is unavailable",
			evs: []schemas.Event{allocEvent(5, "sales", "orders", 10), commitEvent(6, 10)},
			dbs: []string{"sales"}, errKind: schemas.ErrWritesUnavailable},
		{name: "allocations of open transactions are kept",
			log: logWith(5, 6, 7), txns: &fakeTxns{},
			evs: []schemas.Event{allocEvent(5, "sales", "orders", 10, 11), allocEvent(6, "finance", "ledger", 11), commitEvent(7, 10)},
			dbs: []string{"sales"}, read: true, wantOpen: []int64{11}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var src hmslog.Source = tc.log
			if tc.log == nil {
				src = logWith()
			}
			var txns TxnWrites
			if tc.txns != nil {
				txns = tc.txns
			}
			tl := txnTailer(t, src, txns)
			before := newTxnTable(nil, tc.above)
			after, err := tl.completeTxns(context.Background(), tc.evs, before)
			if err != nil {
				t.Fatal(err)
			}
			if len(before.open) != 0 {
				t.Errorf("the batch changed the table it was given: %v", before.list())
			}
			ev := tc.evs[len(tc.evs)-1]
			if !slices.Equal(ev.Databases, tc.dbs) {
				t.Errorf("databases %v, want %v", ev.Databases, tc.dbs)
			}
			var writes, files []string
			if txn, ok := ev.Payload.(*schemas.Transaction); ok {
				for _, w := range txn.WriteIDs {
					writes = append(writes, fmt.Sprintf("%s.%s/%d", w.Database, w.Table, w.WriteID))
				}
			}
			for _, f := range ev.Files {
				files = append(files, f.URI)
			}
			if !slices.Equal(writes, tc.writes) || !slices.Equal(files, tc.files) {
				t.Errorf("writes %v files %v, want %v %v", writes, files, tc.writes, tc.files)
			}
			if read := tc.txns != nil && len(tc.txns.reads) > 0; read != tc.read {
				t.Errorf("read from the source: %v, want %v", read, tc.read)
			}
			var kind schemas.EventErrorKind
			if len(ev.Errors) > 0 {
				kind = ev.Errors[0].Kind
			}
			if kind != tc.errKind {
				t.Errorf("error %v, want kind %q", ev.Errors, tc.errKind)
			}
			var open []int64
			for _, o := range after.list() {
				open = append(open, o.TxnID)
			}
			if !slices.Equal(open, tc.wantOpen) {
				t.Errorf("open transactions %v, want %v", open, tc.wantOpen)
			}
		})
	}
}

// TestCompleteTxnsReadFails: a failed read fails the batch (it is
// retried from the checkpoint), the committed table untouched.
func TestCompleteTxnsReadFails(t *testing.T) {
	tl := txnTailer(t, logWith(5, 6), &fakeTxns{err: errors.New("connection refused")})
	before := newTxnTable(nil, 0)
	_, err := tl.completeTxns(context.Background(), []schemas.Event{allocEvent(5, "sales", "orders", 10), commitEvent(6, 10)}, before)
	if err == nil || !strings.Contains(err.Error(), "source transaction 10") || !strings.Contains(err.Error(), "connection refused") {
		t.Fatalf("err = %v", err)
	}
	if len(before.open) != 0 {
		t.Errorf("the committed table changed: %v", before.list())
	}
}

// TestTailerCompletesCommitAfterRestart: the allocation is published and
// checkpointed by one tailer; the next reads the commit, which names no
// writes, and publishes it with the writes the source gives, to the
// database the allocation was in.
func TestTailerCompletesCommitAfterRestart(t *testing.T) {
	f := newFixture(t)
	f.conf.Replication.SourceRoots = []string{"hdfs://src/warehouse"}
	f.conf.Replication.PathMappings = []config.PathMapping{{Source: "hdfs://src/", Target: "hdfs://dr/"}}
	if err := f.conf.Validate(); err != nil {
		t.Fatal(err)
	}
	fake := &fakeTxns{hwm: 3, writes: map[int64][]TxnWrite{4: {{Database: "sales", Table: "orders", WriteID: 1,
		Files: "hdfs://src/warehouse/sales.db/orders/delta_0000001_0000001_0000/bucket_00000#c1##delta_0000001_0000001_0000"}}}}
	f.txns = fake
	f.src.addRaw(hmslog.RawEvent{Database: "sales", EventType: schemas.EventAllocWriteID, Message: `{"txnIdList":[4],"writeIdList":[1],"dbName":"sales","tableName":"orders"}`})
	f.src.addRaw(hmslog.RawEvent{Database: "", EventType: schemas.EventOpenTxn, Message: `{"txnIds":[5]}`})
	if err := f.run(t, 2); err != nil {
		t.Fatal(err)
	}
	if len(fake.reads) != 0 {
		t.Fatalf("read the writes of %v before any commit", fake.reads)
	}
	f.src.addRaw(hmslog.RawEvent{Database: "", EventType: schemas.EventCommitTxn, Message: `{"txnid":4}`})
	f.src.addRaw(hmslog.RawEvent{Database: "", EventType: schemas.EventCommitTxn, Message: `{"txnid":5}`}) // allocated nothing
	tl := f.tailer(t)
	if err := f.runTailer(t, tl, 4); err != nil {
		t.Fatal(err)
	}
	if ids := f.eventIDs(t, "sales"); !slices.Equal(ids, []int64{1, 3}) {
		t.Fatalf("sales topic has events %v, want the allocation and the commit [1 3]", ids)
	}
	if !slices.Equal(fake.reads, []int64{4}) {
		t.Errorf("read the writes of %v, want [4]", fake.reads)
	}
	ev := f.event(t, "sales", 3)
	txn, ok := ev.Payload.(*schemas.Transaction)
	if !ok || len(txn.WriteIDs) != 1 || txn.WriteIDs[0].Table != "orders" || len(ev.Files) != 1 || ev.Files[0].TaskID == "" {
		t.Fatalf("commit published as %+v (payload %+v)", ev, ev.Payload)
	}
	if got := testutil.ToFloat64(tl.m.writesFetched.WithLabelValues(writesRead)); got != 1 {
		t.Errorf("hivedr_tailer_commit_writes_read_total{outcome=writes} = %v, want 1", got)
	}
	if got := testutil.ToFloat64(tl.m.openTxns); got != 0 {
		t.Errorf("hivedr_tailer_open_transactions = %v, want 0", got)
	}
}
