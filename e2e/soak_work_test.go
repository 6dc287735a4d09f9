//go:build soak

package e2e

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path"
	"slices"
	"strings"
	"sync"

	"github.com/colinmarc/hdfs/v2"

	wl "github.com/hivedr/hivedr/e2e/workload"
	"github.com/hivedr/hivedr/internal/acid"
	"github.com/hivedr/hivedr/internal/location"
)

// soakWork is the soak's workload: random steps over its databases, each
// a few metastore calls with data files, tracking what each database
// holds so that every step is valid. Besides external tables it writes
// managed transactional tables (insert-only and full ACID) in source
// transactions that commit, abort, or stay open over later steps (and
// the faults between them), compacts them through the compactor's
// protocol, and drops and re-creates them at the same path.
type soakWork struct {
	rng *rand.Rand
	dbs []string
	n   int
	tbl map[string][]*soakTable // by database
	// open is each database's transaction left open by a step, with the
	// tables it wrote.
	open map[string]*soakOpenTxn

	// cm is the source's change-management root (a path), where the
	// compaction cleaner recycles what it removes; hdfs the source HDFS.
	cm   string
	hdfs *hdfs.Client

	mu      sync.Mutex      // held by a step; retire takes it
	retired map[string]bool // databases the workload no longer changes
}

type soakTable struct {
	name  string
	parts [][]string // nil: unpartitioned
	cols  int
	keys  bool
	// acid: a managed transactional table (insertOnly: insert-only).
	acid, insertOnly bool
}

type soakOpenTxn struct {
	tx     *wl.Txn
	tables []string
	steps  int // steps of its database since it opened
}

func newSoakWork(dbs []string, rng *rand.Rand, cm string, c *hdfs.Client) *soakWork {
	return &soakWork{rng: rng, dbs: dbs, cm: cm, hdfs: c, tbl: map[string][]*soakTable{}, open: map[string]*soakOpenTxn{}, retired: map[string]bool{}}
}

// pick chooses the database of the next step ("" when all are retired):
// first a retired one whose transaction is still open, to end it.
func (k *soakWork) pick() string {
	var live []string
	for _, db := range k.dbs {
		if k.retired[db] && k.open[db] != nil {
			return db
		}
		if !k.retired[db] {
			live = append(live, db)
		}
	}
	if len(live) == 0 {
		return ""
	}
	return live[k.rng.IntN(len(live))]
}

// soakStepResult is what a step did: a name for the history and the
// tables it may have changed (by any name they had).
type soakStepResult struct {
	what    string
	touched []string
	// absent are tables the step removed and made again: between its
	// events the source had none of that name.
	absent []string
	// renamed is a table's old and new name when the step renamed it.
	renamed [2]string
	// replaced is the table and partition ("" for a table without
	// partition keys) an INSERT OVERWRITE of the step replaced.
	replaced [2]string
}

func did(what string, touched ...string) soakStepResult {
	return soakStepResult{what: what, touched: touched}
}

