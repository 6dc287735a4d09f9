package applier

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/apache/thrift/lib/go/thrift"
	"github.com/beltran/gohive/hive_metastore"

	"github.com/hivedr/hivedr/internal/acid"
	"github.com/hivedr/hivedr/internal/drparam"
	"github.com/hivedr/hivedr/internal/fs"
	"github.com/hivedr/hivedr/internal/hms"
	"github.com/hivedr/hivedr/internal/location"
)

// Metastore is the part of the DR metastore's Thrift API the applier uses
// (*hms.Client).
type Metastore interface {
	GetDatabase(ctx context.Context, name string) (*hive_metastore.Database, error)
	CreateDatabase(ctx context.Context, db *hive_metastore.Database) error
	AlterDatabase(ctx context.Context, name string, db *hive_metastore.Database) error
	DropDatabase(ctx context.Context, name string, deleteData, cascade bool) error
	GetTableReq(ctx context.Context, req *hive_metastore.GetTableRequest) (*hive_metastore.GetTableResult_, error)
	GetAllTables(ctx context.Context, db string) ([]string, error)
	// GetTables lists db's tables whose names match pattern (the
	// metastore's: * for any characters, | between alternatives).
	GetTables(ctx context.Context, db, pattern string) ([]string, error)
	CreateTable(ctx context.Context, t *hive_metastore.Table) error
	AlterTableWithEnvironmentContext(ctx context.Context, db, name string, t *hive_metastore.Table, env *hive_metastore.EnvironmentContext) error
	DropTable(ctx context.Context, db, name string, deleteData bool) error
	GetPartitionsByNamesReq(ctx context.Context, req *hive_metastore.GetPartitionsByNamesRequest) (*hive_metastore.GetPartitionsByNamesResult_, error)
	EachPartitionName(ctx context.Context, db, table string, fn func(name string)) error
	AddPartitions(ctx context.Context, parts []*hive_metastore.Partition) (int32, error)
	AlterPartitionsWithEnvironmentContext(ctx context.Context, db, table string, parts []*hive_metastore.Partition, env *hive_metastore.EnvironmentContext) error
	RenamePartition(ctx context.Context, db, table string, vals []string, part *hive_metastore.Partition) error
	DropPartition(ctx context.Context, db, table string, vals []string, deleteData bool) (bool, error)
	DropPartitionsReq(ctx context.Context, req *hive_metastore.DropPartitionsRequest) (*hive_metastore.DropPartitionsResult_, error)
}

// Files lists and removes DR data files, and lists source ones
// (PruneFiles); *fs.Router implements it.
type Files interface {
	// Walk calls fn with the location and size of every file under dir,
	// at any depth; a missing dir is an error wrapping fs.ErrNotExist.
	Walk(ctx context.Context, dir string, fn func(location string, size int64) error) error
	Remove(ctx context.Context, loc string) error
}

var _ Files = (*fs.Router)(nil)

// DirLister is implemented by Files that can list a directory's
// subdirectories (fs.Router.ListDirs): the names of those directly under
// dir, none for a missing dir. A plan that prunes many directories of one
// parent (a bootstrap's batch of partitions, a run of overwrites) asks
// the parent once and lists only the directories that exist.
type DirLister interface {
	ListDirs(ctx context.Context, dir string) ([]string, error)
}

// WrittenAfter reports whether a copy task of an event after eventID wrote
// target (*state.Completions).
type WrittenAfter func(target string, eventID int64) (bool, error)

// executor reads DR state and runs actions on one metastore connection.
type executor struct {
	ms           Metastore
	files        Files
	writtenAfter WrittenAfter
	cache        *cache       // of the worker's own database; nil: none
	log          *slog.Logger // nil: nothing is logged
	// observe, when set, is told how long each DR call took, by call
	// (hivedr_applier_dr_call_seconds).
	observe func(call string, took time.Duration)

	// shared are the parents of two or more directories the plan's
	// actions prune (prepare), and dirs what ListDirs said of each parent
	// asked (the subdirectories, by name).
	shared map[location.Location]bool
	dirs   map[location.Location]map[string]bool

	// delayed, when set, holds the files of obsolete ACID directories
	// until applier.prune_delay has passed (prunedelay.go); nil removes
	// them at once. clock is the time (nil: time.Now).
	delayed *delayedRemovals
	clock   func() time.Time
}

