package producer

import (
	"context"
	"errors"
	"fmt"
	"math"
	"path"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/hivedr/hivedr/internal/config"
	"github.com/hivedr/hivedr/internal/hmsevent"
	"github.com/hivedr/hivedr/internal/hmslog"
	"github.com/hivedr/hivedr/internal/iceberg"
	"github.com/hivedr/hivedr/internal/kafka"
	"github.com/hivedr/hivedr/internal/location"
	"github.com/hivedr/hivedr/schemas"
)

// Bootstraps: the tailer publishes the existing state of a source database
// into its topic, as HIVEDR_SNAPSHOT_BEGIN, a SNAPSHOT_TABLE per table, a
// SNAPSHOT_PARTITION per partition and SNAPSHOT_END (applier/bootstrap.go
// applies them), then that database's events after the snapshot's cut.
//
// The single writer. The tailer's transactional producer writes every
// events topic, so the bootstrap runs inside the tailer, between its
// normal steps: each page of a snapshot is one more transaction of the
// same producer, carrying the checkpoint with the bootstrap's progress
// (BootstrapState). Ordering on the topic then needs no coordination, and
// a crash anywhere resumes from the last committed page; other databases
// are never paused (the main loop runs a step between any two pages).
//
// The cut. A request taken at checkpoint C gives each of its databases the
// cut N = C: every event <= N of the database is on its topic already.
// From then on the main loop publishes none of the database's events to
// its topic (nor heartbeats): they wait in the source log. After the END
// the CATCHUP phase publishes them, from N+1 up to the main checkpoint,
// then drops the BootstrapState in the same transaction, and the main
// loop serves the database again. So the topic holds: the events <= N,
// the bootstrap, the events > N, in order.
//
// Why no change is lost (the stamps). Each table, and each page of a
// table's partitions, is read between two heads of the source log: h1
// before the read, h2 after. If no event in (h1, h2] touches the table
// (its own events, a rename to or from it, a drop of the database), what
// was read is the state as of h2 and the record carries stamp h2;
// otherwise its state is somewhere between h1 and h2 and the record
// carries stamp h1, since replaying every event after h1 over it
// converges (each event sets the state it describes, as a re-drive
// does). h1 >= N always. The applier stamps the DR object with it:
// events after N up to the stamp are no-ops for that object and the later
// ones apply. Every change after the read is an event > h1 or > h2
// accordingly, published after the END, so none is lost; none is applied
// over a newer state either. An object dropped before it was read is
// left out: its drop event comes after the END, and the END drops what
// DR has and the snapshot does not.
//
// The cursor (resumeOrder). A snapshot's progress is the set of names
// whose TABLE records it published (published_tables), the table in
// progress by name (table_in_progress) and its last partition published.
// Every page re-lists the database and does the table in progress first,
// then each listed name not published, in name order. Not a position in
// the list: a rename can put a name between the last table done and the
// one in progress, and a position would take it for that one. And not
// only the names after the cursor: a table not yet read, renamed to a
// name already passed, would be in no record, and its rename event would
// find nothing on DR. So the END goes in a page whose listing (taken
// after every earlier page's reads) finds every name published: each
// table then has a record under the name it had at that listing, stamped
// at or below that head, so a later rename renames a table DR has and
// an earlier one is a no-op by the stamp. The final pass is unbounded on
// purpose (a bound would leave a renamed table out); each pass is a page,
// between which the other databases go on.

// Reasons for a bootstrap (SnapshotInfo.reason, BootstrapState.reason),
// declared once in schemas.
const (
	ReasonRequested     = schemas.ReasonRequested
	ReasonChainBroken   = schemas.ReasonChainBroken
	ReasonNewDatabase   = schemas.ReasonNewDatabase
	ReasonEnteredScope  = schemas.ReasonEnteredScope
	ReasonDiscontinuity = schemas.ReasonDiscontinuity
)

// requestPoll is the least time between two reads of the control topic.
const requestPoll = time.Second

// catchupBatches bounds the catch-up transactions of one database per
// step: more than the main loop's one, so a catch-up ends under load.
const catchupBatches = 4

// tableKey names a table, in lower case.
type tableKey struct{ db, table string }

// ensureControl creates the control topic the requests come on.
func (t *Tailer) ensureControl(ctx context.Context) error {
	k := t.conf.Kafka
	_, err := kafka.Ensure(ctx, t.adm, kafka.Spec{Name: t.topics.Control(), Partitions: 1, ReplicationFactor: k.ReplicationFactor, Retention: k.Retention.Duration,
		Precreated: k.PrecreatedTopics})
	return err
}

// bootIndex is the index of db's bootstrap in boots; -1 when none.
func bootIndex(boots []schemas.BootstrapState, db string) int {
	return slices.IndexFunc(boots, func(b schemas.BootstrapState) bool { return strings.EqualFold(b.Database, db) })
}

// bootstrapping reports whether db has a bootstrap in progress (any
// phase): the main loop does not publish to its topic.
func (t *Tailer) bootstrapping(db string) bool { return bootIndex(t.boots, db) >= 0 }

// newBootstrap is the state of a bootstrap of db at cut (tables: a
// table-scoped one); txns is the transaction table at the cut.
func newBootstrap(db string, tables []string, reason, requestID string, cut int64, cutTime, now time.Time, pol *config.DatabasePolicy,
	txns *txnTable) schemas.BootstrapState {
	db = strings.ToLower(db)
	b := schemas.BootstrapState{
		Database: db, BootstrapID: fmt.Sprintf("%s-%d-%d", db, cut, now.UnixMilli()), RequestID: requestID, Reason: reason,
		CutEventID: cut, CutEventTime: cutTime, Phase: schemas.PhaseSnapshot, Tables: tables,
		WithData: pol.ExternalWithData(), Started: now,
	}
	keepTxns(&b, txns)
	return b
}

// The catch-up's transactions. A commit or abort goes to every database
// its transaction allocated in (txnTable), and a catch-up re-reads events
// the main loop's table has passed, in batches of its own. So each
// bootstrap carries a table of its own: the main one at the cut, as far
// as its database goes (a transaction open at the cut may end after it),
// then advanced by each catch-up batch with the events it publishes and
// committed with them. One that only allocated in the database, its
// commit in a later batch than the allocation, thus still reaches it,
// and its DR transaction ends.

// keepTxns stores in b what tt knows of the transactions that allocated
// in b's database: the others' ends do not concern its topic.
func keepTxns(b *schemas.BootstrapState, tt *txnTable) {
	b.OpenTxns, b.TxnsTrackedAbove = nil, tt.above
	for _, o := range tt.list() {
		if _, found := slices.BinarySearch(o.Databases, b.Database); found {
			b.OpenTxns = append(b.OpenTxns, o)
		}
	}
}

// catchupTxns is the table b's next catch-up batch starts with. An older
// tailer's checkpoint carries none: nothing is known, and every commit
// naming no writes is then read from the source.
func catchupTxns(b *schemas.BootstrapState) *txnTable {
	if b.TxnsTrackedAbove < 0 {
		return newTxnTable(nil, math.MaxInt64)
	}
	return newTxnTable(b.OpenTxns, b.TxnsTrackedAbove)
}

// txnsAfter is tt after the events of ps, in log order (the changes
// completeTxns made to the table, without its reads): the table at the
// last of them, when a catch-up batch ends before its last event.
func txnsAfter(tt *txnTable, ps []prepared) *txnTable {
	tt = tt.clone()
	for i := range ps {
		ev := &ps[i].routed.Event
		switch x := ev.Payload.(type) {
		case *schemas.WriteIDAllocation:
			tt.allocated(x, ev.EventID)
		case *schemas.Transaction:
			if txnEvent(ev.EventType) && len(x.TxnIDs) == 1 {
				tt.end(x.TxnIDs[0])
			}
		}
	}
	return tt
}

