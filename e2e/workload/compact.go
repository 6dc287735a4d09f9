package workload

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"

	"github.com/beltran/gohive/hive_metastore"

	"github.com/hivedr/hivedr/internal/acid"
	"github.com/hivedr/hivedr/internal/location"
)

// Compactions, run as Hive's compactor runs them through the metastore:
// a request joins the compaction queue (compact2), a worker takes it
// (find_next_compact), opens a transaction of type COMPACTION, records it
// and the highest write ID it compacts up to on the request
// (update_compactor_state), writes what it merged into base_N_vT (major)
// or delta_A_B_vT (minor) with a _metadata_acid file saying so, marks the
// request compacted (mark_compacted) and commits its transaction, which
// the metastore logs as COMMIT_TXN and COMMIT_COMPACTION. The cleaner's
// part, removing what the new directory made obsolete once no reader
// needs it, is CleanObsolete (major) or CleanCompacted.

// compactorWorker names the workload's compactor in the queue.
const compactorWorker = "hivedr-workload-compactor"

// compactedMetadata is what a compactor writes in _metadata_acid.
const compactedMetadata = `{"thisFileVersion":"0","dataFormat":"compacted"}`

// Compaction is a compaction the workload ran.
type Compaction struct {
	// ID is the request's in the compaction queue; Txn the compactor's
	// transaction.
	ID, Txn int64
	// Dir is the directory it wrote (base_N_vT or delta_A_B_vT), under
	// Location.
	Dir, Location string
	// HighestWriteID is the N it compacted up to.
	HighestWriteID int64
	// Merged are the directories it read.
	Merged []string
}

// Compact compacts db.table (partition vals; nil for an unpartitioned
// table): major into a base of every visible write up to the lowest open
// one, or minor into one delta of the visible deltas above the base.
// Requests of others the workload's worker finds first in the queue are
// marked failed, as a worker that cannot run them does.
func (s *Source) Compact(ctx context.Context, db, table string, vals []string, major bool) (*Compaction, error) {
	what := fmt.Sprintf("compact %s.%s %v", db, table, vals)
	t, err := s.table(ctx, db, table)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	dir := strings.TrimSuffix(t.Sd.Location, "/")
	var part *string
	if len(vals) > 0 {
		name, err := partitionName(t.PartitionKeys, vals)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", what, err)
		}
		dir += "/" + name
		part = &name
	}
	typ := hive_metastore.CompactionType_MINOR
	if major {
		typ = hive_metastore.CompactionType_MAJOR
	}
	req, err := s.HMS.Compact2(ctx, &hive_metastore.CompactionRequest{Dbname: db, Tablename: table, Partitionname: part, Type: typ})
	if err != nil {
		return nil, fmt.Errorf("%s: compact2: %w", what, err)
	}
	if !req.Accepted {
		return nil, fmt.Errorf("%s: compact2: not accepted (request %d is %s)", what, req.ID, req.State)
	}
	ci, err := s.takeCompaction(ctx, req.ID)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	open, err := s.HMS.OpenTxns(ctx, &hive_metastore.OpenTxnRequest{NumTxns: 1, User: "hivedr", Hostname: "workload",
		AgentInfo: compactorWorker, TxnType: hive_metastore.TxnType_COMPACTION})
	if err != nil || len(open.GetTxnIds()) != 1 {
		return nil, fmt.Errorf("%s: open_txns (compaction): %v, %v", what, open, err)
	}
	c := &Compaction{ID: ci.ID, Txn: open.TxnIds[0], Location: dir}
	fail := func(err error) (*Compaction, error) {
		_ = s.HMS.MarkFailed(ctx, ci)
		_ = s.HMS.AbortTxns(ctx, &hive_metastore.AbortTxnsRequest{TxnIds: []int64{c.Txn}})
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	states, err := ValidWriteIDs(ctx, s.HMS, []string{strings.ToLower(db + "." + table)})
	if err != nil {
		return fail(err)
	}
	w := states[strings.ToLower(db+"."+table)]
	// Up to the lowest open write ID: what comes after may still change.
	n := w.HighWaterMark
	for _, id := range w.Open {
		n = min(n, id-1)
	}
	c.HighestWriteID = n
	ci.HighestWriteId = &n
	if err := s.HMS.UpdateCompactorState(ctx, ci, c.Txn); err != nil {
		return fail(fmt.Errorf("update_compactor_state: %w", err))
	}
	below := WriteIDs{HighWaterMark: n, Aborted: w.Aborted}
	visible, err := s.visibleDirs(ctx, dir, below)
	if err != nil {
		return fail(err)
	}
	var merge []string
	low := int64(-1)
	for _, d := range visible {
		x, _ := acid.ParseDir(d)
		if x.Kind == acid.Base {
			if major {
				merge = append(merge, d)
			}
			continue
		}
		merge = append(merge, d)
		if low < 0 || x.Min < low {
			low = x.Min
		}
	}
	if len(merge) == 0 {
		return fail(fmt.Errorf("nothing to compact under %s up to write ID %d", dir, n))
	}
	c.Merged = merge
	c.Dir = fmt.Sprintf("base_%07d_v%07d", n, c.Txn)
	if !major {
		c.Dir = fmt.Sprintf("delta_%07d_%07d_v%07d", low, n, c.Txn)
	}
	data, err := s.readDirs(ctx, dir, merge)
	if err != nil {
		return fail(err)
	}
	name := "bucket_00000"
	if strings.EqualFold(t.Parameters["transactional_properties"], "insert_only") {
		name = "000000_0"
	}
	if _, err := s.writeFile(ctx, dir+"/"+c.Dir+"/"+name, data); err != nil {
		return fail(err)
	}
	if _, err := s.writeFile(ctx, dir+"/"+c.Dir+"/"+acid.MetadataFile, []byte(compactedMetadata)); err != nil {
		return fail(err)
	}
	if err := s.HMS.MarkCompacted(ctx, ci); err != nil {
		return fail(fmt.Errorf("mark_compacted: %w", err))
	}
	if err := s.HMS.CommitTxn(ctx, &hive_metastore.CommitTxnRequest{Txnid: c.Txn}); err != nil {
		return nil, fmt.Errorf("%s: commit_txn %d (compaction): %w", what, c.Txn, err)
	}
	return c, nil
}