func (x *executor) now() time.Time {
	if x.clock != nil {
		return x.clock()
	}
	return time.Now()
}

// timed reports a call that started at start to observe; use it as
// defer x.timed("call", time.Now()).
func (x *executor) timed(call string, start time.Time) {
	if x.observe != nil {
		x.observe(call, time.Since(start))
	}
}

// callName names what an action asks of the DR metastore (or, for the
// prunes, of the DR filesystem), for hivedr_applier_dr_call_seconds.
func callName(a Action) string {
	switch a := a.(type) {
	case CreateDatabase:
		return "create_database"
	case AlterDatabase:
		return "alter_database"
	case DropDatabase:
		return "drop_database"
	case CreateTable:
		return "create_table"
	case AlterTable:
		if tableKey(a.DB, a.Name) != tableKey(a.Table.DbName, a.Table.TableName) {
			return "rename_table"
		}
		return "alter_table"
	case DropTable:
		return "drop_table"
	case AddPartitions:
		return "add_partitions"
	case AlterPartitions:
		return "alter_partitions"
	case RenamePartition:
		return "rename_partition"
	case DropPartitions:
		return "drop_partitions"
	case PruneFiles:
		return "prune_files"
	case ExpireIceberg:
		return "expire_iceberg"
	case PruneObsolete:
		return "prune_obsolete"
	case ReplAllocate:
		return "repl_allocate"
	case ReplCommit:
		return "repl_commit"
	case ReplAbort:
		return "repl_abort"
	}
	return "other"
}

// prepare notes what the actions ahead prune: the parents of two or more
// of their directories that keep nothing are listed once (DirLister), not
// every directory. (A directory that keeps files exists, its files being
// copied: the parent's listing would spare it nothing. A run of
// ADD_PARTITION events thus costs one listing per partition, not one more
// of a table that may hold many thousands.)
func (x *executor) prepare(actions []Action) {
	seen := map[location.Location]bool{}
	for _, a := range actions {
		pr, ok := a.(PruneFiles)
		if !ok || len(pr.Keep) > 0 {
			continue
		}
		l, err := location.Parse(pr.Dir)
		if err != nil {
			continue
		}
		if parent := l.Dir(); seen[parent] {
			if x.shared == nil {
				x.shared = map[location.Location]bool{}
			}
			x.shared[parent] = true
		} else {
			seen[parent] = true
		}
	}
}

// absent reports whether dir does not exist, when its parent is one the
// plan prunes several directories of (prepare) and the files can list
// subdirectories: one listing of the parent answers for all of them. A
// directory that does not exist holds no file to prune. false when it
// cannot tell.
func (x *executor) absent(ctx context.Context, dir location.Location) (bool, error) {
	parent := dir.Dir()
	dl, ok := x.files.(DirLister)
	if !ok || !x.shared[parent] || parent == dir {
		return false, nil
	}
	subs, known := x.dirs[parent]
	if !known {
		names, err := dl.ListDirs(ctx, parent.String())
		if errors.Is(err, fs.ErrNoListing) {
			return false, nil
		}
		if err != nil {
			return false, fmt.Errorf("list the directories under %s: %w", parent, err)
		}
		subs = make(map[string]bool, len(names))
		for _, n := range names {
			subs[n] = true
		}
		if x.dirs == nil {
			x.dirs = map[location.Location]map[string]bool{}
		}
		x.dirs[parent] = subs
	}
	return !subs[dir.Base()], nil
}

// RefusedError is the metastore refusing an operation (as opposed to the
// connection failing): retrying will not help, so the database halts.
type RefusedError struct {
	Op  string
	Err error
}