// step runs one random step on db.
func (k *soakWork) step(ctx context.Context, s *wl.Source, db string) (soakStepResult, error) {
	k.n++
	if k.retired[db] {
		return k.endOpen(ctx, db, true)
	}
	if o := k.open[db]; o != nil {
		o.steps++
		if o.steps > 2+k.rng.IntN(6) {
			return k.endOpen(ctx, db, k.rng.IntN(4) > 0)
		}
	}
	ts := k.tbl[db]
	var plain, acids []*soakTable
	for _, t := range ts {
		if t.acid {
			acids = append(acids, t)
		} else {
			plain = append(plain, t)
		}
	}
	if len(acids) < 2 || k.rng.IntN(100) < 40 {
		if r, ok, err := k.acidStep(ctx, s, db, acids); ok {
			return r, err
		}
	}
	pick := func() *soakTable { return plain[k.rng.IntN(len(plain))] }
	rows := 5 + k.rng.IntN(40)
	switch c := k.rng.IntN(100); {
	case len(plain) < 2 || (c < 8 && len(plain) < 6):
		t := &soakTable{name: fmt.Sprintf("t%d", k.n), keys: k.rng.IntN(3) > 0}
		spec := wl.TableSpec{Columns: []string{"id bigint", "v string"}}
		if t.keys {
			spec.PartitionKeys = []string{"dt"}
		}
		k.tbl[db] = append(ts, t)
		return did("create table "+t.name, t.name), s.CreateTable(ctx, db, t.name, spec)
	case c < 35:
		t := pick()
		if !t.keys {
			_, err := s.Insert(ctx, db, t.name, nil, rows)
			return did("insert into "+t.name, t.name), err
		}
		var vals [][]string
		for range 1 + k.rng.IntN(4) {
			k.n++
			vals = append(vals, []string{fmt.Sprintf("d%05d", k.n)})
		}
		t.parts = append(t.parts, vals...)
		_, err := s.AddPartitions(ctx, db, t.name, vals, rows)
		return did(fmt.Sprintf("add %d partitions to %s", len(vals), t.name), t.name), err
	case c < 60:
		t := pick()
		var vals []string
		if t.keys {
			if len(t.parts) == 0 {
				return did("nothing (no partition to insert into)"), nil
			}
			vals = t.parts[k.rng.IntN(len(t.parts))]
		}
		_, err := s.Insert(ctx, db, t.name, vals, rows)
		return did("insert into "+t.name, t.name), err
	case c < 72:
		t := pick()
		var vals []string
		if t.keys {
			if len(t.parts) == 0 {
				return did("nothing (no partition to overwrite)"), nil
			}
			vals = t.parts[k.rng.IntN(len(t.parts))]
		}
		_, err := s.InsertOverwrite(ctx, db, t.name, vals, rows)
		res := did("insert overwrite "+t.name, t.name)
		res.replaced = [2]string{t.name, strings.Join(vals, "/")}
		return res, err
	case c < 82:
		t := pick()
		t.cols++
		return did("add a column to "+t.name, t.name), s.AlterTableAddColumn(ctx, db, t.name, fmt.Sprintf("c%d string", t.cols))
	case c < 89:
		t := pick()
		if len(t.parts) < 2 {
			return did("nothing (no partition to drop)"), nil
		}
		i := k.rng.IntN(len(t.parts))
		vals := t.parts[i]
		t.parts = append(t.parts[:i], t.parts[i+1:]...)
		return did("drop a partition of "+t.name, t.name), s.DropPartitions(ctx, db, t.name, [][]string{vals}, true)
	case c < 95:
		t := pick()
		old := t.name
		t.name = fmt.Sprintf("r%d", k.n)
		res := did("rename "+old+" to "+t.name, old, t.name)
		res.renamed = [2]string{old, t.name}
		return res, s.RenameTable(ctx, db, old, t.name)
	default:
		if len(plain) < 3 {
			return did("nothing (too few tables to drop one)"), nil
		}
		t := pick()
		k.tbl[db] = slices.DeleteFunc(ts, func(x *soakTable) bool { return x == t })
		return did("drop table "+t.name, t.name), s.DropTable(ctx, db, t.name, true)
	}
}

// acidStep runs a step on db's transactional tables; ok is false when it
// chose none.
func (k *soakWork) acidStep(ctx context.Context, s *wl.Source, db string, acids []*soakTable) (soakStepResult, bool, error) {
	c := k.rng.IntN(100)
	if len(acids) < 2 || (c < 10 && len(acids) < 5) {
		t := &soakTable{name: fmt.Sprintf("tx%d", k.n), acid: true, insertOnly: k.rng.IntN(2) == 0, keys: k.rng.IntN(2) == 0}
		k.tbl[db] = append(k.tbl[db], t)
		return did(fmt.Sprintf("create transactional table %s (%s)", t.name, t.kind()), t.name), true, k.createACID(ctx, s, db, t)
	}
	t := acids[k.rng.IntN(len(acids))]
	o := k.open[db]
	inOpen := o != nil && slices.Contains(o.tables, t.name)
	var vals []string
	if t.keys {
		vals = t.parts[k.rng.IntN(len(t.parts))]
	}
	switch {
	case c < 60:
		// A transaction: one or two writes, then commit, abort, or
		// (when db has none open) left open.
		tx, err := s.OpenTxn(ctx)
		if err != nil {
			return soakStepResult{}, true, err
		}
		tables := []string{t.name}
		base := !t.insertOnly && k.rng.IntN(6) == 0
		write := func(t *soakTable, vals []string) error {
			if base {
				_, err := tx.Overwrite(ctx, db, t.name, vals, 3)
				return err
			}
			_, err := tx.Insert(ctx, db, t.name, vals, 2+k.rng.IntN(5))
			return err
		}
		if err := write(t, vals); err != nil {
			return soakStepResult{}, true, err
		}
		if u := acids[k.rng.IntN(len(acids))]; k.rng.IntN(3) == 0 && (o == nil || !slices.Contains(o.tables, u.name)) {
			var uv []string
			if u.keys {
				uv = u.parts[k.rng.IntN(len(u.parts))]
			}
			if err := write(u, uv); err != nil {
				return soakStepResult{}, true, err
			}
			if u != t {
				tables = append(tables, u.name)
			}
		}
		what := fmt.Sprintf("transaction %d writes %v", tx.ID, tables)
		if base {
			what = fmt.Sprintf("transaction %d writes bases of %v", tx.ID, tables)
		}
		switch e := k.rng.IntN(10); {
		case e < 2 && o == nil:
			k.open[db] = &soakOpenTxn{tx: tx, tables: tables}
			return did(what + ", left open"), true, nil
		case e < 4:
			return did(what+", aborted", tables...), true, tx.Abort(ctx)
		default:
			return did(what+", committed", tables...), true, tx.Commit(ctx)
		}
	case c < 80:
		major := k.rng.IntN(2) == 0
		kind := "minor"
		if major {
			kind = "major"
		}
		cp, err := s.Compact(ctx, db, t.name, vals, major)
		if err != nil {
			if strings.Contains(err.Error(), "nothing to compact") || strings.Contains(err.Error(), "not accepted") {
				return did(fmt.Sprintf("%s compaction of %s %v: %v", kind, t.name, vals, err), t.name), true, nil
			}
			return soakStepResult{}, true, err
		}
		if err := k.recycle(ctx, s, cp); err != nil {
			return soakStepResult{}, true, err
		}
		if err := s.CleanCompacted(ctx, cp); err != nil {
			return soakStepResult{}, true, err
		}
		return did(fmt.Sprintf("%s compaction of %s %v into %s", kind, t.name, vals, cp.Dir), t.name), true, nil
	case c < 90 && !inOpen:
		// Dropped and created again at the same path.
		if err := s.DropTable(ctx, db, t.name, true); err != nil {
			return soakStepResult{}, true, err
		}
		t.parts = nil
		res := did(fmt.Sprintf("drop and re-create transactional table %s (%s)", t.name, t.kind()), t.name)
		res.absent = []string{t.name}
		return res, true, k.createACID(ctx, s, db, t)
	}
	return soakStepResult{}, false, nil
}

