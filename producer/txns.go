package producer

import (
	"cmp"
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/hivedr/hivedr/internal/hmsevent"
	"github.com/hivedr/hivedr/schemas"
)

// Source transactions (ACID tables).
//
// A transaction's end reaches DR through its COMMIT_TXN or ABORT_TXN, and
// the applier of each database it allocated write IDs in must see it:
// that database's DR transaction stands for it and stays open until then.
// The messages do not always say where that is. A commit names the
// databases it wrote (when it names its writes at all), not one where it
// only allocated; Hive's own DbNotificationListener keeps the writes out
// of the commit altogether (in TXN_WRITE_NOTIFICATION_LOG, which REPL
// DUMP reads when it dumps the commit). So the tailer keeps, with its
// checkpoint, the databases each open transaction allocated in (from
// ALLOC_WRITE_ID_EVENT), publishes its commit or abort to all of them,
// and completes a commit whose message names no writes with the writes
// the source metastore gives for it (get_all_write_event_info), as REPL
// DUMP does.
//
// The metastore cleans those write notifications by age, with the same
// time to live as the notification log (metastore.event.db.listener.
// timetolive, or metastore.repl.event.db.listener.timetolive when change
// management is on), and a write is logged after its allocation. So while
// the log still holds the transaction's first allocation, it still holds
// every write the transaction made; once that allocation has aged out,
// some writes may have too, and the commit is published with a
// WRITES_UNAVAILABLE error (the applier halts its databases on it) rather
// than as a commit of fewer writes than it made.

// TxnWrites reads source transactions from the source metastore
// (MetastoreReader, over Thrift).
type TxnWrites interface {
	// TxnWrites returns the writes source transaction txnID made, as the
	// metastore's write-notification log holds them
	// (get_all_write_event_info): none when it wrote nothing, or when
	// the rows were cleaned.
	TxnWrites(ctx context.Context, txnID int64) ([]TxnWrite, error)
	// TxnHighWaterMark returns the highest transaction ID the source has
	// handed out (get_open_txns).
	TxnHighWaterMark(ctx context.Context) (int64, error)
}

// TxnWrite is one write of a source transaction to a table or partition.
type TxnWrite = hmsevent.TxnWrite

// txnTable is what the tailer knows of the source transactions that have
// allocated write IDs and not ended. It is part of the checkpoint; a
// batch changes a copy (clone), adopted when its Kafka transaction
// commits.
type txnTable struct {
	open map[int64]schemas.OpenTxn
	// above: transactions with higher IDs are tracked whole (every
	// allocation of theirs was seen); for the others, allocations made
	// before tracking began are unknown.
	above int64
}

func newTxnTable(open []schemas.OpenTxn, above int64) *txnTable {
	tt := &txnTable{open: make(map[int64]schemas.OpenTxn, len(open)), above: above}
	for _, o := range open {
		tt.open[o.TxnID] = o
	}
	return tt
}

// clone is a copy a batch may change. Entries are replaced, never
// changed in place, so they are shared.
func (tt *txnTable) clone() *txnTable {
	return &txnTable{open: maps.Clone(tt.open), above: tt.above}
}

// list is the table as the checkpoint holds it, by transaction ID.
func (tt *txnTable) list() []schemas.OpenTxn {
	out := slices.Collect(maps.Values(tt.open))
	slices.SortFunc(out, func(a, b schemas.OpenTxn) int { return cmp.Compare(a.TxnID, b.TxnID) })
	return out
}

// allocated records the allocation of event eventID.
func (tt *txnTable) allocated(a *schemas.WriteIDAllocation, eventID int64) {
	db := strings.ToLower(a.Database)
	for _, w := range a.Allocations {
		o, ok := tt.open[w.TxnID]
		if !ok {
			o = schemas.OpenTxn{TxnID: w.TxnID, FirstEventID: eventID}
		}
		if i, found := slices.BinarySearch(o.Databases, db); !found {
			o.Databases = slices.Insert(slices.Clone(o.Databases), i, db)
		}
		o.FirstEventID = min(o.FirstEventID, eventID)
		tt.open[w.TxnID] = o
	}
}

// end forgets transaction id, which ended, returning what was known of
// it.
func (tt *txnTable) end(id int64) (schemas.OpenTxn, bool) {
	o, ok := tt.open[id]
	delete(tt.open, id)
	return o, ok
}

// whole reports whether every allocation of transaction id was seen.
func (tt *txnTable) whole(id int64) bool { return id > tt.above }

// trackTxnsFromNow makes the transactions the source has opened so far
// not tracked whole: they may have allocated before the tailer's
// position. Called when tracking begins (no checkpoint, or an older
// tailer's).
func (t *Tailer) trackTxnsFromNow(ctx context.Context) error {
	if t.cfg.Txns == nil {
		t.txns.above = 0
		t.log.Warn("no source metastore (source.metastore): a COMMIT_TXN whose message names no writes cannot be completed; " +
			"transactions open now are taken to have allocated nothing before the tailer's position")
		return nil
	}
	hwm, err := t.cfg.Txns.TxnHighWaterMark(ctx)
	if err != nil {
		return fmt.Errorf("read the source's transaction high-water mark: %w", err)
	}
	t.txns.above = hwm
	t.log.Info("tracking source transactions", "tracked_whole_above_txn", hwm)
	return nil
}

// txnEvent is whether an event changes the transaction table.
func txnEvent(t schemas.EventType) bool {
	switch t.Canonical() {
	case schemas.EventAllocWriteID, schemas.EventCommitTxn, schemas.EventAbortTxn:
		return true
	}
	return false
}