func (e *RefusedError) Error() string { return e.Op + ": the metastore refused: " + e.Err.Error() }
func (e *RefusedError) Unwrap() error { return e.Err }

// TransientError is the metastore answering with a failure of its own
// that a later try may not meet: an internal error (a Thrift
// TApplicationException of type INTERNAL_ERROR, which the metastore
// answers for any exception a call does not declare, such as an I/O
// error of the DR filesystem while a DataNode restarts, or the unique-key
// violation of a twin call still running), or a MetaException whose
// message names a transient I/O cause (transientCauses). The worker
// retries it with backoff and halts the database (metastore_refused)
// only once the event has failed so for applier.halt_after.
type TransientError struct {
	Op  string
	Err error
}

func (e *TransientError) Error() string { return e.Op + ": the metastore failed: " + e.Err.Error() }
func (e *TransientError) Unwrap() error { return e.Err }

// transientCauses are what a MetaException's message names when the
// metastore failed on the DR filesystem being unreachable or not yet
// writable (a NameNode or DataNode restarting): Hadoop's connection and
// safe-mode exceptions, by class name. A refusal for anything else
// (an invalid object, a permission) names none of them. A message that
// names one wrongly only delays that database's halt by
// applier.halt_after.
var transientCauses = []string{
	"java.net.ConnectException",
	"java.net.SocketTimeoutException",
	"java.net.NoRouteToHostException",
	"SafeModeException",
	"RetriableException",
}

// classify wraps err as a RefusedError when the metastore answered with an
// exception, or as a TransientError when that exception is one a later
// try may not meet; transport errors are returned as they are (transient).
func classify(op string, err error) error {
	if err == nil {
		return nil
	}
	var te thrift.TTransportException
	if errors.As(err, &te) || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("%s: %w", op, err)
	}
	var ae thrift.TApplicationException
	if errors.As(err, &ae) {
		if ae.TypeId() == thrift.INTERNAL_ERROR {
			return &TransientError{Op: op, Err: err}
		}
		return &RefusedError{Op: op, Err: err}
	}
	var me *hive_metastore.MetaException
	if errors.As(err, &me) && slices.ContainsFunc(transientCauses, func(c string) bool { return strings.Contains(me.GetMessage(), c) }) {
		return &TransientError{Op: op, Err: err}
	}
	switch err.(type) {
	case *hive_metastore.MetaException, *hive_metastore.InvalidOperationException,
		*hive_metastore.AlreadyExistsException, *hive_metastore.NoSuchObjectException,
		*hive_metastore.InvalidObjectException:
		return &RefusedError{Op: op, Err: err}
	}
	return fmt.Errorf("%s: %w", op, err)
}

// isConflict reports whether the metastore refused because an object
// already exists or does not exist.
func isConflict(r *RefusedError) bool {
	var ae *hive_metastore.AlreadyExistsException
	return errors.As(r.Err, &ae) || isNoSuchObject(r.Err)
}

func isNoSuchObject(err error) bool {
	var n *hive_metastore.NoSuchObjectException
	return errors.As(err, &n)
}

