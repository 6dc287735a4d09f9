package producer

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/beltran/gohive/hive_metastore"

	"github.com/hivedr/hivedr/internal/acid"
	"github.com/hivedr/hivedr/internal/hms"
	"github.com/hivedr/hivedr/internal/location"
	"github.com/hivedr/hivedr/schemas"
)

// Transactional (ACID) tables in a bootstrap.
//
// What a reader of such a table sees is not its files but the files its
// write-ID state selects (acid.Visible): the newest valid base and the
// valid deltas above it. So the tailer reads the table's state from the
// source metastore as a reader starting then would (get_open_txns, then
// get_valid_write_ids with that transaction list), right after the table
// itself (after the second head of its stamp), and
//
//   - copies only the base_/delta_ directories a reader with that state
//     reads (and files outside ACID directories, as for any table):
//     never an aborted or still-open transaction's delta, never a
//     compactor's directory whose own transaction had not committed
//     (acid.VisibleIn); the files are listed after the state is read,
//     and from the live tree even when the bootstrap took HDFS snapshots
//     (a transaction commits without an event naming its table, so the
//     snapshot rule, "no event touched the table since", cannot tell
//     whether the snapshot holds a delta whole);
//   - publishes the state with the TABLE record (snapshot.write_ids),
//     which the applier gives the DR table (repl_tbl_writeid_state, as
//     Hive's REPL LOAD does) before any event after the cut reaches it.
//
// Why no write is lost or resurrected between the cut N and the listing.
// Every write ID at or below the state's high-water mark H was allocated
// before the state was read, and the state says of each whether its
// transaction had committed (valid), aborted or was still open; one
// allocated later is above H. The events after N replay in the
// catch-up, after the END, over that state:
//
//   - an allocation of a write ID at or below H (its event after N, its
//     effect already in the state) is not replayed (applier: it is below
//     DR's next write ID, and a replicated allocation that is would reset
//     the table's write-ID bookkeeping); one above H allocates as usual,
//     the first of them exactly at DR's next write ID H+1;
//   - the commit of a write that was valid in the state finds no DR
//     transaction (a no-op on the metastore) and its files, copied by the
//     bootstrap already, are copied again identical; a commit of a write
//     above H commits the DR transaction its allocation opened;
//   - an aborted write stays aborted: its files were never copied;
//   - a write open in the state is the one case the state cannot settle.
//     Hive's REPL bootstrap waits for open transactions before it dumps;
//     here only that table waits: it is left out of the page and read
//     again on later pages (at most once a second) until none of its
//     write IDs is open, the other tables and databases going on, the
//     END waiting for it. After tailer.bootstrap_open_txn_wait (10m) it
//     is published with those write IDs in write_ids.open: DR aborts
//     them, and if one commits later the applier halts the database
//     (needs_bootstrap) rather than hide that commit's data.
//
// The wait is kept in memory: a restarted tailer waits again from its
// start. A restart inside a partitioned table's partitions reads its
// state again for the rest of them: writes committed since then may
// have their files copied early, invisible on DR until their commits,
// which follow the END, are applied.

// WriteIDSource reads a transactional table's write-ID state from the
// source metastore for a bootstrap (MetastoreReader).
type WriteIDSource interface {
	// TableWriteIDs returns db.table's write-ID state as a reader starting
	// now sees it, and the transaction list it was read with.
	TableWriteIDs(ctx context.Context, db, table string) (acid.Txns, acid.WriteIDs, error)
}

// TableWriteIDs implements WriteIDSource: the highest write ID allocated,
// then the state read whole with it (acid.ReadTableState: what the
// metastore's reading of a table with no committed write hides, told
// open or aborted).
func (s *MetastoreReader) TableWriteIDs(ctx context.Context, db, table string) (acid.Txns, acid.WriteIDs, error) {
	name := strings.ToLower(db + "." + table)
	var (
		txns acid.Txns
		w    acid.WriteIDs
	)
	err := s.call(ctx, "get_valid_write_ids "+name, func(c *hms.Client) error {
		// The highest allocated first: every write ID up to it is then a
		// transaction's that the transaction list read next knows.
		top, err := c.GetMaxAllocatedTableWriteID(ctx, &hive_metastore.MaxAllocatedTableWriteIdRequest{DbName: strings.ToLower(db), TableName: strings.ToLower(table)})
		if err != nil {
			return err
		}
		w, txns, err = acid.ReadTableState(ctx, c, name, top.GetMaxWriteId())
		return err
	})
	if err != nil {
		return acid.Txns{}, acid.WriteIDs{}, err
	}
	return txns, w, nil
}

// acidRetryEvery is the least time between two reads of a table whose
// write IDs were open.
const acidRetryEvery = time.Second

