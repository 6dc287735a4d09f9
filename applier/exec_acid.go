package applier

import (
	"context"
	"errors"
	"fmt"
	"path"
	"slices"
	"strings"

	"github.com/beltran/gohive/hive_metastore"

	"github.com/hivedr/hivedr/internal/acid"
	"github.com/hivedr/hivedr/internal/drparam"
	"github.com/hivedr/hivedr/internal/fs"
	"github.com/hivedr/hivedr/internal/location"
)

// Transactions is the part of the DR metastore's API that replays source
// transactions (acid.go); *hms.Client implements it.
type Transactions interface {
	OpenTxns(ctx context.Context, req *hive_metastore.OpenTxnRequest) (*hive_metastore.OpenTxnsResponse, error)
	AllocateTableWriteIds(ctx context.Context, req *hive_metastore.AllocateTableWriteIdsRequest) (*hive_metastore.AllocateTableWriteIdsResponse, error)
	CommitReplTxn(ctx context.Context, policy string, srcTxn int64, writes []*hive_metastore.WriteEventInfo, last *hive_metastore.ReplLastIdInfo) error
	AbortReplTxn(ctx context.Context, policy string, srcTxn int64) error
}

// walker lists a directory's files recursively (fs.Router).
type walker interface {
	Walk(ctx context.Context, dir string, fn func(location string, size int64) error) error
}

func (x *executor) runACID(ctx context.Context, a Action) error {
	op := a.String()
	switch a := a.(type) {
	case PruneObsolete:
		if read, err := x.baseRead(ctx, a.String(), a.Table, a.Base); err != nil || !read {
			return err
		}
		return x.pruneObsolete(ctx, a.Dir, a.String(), a.EventID, func(top string) bool { return acid.Obsolete(top, a.Base) })
	case PublishCompacted:
		return x.publishCompacted(ctx, a)
	case PruneCompacted:
		return x.pruneCompacted(ctx, a)
	}
	tx, ok := x.ms.(Transactions)
	if !ok {
		return &RefusedError{Op: op, Err: fmt.Errorf("the DR metastore client (%T) cannot replay transactions", x.ms)}
	}
	switch a := a.(type) {
	case ReplAllocate:
		src := make([]int64, len(a.Txns))
		pairs := make([]*hive_metastore.TxnToWriteId, len(a.Txns))
		for i, t := range a.Txns {
			src[i] = t.TxnID
			pairs[i] = &hive_metastore.TxnToWriteId{TxnId: t.TxnID, WriteId: t.WriteID}
		}
		// Hive 4.0 keeps a transaction's host, not its agent: the host
		// names the database, so that a failover finds what it leaves
		// open (drparam.ReplTxnAgent).
		policy := a.Policy
		agent := drparam.ReplTxnAgent(policy)
		// One source transaction a call: the metastore answers a call
		// naming several, some of which it has opened already (a re-run
		// after a crash between two), with those only, and opens none
		// of the others.
		for _, id := range src {
			_, err := tx.OpenTxns(ctx, &hive_metastore.OpenTxnRequest{
				NumTxns: 1, User: "hivedr", Hostname: agent, AgentInfo: agent,
				ReplPolicy: &policy, ReplSrcTxnIds: []int64{id}, TxnType: hive_metastore.TxnType_REPL_CREATED,
			})
			if err != nil {
				return classifyRepl(op, err)
			}
		}
		_, err := tx.AllocateTableWriteIds(ctx, &hive_metastore.AllocateTableWriteIdsRequest{
			DbName: a.DB, TableName: a.Table, ReplPolicy: &policy, SrcTxnToWriteIdList: pairs,
		})
		return classifyRepl(op, err)
	case ReplCommit:
		writes, err := x.heldWrites(ctx, a)
		if err != nil {
			return err
		}
		return classifyRepl(op, tx.CommitReplTxn(ctx, a.Policy, a.SrcTxn, writes, nil))
	case ReplAbort:
		return classifyRepl(op, tx.AbortReplTxn(ctx, a.Policy, a.SrcTxn))
	}
	return fmt.Errorf("unknown action %T", a)
}

// duplicateKeys are what the metastore's database says of a unique-key
// violation (PostgreSQL and Derby, MySQL, Oracle, SQL Server).
var duplicateKeys = []string{"duplicate key value", "Duplicate entry", "unique constraint", "duplicate key"}