// planRequest decides which bootstraps a request starts at cut, given the
// source's databases and the bootstraps in progress, and what to warn
// about: patterns that match no source database, databases out of the
// scope, databases already bootstrapping, tables asked of several
// databases.
func planRequest(req *schemas.BootstrapRequest, source []string, pol *config.Replication, active []schemas.BootstrapState,
	cut int64, cutTime, now time.Time, txns *txnTable) (boots []schemas.BootstrapState, warnings []string) {
	var dbs []string
	add := func(db string) {
		if !slices.Contains(dbs, db) {
			dbs = append(dbs, db)
		}
	}
	var outOfScope, missing []string
	if len(req.Databases) == 0 {
		for _, db := range source {
			if _, ok := pol.Scope(db); ok {
				add(strings.ToLower(db))
			}
		}
	}
	for _, pat := range req.Databases {
		pat = strings.ToLower(pat)
		found := false
		for _, db := range source {
			db = strings.ToLower(db)
			if ok, _ := path.Match(pat, db); !ok {
				continue
			}
			found = true
			if _, in := pol.Scope(db); in {
				add(db)
			} else if !slices.Contains(outOfScope, db) {
				outOfScope = append(outOfScope, db)
			}
		}
		if !found {
			missing = append(missing, pat)
		}
	}
	if len(missing) > 0 {
		warnings = append(warnings, fmt.Sprintf("request %s: %s match no database on the source", req.RequestID, strings.Join(missing, ", ")))
	}
	if len(outOfScope) > 0 {
		warnings = append(warnings, fmt.Sprintf("request %s: databases %s are not in the replication scope", req.RequestID, strings.Join(outOfScope, ", ")))
	}
	sort.Strings(dbs)
	var tables []string
	for _, tb := range req.Tables {
		tables = append(tables, strings.ToLower(tb))
	}
	if len(tables) > 0 && len(dbs) != 1 {
		return nil, append(warnings, fmt.Sprintf("request %s names tables %v but %d databases (%v): a table-scoped bootstrap is of one database; nothing done",
			req.RequestID, tables, len(dbs), dbs))
	}
	reason := req.Reason
	if reason == "" {
		reason = ReasonRequested
	}
	for _, db := range dbs {
		if i := bootIndex(active, db); i >= 0 {
			warnings = append(warnings, fmt.Sprintf("request %s: database %s is being bootstrapped already (bootstrap %s, %s)",
				req.RequestID, db, active[i].BootstrapID, active[i].Phase))
			continue
		}
		p, _ := pol.Scope(db)
		boots = append(boots, newBootstrap(db, tables, reason, req.RequestID, cut, cutTime, now, p, txns))
	}
	return boots, warnings
}

// controlRecord is one request read from the control topic.
type controlRecord struct {
	offset int64
	req    *schemas.BootstrapRequest
}

// readRequests reads the control topic's committed records from the
// checkpoint's requests offset on, and the offset after them.
func (t *Tailer) readRequests(ctx context.Context) ([]controlRecord, int64, error) {
	topic := t.topics.Control()
	end, err := kafka.CommittedEnd(ctx, t.prod, topic, 0)
	if err != nil {
		return nil, 0, err
	}
	if end <= t.reqOff {
		return nil, t.reqOff, nil
	}
	recs, err := kafka.ReadCommitted(ctx, t.consumeOpts(), topic, 0, t.reqOff, end)
	if err != nil {
		return nil, 0, err
	}
	var out []controlRecord
	for _, r := range recs {
		v, err := t.cfg.Codec.Decode(ctx, r.Value)
		req, ok := v.(*schemas.BootstrapRequest)
		if err != nil || !ok {
			t.log.Warn("not a bootstrap request on the control topic; skipped", "offset", r.Offset, "err", err, "type", fmt.Sprintf("%T", v))
			continue
		}
		out = append(out, controlRecord{offset: r.Offset, req: req})
	}
	return out, end, nil
}

// ours reports whether a request is for this tailer, logging once per
// other source the ones that are not.
func (t *Tailer) ours(req *schemas.BootstrapRequest) bool {
	if req.Source == t.conf.Source.Name {
		return true
	}
	t.m.requestsSkipped.Inc()
	if key := "source/" + req.Source; !t.warned[key] {
		t.warned[key] = true
		t.log.Info("bootstrap requests for another source are skipped", "request_source", req.Source, "request_id", req.RequestID)
	}
	return false
}

// bootstrapStep takes new requests and runs one page of each bootstrap
// whose snapshot is being published (at most bootstrap_concurrency) and a
// few catch-up batches of each bootstrap in CATCHUP, each its own
// transaction. It reports whether it published anything.
func (t *Tailer) bootstrapStep(ctx context.Context) (bool, error) {
	if t.cfg.Snapshots == nil {
		if (len(t.boots) > 0 || t.autoCheck) && !t.warned["nosnapshots"] {
			t.warned["nosnapshots"] = true
			t.log.Warn("bootstraps need the source metastore's Thrift address (source.metastore); none are run")
		}
		return false, nil
	}
	progressed := false
	if time.Since(t.lastReqPoll) >= requestPoll {
		took, err := t.takeRequests(ctx)
		if err != nil {
			return false, err
		}
		t.lastReqPoll = time.Now()
		progressed = took
	}
	// (Only once caught up: a database created after the checkpoint gets
	// its CREATE_DATABASE published instead.)
	if t.autoCheck && t.checkpoint >= t.head {
		if err := t.autoBootstraps(ctx); err != nil {
			return progressed, err
		}
		t.autoCheck = false
	}
	var snaps, catchups []string
	for _, b := range t.boots {
		switch {
		case b.Phase == schemas.PhaseCatchup:
			catchups = append(catchups, b.Database)
		case len(snaps) < t.conf.Tailer.BootstrapConcurrency:
			snaps = append(snaps, b.Database) // the others wait their turn
		}
	}
	for _, db := range snaps {
		published, err := t.snapshotPage(ctx, db)
		if err != nil {
			return progressed, err
		}
		progressed = progressed || published
	}
	t.logProgress()
	if err := t.releaseSnapshots(ctx); err != nil {
		return progressed, err
	}
	for _, db := range catchups {
		for range catchupBatches {
			more, err := t.catchup(ctx, db)
			if err != nil {
				return progressed, err
			}
			progressed = true
			if !more {
				break
			}
		}
	}
	return progressed, nil
}

// progressEvery is how often a bootstrap's progress is logged.
const progressEvery = 10 * time.Second

// logProgress logs each bootstrap's figures every progressEvery: tables,
// partitions, files and bytes so far, with the partition rate since it
// started.
func (t *Tailer) logProgress() {
	if time.Since(t.lastProgress) < progressEvery || len(t.boots) == 0 {
		return
	}
	t.lastProgress = time.Now()
	for _, b := range t.boots {
		el := time.Since(b.Started)
		rate := 0.0
		if el > 0 {
			rate = float64(b.PartitionsDone) / el.Seconds()
		}
		t.log.Info("bootstrap progress", "db", b.Database, "bootstrap_id", b.BootstrapID, "phase", b.Phase,
			"tables", fmt.Sprintf("%d/%d", b.TablesDone, b.TablesTotal), "partitions", b.PartitionsDone, "files", b.Files,
			"bytes", b.Bytes, "partitions_per_s", fmt.Sprintf("%.0f", rate), "catchup_event_id", b.CatchupEventID,
			"checkpoint", t.checkpoint, "elapsed", el.Round(time.Second))
	}
}