// acidLogEvery is how often a table still waiting for its open write IDs
// is logged again.
const acidLogEvery = time.Minute

// acidView is the write-ID state a bootstrap published for the table it
// is in: what its files (the table's, then each partition's) are chosen
// by.
type acidView struct {
	table string // lower case
	txns  acid.Txns
	w     acid.WriteIDs
	// at is the source log's head read just before the state: every
	// event after it may be missing from what the state selects.
	at int64
}

// acidWait is a transactional table whose write IDs were open when a
// bootstrap read it.
type acidWait struct {
	since, next, logged time.Time
}

// acidBoot is the tailer's memory of its bootstraps' transactional
// tables (not in the checkpoint; see above).
type acidBoot struct {
	views map[string]acidView             // by bootstrap ID
	waits map[string]map[string]*acidWait // by bootstrap ID, then table
	now   func() time.Time                // the waits' clock
}

func (t *Tailer) acidState() *acidBoot {
	if t.acid == nil {
		t.acid = &acidBoot{views: map[string]acidView{}, waits: map[string]map[string]*acidWait{}, now: time.Now}
	}
	return t.acid
}

// forgetACID drops what a bootstrap that ended (or was dropped) kept.
func (t *Tailer) forgetACID(id string) {
	if t.acid != nil {
		delete(t.acid.views, id)
		delete(t.acid.waits, id)
	}
}

// acidWaiting reports whether table, of bootstrap b, waits for its open
// write IDs and is not due for another read yet.
func (t *Tailer) acidWaiting(b *schemas.BootstrapState, table string, now time.Time) bool {
	w := t.acidState().waits[b.BootstrapID][table]
	return w != nil && now.Before(w.next)
}

// acidTable reads the write-ID state of tb, a transactional table of
// pg's bootstrap whose TABLE record is next, and decides: ready, with
// the state the record carries (pg.writeIDs) and its files are chosen
// by; or not yet, its write IDs open and the wait not over (the caller
// leaves it for a later page). A table that is not transactional, or a
// source that cannot read write-ID states, is ready with none.
func (pg *snapPage) acidTable(ctx context.Context, tb *schemas.Table, now time.Time) (bool, error) {
	t, b := pg.t, pg.b
	pg.writeIDs = nil
	if !acid.Transactional(tb.Parameters) {
		return true, nil
	}
	src, ok := t.cfg.Snapshots.(WriteIDSource)
	if !ok {
		if !t.warned["nowriteids"] {
			t.warned["nowriteids"] = true
			t.log.Warn("bootstrap: the source reader cannot read write-ID states; transactional tables are published without them",
				"db", b.Database, "table", tb.Name)
		}
		return true, nil
	}
	name := strings.ToLower(tb.Name)
	at, err := t.cfg.Source.Head(ctx)
	if err != nil {
		return false, err
	}
	txns, w, err := src.TableWriteIDs(ctx, b.Database, name)
	if err != nil {
		return false, fmt.Errorf("bootstrap %s: write-ID state of %s.%s: %w", b.BootstrapID, b.Database, name, err)
	}
	st := t.acidState()
	if len(w.Open) > 0 {
		waits := st.waits[b.BootstrapID]
		if waits == nil {
			waits = map[string]*acidWait{}
			st.waits[b.BootstrapID] = waits
		}
		aw := waits[name]
		if aw == nil {
			aw = &acidWait{since: now}
			waits[name] = aw
		}
		bound := t.conf.Tailer.BootstrapOpenTxnWait.Duration
		if waited := now.Sub(aw.since); waited < bound {
			aw.next = now.Add(acidRetryEvery)
			if now.Sub(aw.logged) >= acidLogEvery {
				aw.logged = now
				t.log.Info("bootstrap: a transactional table has write IDs open; it waits for them to end (the rest of the bootstrap goes on)",
					"db", b.Database, "table", name, "bootstrap_id", b.BootstrapID, "open_write_ids", w.Open,
					"waited", waited.Round(time.Second), "wait", bound)
			}
			return false, nil
		}
		t.log.Warn("bootstrap: publishing a transactional table with write IDs still open after tailer.bootstrap_open_txn_wait: "+
			"DR aborts them, and a later commit of one of them halts the database on DR (needs_bootstrap)",
			"db", b.Database, "table", name, "bootstrap_id", b.BootstrapID, "open_write_ids", w.Open, "waited", now.Sub(aw.since).Round(time.Second))
	}
	delete(st.waits[b.BootstrapID], name)
	st.views[b.BootstrapID] = acidView{table: name, txns: txns, w: w, at: at}
	pg.writeIDs = &schemas.SnapshotWriteIDs{HighWaterMark: w.HighWaterMark, Aborted: w.Aborted, Open: w.Open}
	return true, nil
}

