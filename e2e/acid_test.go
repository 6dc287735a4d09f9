package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/beltran/gohive/hive_metastore"

	wl "github.com/hivedr/hivedr/e2e/workload"
	"github.com/hivedr/hivedr/internal/acid"
	"github.com/hivedr/hivedr/internal/drparam"
	"github.com/hivedr/hivedr/internal/fs"
	"github.com/hivedr/hivedr/internal/hms"
	"github.com/hivedr/hivedr/internal/kafka"
	"github.com/hivedr/hivedr/internal/location"
	"github.com/hivedr/hivedr/internal/testenv"
	"github.com/hivedr/hivedr/internal/verify"
	"github.com/hivedr/hivedr/schemas"
)

// acidTable is one transactional table of the ACID tests.
type acidTable struct {
	db, name   string
	insertOnly bool
	partitions [][]string // nil: unpartitioned
}

func (a acidTable) full() string { return a.db + "." + a.name }

// acidRig is a pipeline over two databases of transactional tables: full
// ACID and insert-only, partitioned and not.
type acidRig struct {
	*pipelineTest
	db1, db2 string
	tables   []acidTable
	// drTxnBase is DR's transaction high-water mark when the rig started:
	// transactions above it are this test's.
	drTxnBase int64
	// wrote are, by source transaction committed, the databases it wrote;
	// allocOnlys the committed ones that allocated in db1 and wrote db2
	// only.
	wrote      map[int64][]string
	allocOnlys []int64
	// aborted are the files of the transactions the rig aborted;
	// compactions the compactions it ran.
	aborted     []wl.File
	compactions []*wl.Compaction
}

// newAcidRig makes the rig with databases acid_a_* and acid_b_*.
func newAcidRig(t *testing.T, d time.Duration) *acidRig { return newAcidRigNamed(t, d, "acid") }

// newAcidRigNamed makes the rig with databases <prefix>_a_* and
// <prefix>_b_* (the stack's listener leaves the writes out of the
// commits of transactions that wrote stock_* databases).
func newAcidRigNamed(t *testing.T, d time.Duration, prefix string) *acidRig {
	u := uniq(t)
	r := &acidRig{db1: prefix + "_a_" + u, db2: prefix + "_b_" + u, wrote: map[int64][]string{}}
	r.pipelineTest = startPipeline(t, d, r.db1, r.db2)
	r.setUp(t)
	return r
}