// commitToRead is a COMMIT_TXN whose writes are read from the source.
type commitToRead struct {
	i     int // in the batch
	txn   int64
	known bool // some of its allocations are known: o
	o     schemas.OpenTxn
}

// completeTxns runs over a batch's decoded events in log order: it
// records allocations in tt, adds to each commit and abort the databases
// its transaction allocated in, and completes each commit whose message
// names no writes with those the source metastore gives. It returns the
// table as the batch leaves it (a copy when the batch changed it). An
// error is a failure to read the source (the batch is retried).
func (t *Tailer) completeTxns(ctx context.Context, evs []schemas.Event, tt *txnTable) (*txnTable, error) {
	cloned := false
	var reads []commitToRead
	for i := range evs {
		ev := &evs[i]
		if !txnEvent(ev.EventType) || len(ev.Errors) > 0 {
			continue
		}
		if !cloned {
			tt, cloned = tt.clone(), true
		}
		if a, ok := ev.Payload.(*schemas.WriteIDAllocation); ok {
			tt.allocated(a, ev.EventID)
			continue
		}
		txn, ok := ev.Payload.(*schemas.Transaction)
		if !ok || len(txn.TxnIDs) != 1 {
			continue
		}
		id := txn.TxnIDs[0]
		o, known := tt.end(id)
		if known {
			addDatabases(ev, o.Databases)
		}
		if ev.EventType.Canonical() != schemas.EventCommitTxn || len(txn.WriteIDs) > 0 {
			continue // an abort, or a commit whose message names its writes
		}
		if tt.whole(id) && (!known || !t.anyInScope(o.Databases)) {
			continue // it allocated nothing that is replicated
		}
		reads = append(reads, commitToRead{i: i, txn: id, known: known, o: o})
	}
	for _, r := range reads {
		if err := t.readWrites(ctx, &evs[r.i], r); err != nil {
			return nil, err
		}
	}
	return tt, nil
}

// readWrites completes one commit with its writes from the source
// metastore, or marks it WRITES_UNAVAILABLE when they cannot be had
// whole.
func (t *Tailer) readWrites(ctx context.Context, ev *schemas.Event, r commitToRead) error {
	src := t.cfg.Txns
	if src == nil {
		if r.known {
			t.m.writesFetched.WithLabelValues(writesUnavailable).Inc()
			unavailable(ev, fmt.Sprintf("COMMIT_TXN of source transaction %d names no writes, and no source metastore is configured "+
				"to read them from (source.metastore): the transaction's data cannot be replicated", r.txn))
		} else if !t.warned["txn-writes"] {
			t.warned["txn-writes"] = true
			t.log.Warn("a COMMIT_TXN names no writes and no source metastore is configured to read them from (source.metastore): "+
				"commits of transactions opened before the tailer tracked them are not published", "event_id", ev.EventID, "txn", r.txn)
		}
		return nil
	}
	writes, err := src.TxnWrites(ctx, r.txn)
	if err != nil {
		return fmt.Errorf("read the writes of source transaction %d (COMMIT_TXN event %d): %w", r.txn, ev.EventID, err)
	}
	if len(writes) > 0 {
		hmsevent.AddTxnWrites(ev, writes)
	}
	if r.known {
		// Read after the writes: if the allocation is still in the log,
		// no write of the transaction had aged out when they were read.
		next, err := t.cfg.Source.Next(ctx, r.o.FirstEventID-1, 1)
		if err != nil {
			return fmt.Errorf("look for event %d, the first allocation of source transaction %d: %w", r.o.FirstEventID, r.txn, err)
		}
		if len(next) == 0 || next[0].EventID != r.o.FirstEventID {
			t.m.writesFetched.WithLabelValues(writesUnavailable).Inc()
			unavailable(ev, fmt.Sprintf("COMMIT_TXN of source transaction %d names no writes, and the source metastore may no longer hold them all "+
				"(%d read): the transaction's first allocation (event %d) has aged out of the notification log, and its write notifications "+
				"age out with it (metastore.event.db.listener.timetolive, or metastore.repl.event.db.listener.timetolive with change "+
				"management on). Its data cannot be replicated from the log: keep that time to live above the tailer's lag; to go on "+
				"without this transaction's data, skip this event (its DR transaction stays open, its writes invisible, until "+
				"`hivedr failover` aborts it)", r.txn, len(writes), r.o.FirstEventID))
			return nil
		}
	}
	outcome := writesRead
	if len(writes) == 0 {
		outcome = writesNone
	}
	t.m.writesFetched.WithLabelValues(outcome).Inc()
	return nil
}

// The outcomes of hivedr_tailer_commit_writes_read_total.
const (
	writesRead        = "writes"
	writesNone        = "none"
	writesUnavailable = "unavailable"
)

func (t *Tailer) anyInScope(dbs []string) bool {
	return slices.ContainsFunc(dbs, func(db string) bool {
		_, ok := t.conf.Replication.Scope(db)
		return ok
	})
}

// unavailable marks a commit whose writes cannot be had whole.
func unavailable(ev *schemas.Event, msg string) {
	ev.Errors = append(ev.Errors, schemas.EventError{Kind: schemas.ErrWritesUnavailable, Message: msg})
}

// addDatabases adds dbs to the databases an event concerns.
func addDatabases(ev *schemas.Event, dbs []string) {
	ev.Databases = append(slices.Clone(ev.Databases), dbs...)
	slices.Sort(ev.Databases)
	ev.Databases = slices.Compact(ev.Databases)
}