// acidPartitions makes sure the partitions of tb, a table whose TABLE
// record is published, are listed by a write-ID state: the one published
// with it, or after a restart (the tailer keeps it in memory) one read
// again, which selects at least what that one did.
func (pg *snapPage) acidPartitions(ctx context.Context, tb *schemas.Table) error {
	t, b := pg.t, pg.b
	name := strings.ToLower(tb.Name)
	if !acid.Transactional(tb.Parameters) || t.acidState().views[b.BootstrapID].table == name {
		return nil
	}
	src, ok := t.cfg.Snapshots.(WriteIDSource)
	if !ok {
		return nil
	}
	at, err := t.cfg.Source.Head(ctx)
	if err != nil {
		return err
	}
	txns, w, err := src.TableWriteIDs(ctx, b.Database, name)
	if err != nil {
		return fmt.Errorf("bootstrap %s: write-ID state of %s.%s: %w", b.BootstrapID, b.Database, name, err)
	}
	t.log.Info("bootstrap: read the write-ID state of the transactional table in progress again (after a restart) for its partitions",
		"db", b.Database, "table", name, "bootstrap_id", b.BootstrapID, "write_ids", w.String())
	t.acidState().views[b.BootstrapID] = acidView{table: name, txns: txns, w: w, at: at}
	return nil
}

// acidView is the write-ID state tb's files are chosen by, when tb is
// the transactional table pg's bootstrap is in; nil otherwise. Safe from
// several goroutines (it only reads).
func (pg *snapPage) acidView(tb *schemas.Table) *acidView {
	if pg.t.acid == nil || !acid.Transactional(tb.Parameters) {
		return nil
	}
	v, ok := pg.t.acid.views[pg.b.BootstrapID]
	if !ok || v.table != strings.ToLower(tb.Name) {
		return nil
	}
	return &v
}

// listACID lists dir, a transactional table's or partition's directory,
// keeping the files a reader with v's state reads (acidFiles).
func (pg *snapPage) listACID(ctx context.Context, tb *schemas.Table, dir string, v *acidView) ([]schemas.FileRef, int64, []schemas.EventError, error) {
	b := pg.b
	// A compactor's metadata file is kept beside the data: DR's readers
	// need it to read a compacted base as one.
	keepACID := func(rel string) bool { return dataFile(rel) || acid.IsMetadata(rel) }
	files, sizes, e, err := pg.t.lister.listDirKeepSizes(ctx, dir, "bootstrap "+b.BootstrapID, keepACID, "db", b.Database, "table", tb.Name)
	if err != nil || e != nil {
		var errs []schemas.EventError
		if e != nil {
			errs = []schemas.EventError{*e}
		}
		return nil, 0, errs, err
	}
	keep, err := acidFiles(dir, files, v)
	if err != nil {
		return nil, 0, []schemas.EventError{{Kind: schemas.ErrListingFailed, Path: dir, Message: err.Error()}}, nil
	}
	var out []schemas.FileRef
	var size int64
	for i, f := range files {
		if keep[i] {
			out = append(out, f)
			size += sizes[i]
		}
	}
	return out, size, nil, nil
}

// acidFiles says which of the files listed under dir a reader with v's
// state reads: those of the ACID directories (base_, delta_,
// delete_delta_) directly under dir that acid.VisibleIn chooses, and
// every file outside such directories.
func acidFiles(dir string, files []schemas.FileRef, v *acidView) ([]bool, error) {
	d, err := location.Parse(dir)
	if err != nil {
		return nil, fmt.Errorf("directory %s: %w", dir, err)
	}
	tops := make([]string, len(files)) // the ACID directory of each file, or ""
	dirs := map[string]bool{}
	var rels []string
	for i, f := range files {
		l, err := location.Parse(f.URI)
		if err != nil {
			return nil, fmt.Errorf("listed file: %w", err)
		}
		rel, ok := l.Rel(d)
		if !ok {
			return nil, fmt.Errorf("listed file %s is not under %s", f.URI, dir)
		}
		top, _, nested := strings.Cut(rel, "/")
		if _, isACID := acid.ParseDir(top); nested && isACID {
			tops[i], dirs[top] = top, true
			rels = append(rels, rel)
		}
	}
	visible := map[string]bool{}
	view := acid.View{Txns: v.txns, Compacted: acid.Compacted(rels)}
	for _, n := range acid.VisibleIn(slices.Sorted(maps.Keys(dirs)), v.w, view) {
		visible[n] = true
	}
	keep := make([]bool, len(files))
	for i, top := range tops {
		keep[i] = top == "" || visible[top]
	}
	return keep, nil
}