// read fetches the DR state of the objects t names, from the cache where
// it knows them.
func (x *executor) read(ctx context.Context, t Touched) (Replica, error) {
	r := Replica{
		Databases:  map[string]*hive_metastore.Database{},
		Tables:     map[TableKey]*hive_metastore.Table{},
		Partitions: map[PartKey]*hive_metastore.Partition{},
	}
	c := x.cache
	if c == nil {
		c = &cache{} // caches nothing: no database is c.db
	}
	for _, name := range t.Databases {
		if db, ok := c.cachedDB(name, time.Now()); ok {
			if db != nil {
				r.Databases[name] = db
			}
			continue
		}
		start := time.Now()
		db, err := x.ms.GetDatabase(ctx, name)
		x.timed("get_database", start)
		if isNoSuchObject(err) {
			db, err = nil, nil
		}
		if err != nil {
			return r, classify("get database "+name, err)
		}
		c.readDB(name, db, time.Now())
		if db != nil {
			r.Databases[name] = db
		}
	}
	for _, k := range t.Tables {
		if _, seen := r.Tables[k]; seen || r.Databases[k.DB] == nil {
			continue
		}
		if tb, ok := c.tables[k]; ok && k.DB == c.db {
			if tb != nil {
				r.Tables[k] = tb
			}
			continue
		}
		// get_table_req: Hive 4 removed get_table.
		start := time.Now()
		res, err := x.ms.GetTableReq(ctx, hms.TableRequest(k.DB, k.Name))
		x.timed("get_table", start)
		var tb *hive_metastore.Table
		switch {
		case isNoSuchObject(err):
		case err != nil:
			return r, classify("get table "+k.String(), err)
		default:
			tb = res.Table
		}
		if k.DB == c.db {
			c.tables[k] = tb
		}
		if tb != nil {
			r.Tables[k] = tb
		}
	}
	byTable := map[TableKey][]PartKey{}
	for _, k := range t.Partitions {
		byTable[k.TableKey] = append(byTable[k.TableKey], k)
	}
	for tk, keys := range byTable {
		tb := r.Tables[tk]
		if tb == nil {
			continue
		}
		var names []string
		var unknown []PartKey
		for _, k := range keys {
			if p, ok := c.parts[k]; ok && tk.DB == c.db {
				if p != nil {
					r.Partitions[k] = p
				}
				continue
			}
			if tk.DB == c.db && c.absent(k) {
				continue
			}
			unknown = append(unknown, k)
			names = append(names, hms.PartitionName(tb.PartitionKeys, strings.Split(k.Values, "/")))
		}
		if len(names) == 0 {
			continue
		}
		start := time.Now()
		res, err := x.ms.GetPartitionsByNamesReq(ctx, &hive_metastore.GetPartitionsByNamesRequest{DbName: tk.DB, TblName: tk.Name, Names: names})
		x.timed("get_partitions_by_names", start)
		if isNoSuchObject(err) {
			continue
		}
		if err != nil {
			return r, classify("get partitions of "+tk.String(), err)
		}
		if tk.DB == c.db {
			if len(c.parts)+len(unknown) > maxCachedParts {
				c.parts = map[PartKey]*hive_metastore.Partition{}
			}
			for _, k := range unknown {
				c.parts[k] = nil
			}
		}
		for _, p := range res.Partitions {
			k := partKey(tk, p.Values)
			r.Partitions[k] = p
			if tk.DB == c.db {
				c.parts[k] = p
			}
		}
	}
	return r, nil
}

// inventoryPage is how many partitions the inventory of a bootstrap's END
// holds as Thrift objects at once.
const inventoryPage = 1000

// inventoryWindow is how many partition names of one DR table the
// inventory holds at once: the names are streamed (the metastore cannot
// page them) and kept a window at a time (hms.NamesAfter).
const inventoryWindow = 10_000

// inventoryMaxStale bounds the stale partitions one inventory holds: an
// END with more drops them in rounds (Inventory.More), so the applier's
// memory does not grow with a table's partitions.
const inventoryMaxStale = 10_000