// classifyRepl is classify for the calls that replay a source
// transaction, each of which the metastore makes idempotent by looking
// the source transaction up first (open_txns finds the DR transaction in
// REPL_TXN_MAP, allocate_table_write_ids the write IDs it holds,
// commit_txn and abort_txn do nothing once it is closed). Two such calls
// for one transaction at once (a killed applier's still running on the
// metastore as its successor runs it again; one lost in transit and
// retried) both miss the lookup and insert the same key: one is refused
// with a unique-key violation (REPL_TXN_MAP, TXN_WRITE_NOTIFICATION_LOG,
// TXN_TO_WRITE_ID), as an internal error or a MetaException. That
// refusal is a TransientError: retried, the call's lookup finds what its
// twin did, or does it if the twin failed. It is never taken for done
// without that lookup.
func classifyRepl(op string, err error) error {
	c := classify(op, err)
	var r *RefusedError
	if errors.As(c, &r) && slices.ContainsFunc(duplicateKeys, func(k string) bool { return strings.Contains(err.Error(), k) }) {
		return &TransientError{Op: op, Err: err}
	}
	return c
}

// heldWrites are a commit's writes without the files of a.Replaced that
// DR does not hold (ReplCommit), a write left with none left out whole.
// Without a filesystem that tells whether a file exists, a.Writes.
func (x *executor) heldWrites(ctx context.Context, a ReplCommit) ([]*hive_metastore.WriteEventInfo, error) {
	ex, ok := x.files.(interface {
		Exists(ctx context.Context, loc string) (bool, error)
	})
	if len(a.Replaced) == 0 || !ok {
		return a.Writes, nil
	}
	out := make([]*hive_metastore.WriteEventInfo, 0, len(a.Writes))
	for _, w := range a.Writes {
		var kept, dropped []string
		for _, e := range strings.Split(w.Files, "]") {
			loc, _, _ := strings.Cut(e, "#")
			by, replaced := a.Replaced[loc]
			if !replaced {
				kept = append(kept, e)
				continue
			}
			held, err := ex.Exists(ctx, loc)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", a, err)
			}
			if held {
				kept = append(kept, e)
				continue
			}
			dropped = append(dropped, loc)
			if x.log != nil {
				x.log.Info("a committed file is not on DR; left out of the commit, a later event replaces its object",
					"file", loc, "write_id", w.WriteId, "table", w.Database+"."+w.Table, "src_txn", a.SrcTxn, "replaced_by", by)
			}
		}
		switch {
		case len(dropped) == 0:
			out = append(out, w)
		case len(kept) > 0:
			c := *w
			c.Files = strings.Join(kept, "]")
			out = append(out, &c)
		}
	}
	return out, nil
}

// pruneObsolete removes the files of the ACID directories directly under
// dir that obsolete reports (by name). Only names that parse as ACID
// directories are touched; a listed file outside dir is refused. what
// names the action in errors.
func (x *executor) pruneObsolete(ctx context.Context, dir, what string, eventID int64, obsolete func(top string) bool) error {
	refuse := func(err error) error { return &RefusedError{Op: what, Err: err} }
	w, ok := x.files.(walker)
	if !ok || x.files == nil {
		return refuse(errors.New("no filesystem that lists directories is configured for DR data"))
	}
	d, err := location.Parse(dir)
	if err != nil {
		return refuse(err)
	}
	var remove, rels []string
	err = w.Walk(ctx, dir, func(loc string, _ int64) error {
		l, err := location.Parse(loc)
		if err != nil {
			return refuse(fmt.Errorf("listed file: %w", err))
		}
		rel, ok := l.Rel(d)
		if !ok || rel == "" {
			return refuse(fmt.Errorf("walking %s gave %s, which is not under it", dir, loc))
		}
		top, _, nested := strings.Cut(rel, "/")
		if nested && acid.IsDir(top) && obsolete(top) {
			remove, rels = append(remove, loc), append(rels, rel)
		}
		return nil
	})
	if errors.Is(err, fs.ErrNotExist) {
		return nil // nothing there to prune
	}
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	kept := remove[:0]
	for i, loc := range remove {
		later, err := x.copiedLater(ctx, location.Append(d.String(), rels[i]), loc, eventID)
		if err != nil {
			return fmt.Errorf("%s: %w", what, err)
		}
		if !later {
			kept = append(kept, loc)
		}
	}
	return x.removeObsolete(ctx, dir, what, eventID, kept) // prunedelay.go: after applier.prune_delay
}