// takeRequests reads the control topic and starts the bootstraps its new
// requests ask for, at the current checkpoint, in one transaction with
// the new requests offset.
func (t *Tailer) takeRequests(ctx context.Context) (bool, error) {
	reqs, end, err := t.readRequests(ctx)
	if err != nil || end == t.reqOff {
		return false, err
	}
	st := t.state()
	st.reqOff = end
	var source []string
	for _, r := range reqs {
		if !t.ours(r.req) {
			continue
		}
		if r.req.Reason == ReasonChainBroken {
			t.log.Warn("a chain_broken bootstrap request, but this tailer's chain is not broken: ignored (request a bootstrap without -repair-chain)",
				"request_id", r.req.RequestID, "offset", r.offset)
			continue
		}
		if source == nil {
			if source, err = t.cfg.Source.Databases(ctx); err != nil {
				return false, err
			}
		}
		boots, warnings := planRequest(r.req, source, &t.conf.Replication, st.boots, st.cp, st.cpTime, time.Now(), st.txns)
		for _, w := range warnings {
			t.log.Warn(w, "request_id", r.req.RequestID)
		}
		for _, b := range boots {
			t.log.Info("bootstrap requested", "db", b.Database, "bootstrap_id", b.BootstrapID, "cut", b.CutEventID,
				"tables", b.Tables, "request_id", b.RequestID, "requested_by", r.req.RequestedBy)
		}
		st.boots = append(st.boots, boots...)
	}
	return true, t.commit(ctx, nil, st, schemas.StateRunning)
}

// autoBootstraps starts a bootstrap (new_database) of each database of the
// scope with policy bootstrap: auto that exists on the source but to
// whose topic the tailer never published an event (its chain is 0:
// heartbeats at most).
func (t *Tailer) autoBootstraps(ctx context.Context) error {
	st := t.state()
	for _, db := range t.inScope {
		p, _ := t.conf.Replication.Scope(db)
		if p == nil || !p.AutoBootstrap() || st.chain[db] > 0 || bootIndex(st.boots, db) >= 0 {
			continue
		}
		b := newBootstrap(db, nil, ReasonNewDatabase, "", st.cp, st.cpTime, time.Now(), p, st.txns)
		t.log.Info("bootstrapping a database of the scope never replicated (policy bootstrap: auto)", "db", db, "bootstrap_id", b.BootstrapID, "cut", b.CutEventID)
		st.boots = append(st.boots, b)
	}
	if len(st.boots) == len(t.boots) {
		return nil
	}
	return t.commit(ctx, nil, st, schemas.StateRunning)
}

// replicated reports whether a table is in the replication scope.
func replicated(pol *config.Replication, tb *schemas.Table) bool {
	p, ok := pol.Scope(tb.Database)
	return ok && p.TableIncluded(tb.Name)
}

// enteredScope reports the table an event renames into the replication
// scope from a name outside it (its data was never copied).
func enteredScope(ev *schemas.Event, pol *config.Replication) (tableKey, bool) {
	c, ok := ev.Payload.(*schemas.TableChange)
	if ev.EventType.Canonical() != schemas.EventAlterTable || !ok || c.Before == nil || c.After == nil {
		return tableKey{}, false
	}
	if replicated(pol, c.Before) || !replicated(pol, c.After) {
		return tableKey{}, false
	}
	return tableKey{strings.ToLower(c.After.Database), strings.ToLower(c.After.Name)}, true
}

// enterScope adds to st's bootstraps a table-scoped bootstrap (at st's
// checkpoint) for each database with tables renamed into the scope by
// the transaction st ends, unless the database is being bootstrapped.
func (t *Tailer) enterScope(st txState, entered []tableKey) []schemas.BootstrapState {
	boots := st.boots
	for _, k := range entered {
		if i := bootIndex(boots, k.db); i >= 0 {
			if b := &boots[i]; b.Seq == 0 && b.Reason == ReasonEnteredScope && b.CutEventID == st.cp && !slices.Contains(b.Tables, k.table) {
				b.Tables = append(slices.Clone(b.Tables), k.table) // one more of this same transaction
			}
			continue
		}
		p, _ := t.conf.Replication.Scope(k.db)
		b := newBootstrap(k.db, []string{k.table}, ReasonEnteredScope, "", st.cp, st.cpTime, time.Now(), p, st.txns)
		t.log.Info("a table was renamed into the scope: bootstrapping it", "db", k.db, "table", k.table, "bootstrap_id", b.BootstrapID, "cut", b.CutEventID)
		boots = append(boots, b)
	}
	return boots
}

// snapshotTables lists the tables of b's snapshot: the database's tables
// the policy includes (a table-scoped bootstrap: those of its tables that
// exist), in name order, lower case.
func (t *Tailer) snapshotTables(ctx context.Context, b *schemas.BootstrapState, pol *config.DatabasePolicy) ([]string, error) {
	all, err := t.cfg.Snapshots.Tables(ctx, b.Database)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, n := range all {
		n = strings.ToLower(n)
		if !pol.TableIncluded(n) || (len(b.Tables) > 0 && !slices.Contains(b.Tables, n)) {
			continue
		}
		out = append(out, n)
	}
	sort.Strings(out)
	return slices.Compact(out), nil
}

// snapPage is one transaction of a bootstrap's snapshot being built.
type snapPage struct {
	t    *Tailer
	b    *schemas.BootstrapState
	prev int64 // the topic's chain, carried by every snapshot record
	recs []*kgo.Record
	n    int // snapshot records
	// writeIDs is the write-ID state the next TABLE record carries (a
	// transactional table's: bootstrap_acid.go).
	writeIDs *schemas.SnapshotWriteIDs
}

// add appends a snapshot record (and its copy tasks) to the page: seq is
// the next of the bootstrap, the files' tasks are named
// <bootstrap_id>-s<seq>-<i>, and a file outside the roots becomes an
// error of the record, as for events.
func (pg *snapPage) add(typ schemas.EventType, table string, payload schemas.Payload, stamp int64, files []schemas.FileRef, errs []schemas.EventError,
	from *hdfsSnap) error {
	t, b := pg.t, pg.b
	b.Seq++
	at := b.CutEventTime
	if at.IsZero() {
		at = time.Now()
	}
	ev := schemas.Event{EventID: b.CutEventID, EventTime: at, EventType: typ, Database: b.Database, Table: table,
		Databases: []string{b.Database}, Source: t.conf.Source.Name, MessageFormat: "hivedr", Payload: payload,
		Files: files, Errors: errs, PreviousEventID: &pg.prev,
		Snapshot: &schemas.SnapshotInfo{BootstrapID: b.BootstrapID, CutEventID: b.CutEventID, StampEventID: stamp, Seq: b.Seq,
			Tables: b.Tables, WithData: b.WithData, Reason: b.Reason}}
	if typ == schemas.EventSnapshotTable {
		ev.Snapshot.WriteIDs, pg.writeIDs = pg.writeIDs, nil
	}
	if typ == schemas.EventSnapshotEnd {
		ev.Snapshot.TableCount, ev.Snapshot.PartitionCount, ev.Snapshot.FileCount, ev.Snapshot.ByteCount =
			b.TablesDone, b.PartitionsDone, b.Files, b.Bytes
	}
	envelope(&ev, &t.conf.Source, t.version)
	r := Routed{Event: ev}
	seq := b.Seq
	r.addTasks(0, &t.conf.Replication, func(i int) string { return fmt.Sprintf("%s-s%d-%d", b.BootstrapID, seq, i) })
	if from != nil {
		readTasksFrom(from, r.Tasks) // the files as the snapshot holds them
	}
	id := strconv.FormatInt(b.CutEventID, 10)
	v, err := t.cfg.Codec.Encode(&r.Event)
	if err != nil {
		return fmt.Errorf("encode %s record %d of bootstrap %s: %w", typ, seq, b.BootstrapID, err)
	}
	if len(r.Event.Errors) > 0 {
		t.log.Warn("publishing a bootstrap record with errors; the applier will halt the database on it",
			"bootstrap_id", b.BootstrapID, "seq", seq, "type", typ, "table", table, "errors", r.Event.Errors)
	}
	rec := record(t.topics.Events(b.Database), fmt.Sprintf("snapshot/%s/%d", b.BootstrapID, seq), v, schemas.NameMetastoreEvent, id)
	if _, err := t.fit(rec, &r.Event, b.Database); err != nil {
		return err
	}
	pg.recs = append(pg.recs, rec)
	for _, task := range r.Tasks {
		tv, err := t.cfg.Codec.Encode(&task)
		if err != nil {
			return fmt.Errorf("encode copy task %s: %w", task.TaskID, err)
		}
		pg.recs = append(pg.recs, taskRecord(t.topics.Manifests(), task, tv, id))
	}
	t.m.tasksPublished.Add(float64(len(r.Tasks)))
	t.m.bootstrapRecords.WithLabelValues(b.Database).Inc()
	b.Files += int64(len(r.Tasks))
	pg.n++
	return nil
}