// setUp notes DR's transaction high-water mark and creates the rig's
// databases and tables on the source.
func (r *acidRig) setUp(t *testing.T) {
	o, err := r.dr.GetOpenTxns(r.ctx)
	if err != nil {
		t.Fatal(err)
	}
	r.drTxnBase = o.TxnHighWaterMark
	days := [][]string{{"2024-01-01"}, {"2024-01-02"}}
	r.tables = []acidTable{
		{db: r.db1, name: "orders"},
		{db: r.db1, name: "events", insertOnly: true, partitions: days},
		{db: r.db2, name: "ledger", partitions: days},
		{db: r.db2, name: "notes", insertOnly: true},
	}
	ctx := r.ctx
	for _, db := range []string{r.db1, r.db2} {
		if err := r.w.CreateDatabase(ctx, db); err != nil {
			t.Fatal(err)
		}
	}
	for _, tb := range r.tables {
		spec := wl.ACIDTableSpec{Columns: []string{"id bigint", "amount double", "note string"}, InsertOnly: tb.insertOnly}
		if tb.partitions != nil {
			spec.PartitionKeys = []string{"dt"}
		}
		if err := r.w.CreateACIDTable(ctx, tb.db, tb.name, spec); err != nil {
			t.Fatal(err)
		}
		if tb.partitions != nil {
			if err := r.w.AddACIDPartitions(ctx, tb.db, tb.name, tb.partitions); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// txn runs one transaction: writes (table index, partition index or -1,
// base?) then commit or abort.
type acidWrite struct {
	table, part int
	base        bool
}

func (r *acidRig) txn(commit bool, writes ...acidWrite) *wl.Txn {
	r.t.Helper()
	tx, err := r.w.OpenTxn(r.ctx)
	if err != nil {
		r.t.Fatal(err)
	}
	r.write(tx, writes...)
	r.end(tx, commit, writes...)
	return tx
}

// end commits or aborts tx, which made writes.
func (r *acidRig) end(tx *wl.Txn, commit bool, writes ...acidWrite) {
	r.t.Helper()
	var err error
	if commit {
		err = tx.Commit(r.ctx)
		var dbs []string
		for _, w := range writes {
			if db := r.tables[w.table].db; !slices.Contains(dbs, db) {
				dbs = append(dbs, db)
			}
		}
		r.wrote[tx.ID] = dbs
	} else {
		err = tx.Abort(r.ctx)
		r.aborted = append(r.aborted, tx.Files()...)
	}
	if err != nil {
		r.t.Fatal(err)
	}
}

// allocOnly commits a transaction that allocates a write ID for table
// alloc (db1) and writes only the tables of writes (db2).
func (r *acidRig) allocOnly(alloc int, writes ...acidWrite) {
	r.t.Helper()
	tx, err := r.w.OpenTxn(r.ctx)
	if err != nil {
		r.t.Fatal(err)
	}
	tb := r.tables[alloc]
	if _, err := tx.WriteID(r.ctx, tb.db, tb.name); err != nil {
		r.t.Fatal(err)
	}
	r.write(tx, writes...)
	r.end(tx, true, writes...)
	r.allocOnlys = append(r.allocOnlys, tx.ID)
}

func (r *acidRig) write(tx *wl.Txn, writes ...acidWrite) {
	r.t.Helper()
	for _, w := range writes {
		tb := r.tables[w.table]
		var vals []string
		if w.part >= 0 {
			vals = tb.partitions[w.part]
		}
		var err error
		if w.base {
			_, err = tx.Overwrite(r.ctx, tb.db, tb.name, vals, 3)
		} else {
			_, err = tx.Insert(r.ctx, tb.db, tb.name, vals, 2)
		}
		if err != nil {
			r.t.Fatal(err)
		}
	}
}

// round is one round of the workload: commits in one and in two
// databases, an abort, two statements of one transaction in one
// partition, and a transaction that allocates a write ID in db1 and
// writes only db2.
func (r *acidRig) round() {
	r.txn(true, acidWrite{0, -1, false}, acidWrite{1, 0, false})
	r.txn(true, acidWrite{2, 0, false}, acidWrite{0, -1, false}) // two databases
	r.txn(false, acidWrite{3, -1, false}, acidWrite{1, 1, false})
	r.txn(true, acidWrite{1, 1, false}, acidWrite{1, 1, false}, acidWrite{3, -1, false})
	r.allocOnly(0, acidWrite{2, 1, false})
}

// overwrite commits a base over a table's (partition's) deltas, as INSERT
// OVERWRITE does, then cleans the deltas it covers on the source, as
// Hive's cleaner does.
func (r *acidRig) overwrite(table, part int) {
	r.t.Helper()
	r.txn(true, acidWrite{table, part, true})
	tb := r.tables[table]
	if err := r.w.CleanObsolete(r.ctx, tb.db, tb.name, r.vals(tb, part)); err != nil {
		r.t.Fatal(err)
	}
}

// compact compacts a table (partition) as Hive's compactor does, major
// or minor (in its own transaction, logged as COMMIT_COMPACTION), then
// cleans what it made obsolete on the source, as Hive's cleaner does.
func (r *acidRig) compact(table, part int, major bool) *wl.Compaction {
	r.t.Helper()
	tb := r.tables[table]
	c, err := r.w.Compact(r.ctx, tb.db, tb.name, r.vals(tb, part), major)
	if err != nil {
		r.t.Fatal(err)
	}
	if err := r.w.CleanCompacted(r.ctx, c); err != nil {
		r.t.Fatal(err)
	}
	r.compactions = append(r.compactions, c)
	r.t.Logf("compacted %s %v into %s (transaction %d, %d directories merged)", tb.full(), r.vals(tb, part), c.Dir, c.Txn, len(c.Merged))
	return c
}

// vals are the values of a table's partition part (nil for -1).
func (r *acidRig) vals(tb acidTable, part int) []string {
	if part < 0 {
		return nil
	}
	return tb.partitions[part]
}

// compactedOver reports whether a later compaction of the rig's made the
// i-th one's directory obsolete.
func (r *acidRig) compactedOver(i int) bool {
	c := r.compactions[i]
	for _, later := range r.compactions[i+1:] {
		by, _ := acid.ParseDir(later.Dir)
		if later.Location == c.Location && acid.ObsoleteAfter(acid.ReplicaName(c.Dir), by) {
			return true
		}
	}
	return false
}

// compactedOnDR checks that each compaction's directory is on DR under
// its name without the compactor's suffix, with what it made obsolete
// gone and no staging name left.
func (r *acidRig) compactedOnDR() {
	r.t.Helper()
	for i, c := range r.compactions {
		if r.compactedOver(i) {
			continue // a later compaction made it obsolete: checked as that one's
		}
		drDir, err := r.mapLocation(c.Location)
		if err != nil {
			r.t.Fatal(err)
		}
		name := acid.ReplicaName(c.Dir)
		by, _ := acid.ParseDir(c.Dir)
		var have, obsolete, staged []string
		err = r.drFS.Walk(r.ctx, drDir, func(loc string, _ int64) error {
			rel, _ := location.Below(drDir, loc)
			top, _, _ := strings.Cut(rel, "/")
			switch {
			case top == name:
				have = append(have, rel)
			case strings.HasPrefix(top, acid.StagingName("")):
				staged = append(staged, rel)
			case acid.ObsoleteAfter(top, by):
				obsolete = append(obsolete, rel)
			}
			return nil
		})
		if err != nil {
			r.t.Fatal(err)
		}
		if !slices.Contains(have, name+"/"+acid.MetadataFile) || len(have) < 2 {
			r.t.Errorf("compaction %d: DR %s holds %v of %s, want its data and %s", c.ID, drDir, have, name, acid.MetadataFile)
		}
		if len(obsolete) > 0 || len(staged) > 0 {
			r.t.Errorf("compaction %d: DR %s still holds what it made obsolete %v, or staged copies %v", c.ID, drDir, obsolete, staged)
		}
	}
}

// caughtUp waits until the tailer has published up to the source's head
// and the applier has applied everything published.
func (r *acidRig) caughtUpToHead(d time.Duration) {
	r.t.Helper()
	env := r.env
	s := serde(r.t, env)
	head := currentEventID(r.t, r.ctx, r.src)
	topic := kafka.Topics{Prefix: r.prefix}.Checkpoints()
	eventually(r.t, d, fmt.Sprintf("the tailer at event %d and the applier caught up", head), func() bool {
		r.checkAlive()
		return lastCheckpoint(r.t, env, s, topic, r.prefix) >= head && r.caughtUp(r.ctx)
	})
}

// dirs are the table and partition directories of a table on one side.
func (r *acidRig) dirs(tb acidTable) []string {
	r.t.Helper()
	res, err := r.src.GetTableReq(r.ctx, &hive_metastore.GetTableRequest{DbName: tb.db, TblName: tb.name,
		Capabilities: &hive_metastore.ClientCapabilities{Values: []hive_metastore.ClientCapability{hive_metastore.ClientCapability_INSERT_ONLY_TABLES}}})
	if err != nil {
		r.t.Fatalf("get table %s: %v", tb.full(), err)
	}
	loc := strings.TrimSuffix(res.Table.Sd.Location, "/")
	if tb.partitions == nil {
		return []string{loc}
	}
	var out []string
	for _, p := range tb.partitions {
		out = append(out, loc+"/dt="+p[0])
	}
	return out
}

// compare checks that DR's write-ID state of every table equals the
// source's, and that the files a reader sees under it are the same, byte
// for byte (CRC32C and size), under the same names.
func (r *acidRig) compare() (string, bool) {
	r.t.Helper()
	var names []string
	for _, tb := range r.tables {
		names = append(names, tb.full())
	}
	srcW, err := wl.ValidWriteIDs(r.ctx, r.src, names)
	if err != nil {
		r.t.Fatal(err)
	}
	drW, err := wl.ValidWriteIDs(r.ctx, r.dr, names)
	if err != nil {
		return err.Error(), false
	}
	for _, n := range names {
		if !reflect.DeepEqual(srcW[n], drW[n]) {
			return fmt.Sprintf("%s: write ids on the source %s, on DR %s", n, srcW[n], drW[n]), false
		}
	}
	for _, tb := range r.tables {
		w := srcW[tb.full()]
		for _, dir := range r.dirs(tb) {
			drDir, err := r.mapLocation(dir)
			if err != nil {
				r.t.Fatal(err)
			}
			a, err := wl.VisibleFiles(r.ctx, r.srcFS, dir, w)
			if err != nil {
				r.t.Fatal(err)
			}
			b, err := wl.VisibleFiles(r.ctx, r.drFS, drDir, drW[tb.full()])
			if err != nil {
				return err.Error(), false
			}
			if !reflect.DeepEqual(a, b) {
				return fmt.Sprintf("%s: a reader sees on the source %v, on DR %v", dir, a, b), false
			}
		}
	}
	return "", true
}

func (r *acidRig) converge(d time.Duration) {
	r.t.Helper()
	r.caughtUpToHead(d)
	var last string
	r.t.Cleanup(func() {
		if r.t.Failed() && last != "" {
			r.t.Logf("last difference: %s", last)
		}
	})
	poll(r.t, time.Minute, time.Second, "DR's transactional tables to equal the source's", func() bool {
		r.checkAlive()
		msg, ok := r.compare()
		last = msg
		return ok
	})
	last = ""
}

// notOnDR checks that none of the files exists on DR.
func (r *acidRig) notOnDR(files []wl.File) {
	r.t.Helper()
	for _, f := range files {
		dr, err := r.mapLocation(f.Location)
		if err != nil {
			r.t.Fatal(err)
		}
		if _, err := r.drFS.Stat(r.ctx, dr); !errors.Is(err, fs.ErrNotExist) {
			r.t.Errorf("%s of an uncommitted transaction is on DR (stat: %v)", dr, err)
		}
	}
}

// drOpenReplTxns lists DR's open transactions opened by the applier
// (user hivedr) since the rig started.
func (r *acidRig) drOpenReplTxns() []int64 {
	r.t.Helper()
	info, err := r.dr.GetOpenTxnsInfo(r.ctx)
	if err != nil {
		r.t.Fatal(err)
	}
	var out []int64
	for _, ti := range info.OpenTxns {
		if ti.State == hive_metastore.TxnState_OPEN && ti.User == "hivedr" && ti.ID > r.drTxnBase {
			out = append(out, ti.ID)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}

// TestAcidCommittedStates replicates transactional tables (full ACID and
// insert-only, partitioned and not, in two databases): commits, an abort,
// a transaction writing both databases, two statements of one, one that
// allocates a write ID in one database and writes the other only, a base
// over deltas in a table and in a partition with the cleaner's removal of
// what it covers, and a transaction left open while DR is checked (its
// write ID open on DR too, its files not there). At each check DR's
// get_valid_write_ids equals the source's for every table and the files a
// reader sees are the same, and hivedr verify finds nothing; at the end no
// transaction the applier opened is left open, verify finds a visible
// file removed on DR, and a client writes to a replicated table on DR.
// The source's COMMIT_TXN messages name their writes (the stack's
// listener puts them there).
func TestAcidCommittedStates(t *testing.T) {
	r := newAcidRig(t, 10*time.Minute)
	r.committedStates()
	r.checkCommits(true)
	r.drWritable()
}

// TestAcidStockListener is TestAcidCommittedStates with COMMIT_TXN
// messages that name no writes, as Hive's own DbNotificationListener
// writes them (the stack's listener does so for stock_* databases): the
// tailer reads each commit's writes from the source metastore
// (get_all_write_event_info) and DR converges all the same.
func TestAcidStockListener(t *testing.T) {
	r := newAcidRigNamed(t, 10*time.Minute, "stock")
	r.committedStates()
	r.checkCommits(false)
	r.drWritable()
}

// committedStates runs TestAcidCommittedStates's workload and checks.
func (r *acidRig) committedStates() {
	t := r.t
	t.Helper()
	r.round()
	r.round()
	r.compact(0, -1, true) // orders: the compactor's base over its deltas
	r.overwrite(2, 0)      // ledger dt=2024-01-01: INSERT OVERWRITE's base
	r.compact(1, 1, false) // events dt=2024-01-02, insert-only: a minor compaction's delta
	open, err := r.w.OpenTxn(r.ctx)
	if err != nil {
		t.Fatal(err)
	}
	openWrites := []acidWrite{{2, 1, false}, {0, -1, false}}
	r.write(open, openWrites...)
	r.round()
	r.converge(5 * time.Minute)
	r.notOnDR(open.Files())
	r.notOnDR(r.aborted)
	r.compactedOnDR()
	if got := r.drOpenReplTxns(); len(got) != 2 {
		t.Errorf("DR has open transactions of the applier %v while one source transaction that wrote two databases is open: want one in each", got)
	}
	verifyClean(t, r.conf, r.db1, r.db2)
	t.Logf("checked with transaction %d open: write ids and visible files equal, its %d files not on DR", open.ID, len(open.Files()))

	r.end(open, true, openWrites...)
	r.compact(1, 1, true) // events dt=2024-01-02, insert-only: a major compaction over the minor one's delta
	r.converge(5 * time.Minute)
	r.notOnDR(r.aborted)
	r.compactedOnDR()
	if got := r.drOpenReplTxns(); len(got) != 0 {
		t.Errorf("DR has open transactions of the applier %v after every source transaction ended", got)
	}
	verifyClean(t, r.conf, r.db1, r.db2)
	// Deltas the bases cover are gone from DR too.
	for _, dir := range append(r.dirs(r.tables[0]), r.dirs(r.tables[2])[0]) {
		drDir, _ := r.mapLocation(dir)
		var leftover []string
		err := r.drFS.Walk(r.ctx, drDir, func(loc string, _ int64) error {
			if strings.Contains(loc, "/delta_0000001_") {
				leftover = append(leftover, loc)
			}
			return nil
		})
		if err != nil || len(leftover) > 0 {
			t.Errorf("%s: obsolete deltas still on DR %v (%v)", drDir, leftover, err)
		}
	}
}

// checkCommits checks, for every transaction the rig committed, what the
// source's COMMIT_TXN message named (its writes when named is set, none
// otherwise) and what the tailer published: on the topic of each
// database it wrote, the commit with its writes there; on db1's, the
// commits of the transactions that only allocated there.
func (r *acidRig) checkCommits(named bool) {
	t := r.t
	t.Helper()
	msgs := map[int64]int{} // source transaction -> databases its message names
	head := currentEventID(t, r.ctx, r.src)
	for from := r.start; from < head; {
		n := int32(500)
		resp, err := r.src.GetNextNotification(r.ctx, &hive_metastore.NotificationEventRequest{LastEvent: from, MaxEvents: &n})
		if err != nil {
			t.Fatal(err)
		}
		if len(resp.Events) == 0 {
			break
		}
		for _, ev := range resp.Events {
			from = ev.EventId
			if ev.EventType != string(schemas.EventCommitTxn) {
				continue
			}
			format := ""
			if ev.MessageFormat != nil {
				format = *ev.MessageFormat
			}
			m, err := hms.DecodeMessage(format, ev.Message)
			if err != nil {
				t.Fatalf("COMMIT_TXN event %d: %v", ev.EventId, err)
			}
			var c struct {
				TxnID     int64    `json:"txnid"`
				Databases []string `json:"databases"`
			}
			err = json.Unmarshal(m.JSON, &c)
			m.Release()
			if err != nil {
				t.Fatalf("COMMIT_TXN event %d: %v", ev.EventId, err)
			}
			msgs[c.TxnID] = len(c.Databases)
		}
	}
	for id := range r.wrote {
		n, ok := msgs[id]
		switch {
		case !ok:
			t.Errorf("no COMMIT_TXN of source transaction %d in the source log after event %d", id, r.start)
		case named && n == 0:
			t.Errorf("the COMMIT_TXN of source transaction %d names no writes: the stack's listener should name them for %s", id, r.db1)
		case !named && n > 0:
			t.Fatalf("the COMMIT_TXN of source transaction %d names %d writes: the stack's listener should leave them out for stock_* "+
				"databases (is the stack's metastore running an older hms.sh? restart it)", id, n)
		}
	}
	s := serde(t, r.env)
	published := 0
	for _, db := range []string{r.db1, r.db2} {
		commits := map[int64]*schemas.Transaction{}
		for _, ev := range events(readTopic(t, r.env, s, kafka.Topics{Prefix: r.prefix}.Events(db))) {
			if txn, ok := ev.Payload.(*schemas.Transaction); ok && ev.EventType == schemas.EventCommitTxn && len(txn.TxnIDs) == 1 {
				commits[txn.TxnIDs[0]] = txn
			}
		}
		for id, dbs := range r.wrote {
			if !slices.Contains(dbs, db) {
				continue
			}
			txn := commits[id]
			if txn == nil || !slices.ContainsFunc(txn.WriteIDs, func(w schemas.TableWriteID) bool { return w.Database == db }) {
				t.Errorf("the topic of %s has no commit of source transaction %d with its writes there: %+v", db, id, txn)
				continue
			}
			published++
		}
		if db != r.db1 {
			continue
		}
		for _, id := range r.allocOnlys {
			if commits[id] == nil {
				t.Errorf("the topic of %s has no commit of source transaction %d, which allocated a write ID there and wrote %s only", db, id, r.db2)
			}
		}
	}
	t.Logf("%d source commits (their messages name their writes: %v); %d commits published with their writes, %d allocation-only commits",
		len(r.wrote), named, published, len(r.allocOnlys))
}

// drWritable stops the applier and shows DR failover-ready and checked:
// verify calls a commit the applier has not applied in flight and a
// visible file removed on DR diverged, and a client of the DR metastore
// writes to a replicated table and readers see its write.
func (r *acidRig) drWritable() {
	t := r.t
	t.Helper()
	r.apply.stop(t)
	r.apply = nil
	// A commit published, not applied: in flight.
	notes := r.tables[3]
	r.txn(true, acidWrite{3, -1, false})
	head := currentEventID(t, r.ctx, r.src)
	topic := kafka.Topics{Prefix: r.prefix}.Checkpoints()
	s := serde(t, r.env)
	eventually(t, time.Minute, fmt.Sprintf("the tailer at event %d", head), func() bool {
		return lastCheckpoint(t, r.env, s, topic, r.prefix) >= head
	})
	v := r.runVerify("-db", notes.db)
	inFlight := v.of(verify.InFlight)
	if v.code != 0 || len(inFlight) == 0 || len(v.of(verify.Diverged)) != 0 {
		t.Errorf("verify with a commit to %s not applied: exit %d, %d in flight, %d diverged; want it in flight only\n%s",
			notes.full(), v.code, len(inFlight), len(v.of(verify.Diverged)), v.raw)
	}
	for _, f := range inFlight {
		if f.Table != notes.name {
			t.Errorf("in flight: %+v, want only %s", f, notes.full())
		}
	}
	t.Logf("verify with a commit to %s published, not applied: %d in flight (%v)", notes.full(), len(inFlight), inFlight)
	before, err := wl.ValidWriteIDs(r.ctx, r.dr, []string{r.tables[0].full()})
	if err != nil {
		t.Fatal(err)
	}
	// verify sees a file a reader reads go missing on DR.
	orders := r.tables[0]
	srcFiles, err := wl.VisibleFiles(r.ctx, r.srcFS, r.dirs(orders)[0], before[orders.full()])
	if err != nil || len(srcFiles) == 0 {
		t.Fatalf("visible files of %s: %v %v", orders.full(), srcFiles, err)
	}
	rel := slices.Sorted(maps.Keys(srcFiles))[0]
	drDir, _ := r.mapLocation(r.dirs(orders)[0])
	if err := r.drFS.Remove(r.ctx, drDir+"/"+rel); err != nil {
		t.Fatal(err)
	}
	v = r.runVerify("-db", r.db1, "-tables", orders.name)
	if d := v.of(verify.Diverged); v.code != 1 || len(d) != 1 || d[0].Object != orders.full()+" file "+rel || d[0].Detail != "missing on DR" {
		t.Errorf("verify after removing %s on DR: exit %d, diverged %+v\n%s", rel, v.code, d, v.raw)
	}
	// Failover-ready: a client of the DR metastore writes to a replicated
	// table, and readers see its write.
	drw := wl.NewSource(r.dr, r.drFS, r.env.Get(t, "HIVEDR_HMS_DR_EXTERNAL"))
	tx, err := drw.OpenTxn(r.ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Insert(r.ctx, r.db1, "orders", nil, 1); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(r.ctx); err != nil {
		t.Fatal(err)
	}
	after, err := wl.ValidWriteIDs(r.ctx, r.dr, []string{r.tables[0].full()})
	if err != nil {
		t.Fatal(err)
	}
	b, a := before[r.tables[0].full()], after[r.tables[0].full()]
	if a.HighWaterMark != b.HighWaterMark+1 || len(a.Open) != 0 {
		t.Errorf("a DR client's write to %s: write ids %s before, %s after", r.tables[0].full(), b, a)
	}
	d, err := r.dr.GetDatabase(r.ctx, r.db1)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("DR %s at event %s; a DR client's write got write id %d", r.db1, d.Parameters[drparam.LastID], a.HighWaterMark)
}

// TestAcidFailover: a source transaction that wrote both databases is
// still open when they are failed over. The failover aborts the two DR
// transactions standing for it and says so in its report; none of the
// applier's is left open; the write IDs it held are aborted on DR; a
// Hive-like client then writes both tables on DR and readers see its
// writes; the source transaction's later commit does not reach the
// failed-over databases.
func TestAcidFailover(t *testing.T) {
	r := newAcidRigNamed(t, 10*time.Minute, "acidfo")
	r.round()
	open, err := r.w.OpenTxn(r.ctx)
	if err != nil {
		t.Fatal(err)
	}
	r.write(open, acidWrite{2, 1, false}, acidWrite{0, -1, false})
	r.converge(5 * time.Minute)
	drOpen := r.drOpenReplTxns()
	if len(drOpen) != 2 {
		t.Fatalf("DR has open transactions of the applier %v, want one in each database for source transaction %d", drOpen, open.ID)
	}
	rep, errOut, code := runFailover(t, r.conf, "-db", r.db1+","+r.db2, "-planned", "-timeout", "3m")
	if code != 0 {
		t.Fatalf("failover exited %d:\n%s", code, errOut)
	}
	var aborted []int64
	for _, d := range rep.Databases {
		if len(d.ReplTxns) != 1 {
			t.Errorf("%s: the failover aborted %v, want the one DR transaction of source transaction %d", d.Database, d.ReplTxns, open.ID)
		}
		aborted = append(aborted, d.ReplTxns...)
	}
	slices.Sort(aborted)
	if !slices.Equal(aborted, drOpen) {
		t.Errorf("the failover aborted %v, DR had %v open", aborted, drOpen)
	}
	if left := r.drOpenReplTxns(); len(left) != 0 {
		t.Errorf("DR transactions of the applier still open after the failover: %v", left)
	}
	names := []string{r.tables[0].full(), r.tables[2].full()}
	held := map[string]int64{}
	for _, i := range []int{0, 2} {
		tb := r.tables[i]
		if held[tb.full()], err = open.WriteID(r.ctx, tb.db, tb.name); err != nil {
			t.Fatal(err)
		}
	}
	before, err := wl.ValidWriteIDs(r.ctx, r.dr, names)
	if err != nil {
		t.Fatal(err)
	}
	for n, id := range held {
		if w := before[n]; slices.Contains(w.Open, id) || !slices.Contains(w.Aborted, id) {
			t.Errorf("%s on DR after the failover: %s; want write id %d of the open source transaction aborted", n, w, id)
		}
	}
	// A Hive-like client writes both tables on DR, in one transaction.
	drw := wl.NewSource(r.dr, r.drFS, r.env.Get(t, "HIVEDR_HMS_DR_EXTERNAL"))
	tx, err := drw.OpenTxn(r.ctx)
	if err != nil {
		t.Fatal(err)
	}
	f1, err := tx.Insert(r.ctx, r.db1, "orders", nil, 2)
	if err != nil {
		t.Fatal(err)
	}
	f2, err := tx.Insert(r.ctx, r.db2, "ledger", r.tables[2].partitions[1], 2)
	if err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(r.ctx); err != nil {
		t.Fatal(err)
	}
	after, err := wl.ValidWriteIDs(r.ctx, r.dr, names)
	if err != nil {
		t.Fatal(err)
	}
	for i, f := range []wl.File{f1, f2} {
		n := names[i]
		if a, b := after[n], before[n]; a.HighWaterMark != b.HighWaterMark+1 || len(a.Open) != 0 {
			t.Errorf("%s: write ids %s before the DR client's write, %s after", n, b, a)
		}
		// The table's or partition's directory: above the delta's.
		delta := f.Location[:strings.LastIndex(f.Location, "/")]
		dir := delta[:strings.LastIndex(delta, "/")]
		seen, err := wl.VisibleFiles(r.ctx, r.drFS, dir, after[n])
		if err != nil {
			t.Fatal(err)
		}
		if rel, _ := strings.CutPrefix(f.Location, dir+"/"); seen[rel] == (wl.FileSum{}) {
			t.Errorf("%s: a reader on DR does not see the DR client's file %s (sees %v)", n, rel, seen)
		}
	}
	// The source transaction commits after all: the failed-over
	// databases refuse it.
	if err := open.Commit(r.ctx); err != nil {
		t.Fatal(err)
	}
	eventually(t, 2*time.Minute, "the applier halts "+r.db1+" failed_over", func() bool {
		return strings.Contains(grepLines(r.apply.out.String(), "db="+r.db1), "reason=failed_over")
	})
	if now, err := wl.ValidWriteIDs(r.ctx, r.dr, names); err != nil || !reflect.DeepEqual(now, after) {
		t.Errorf("DR write ids changed after the failover: %v, were %v (%v)", now, after, err)
	}
	t.Logf("failover aborted DR transactions %v of source transaction %d; a DR client wrote %s and %s", aborted, open.ID, f1.Location, f2.Location)
}

// TestAcidKill9 runs rounds of transactional writes while killing, with
// SIGKILL, the tailer, the copy daemon and the applier in turn, each once
// it has made progress inside its round (the tailer's published event, a
// finished copy, the DR database's position), and restarting it. DR then
// converges: write IDs and visible files equal the source's, and no
// transaction the applier opened is left open.
func TestAcidKill9(t *testing.T) { acidKill9(t, newAcidRig(t, 15*time.Minute)) }

// TestAcidStockListenerKill9 is TestAcidKill9 with COMMIT_TXN messages
// that name no writes (stock_* databases, see TestAcidStockListener): a
// tailer killed between a transaction's allocation and its commit
// resumes with the allocation's database from its checkpoint.
func TestAcidStockListenerKill9(t *testing.T) {
	r := newAcidRigNamed(t, 15*time.Minute, "stock")
	acidKill9(t, r)
	r.checkCommits(false)
}

func acidKill9(t *testing.T, r *acidRig) {
	rng := testRand(t)
	tailAddr := "127.0.0.1:" + itoa(int64(freePort(t)))
	copydAddr := "127.0.0.1:" + itoa(int64(freePort(t)))
	for copydAddr == tailAddr {
		copydAddr = "127.0.0.1:" + itoa(int64(freePort(t)))
	}
	// The tailer publishes one event per Kafka transaction here, so that a
	// round takes it many and a kill lands inside one.
	conf, err := os.ReadFile(r.conf)
	if err != nil {
		t.Fatal(err)
	}
	const batch = "\n  batch_size: 200\n"
	if strings.Count(string(conf), batch) != 1 {
		t.Fatalf("the pipeline's YAML changed shape; cannot set tailer.batch_size:\n%s", conf)
	}
	tailConf := writeFile(t, "acid-tail.yaml", strings.Replace(string(conf), batch, "\n  batch_size: 1\n", 1))
	s := serde(t, r.env)
	checkpoint := func() int64 {
		return lastCheckpoint(t, r.env, s, kafka.Topics{Prefix: r.prefix}.Checkpoints(), r.prefix)
	}
	startTail := func() { r.tail = startHivedr(t, "tail", "tail", "-config", tailConf, "-metrics-addr", tailAddr) }
	startCopyd := func() {
		r.copyd = startHivedr(t, "copyd", "copyd", "-config", r.conf, "-state-dir", filepath.Join(r.state, "copyd"), "-metrics-addr", copydAddr)
	}
	r.tail.stop(t)
	r.copyd.stop(t)
	startTail()
	startCopyd()
	waitMetric := func(url, what string, cond func(m map[string]float64) bool) {
		t.Helper()
		poll(t, 5*time.Minute, 5*time.Millisecond, what, func() bool {
			r.checkAlive()
			m, ok := scrape(url)
			return ok && cond(m)
		})
	}
	head := func() int64 { return currentEventID(t, r.ctx, r.src) }
	drAt := func(db string) int64 {
		d, err := r.dr.GetDatabase(r.ctx, db)
		if err != nil {
			return 0
		}
		n, _ := strconv.ParseInt(d.Parameters[drparam.LastID], 10, 64)
		return n
	}
	r.caughtUpToHead(5 * time.Minute)
	for i, who := range []string{"tail", "copyd", "apply", "tail", "copyd", "apply"} {
		var lo, hi, at int64
		switch who {
		case "tail":
			r.tail.stop(t)
			r.tail = nil
			lo = head()
			r.round()
			r.round()
			hi = head()
			at = lo + 1 + rng.Int64N(max(1, (hi-lo)/3))
			startTail()
			waitMetric("http://"+tailAddr+"/metrics", fmt.Sprintf("the tailer past event %d", at), func(m map[string]float64) bool {
				return m["hivedr_tailer_last_published_event_id"] >= float64(at)
			})
			r.tail.kill9()
			var cp int64
			eventually(t, time.Minute, fmt.Sprintf("the committed checkpoint at event %d", at), func() bool {
				cp = checkpoint()
				return cp >= at
			})
			if cp >= hi {
				t.Errorf("round %d: the tailer was killed once past event %d and its committed checkpoint is %d: the round (to %d) was already done", i, at, cp, hi)
			}
			startTail()
		case "copyd":
			r.copyd.stop(t)
			r.copyd = nil
			lo = head()
			r.round()
			r.round()
			hi = head()
			startCopyd()
			want := 1 + rng.IntN(4)
			var inFlight float64
			waitMetric("http://"+copydAddr+"/metrics", fmt.Sprintf("copyd to finish %d copies with copies in flight", want), func(m map[string]float64) bool {
				inFlight = m["hivedr_copyd_tasks_in_flight"]
				return metricSum(m, "hivedr_copyd_files_total") >= float64(want) && inFlight >= 1
			})
			r.copyd.kill9()
			at = int64(want)
			t.Logf("round %d (copyd): killed after %d copies with %.0f in flight", i, want, inFlight)
			startCopyd()
		case "apply":
			r.apply.stop(t)
			r.apply = nil
			lo = head()
			r.round()
			r.round()
			hi = head()
			at = lo + 1 + rng.Int64N(max(1, (hi-lo)/3))
			r.startApply()
			poll(t, 5*time.Minute, 5*time.Millisecond, fmt.Sprintf("DR %s past event %d", r.db1, at), func() bool {
				r.checkAlive()
				return drAt(r.db1) >= at
			})
			r.apply.kill9()
			if got := drAt(r.db1); got >= hi {
				t.Errorf("round %d: the applier was killed once %s was past event %d, yet it is at %d, the round's end (%d)", i, r.db1, at, got, hi)
			}
			r.startApply()
		}
		t.Logf("round %d (%s): source events %d-%d, killed past %d (for copyd: copies finished)", i, who, lo+1, hi, at)
		if i == 2 {
			r.compact(0, -1, true)
			r.overwrite(2, 0)
		}
	}
	r.compact(1, 1, true)
	r.converge(8 * time.Minute)
	r.notOnDR(r.aborted)
	r.compactedOnDR()
	if got := r.drOpenReplTxns(); len(got) != 0 {
		t.Errorf("DR has open transactions of the applier %v after every source transaction ended", got)
	}
}

// TestAcidWritesAgedOut: a commit whose message names no writes, and
// whose transaction's first allocation has aged out of the source log
// (the metastore cleans write notifications with the same time to live),
// is published with WRITES_UNAVAILABLE, on which the applier halts its
// database; a commit whose allocation is still in the log is published
// with its writes. The log is a synthetic one (a test must not purge the
// real metastore's), over two real source transactions whose writes the
// source metastore holds and the tailer reads from it.
func TestAcidWritesAgedOut(t *testing.T) {
	env := testenv.Require(t)
	ctx := ctxFor(t, 5*time.Minute)
	src := env.HMS(t, testenv.Source)
	srcFS, _ := pipelineFS(t, env)
	w := wl.NewSource(src, srcFS, env.Get(t, "HIVEDR_HMS_SRC_EXTERNAL"))
	db := "aged_" + uniq(t)
	if err := w.CreateDatabase(ctx, db); err != nil {
		t.Fatal(err)
	}
	if err := w.CreateACIDTable(ctx, db, "orders", wl.ACIDTableSpec{Columns: []string{"id bigint", "note string"}}); err != nil {
		t.Fatal(err)
	}
	txns := make([]*wl.Txn, 2) // old: its allocation ages out; fresh: it does not
	writeIDs := make([]int64, 2)
	for i := range txns {
		tx, err := w.OpenTxn(ctx)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = tx.Abort(context.Background()) })
		if _, err := tx.Insert(ctx, db, "orders", nil, 2); err != nil {
			t.Fatal(err)
		}
		if writeIDs[i], err = tx.WriteID(ctx, db, "orders"); err != nil {
			t.Fatal(err)
		}
		txns[i] = tx
	}
	row := func(typ, msg string) synthRow {
		return synthRow{Type: typ, DB: db, Table: "orders", Format: "json-0.2", Message: msg}
	}
	log := newSynthLog(t, env)
	log.addDatabases(t, db)
	s := serde(t, env)
	oldAlloc, _ := log.append(t, []synthRow{row("ALLOC_WRITE_ID_EVENT",
		fmt.Sprintf(`{"txnIdList":[%d],"writeIdList":[%d],"dbName":"%s","tableName":"orders"}`, txns[0].ID, writeIDs[0], db))})
	_, freshAlloc := log.append(t, []synthRow{row("ALLOC_WRITE_ID_EVENT",
		fmt.Sprintf(`{"txnIdList":[%d],"writeIdList":[%d],"dbName":"%s","tableName":"orders"}`, txns[1].ID, writeIDs[1], db))})
	conf := tailerConf{prefix: "t" + uniq(t), source: "aged", kind: "postgres", postgres: log.DSN, databases: "    - {name: " + db + "}"}
	p := startHivedr(t, "tailer", "tail", "-config", conf.write(t, env))
	waitCheckpoint(t, env, s, conf, freshAlloc, p, 2*time.Minute)
	// The first allocation ages out of the log, then both commit, their
	// messages naming no writes (Hive's own listener's).
	log.purge(t, oldAlloc, oldAlloc)
	_, last := log.append(t, []synthRow{
		{Type: "COMMIT_TXN", Format: "json-0.2", Message: fmt.Sprintf(`{"txnid":%d}`, txns[0].ID)},
		{Type: "COMMIT_TXN", Format: "json-0.2", Message: fmt.Sprintf(`{"txnid":%d}`, txns[1].ID)},
	})
	waitCheckpoint(t, env, s, conf, last, p, 2*time.Minute)
	commits := map[int64]*schemas.Event{}
	for _, ev := range events(readTopic(t, env, s, kafka.Topics{Prefix: conf.prefix}.Events(db))) {
		if txn, ok := ev.Payload.(*schemas.Transaction); ok && ev.EventType == schemas.EventCommitTxn && len(txn.TxnIDs) == 1 {
			commits[txn.TxnIDs[0]] = ev
		}
	}
	for i, tx := range txns {
		ev := commits[tx.ID]
		if ev == nil {
			t.Fatalf("no commit of source transaction %d on the topic of %s", tx.ID, db)
		}
		txn := ev.Payload.(*schemas.Transaction)
		if len(txn.WriteIDs) != 1 || txn.WriteIDs[0].WriteID != writeIDs[i] || len(ev.Files) != 1 {
			t.Errorf("commit of %d published with writes %+v and files %+v; want write id %d and its file, read from the source",
				tx.ID, txn.WriteIDs, ev.Files, writeIDs[i])
		}
		aged := len(ev.Errors) == 1 && ev.Errors[0].Kind == schemas.ErrWritesUnavailable &&
			strings.Contains(ev.Errors[0].Message, fmt.Sprintf("(event %d)", oldAlloc))
		if aged != (i == 0) {
			t.Errorf("commit of %d (allocation aged out: %v) published with errors %+v", tx.ID, i == 0, ev.Errors)
		}
	}
	t.Logf("commit of %d: %s", txns[0].ID, commits[txns[0].ID].Errors[0].Message)
}