// copiedLater reports whether a DR file is a copy made for an event
// after eventID: its completion was read (writtenAfter, by the file's
// canonical location), or it carries that event's mark (copyd sets it
// before the file appears; read at listed, the location as the listing
// spells it). A later event's file copied ahead of its metadata must
// survive an earlier event's prune: a table dropped and made again at
// the same path names its first deltas as the old one did. 0: no event
// to compare with.
func (x *executor) copiedLater(ctx context.Context, canonical, listed string, eventID int64) (bool, error) {
	if eventID <= 0 {
		return false, nil
	}
	if x.writtenAfter != nil {
		if later, err := x.writtenAfter(canonical, eventID); err != nil || later {
			return later, err
		}
	}
	return x.markedAfter(ctx, listed, eventID)
}

// dirRenamer moves directories in one step (fs.Router).
type dirRenamer interface {
	RenameDir(ctx context.Context, from, to string) error
	Exists(ctx context.Context, loc string) (bool, error)
}

// publishCompacted renames a compaction's directory from its staging name
// into place. Re-driven after the rename, it finds Final there and the
// staging name gone, and does nothing.
func (x *executor) publishCompacted(ctx context.Context, a PublishCompacted) error {
	refuse := func(err error) error { return &RefusedError{Op: a.String(), Err: err} }
	r, ok := x.files.(dirRenamer)
	if !ok || x.files == nil {
		return refuse(errors.New("no filesystem that renames directories is configured for DR data"))
	}
	// Where an incomplete directory under the final name goes while the
	// compaction's takes its place (hidden: prunes leave it alone).
	fl, err := location.Parse(a.Final)
	if err != nil {
		return refuse(err)
	}
	aside := location.Append(fl.Dir().String(), ".hivedr-replaced-"+path.Base(fl.Path))
	final, err := r.Exists(ctx, a.Final)
	if err != nil {
		return fmt.Errorf("%s: %w", a, err)
	}
	if final {
		lacks, err := x.lacksFiles(ctx, a.Final, a.Staging)
		if err != nil {
			return fmt.Errorf("%s: %w", a, err)
		}
		if !lacks {
			// Already published (a re-drive): it stays, and a staged
			// copy left goes (and what a replacement cut short left
			// aside).
			if err := x.removeTree(ctx, a.Staging, a.String()); err != nil {
				return err
			}
			return x.removeTree(ctx, aside, a.String())
		}
		// A directory of that name holding less than the compaction
		// wrote: a base of that write ID an overwrite left (without the
		// compactor's metadata file, or without some of its files when
		// its commit left out those this compaction replaces). The
		// compaction's output takes its place, as Hive's readers on the
		// source read it in place of the overwrite's.
		if err := x.removeTree(ctx, aside, a.String()); err != nil {
			return err
		}
		if err := r.RenameDir(ctx, a.Final, aside); err != nil {
			return fmt.Errorf("%s: move the incomplete %s aside: %w", a, a.Final, err)
		}
		if x.log != nil {
			x.log.Warn("a directory under the compacted directory's name held less than the compaction wrote; replacing it", "dir", a.Final, "staging", a.Staging)
		}
	}
	err = r.RenameDir(ctx, a.Staging, a.Final)
	switch {
	case errors.Is(err, fs.ErrNoAtomicRename):
		return refuse(fmt.Errorf("%w: a compaction's output is published on DR by renaming its directory, which this store cannot do in one step (replicate transactional tables to HDFS)", err))
	case errors.Is(err, fs.ErrNotExist):
		return refuse(fmt.Errorf("the compaction's copy at %s is not there, though its copies completed: %w", a.Staging, err))
	case err != nil:
		return fmt.Errorf("%s: %w", a, err)
	}
	return x.removeTree(ctx, aside, a.String())
}

// lacksFiles reports whether dir lacks a file that staging holds, by its
// path below each, the compactor's metadata file included: an
// overwrite's base of the same write ID never has it, and Hive's readers
// choose the compactor's base over it once the compaction committed, so
// DR holds the compactor's; a missing staging holds none.
func (x *executor) lacksFiles(ctx context.Context, dir, staging string) (bool, error) {
	w, ok := x.files.(walker)
	if !ok {
		return false, nil
	}
	rels := func(root string) (map[string]bool, error) {
		r, err := location.Parse(root)
		if err != nil {
			return nil, err
		}
		out := map[string]bool{}
		err = w.Walk(ctx, root, func(loc string, _ int64) error {
			l, err := location.Parse(loc)
			if err != nil {
				return err
			}
			if rel, ok := l.Rel(r); ok {
				out[rel] = true
			}
			return nil
		})
		if errors.Is(err, fs.ErrNotExist) {
			return out, nil
		}
		return out, err
	}
	staged, err := rels(staging)
	if err != nil || len(staged) == 0 {
		return false, err
	}
	have, err := rels(dir)
	if err != nil {
		return false, err
	}
	for rel := range staged {
		if !have[rel] {
			return true, nil
		}
	}
	return false, nil
}