// files lists the data files under dir, an object of table tb, for a
// snapshot record: managed tables' always, external tables' when the
// policy copies them (with_data); from a snapshot when from is one (the
// files' live names are returned). It adds their bytes to the bootstrap.
func (pg *snapPage) files(ctx context.Context, tb *schemas.Table, dir string, from *hdfsSnap) ([]schemas.FileRef, []schemas.EventError, error) {
	files, size, errs, err := pg.list(ctx, tb, dir, from)
	pg.b.Bytes += size
	return files, errs, err
}

// list is files without adding to the bootstrap: safe to call from
// several goroutines.
func (pg *snapPage) list(ctx context.Context, tb *schemas.Table, dir string, from *hdfsSnap) ([]schemas.FileRef, int64, []schemas.EventError, error) {
	t, b := pg.t, pg.b
	// An Iceberg table's files go with it even when external tables'
	// do not (external_data: metadata_only): its pointer is metadata that
	// names them, and later commits bring only what they add.
	if t.lister == nil || dir == "" || tb.TableType == "VIRTUAL_VIEW" || (tb.External() && !b.WithData && !IsIceberg(tb)) {
		return nil, 0, nil, nil
	}
	if v := pg.acidView(tb); v != nil {
		return pg.listACID(ctx, tb, dir, v) // what its write-ID state reads (bootstrap_acid.go)
	}
	if IsIceberg(tb) {
		// What its live snapshots reach, from its metadata, read live:
		// Iceberg files are written once, so an HDFS snapshot adds
		// nothing (iceberg.go).
		return t.lister.listIceberg(ctx, "bootstrap "+b.BootstrapID, "", tb.Parameters[iceberg.ParamMetadataLocation])
	}
	read := dir
	if from != nil {
		l, err := location.Parse(dir)
		if err != nil {
			return nil, 0, nil, err
		}
		in, ok := from.inSnapshot(l)
		if !ok {
			return nil, 0, nil, fmt.Errorf("directory %s is not under snapshot %s (a bug)", dir, from)
		}
		read = in.String()
	}
	files, size, e, err := t.lister.listDir(ctx, read, "bootstrap "+b.BootstrapID, "db", b.Database, "table", tb.Name)
	if err != nil || e != nil {
		var errs []schemas.EventError
		if e != nil {
			errs = []schemas.EventError{*e}
		}
		return nil, 0, errs, err
	}
	if from != nil {
		if err := fromSnapshot(from, files); err != nil {
			return nil, 0, []schemas.EventError{{Kind: schemas.ErrListingFailed, Path: dir, Message: err.Error()}}, nil
		}
	}
	return files, size, nil, nil
}

// listWorkers bounds the directory listings of a page run at once.
const listWorkers = 16

// ioParallel runs fn(0) ... fn(n-1) on up to listWorkers goroutines and
// returns when all have: for calls that wait on I/O.
func ioParallel(n int, fn func(i int)) {
	sem := make(chan struct{}, listWorkers)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			fn(i)
		}()
	}
	wg.Wait()
}

// snapshotPage publishes the next page of db's snapshot, with the
// checkpoint recording how far it got: BEGIN first, then per table in
// name order its TABLE record and its partitions in pages of
// tailer.bootstrap_page, and END after the last, which moves the
// bootstrap to CATCHUP. A table's TABLE record and its first partitions
// always share a transaction, so done_partition "" means the table after
// done_table is not started. A transactional table whose write IDs are
// open waits for a later page (bootstrap_acid.go); a page that only found
// such tables commits nothing. It reports whether it committed.
func (t *Tailer) snapshotPage(ctx context.Context, db string) (bool, error) {
	st := t.state()
	i := bootIndex(st.boots, db)
	b := &st.boots[i]
	pol, ok := t.conf.Replication.Scope(db)
	if !ok {
		t.log.Warn("a database being bootstrapped left the replication scope: bootstrap dropped", "db", db, "bootstrap_id", b.BootstrapID)
		finishRelease(&st, b)
		delete(t.touch, b.BootstrapID)
		t.forgetACID(b.BootstrapID)
		st.boots = slices.Delete(st.boots, i, i+1)
		return true, t.commit(ctx, nil, st, schemas.StateRunning)
	}
	if err := t.prepareTopics(ctx, st.chain, []string{db}); err != nil {
		return false, err
	}
	pg := &snapPage{t: t, b: b, prev: st.chain[db]}
	tables, err := t.snapshotTables(ctx, b, pol)
	if err != nil {
		return false, err
	}
	if b.Seq == 0 {
		stop, err := t.beginSnapshot(ctx, &st, pg, db, tables)
		if err != nil {
			return false, err
		}
		if stop {
			return true, t.commit(ctx, nil, st, schemas.StateRunning)
		}
	}
	adoptLegacyCursor(b, tables)
	// The table in progress first (its TABLE record is out), then every
	// listed name not published yet, in name order: a name renamed behind
	// the cursor is among them, so the last pass, the page that finds
	// none, is the one that publishes the END (see resumeOrder).
	queue, inProgress := resumeOrder(b, tables)
	listedNone := len(queue) == 0
	handled := 0 // tables done (or gone) in this page: not left waiting
	now := t.acidState().now()
	for len(queue) > 0 && pg.n < t.conf.Tailer.BootstrapPage {
		name := queue[0]
		advance, done, err := t.snapshotTable(ctx, pg, db, name, inProgress && name == b.TableInProgress, now)
		if err != nil {
			return false, err
		}
		if done {
			handled++
		}
		if advance {
			queue = queue[1:]
		}
	}
	if listedNone {
		if err := t.endSnapshot(&st, pg, db); err != nil {
			return false, err
		}
	}
	if pg.n == 0 && handled == 0 {
		return false, nil // every table left was waiting: nothing to commit
	}
	if err := t.commit(ctx, pg.recs, st, schemas.StateRunning); err != nil {
		return false, err
	}
	t.faultPaged(b.TableInProgress, b.DonePartition)
	return true, nil
}

// beginSnapshot starts the snapshot of db at the cut: its HDFS snapshots
// first (planned and committed before they are taken), then the BEGIN
// record. It reports stop when the page ends with st as it is: the
// database is gone from the source (the bootstrap moves to CATCHUP), or
// HDFS snapshots were just planned.
func (t *Tailer) beginSnapshot(ctx context.Context, st *txState, pg *snapPage, db string, tables []string) (stop bool, err error) {
	b := pg.b
	d, err := t.cfg.Snapshots.Database(ctx, db)
	if errors.Is(err, ErrNoSuchObject) {
		// Dropped since the cut: its events after the cut say so.
		t.log.Warn("a database to bootstrap is gone from the source: publishing its events after the cut only", "db", db, "bootstrap_id", b.BootstrapID)
		b.Phase, b.CatchupEventID = schemas.PhaseCatchup, b.CutEventID
		finishRelease(st, b)
		return true, nil
	}
	if err != nil {
		return false, err
	}
	// At the cut: HDFS snapshots of the directories it copies from,
	// planned (and committed) before they are taken, so a crash in
	// between leaves none the checkpoint does not name.
	if b.SnapshotEventID == 0 {
		if len(b.HDFSSnapshots) == 0 {
			planned, err := t.planSnapshots(ctx, b, d, tables)
			if err != nil {
				return false, err
			}
			if len(planned) > 0 {
				b.HDFSSnapshots = planned
				if err := t.addRelease(ctx, st, b); err != nil {
					return false, err
				}
				return true, nil
			}
		} else if err := t.takeSnapshots(ctx, b); err != nil {
			return false, err
		}
	}
	b.TablesTotal = int64(len(tables))
	t.log.Info("bootstrap started", "db", db, "bootstrap_id", b.BootstrapID, "cut", b.CutEventID, "tables", len(tables), "reason", b.Reason)
	return false, pg.add(schemas.EventSnapshotBegin, "", &schemas.DatabaseChange{After: d}, 0, nil, nil, nil)
}