// inventory reads what the END of bootstrap id converges (InventoryScope):
// the DR tables of db (all, or the named ones) with the bootstrap that
// wrote each, and of the tables id wrote (but not created: all their
// partitions are its own) the partitions it did not write, up to
// inventoryMaxStale (More says there are more). Partition names are
// streamed (get_partition_names) and kept a window of inventoryWindow at a
// time; the partitions are read in pages of inventoryPage
// (get_partitions_by_names). Memory holds a window of names, a page of
// Thrift objects and the stale partitions found, never a table's all.
func (x *executor) inventory(ctx context.Context, db, id string, tables []string, all bool) (*Inventory, error) {
	inv := &Inventory{Tables: map[string]string{}, Stale: map[string][]StalePartition{}}
	if all {
		var err error
		if tables, err = x.ms.GetAllTables(ctx, db); err != nil {
			return nil, classify("list the tables of "+db, err)
		}
	}
	stale := 0
	for _, name := range tables {
		k := tableKey(db, name)
		res, err := x.ms.GetTableReq(ctx, hms.TableRequest(k.DB, k.Name))
		if isNoSuchObject(err) {
			continue
		}
		if err != nil {
			return nil, classify("get table "+k.String(), err)
		}
		t := res.Table
		inv.Tables[k.Name] = t.Parameters[drparam.BootstrapID]
		if t.Parameters[drparam.BootstrapID] != id || t.Parameters[drparam.BootstrapNew] == id || len(t.PartitionKeys) == 0 || inv.More {
			continue
		}
		for after, more := "", true; more && !inv.More; {
			w := hms.NewNamesAfter(after, inventoryWindow)
			if err := x.ms.EachPartitionName(ctx, k.DB, k.Name, w.Add); err != nil {
				return nil, classify("list the partitions of "+k.String(), err)
			}
			var names []string
			names, more = w.Names()
			if len(names) > 0 {
				after = names[len(names)-1]
			}
			for len(names) > 0 && !inv.More {
				page := names[:min(inventoryPage, len(names))]
				names = names[len(page):]
				res, err := x.ms.GetPartitionsByNamesReq(ctx, &hive_metastore.GetPartitionsByNamesRequest{DbName: k.DB, TblName: k.Name, Names: page})
				if isNoSuchObject(err) {
					more = false
					break
				}
				if err != nil {
					return nil, classify("get partitions of "+k.String(), err)
				}
				for _, p := range res.Partitions {
					if p.Parameters[drparam.BootstrapID] == id {
						continue
					}
					if stale == inventoryMaxStale {
						inv.More = true
						break
					}
					inv.Stale[k.Name] = append(inv.Stale[k.Name], StalePartition{Name: hms.PartitionName(t.PartitionKeys, p.Values), Values: p.Values})
					stale++
				}
			}
		}
	}
	return inv, nil
}

// FencedError is the refusal of a whole-database write (alter or drop)
// into a DR database that `hivedr failover` marked while the plan was
// made: the plan read the database before the mark (its copy is up to
// dbFresh old), and writing that copy back would undo the mark.
type FencedError struct {
	DB string
	// At, Mode and EventID are the failover's, as the mark records them.
	At, Mode, EventID string
}

func (e *FencedError) Error() string {
	return fmt.Sprintf("DR database %s was failed over at %s (%s, reflecting source event %s) while the plan was made: refusing to write into it",
		e.DB, e.At, e.Mode, e.EventID)
}

// unfenced reads DR database name afresh and refuses (*FencedError) when
// it carries a failover mark. Guarantee kept with failover's fence (see
// schemas.ControlFence): a database's definition is only ever written
// back from a copy read in the same step, after the mark was looked for,
// so a whole-object write from a stale copy cannot erase a mark made
// before that read; the failover's confirmation covers a mark made
// between this read and the write.
func (x *executor) unfenced(ctx context.Context, name string) error {
	cur, err := x.ms.GetDatabase(ctx, name)
	if isNoSuchObject(err) {
		return nil
	}
	if err != nil {
		return classify("get database "+name, err)
	}
	if at := cur.Parameters[drparam.FailedOverAt]; at != "" {
		return &FencedError{DB: name, At: at, Mode: cur.Parameters[drparam.FailoverMode], EventID: cur.Parameters[drparam.FailoverEventID]}
	}
	return nil
}