// pruneCompacted removes what a compaction's directory made obsolete. A
// base goes first through the DR table's write IDs: while a write ID up to
// it is open on DR (a replicated transaction left open), DR's readers do
// not read the base but the deltas, and they are kept.
func (x *executor) pruneCompacted(ctx context.Context, a PruneCompacted) error {
	by, ok := acid.ParseDir(a.By)
	if !ok {
		return &RefusedError{Op: a.String(), Err: fmt.Errorf("%s is not an ACID directory", a.By)}
	}
	if by.Kind == acid.Base {
		if read, err := x.baseRead(ctx, a.String(), a.Table, by.Max); err != nil || !read {
			return err
		}
	}
	return x.pruneObsolete(ctx, a.Dir, a.String(), a.EventID, func(top string) bool { return acid.ObsoleteAfter(top, by) })
}

// baseRead reports whether a DR reader of table ("db.table") reads the
// base of write ID max that op (a prune) is for: no write ID up to max is
// open on DR. Until then a reader reads the deltas below it (a
// transaction that began before the base's committed after it, or not
// yet), which are kept. No table names no reader to wait for.
func (x *executor) baseRead(ctx context.Context, op, table string, max int64) (bool, error) {
	if table == "" {
		return true, nil
	}
	ms, ok := x.ms.(acid.Metastore)
	if !ok {
		return false, &RefusedError{Op: op, Err: fmt.Errorf("the DR metastore client (%T) cannot read write IDs", x.ms)}
	}
	states, err := acid.ReadWriteIDs(ctx, ms, []string{table})
	if err != nil {
		return false, classify(op, err)
	}
	w := states[strings.ToLower(table)]
	if max > w.HighWaterMark || slices.ContainsFunc(w.Open, func(id int64) bool { return id <= max }) {
		if x.log != nil {
			x.log.Warn("a base is not read on DR yet (a write ID below it is open): keeping the deltas it covers", "prune", op,
				"write_ids", w.String())
		}
		return false, nil
	}
	return true, nil
}

// removeTree removes dir (a staging or set-aside directory of this
// applier's) with every file under it, then the directories that held
// them, deepest first, and dir itself: an empty directory left under a
// name a later step renames a directory to would refuse that rename (the
// soak found a compaction's publish retried for ever on the empty
// directory an interrupted attempt had set aside). A missing dir holds
// none.
func (x *executor) removeTree(ctx context.Context, dir, what string) error {
	w, ok := x.files.(walker)
	if !ok || x.files == nil {
		return &RefusedError{Op: what, Err: errors.New("no filesystem that lists directories is configured for DR data")}
	}
	var remove []string
	err := w.Walk(ctx, dir, func(loc string, _ int64) error {
		remove = append(remove, loc)
		return nil
	})
	if errors.Is(err, fs.ErrNotExist) {
		return nil // no directory, nothing under it
	}
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	for _, loc := range remove {
		if err := x.files.Remove(ctx, loc); err != nil {
			return fmt.Errorf("%s: %w", what, err)
		}
	}
	r, ok := x.files.(emptyDirRemover)
	l, lok := x.files.(DirLister)
	if !ok || !lok {
		return nil
	}
	// The directories under dir, then dir, deepest first: each is empty
	// once those below it are gone.
	var dirs []string
	var below func(d string) error
	below = func(d string) error {
		names, err := l.ListDirs(ctx, d)
		if err != nil {
			return err
		}
		for _, n := range names {
			sub := location.Append(d, n)
			if err := below(sub); err != nil {
				return err
			}
		}
		dirs = append(dirs, d)
		return nil
	}
	if err := below(strings.TrimSuffix(dir, "/")); err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	for _, d := range dirs {
		if err := r.RemoveEmptyDir(ctx, d); err != nil {
			return fmt.Errorf("%s: %w", what, err)
		}
	}
	return nil
}