// snapshotTable publishes what fits in the page of table name of db: its
// TABLE record unless started (it is the table in progress), then a page
// of its partitions. It reports advance when the page is done with the
// table (published to the end, gone, or waiting for its write IDs), and
// done when the table counts as handled (not left waiting).
func (t *Tailer) snapshotTable(ctx context.Context, pg *snapPage, db, name string, started bool, now time.Time) (advance, done bool, err error) {
	b := pg.b
	if !started && t.acidWaiting(b, name, now) {
		return true, false, nil // its write IDs were open: read again later
	}
	var tb *schemas.Table
	stamp, head, serr := t.stamped(ctx, db, name, func() error { tb, err = t.cfg.Snapshots.Table(ctx, db, name); return err })
	switch {
	case errors.Is(err, ErrNoSuchObject):
		// Dropped (or renamed away) before it was read: its event comes
		// after END. One in progress stays published under its name.
		finishTable(b, name)
		return true, true, nil
	case err != nil:
		return false, false, err
	case serr != nil:
		return false, false, serr
	}
	t.noteTableRead(b, name)
	if !started {
		if ready, err := pg.acidTable(ctx, tb, now); err != nil || !ready {
			// write IDs open: a later page reads it again
			return err == nil, false, err
		}
	}
	if !started {
		var files []schemas.FileRef
		var errs []schemas.EventError
		var from *hdfsSnap
		if len(tb.PartitionKeys) == 0 {
			if from, err = pg.readFrom(ctx, tb, tb.Location, head); err != nil {
				return false, true, err
			}
			if files, errs, err = pg.files(ctx, tb, tb.Location, from); err != nil {
				return false, true, err
			}
		}
		if err := pg.add(schemas.EventSnapshotTable, tb.Name, &schemas.TableChange{After: tb}, stamp, files, errs, from); err != nil {
			return false, true, err
		}
		b.TablesDone++
		markPublished(b, name)
		if len(tb.PartitionKeys) == 0 {
			finishTable(b, name)
			return true, true, nil
		}
		b.TableInProgress, b.DonePartition = name, ""
	}
	more, err := t.partitionPage(ctx, pg, tb, max(t.conf.Tailer.BootstrapPage-pg.n, 1))
	if err != nil {
		return false, true, err
	}
	if !more {
		finishTable(b, name)
	}
	return !more, true, nil
}

// endSnapshot publishes the snapshot's END: the bootstrap moves to
// CATCHUP, and what only the SNAPSHOT phase needed goes.
func (t *Tailer) endSnapshot(st *txState, pg *snapPage, db string) error {
	b := pg.b
	if err := pg.add(schemas.EventSnapshotEnd, "", nil, 0, nil, nil, nil); err != nil {
		return err
	}
	b.Phase, b.CatchupEventID = schemas.PhaseCatchup, b.CutEventID
	finishRelease(st, b) // every copy task of it is published
	delete(t.touch, b.BootstrapID)
	b.PublishedTables = nil     // only the SNAPSHOT phase needs them
	st.chain[db] = b.CutEventID // the END's event ID: what the next event follows
	delete(t.partNames, b.BootstrapID)
	t.forgetACID(b.BootstrapID)
	t.log.Info("bootstrap snapshot published; catching up", "db", db, "bootstrap_id", b.BootstrapID, "records", b.Seq,
		"tables", b.TablesDone, "partitions", b.PartitionsDone, "files", b.Files, "bytes", b.Bytes)
	return nil
}

// resumeOrder is what a page of b's snapshot has left to do, given the
// tables listed at its start: the table in progress first (reported by
// inProgress; it is published, so it comes first even if a rename put
// another name before it), then every listed name not yet published, in
// name order. The cursor is the set of published names, not a position
// in a list that renames reorder, so resuming never skips a TABLE record
// and never publishes a table, or a partition, twice.
func resumeOrder(b *schemas.BootstrapState, tables []string) (queue []string, inProgress bool) {
	if b.TableInProgress != "" {
		queue, inProgress = append(queue, b.TableInProgress), true
	}
	for _, n := range tables {
		if n != b.TableInProgress && !published(b, n) {
			queue = append(queue, n)
		}
	}
	return queue, inProgress
}

// published reports whether b's snapshot has published name's TABLE record.
func published(b *schemas.BootstrapState, name string) bool {
	_, ok := slices.BinarySearch(b.PublishedTables, name)
	return ok
}

// markPublished adds name to b's published tables, kept sorted.
func markPublished(b *schemas.BootstrapState, name string) {
	if i, ok := slices.BinarySearch(b.PublishedTables, name); !ok {
		b.PublishedTables = slices.Insert(slices.Clone(b.PublishedTables), i, name)
	}
}

// finishTable records that name has all its records published (or is gone).
func finishTable(b *schemas.BootstrapState, name string) {
	b.DoneTable, b.DonePartition = name, ""
	if b.TableInProgress == name {
		b.TableInProgress, b.TableInProgressIncarnation = "", ""
	}
}

// adoptLegacyCursor turns the cursor of a checkpoint written before
// table_in_progress and published_tables into them, as that tailer meant
// it: the listed names up to done_table are published, and with a
// done_partition the next listed name is in progress.
func adoptLegacyCursor(b *schemas.BootstrapState, tables []string) {
	if b.Seq == 0 || b.TableInProgress != "" || len(b.PublishedTables) > 0 || (b.DoneTable == "" && b.DonePartition == "") {
		return
	}
	for _, n := range tables {
		switch {
		case n <= b.DoneTable:
			markPublished(b, n)
		case b.DonePartition != "" && b.TableInProgress == "":
			b.TableInProgress = n
			markPublished(b, n)
		}
	}
}