// run performs one action.
func (x *executor) run(ctx context.Context, a Action) error {
	if _, create := a.(CreateDatabase); !create {
		if err := x.dropScratch(ctx); err != nil { // exec_acid_bootstrap.go
			return err
		}
	}
	defer x.timed(callName(a), time.Now())
	op := a.String()
	switch a := a.(type) {
	case CreateDatabase:
		return classify(op, x.ms.CreateDatabase(ctx, a.DB))
	case AlterDatabase:
		if err := x.unfenced(ctx, a.Name); err != nil {
			return err
		}
		return classify(op, x.ms.AlterDatabase(ctx, a.Name, a.DB))
	case DropDatabase:
		if err := x.unfenced(ctx, a.Name); err != nil {
			return err
		}
		err := x.ms.DropDatabase(ctx, a.Name, false, true)
		if isNoSuchObject(err) {
			return nil
		}
		return classify(op, err)
	case CreateTable:
		return classify(op, x.ms.CreateTable(ctx, a.Table))
	case AlterTable:
		return classify(op, x.ms.AlterTableWithEnvironmentContext(ctx, a.DB, a.Name, a.Table, keepStats()))
	case DropTable:
		return x.dropTable(ctx, a) // exec_acid_bootstrap.go: a transactional table's write ids go with it
	case SetWriteIDs:
		return x.setWriteIDs(ctx, a)
	case ResetWriteIDs:
		return x.resetWriteIDs(ctx, a, nil)
	case AddPartitions:
		_, err := x.ms.AddPartitions(ctx, a.Parts)
		return classify(op, err)
	case AlterPartitions:
		return classify(op, x.ms.AlterPartitionsWithEnvironmentContext(ctx, a.DB, a.Table, a.Parts, keepStats()))
	case RenamePartition:
		return classify(op, x.ms.RenamePartition(ctx, a.DB, a.Table, a.Values, a.Part))
	case DropPartitions:
		if len(a.Names) > 0 && len(a.Names) == len(a.Values) {
			return x.dropPartitionsByName(ctx, a)
		}
		for _, v := range a.Values {
			if _, err := x.ms.DropPartition(ctx, a.DB, a.Table, v, false); err != nil && !isNoSuchObject(err) {
				return classify(op, err)
			}
		}
		return nil
	case PruneFiles:
		return x.prune(ctx, a)
	case ExpireIceberg:
		return x.expireIceberg(ctx, a) // exec_iceberg.go
	case ReplAllocate, ReplCommit, ReplAbort, PruneObsolete, PublishCompacted, PruneCompacted:
		return x.runACID(ctx, a) // exec_acid.go
	}
	return fmt.Errorf("unknown action %T", a)
}

// keepStats is the environment context of the applier's alter_table and
// alter_partitions calls: DO_NOT_UPDATE_STATS. Without it the metastore
// recomputes the basic statistics (numFiles, totalSize) of every
// partition whose statistics the call changes or lacks by listing its
// DR directory (one NameNode listing per partition, in the call), writes
// what it found over the source's values and marks them inaccurate
// (COLUMN_STATS_ACCURATE). A replica keeps the source's statistics as the
// events carry them, and its files are copyd's, not the metastore's, to
// look at. (add_partitions has no such switch in Hive 4.0: it lists a
// partition's directory only when the directory exists and the
// partition's parameters lack numFiles, totalSize or
// numFilesErasureCoded.)
func keepStats() *hive_metastore.EnvironmentContext {
	return &hive_metastore.EnvironmentContext{Properties: map[string]string{"DO_NOT_UPDATE_STATS": "true"}}
}

// dropPartitionsByName drops a's partitions by name, inventoryPage per
// drop_partitions_req; ones already gone are skipped (ifExists), data
// stays.
func (x *executor) dropPartitionsByName(ctx context.Context, a DropPartitions) error {
	keep := false
	for names := a.Names; len(names) > 0; {
		page := names[:min(inventoryPage, len(names))]
		names = names[len(page):]
		_, err := x.ms.DropPartitionsReq(ctx, &hive_metastore.DropPartitionsRequest{DbName: a.DB, TblName: a.Table,
			Parts: &hive_metastore.RequestPartsSpec{Names: page}, DeleteData: &keep, IfExists: true, CatName: strPtr("hive")})
		if isNoSuchObject(err) {
			continue
		}
		if err != nil {
			return classify(a.String(), err)
		}
	}
	return nil
}