// takeCompaction takes request id off the queue as a worker does, marking
// failed any other it is handed first.
func (s *Source) takeCompaction(ctx context.Context, id int64) (*hive_metastore.CompactionInfoStruct, error) {
	for range 1000 {
		o, err := s.HMS.FindNextCompact(ctx, compactorWorker, "hivedr")
		if err != nil {
			return nil, fmt.Errorf("find_next_compact: %w", err)
		}
		if o == nil || o.Ci == nil {
			return nil, fmt.Errorf("find_next_compact: request %d is not in the queue", id)
		}
		if o.Ci.ID == id {
			return o.Ci, nil
		}
		if err := s.HMS.MarkFailed(ctx, o.Ci); err != nil {
			return nil, fmt.Errorf("mark_failed %d: %w", o.Ci.ID, err)
		}
	}
	return nil, fmt.Errorf("find_next_compact: request %d not handed out after 1000 others", id)
}

// visibleDirs are the ACID directories under dir a reader with state w
// reads.
func (s *Source) visibleDirs(ctx context.Context, dir string, w WriteIDs) ([]string, error) {
	names := map[string]bool{}
	var rels []string
	err := s.FS.Walk(ctx, dir, func(loc string, _ int64) error {
		if rel, ok := location.Below(dir, loc); ok {
			if top, _, nested := strings.Cut(rel, "/"); nested {
				names[top] = true
				rels = append(rels, rel)
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("list %s: %w", dir, err)
	}
	return acid.VisibleIn(slices.Collect(maps.Keys(names)), w, acid.View{Compacted: acid.Compacted(rels)}), nil
}

// readDirs concatenates the data files of the directories dirs under dir,
// in order: the rows a compactor merges (the workload's files are text).
func (s *Source) readDirs(ctx context.Context, dir string, dirs []string) ([]byte, error) {
	var buf bytes.Buffer
	for _, d := range dirs {
		var locs []string
		err := s.FS.Walk(ctx, dir+"/"+d, func(loc string, _ int64) error {
			if rel, ok := location.Below(dir+"/"+d, loc); ok && !location.Hidden(rel) {
				locs = append(locs, loc)
			}
			return nil
		})
		if err != nil {
			return nil, fmt.Errorf("list %s/%s: %w", dir, d, err)
		}
		for _, loc := range locs {
			r, err := s.FS.Open(ctx, loc, 0, -1)
			if err != nil {
				return nil, err
			}
			_, err = io.Copy(&buf, r)
			r.Close()
			if err != nil {
				return nil, fmt.Errorf("read %s: %w", loc, err)
			}
		}
	}
	return buf.Bytes(), nil
}

// CleanCompacted removes, under the directory c compacted, the files of
// the directories c made obsolete, as Hive's cleaner does once no reader
// needs them (the metastore logs nothing for it).
func (s *Source) CleanCompacted(ctx context.Context, c *Compaction) error {
	by, ok := acid.ParseDir(c.Dir)
	if !ok {
		return fmt.Errorf("clean after compaction %d: %s is not an ACID directory", c.ID, c.Dir)
	}
	var remove []string
	err := s.FS.Walk(ctx, c.Location, func(loc string, _ int64) error {
		rel, ok := location.Below(c.Location, loc)
		top, _, nested := strings.Cut(rel, "/")
		if ok && nested && top != c.Dir && acid.ObsoleteAfter(top, by) {
			remove = append(remove, loc)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("clean after compaction %d: %w", c.ID, err)
	}
	for _, loc := range remove {
		if err := s.FS.Remove(ctx, loc); err != nil {
			return fmt.Errorf("clean after compaction %d: %w", c.ID, err)
		}
		s.markRemoved(loc)
	}
	return nil
}