// partitionPage adds up to n partition records of table tb, after the
// bootstrap's done_partition, to the page, read with one stamp. It reports
// whether the table has partitions left after them.
func (t *Tailer) partitionPage(ctx context.Context, pg *snapPage, tb *schemas.Table, n int) (bool, error) {
	b, db := pg.b, pg.b.Database
	name := strings.ToLower(tb.Name)
	if b.DonePartition == "" {
		// The table's first page, in the transaction of its TABLE record
		// (of tb): which table the partitions to come belong to.
		b.TableInProgressIncarnation = tableIncarnation(tb)
	} else if !t.sameTable(b, tb) {
		return false, nil
	}
	names, left, err := t.partitionNames(ctx, b, name, n)
	if errors.Is(err, ErrNoSuchObject) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	if len(names) == 0 {
		return false, nil
	}
	var parts []schemas.Partition
	var stamp, head int64
	var serr error
	for try := 1; ; try++ {
		stamp, head, serr = t.stamped(ctx, db, name, func() error { parts, err = t.cfg.Snapshots.Partitions(ctx, db, name, names); return err })
		torn := tornPartition(tb, parts)
		if err != nil || serr != nil || torn < 0 {
			break
		}
		// The metastore reads a page of partitions in several queries,
		// not in one snapshot of its database: a partition dropped between
		// them comes back without its values. Read the page again (the
		// drop has committed by then).
		if try == tornTries {
			return false, fmt.Errorf("bootstrap %s: the source metastore answered %d times for %s.%s a partition with %d values where the table has %d keys (%v at %s): "+
				"a partition read while it changes; the tailer tries the page again", b.BootstrapID, try, db, name,
				len(parts[torn].Values), len(tb.PartitionKeys), parts[torn].Values, parts[torn].Location)
		}
		t.log.Warn("bootstrap: a partition read while it changed on the source; reading the page again", "db", db, "table", name,
			"bootstrap_id", b.BootstrapID, "values", parts[torn].Values, "location", parts[torn].Location, "keys", len(tb.PartitionKeys))
	}
	switch {
	case errors.Is(err, ErrNoSuchObject):
		return false, nil
	case err != nil:
		return false, err
	case serr != nil:
		return false, serr
	}
	t.m.partitionsRead.WithLabelValues(db).Add(float64(len(parts)))
	// Read between two reads of the same table (a table ID is never
	// given again), they are its partitions.
	again, err := t.cfg.Snapshots.Table(ctx, db, name)
	switch {
	case errors.Is(err, ErrNoSuchObject):
		return false, nil
	case err != nil:
		return false, err
	case !t.sameTable(b, again):
		return false, nil
	}
	// Each partition's files from the snapshot holding its directory,
	// unless the table changed since the snapshots were taken.
	from := make([]*hdfsSnap, len(parts))
	for i := range parts {
		if from[i], err = pg.readFrom(ctx, tb, parts[i].Location, head); err != nil {
			return false, err
		}
	}
	if err := pg.acidPartitions(ctx, tb); err != nil {
		return false, err
	}
	stamp = acidStamp(stamp, pg.acidView(tb))
	// The partitions' directories are listed at once (I/O, one call each),
	// then the records made in order.
	type listed struct {
		files []schemas.FileRef
		errs  []schemas.EventError
		size  int64
		err   error
	}
	ls := make([]listed, len(parts))
	ioParallel(len(parts), func(i int) {
		l := &ls[i]
		l.files, l.size, l.errs, l.err = pg.list(ctx, tb, parts[i].Location, from[i])
	})
	for i := range parts {
		l := ls[i]
		if l.err != nil {
			return false, l.err
		}
		b.Bytes += l.size
		if err := pg.add(schemas.EventSnapshotPartition, tb.Name, &schemas.PartitionChange{Table: tb, After: []schemas.Partition{parts[i]}}, stamp, l.files, l.errs, from[i]); err != nil {
			return false, err
		}
		b.PartitionsDone++
	}
	b.DonePartition = names[len(names)-1]
	return left, nil
}

// tornTries is how many times a page of partitions is read while the
// metastore answers one torn (tornPartition) before the step fails.
const tornTries = 5

// tornPartition returns the index of the first of parts whose values do
// not match tb's partition keys in number, or -1.
func tornPartition(tb *schemas.Table, parts []schemas.Partition) int {
	for i := range parts {
		if len(parts[i].Values) != len(tb.PartitionKeys) {
			return i
		}
	}
	return -1
}

// A table dropped and created again under the name of the table in
// progress is another table: its partitions (other keys, other values)
// do not belong under the TABLE record published, and the applier would
// add them to the DR table that record made. So the table in progress is
// known by its incarnation, recorded with its first partition page, and
// a page that finds another one ends the table there, as if it were
// dropped: the DR table keeps the old one's state, stamped before the
// drop, and the events after the cut (the drop, the create, the new
// table's partitions and data) bring the new one.

// tableIncarnation names which table tb is: the metastore's table ID
// (Hive 4's Table.id, never given again), or its create time from a
// metastore without IDs.
func tableIncarnation(tb *schemas.Table) string {
	id, err := hmsevent.TableID(tb.ThriftJSON)
	if err == nil && id > 0 {
		return "id:" + strconv.FormatInt(id, 10)
	}
	return "created:" + strconv.FormatInt(tb.CreateTime, 10)
}

// sameIncarnation reports whether tb is the table whose TABLE record was
// published with incarnation recorded ("": not known, taken as the same).
func sameIncarnation(recorded string, tb *schemas.Table) bool {
	return recorded == "" || tableIncarnation(tb) == recorded
}

// sameTable reports whether tb is b's table in progress, logging when it
// is another one.
func (t *Tailer) sameTable(b *schemas.BootstrapState, tb *schemas.Table) bool {
	if sameIncarnation(b.TableInProgressIncarnation, tb) {
		return true
	}
	t.log.Info("bootstrap: the table in progress was dropped and created again; its partitions end here, and its events after the cut bring the new table",
		"db", b.Database, "bootstrap_id", b.BootstrapID, "table", b.TableInProgress, "after", b.DonePartition,
		"published", b.TableInProgressIncarnation, "found", tableIncarnation(tb))
	return false
}

// acidStamp is the stamp of a page of partitions of a transactional
// table whose files are chosen by write-ID state v (nil: not one): at
// most the log's head when v was read. The page's own stamp says its
// metadata is as of a later head, but its files are what v selects
// among those still there: a compaction committed since v (its
// directory invisible to v) whose merged deltas the source's cleaner
// has removed leaves the partition without them, and the compaction's
// event, after v's head, must then apply on DR rather than be taken as
// already applied. Events replayed over a state read later converge, as
// for any stamp h1.
func acidStamp(stamp int64, v *acidView) int64 {
	if v == nil {
		return stamp
	}
	return min(stamp, v.at)
}

// partitionWindow is how many partition names of the table in progress a
// bootstrap holds at most (besides a page larger than it): the names come
// from the metastore in windows of this size, so the tailer's memory does
// not grow with a table's partitions.
const partitionWindow = 10_000

// partitionNames returns the next (at most n) partition names of table
// after b's done_partition, in byte order, and whether more follow. They
// come from a window of the table's names (partNames), listed again from
// done_partition when the page would run past it. Each listing (a window)
// is taken after the table's TABLE record was read: it holds every
// partition whose ADD_PARTITION is at or below that record's stamp, which
// the applier no-ops; one added later is either in a later window, read
// with a page's own stamp (its ADD_PARTITION is at or below it), or comes
// after the END; one dropped is left out by the page's read.
//
// A table in progress that this process did not start (the tailer was
// restarted inside it) has its listing started again from done_partition:
// counted in hivedr_tailer_bootstrap_relisted_tables_total, at most one
// table per bootstrap and restart.
func (t *Tailer) partitionNames(ctx context.Context, b *schemas.BootstrapState, table string, n int) ([]string, bool, error) {
	c, ok := t.partNames[b.BootstrapID]
	if !ok || c.table != table || c.after > b.DonePartition || (c.rest(b.DonePartition) < n && c.more) {
		if !ok {
			if b.DonePartition != "" {
				t.m.relistedTables.Inc()
				t.log.Info("bootstrap: listing the partitions of the table in progress again after a restart", "db", b.Database,
					"bootstrap_id", b.BootstrapID, "table", table, "after", b.DonePartition)
			}
		}
		names, more, err := t.cfg.Snapshots.PartitionNames(ctx, b.Database, table, b.DonePartition, max(partitionWindow, n))
		if err != nil {
			return nil, false, err
		}
		t.m.partitionListings.WithLabelValues(b.Database).Inc()
		c = partNames{table: table, after: b.DonePartition, names: names, more: more}
		t.partNames[b.BootstrapID] = c
	}
	from := c.from(b.DonePartition)
	names := c.names[from:min(from+n, len(c.names))]
	return names, from+len(names) < len(c.names) || c.more, nil
}

// partNames is a window of the partition names of the table a bootstrap
// is in: those after after, in byte order, up to the window's size; more
// says names follow the window.
type partNames struct {
	table string
	after string
	names []string
	more  bool
}

// from is the index of the first name of the window after cursor.
func (c partNames) from(cursor string) int {
	i, found := slices.BinarySearch(c.names, cursor)
	if found {
		i++
	}
	return i
}

// rest is how many names of the window follow cursor.
func (c partNames) rest(cursor string) int { return len(c.names) - c.from(cursor) }

// stamped runs read between two reads of the source log's head and
// returns the stamp of what it read (stampOf, the rule at the top) and
// the second head.
func (t *Tailer) stamped(ctx context.Context, db, table string, read func() error) (stamp, head int64, err error) {
	h1, err := t.cfg.Source.Head(ctx)
	if err != nil {
		return 0, 0, err
	}
	if err := read(); err != nil {
		return 0, 0, nil // the caller looks at read's error
	}
	h2, err := t.cfg.Source.Head(ctx)
	if err != nil {
		return 0, 0, err
	}
	touched, err := t.touchedIn(ctx, h1, h2, db, table)
	if err != nil {
		return 0, 0, err
	}
	return stampOf(h1, h2, touched), h2, nil
}