// prune removes the files under a.Dir, recursively, that the source
// directory does not hold, keeping a.Keep and every file a later event's
// copy task wrote.
//
// Invariant (a DR directory holds what its source directory holds): once
// an event that names an object's files (CREATE_TABLE, ADD_PARTITION, an
// INSERT OVERWRITE, a truncate, a bootstrap's TABLE and PARTITION records)
// or drops a managed object is applied, the object's DR directory holds
// no file the source's does not, below it at any depth: files of an
// earlier object at the same path (dropped, its directory removed, made
// again), an earlier incarnation's base_N or delta_* directories (which a
// DR reader would otherwise choose over the new table's writes once its
// write IDs reach N), HIVE_UNION_SUBDIR_* outputs. Hidden names are not
// touched (prunable): copyd's staging files, a compaction's staged
// directory and in-flight _tmp names are work in progress, and Hive's
// readers skip them. Nothing outside a.Dir is listed or removed. An ACID
// directory the prune empties goes too (RemoveEmptyDir): an empty base_N
// is still a base to Hive's readers.
//
// A later event's copy can be on DR before the applier knows of it: copyd
// renames a file into place, then commits its completion, and the
// applier's completion store reads completions as they come. So a file
// whose path below the directory the source directory (a.Source) holds
// now is kept too: the event left only a.Keep there, so a later event
// wrote that name, and its copy (here, or still to come and then
// overwriting it) is what DR must show. A stale file kept this way is
// removed by the later event that removes it on the source. (The soak
// found the race: re-driven after kills, an INSERT OVERWRITE removed a
// later INSERT's freshly copied file, and DR lost it for good.)
//
// Invariant (prune never removes what it must keep): every comparison is
// of canonical locations (package location). Keep and the completions'
// targets are spelled as the path mapping writes them, the listing as the
// DR filesystem does (its configured authority, s3 for s3a, bare paths for
// file:), and a raw comparison would delete the overwrite's own, freshly
// copied files. A location that does not parse, or a listed file that is
// not under a.Dir, is refused: nothing is removed.
func (x *executor) prune(ctx context.Context, a PruneFiles) error {
	refuse := func(err error) error { return &RefusedError{Op: a.String(), Err: err} }
	if x.files == nil {
		return refuse(errors.New("no filesystem is configured for DR data"))
	}
	w := x.files
	dir, err := location.Parse(a.Dir)
	if err != nil {
		return refuse(err)
	}
	keep := make(map[location.Location]bool, len(a.Keep))
	for _, k := range a.Keep {
		l, err := location.Parse(k)
		if err != nil {
			return refuse(fmt.Errorf("kept file: %w", err))
		}
		keep[l] = true
	}
	if gone, err := x.absent(ctx, dir); err != nil || gone {
		return err
	}
	// The files the DR directory holds that the event did not leave
	// there; only when there are any is the source listed (one listing
	// fewer for the common prune, which removes nothing).
	type candidate struct{ loc, rel string }
	var candidates []candidate
	err = w.Walk(ctx, a.Dir, func(loc string, _ int64) error {
		l, err := location.Parse(loc)
		if err != nil {
			return refuse(fmt.Errorf("listed file: %w", err))
		}
		rel, ok := l.Rel(dir)
		if !ok || rel == "" {
			return refuse(fmt.Errorf("listing %s gave %s, which is not under it", a.Dir, loc))
		}
		if !keep[l] && prunable(rel) {
			candidates = append(candidates, candidate{loc, rel})
		}
		return nil
	})
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil // nothing there to prune
	case err != nil:
		var re *RefusedError
		if errors.As(err, &re) {
			return err
		}
		return fmt.Errorf("%s: %w", a, err)
	case len(candidates) == 0:
		return nil
	}
	held, err := x.sourceHolds(ctx, w, a)
	if err != nil {
		return err
	}
	var remove []string
	emptied := map[string]bool{} // ACID directories below a.Dir a removal may empty
	for _, c := range candidates {
		if held[c.rel] {
			continue
		}
		later, err := x.copiedLater(ctx, location.Append(dir.String(), c.rel), c.loc, a.EventID)
		if err != nil {
			return fmt.Errorf("%s: %w", a, err)
		}
		if !later {
			remove = append(remove, c.loc)
			if d := acidDirOf(c.rel); d != "" {
				emptied[location.Append(dir.String(), d)] = true
			}
		}
	}
	for _, loc := range remove {
		if err := x.files.Remove(ctx, loc); err != nil {
			return fmt.Errorf("%s: remove %s: %w", a, loc, err)
		}
	}
	if r, ok := x.files.(emptyDirRemover); ok {
		for _, d := range slices.Sorted(maps.Keys(emptied)) {
			if err := r.RemoveEmptyDir(ctx, d); err != nil {
				return fmt.Errorf("%s: %w", a, err)
			}
		}
	}
	return nil
}