func (t *soakTable) kind() string {
	k := "full ACID"
	if t.insertOnly {
		k = "insert-only"
	}
	if t.keys {
		k += ", partitioned"
	}
	return k
}

// createACID creates transactional table t, with two partitions when it
// has keys.
func (k *soakWork) createACID(ctx context.Context, s *wl.Source, db string, t *soakTable) error {
	spec := wl.ACIDTableSpec{Columns: []string{"id bigint", "amount double", "note string"}, InsertOnly: t.insertOnly}
	if t.keys {
		spec.PartitionKeys = []string{"dt"}
	}
	if err := s.CreateACIDTable(ctx, db, t.name, spec); err != nil {
		return err
	}
	if !t.keys {
		return nil
	}
	k.n++
	t.parts = [][]string{{fmt.Sprintf("p%05d", k.n)}, {fmt.Sprintf("q%05d", k.n)}}
	return s.AddACIDPartitions(ctx, db, t.name, t.parts)
}

// endOpen commits or aborts db's open transaction. One the metastore
// aborted meanwhile (its time-out passed) counts as aborted.
func (k *soakWork) endOpen(ctx context.Context, db string, commit bool) (soakStepResult, error) {
	o := k.open[db]
	delete(k.open, db)
	what := fmt.Sprintf("transaction %d (open over %d steps) ", o.tx.ID, o.steps)
	if !commit {
		return did(what+"aborted", o.tables...), o.tx.Abort(ctx)
	}
	err := o.tx.Commit(ctx)
	if err != nil && (strings.Contains(err.Error(), "TxnAbortedException") || strings.Contains(err.Error(), "NoSuchTxnException")) {
		return did(what+"aborted by the metastore: "+err.Error(), o.tables...), nil
	}
	return did(what+"committed", o.tables...), err
}

// recycle moves the files compaction c made obsolete into the
// change-management root as <name>_<checksum>, as Hive's cleaner does
// with what it removes when change management is on and the database is
// a source of replication: a commit whose files a compaction cleaned
// before DR copied them is copied from there.
func (k *soakWork) recycle(ctx context.Context, s *wl.Source, c *wl.Compaction) error {
	by, ok := acid.ParseDir(c.Dir)
	sums, can := s.FS.(interface {
		FileChecksum(ctx context.Context, loc string) (string, bool, error)
	})
	if !ok || !can {
		return fmt.Errorf("recycle after compaction %d: %s is not an ACID directory, or the store gives no checksum", c.ID, c.Dir)
	}
	var move []string
	err := s.FS.Walk(ctx, c.Location, func(loc string, _ int64) error {
		rel, ok := location.Below(c.Location, loc)
		top, _, nested := strings.Cut(rel, "/")
		if ok && nested && top != c.Dir && acid.ObsoleteAfter(top, by) {
			move = append(move, loc)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("recycle after compaction %d: %w", c.ID, err)
	}
	if len(move) > 0 {
		if err := k.hdfs.MkdirAll(k.cm, 0o777); err != nil {
			return fmt.Errorf("recycle after compaction %d: %w", c.ID, err)
		}
	}
	for _, loc := range move {
		sum, _, err := sums.FileChecksum(ctx, loc)
		if err != nil {
			return fmt.Errorf("recycle %s: %w", loc, err)
		}
		p := hdfsPath(loc)
		if err := k.hdfs.Rename(p, path.Join(k.cm, path.Base(p)+"_"+sum)); err != nil && !errors.Is(err, os.ErrExist) {
			return fmt.Errorf("recycle %s: %w", loc, err)
		}
	}
	return nil
}

// hdfsPath is the path of an hdfs:// location.
func hdfsPath(loc string) string {
	_, rest, _ := strings.Cut(loc, "://")
	if i := strings.IndexByte(rest, '/'); i >= 0 {
		return rest[i:]
	}
	return "/"
}