// stampOf is the stamp of an object read between heads h1 and h2: h2
// when no event in (h1, h2] touched it (the state read is the state as of
// h2), else h1 (replaying every event after h1 over it converges).
func stampOf(h1, h2 int64, touched bool) int64 {
	if touched {
		return h1
	}
	return h2
}

// touchedIn reports whether an event in (h1, h2] of the source log
// touches db.table; a hole in the window counts as touching (what was
// purged is unknown).
func (t *Tailer) touchedIn(ctx context.Context, h1, h2 int64, db, table string) (bool, error) {
	for after := h1; after < h2; {
		evs, err := t.cfg.Source.Next(ctx, after, t.conf.Tailer.BatchSize)
		if err != nil {
			return false, err
		}
		if n := contiguous(after, evs); n < len(evs) || len(evs) == 0 {
			return true, nil
		}
		for _, e := range evs {
			if e.EventID > h2 {
				return false, nil
			}
			if touches(e, db, table) {
				return true, nil
			}
		}
		after = evs[len(evs)-1].EventID
	}
	return false, nil
}

// touches reports whether a log event may change table db.table: one of
// its own events, a rename to or from it, a drop of its database.
func touches(raw hmslog.RawEvent, db, table string) bool {
	names, all := touchedTables(raw, db)
	return all || slices.Contains(names, strings.ToLower(table))
}

// catchup publishes the next batch of db's events after its snapshot, up
// to the main checkpoint, to db's topic only, in one transaction with
// the catch-up's progress; the batch that reaches the checkpoint drops
// the bootstrap, and the main loop serves db again. A table renamed into
// the scope in the batch ends the batch there and turns the bootstrap
// into one of that table at the rename. It reports whether there is more
// to catch up.
func (t *Tailer) catchup(ctx context.Context, db string) (bool, error) {
	st := t.state()
	i := bootIndex(st.boots, db)
	b := &st.boots[i]
	var evs []hmslog.RawEvent
	if b.CatchupEventID < st.cp {
		var err error
		if evs, err = t.cfg.Source.Next(ctx, b.CatchupEventID, t.conf.Tailer.BatchSize); err != nil {
			return false, err
		}
		n := contiguous(b.CatchupEventID, evs)
		if n == 0 {
			gap := &GapError{Checkpoint: b.CatchupEventID, Head: t.head}
			if len(evs) > 0 {
				gap.Found = evs[0].EventID
			}
			return false, fmt.Errorf("catch-up of %s after bootstrap %s: %w", db, b.BootstrapID, gap)
		}
		evs = evs[:n]
		if k, _ := slices.BinarySearchFunc(evs, st.cp+1, func(e hmslog.RawEvent, id int64) int { return int(e.EventID - id) }); k < len(evs) {
			evs = evs[:k]
		}
	}
	if err := t.prepareTopics(ctx, st.chain, []string{db}); err != nil {
		return false, err
	}
	var (
		recs []*kgo.Record
		jobs []encodeJob
	)
	// The catch-up reads again events the main loop has passed: the
	// bootstrap's own transaction table, as the last batch left it.
	before := catchupTxns(b)
	ps, txns, err := t.prepare(ctx, evs, before)
	if err != nil {
		return false, err
	}
	last, lastTime := b.CatchupEventID, b.CutEventTime
	var entered *tableKey
	for j, p := range ps {
		if p.err != nil {
			return false, p.err
		}
		last, lastTime = evs[j].EventID, time.Unix(evs[j].EventTime, 0).UTC()
		ev := &p.routed.Event
		if p.routed.Filtered != "" || !slices.Contains(ev.Databases, db) {
			continue
		}
		id := strconv.FormatInt(ev.EventID, 10)
		r := record(t.topics.Events(db), id, nil, schemas.NameMetastoreEvent, id)
		jobs = append(jobs, encodeJob{rec: r, ev: ev, prev: st.chain[db]})
		recs = append(recs, r)
		st.chain[db] = ev.EventID
		t.m.eventsPublished.WithLabelValues(string(ev.EventType), db).Inc()
		recs = append(recs, t.taskRecords(&p, id)...)
		if k, ok := enteredScope(ev, &t.conf.Replication); ok && k.db == db {
			entered = &k
			if j+1 < len(ps) {
				txns = txnsAfter(before, ps[:j+1]) // the rest is read again
			}
			break
		}
	}
	if err := t.encodeEvents(jobs); err != nil {
		return false, err
	}
	b.CatchupEventID = last
	keepTxns(b, txns)
	more := true
	switch {
	case entered != nil:
		p, _ := t.conf.Replication.Scope(db)
		nb := newBootstrap(db, []string{entered.table}, ReasonEnteredScope, "", last, lastTime, time.Now(), p, txns)
		t.log.Info("a table was renamed into the scope during a catch-up: bootstrapping it", "db", db, "table", entered.table,
			"bootstrap_id", nb.BootstrapID, "cut", last, "after", b.BootstrapID)
		*b = nb
		more = false
	case last >= st.cp:
		t.log.Info("bootstrap caught up: the database rejoins the others", "db", db, "bootstrap_id", b.BootstrapID,
			"cut", b.CutEventID, "checkpoint", st.cp, "took", time.Since(b.Started).Round(time.Millisecond))
		st.boots = slices.Delete(st.boots, i, i+1)
		more = false
	}
	return more, t.commit(ctx, recs, st, schemas.StateRunning)
}

// markDiscontinuity runs at the start of a tailer without a checkpoint:
// every database of the scope whose topic has records gets a
// HIVEDR_DISCONTINUITY at the start position, before anything else, so
// the applier halts it (needs_bootstrap) instead of applying the events
// after a hole; with policy bootstrap: auto it is bootstrapped at once.
func (t *Tailer) markDiscontinuity(ctx context.Context) error {
	all, err := t.adm.ListTopics(ctx)
	if err != nil {
		return fmt.Errorf("list topics: %w", err)
	}
	pat := t.topics.EventsPattern()
	var names []string
	for name := range all {
		if m := pat.FindStringSubmatch(name); m != nil {
			if _, ok := t.conf.Replication.Scope(m[1]); ok {
				names = append(names, name)
			}
		}
	}
	if len(names) == 0 {
		return nil
	}
	ends, err := t.adm.ListEndOffsets(ctx, names...)
	if err != nil {
		return fmt.Errorf("list end offsets of %v: %w", names, err)
	}
	var dbs []string
	for _, name := range names {
		o, ok := ends.Lookup(name, 0)
		if !ok || o.Err != nil || o.Offset == 0 {
			continue
		}
		// Committed records only: a tailer killed before its first commit
		// leaves aborted ones, which no consumer ever saw.
		found := false
		if err := scanBack(ctx, t.prod, t.consumeOpts(), name, func(*kgo.Record) (bool, error) { found = true; return true, nil }); err != nil {
			return fmt.Errorf("read %s: %w", name, err)
		}
		if found {
			dbs = append(dbs, pat.FindStringSubmatch(name)[1])
		}
	}
	if len(dbs) == 0 {
		return nil
	}
	sort.Strings(dbs)
	st := t.state()
	if err := t.prepareTopics(ctx, st.chain, dbs); err != nil {
		return err
	}
	var recs []*kgo.Record
	for _, db := range dbs {
		r, err := t.discontinuity(&st, db)
		if err != nil {
			return err
		}
		recs = append(recs, r)
	}
	t.log.Warn("no checkpoint, but these databases' topics have records: marked a discontinuity; their appliers halt (needs_bootstrap) "+
		"until they are bootstrapped (hivedr bootstrap, or policy bootstrap: auto)", "databases", dbs, "event_id", st.cp, "bootstrapping", len(st.boots))
	return t.commit(ctx, recs, st, schemas.StateRunning)
}