// markedAfter reports whether the DR file at loc carries the mark of an
// event after eventID (fs.EventMarkAttr); false when the store keeps no
// marks or the file has none.
func (x *executor) markedAfter(ctx context.Context, loc string, eventID int64) (bool, error) {
	m, ok := x.files.(fs.EventMarks)
	if !ok {
		return false, nil
	}
	id, marked, err := m.EventMark(ctx, loc)
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	return marked && id > eventID, nil
}

// emptyDirRemover removes a directory when it is empty (fs.Router).
type emptyDirRemover interface {
	RemoveEmptyDir(ctx context.Context, loc string) error
}

// sourceHolds lists the source directory a.Source names, recursively:
// the paths below it (and their replica names, acid.ReplicaPath, as a
// compactor's directory is copied). None when a.Source is empty or no
// filesystem here holds it: then the prune goes by Keep and the
// completions alone.
func (x *executor) sourceHolds(ctx context.Context, w walker, a PruneFiles) (map[string]bool, error) {
	held := map[string]bool{}
	if a.Source == "" {
		return held, nil
	}
	src, err := location.Parse(a.Source)
	if err != nil {
		return nil, &RefusedError{Op: a.String(), Err: fmt.Errorf("source directory: %w", err)}
	}
	err = w.Walk(ctx, a.Source, func(loc string, _ int64) error {
		l, err := location.Parse(loc)
		if err != nil {
			return &RefusedError{Op: a.String(), Err: fmt.Errorf("listed source file: %w", err)}
		}
		if rel, ok := l.Rel(src); ok && rel != "" {
			held[rel], held[acid.ReplicaPath(rel)] = true, true
		}
		return nil
	})
	var re *RefusedError
	switch {
	case errors.Is(err, fs.ErrNoStore), errors.Is(err, fs.ErrNoListing), errors.Is(err, fs.ErrNotExist):
		// No source filesystem configured here, or nothing left there.
		return held, nil
	case errors.As(err, &re):
		return nil, err
	case err != nil:
		return nil, fmt.Errorf("%s: list the source %s: %w", a, a.Source, err)
	}
	return held, nil
}

// prunable reports whether rel, a file's path below a pruned directory,
// is one a prune may remove: a name that is not hidden (Hive's readers
// skip hidden names; copyd's staging files, a compaction's staged
// directory and in-flight _tmp names are hidden, and are work in
// progress), or a hidden file directly in an ACID directory that is not a
// copy's staging file (_metadata_acid, _orc_acid_version): left behind,
// it would keep alive a directory that Hive's readers still choose.
func prunable(rel string) bool {
	if !location.Hidden(rel) {
		return true
	}
	top, name, ok := strings.Cut(rel, "/")
	return ok && !strings.Contains(name, "/") && !location.Hidden(top) && acid.IsDir(top) && !fs.IsStagingName(name)
}

// acidDirOf is the deepest ACID directory on the path rel ("" for none):
// the directory a removal of rel may leave empty.
func acidDirOf(rel string) string {
	segs := strings.Split(rel, "/")
	for i := len(segs) - 2; i >= 0; i-- {
		if acid.IsDir(segs[i]) {
			return strings.Join(segs[:i+1], "/")
		}
	}
	return ""
}

var _ Metastore = (*hms.Client)(nil)