// discontinuity returns db's HIVEDR_DISCONTINUITY record at st's
// checkpoint (events of db before it may never have been published) and
// moves db's chain there; with policy bootstrap: auto it starts db's
// bootstrap in st.
func (t *Tailer) discontinuity(st *txState, db string) (*kgo.Record, error) {
	id := strconv.FormatInt(st.cp, 10)
	prev := st.chain[db]
	ev := &schemas.Event{EventID: st.cp, EventTime: time.Now(), EventType: schemas.EventDiscontinuity, Database: db,
		Databases: []string{db}, Source: t.conf.Source.Name, MessageFormat: "hivedr", PreviousEventID: &prev,
		Snapshot: &schemas.SnapshotInfo{CutEventID: st.cp, Reason: ReasonDiscontinuity}}
	envelope(ev, &t.conf.Source, t.version)
	v, err := t.cfg.Codec.Encode(ev)
	if err != nil {
		return nil, fmt.Errorf("encode the discontinuity marker of %s: %w", db, err)
	}
	st.chain[db] = st.cp
	if p, _ := t.conf.Replication.Scope(db); p.AutoBootstrap() && t.cfg.Snapshots != nil && bootIndex(st.boots, db) < 0 {
		st.boots = append(st.boots, newBootstrap(db, nil, ReasonDiscontinuity, "", st.cp, st.cpTime, time.Now(), p, st.txns))
	}
	return record(t.topics.Events(db), id, v, schemas.NameMetastoreEvent, id), nil
}

// applyScope takes a new replication scope (config.Watch) between two
// transactions: the databases it adds are published from the current
// checkpoint on. One never published to before is new: with policy
// bootstrap: auto it is bootstrapped at that checkpoint at once, before
// any event of it goes out; otherwise its existing tables wait for
// `hivedr bootstrap -db` (the applier halts on the first event that
// finds them missing, naming that command). One whose topic has records
// was out of the scope for a while, its events of that time never
// published: it gets a HIVEDR_DISCONTINUITY, so the applier halts it
// needs_bootstrap (auto: bootstrapped at once) rather than going on over
// the hole. A database the scope drops is no longer published; one being
// bootstrapped is dropped by its next page.
//
// A change that fails (its commit refused, the source unreachable) leaves
// the scope as it was, so that applying it again (Run does, each round
// until it succeeds) finds the same databases added: else a database
// that entered with bootstrap: auto would never be bootstrapped.
func (t *Tailer) applyScope(ctx context.Context, rep config.Replication) (err error) {
	before := map[string]bool{}
	for _, db := range t.inScope {
		before[strings.ToLower(db)] = true
	}
	prevScope, prevDBs := t.inScope, t.conf.Replication.Databases
	defer func() {
		if err != nil {
			t.inScope, t.conf.Replication.Databases = prevScope, prevDBs
		}
	}()
	t.conf.Replication.Databases = rep.Databases // (roots and mappings stay: config.Watch)
	if err := t.refreshDatabases(ctx); err != nil {
		return err
	}
	st := t.state()
	var added, holes, waiting []string
	var recs []*kgo.Record
	for _, db := range t.inScope {
		db = strings.ToLower(db)
		if before[db] {
			continue
		}
		added = append(added, db)
		p, _ := t.conf.Replication.Scope(db)
		switch {
		case st.chain[db] > 0:
			if err := t.prepareTopics(ctx, st.chain, []string{db}); err != nil {
				return err
			}
			r, err := t.discontinuity(&st, db)
			if err != nil {
				return err
			}
			recs, holes = append(recs, r), append(holes, db)
		case p.AutoBootstrap() && t.cfg.Snapshots != nil && bootIndex(st.boots, db) < 0:
			st.boots = append(st.boots, newBootstrap(db, nil, ReasonNewDatabase, "", st.cp, st.cpTime, time.Now(), p, st.txns))
		default:
			waiting = append(waiting, db)
		}
	}
	t.log.Info("replication scope changed", "databases_in_scope", len(t.inScope), "added", added, "checkpoint", st.cp)
	for _, db := range waiting {
		t.log.Warn("a database entered the replication scope: its existing tables need a bootstrap; run `hivedr bootstrap -db "+db+"` (or give it policy bootstrap: auto)", "db", db)
	}
	if len(holes) > 0 {
		t.log.Warn("databases came back into the replication scope: their events while out of it were not published; marked a discontinuity (the applier halts them needs_bootstrap until a bootstrap)", "databases", holes)
	}
	if len(recs) == 0 && len(st.boots) == len(t.boots) {
		return nil
	}
	return t.commit(ctx, recs, st, schemas.StateRunning)
}

// repairCut is where a repair resumes after the gap that broke the
// chain at checkpoint (of time cpTime), given the log's head and its
// first event after the checkpoint (none when the log holds none), and
// the cut's time: what the new bootstraps are stamped with, and what the
// replica's age and the RPO count from. The cut event itself is purged:
// its time is taken as the first event's after it (the closest known,
// never before it), or now when the log holds nothing after the
// checkpoint (the head's events are all gone, and the snapshot reads the
// source as of now). Not the checkpoint's: the gap may be days long.
func repairCut(checkpoint int64, cpTime time.Time, head int64, first []hmslog.RawEvent, now time.Time) (int64, time.Time) {
	switch {
	case len(first) > 0 && first[0].EventID-1 > checkpoint:
		return first[0].EventID - 1, time.Unix(first[0].EventTime, 0).UTC()
	case len(first) == 0 && head > checkpoint:
		return head, now
	}
	return checkpoint, cpTime
}

// repairChain runs at the start of a tailer whose checkpoint is
// CHAIN_BROKEN: if the control topic holds a chain_broken request for it
// (hivedr bootstrap -repair-chain), the checkpoint moves to just before
// the log's first event after the gap and every database of the scope is
// bootstrapped at that cut, in one transaction that also takes the
// request. Without one, the tailer goes on and stops on the same gap.
func (t *Tailer) repairChain(ctx context.Context) error {
	if t.cfg.Snapshots == nil {
		return nil
	}
	reqs, _, err := t.readRequests(ctx)
	if err != nil {
		return err
	}
	k := slices.IndexFunc(reqs, func(r controlRecord) bool {
		return r.req.Source == t.conf.Source.Name && r.req.Reason == ReasonChainBroken
	})
	if k < 0 {
		t.log.Error("the checkpoint is CHAIN_BROKEN and no repair was requested: run `hivedr bootstrap -repair-chain`", "checkpoint", t.checkpoint)
		return nil
	}
	req := reqs[k].req
	head, err := t.cfg.Source.Head(ctx)
	if err != nil {
		return err
	}
	first, err := t.cfg.Source.Next(ctx, t.checkpoint, 1)
	if err != nil {
		return err
	}
	cut, cutTime := repairCut(t.checkpoint, t.checkpointTime, head, first, time.Now())
	source, err := t.cfg.Source.Databases(ctx)
	if err != nil {
		return err
	}
	st := t.state()
	st.cp, st.cpTime, st.reqOff = cut, cutTime, reqs[k].offset+1
	all := *req
	all.Databases = nil
	// The gap's allocations are unknown: no transaction is known whole.
	txns := st.txns.clone()
	txns.above = math.MaxInt64
	boots, warnings := planRequest(&all, source, &t.conf.Replication, nil, cut, cutTime, time.Now(), txns)
	for _, w := range warnings {
		t.log.Warn(w)
	}
	for i := range st.boots {
		finishRelease(&st, &st.boots[i]) // replaced: its snapshots go once its tasks are done
	}
	st.boots = boots
	t.log.Warn("repairing a broken chain: resuming after the gap and bootstrapping every database of the scope",
		"request_id", req.RequestID, "checkpoint", t.checkpoint, "resume_after", cut, "databases", len(boots))
	return t.commit(ctx, nil, st, schemas.StateRunning)
}
