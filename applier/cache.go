package applier

import (
	"strings"
	"time"

	"github.com/beltran/gohive/hive_metastore"
)

// dbFresh is how long a worker trusts its cached copy of its DR database
// after reading it (see cache).
const dbFresh = time.Second

// heartbeatFresh is how long a heartbeat that finds the chain unbroken
// trusts the cached copy (worker.stepHeartbeat): such a heartbeat writes
// nothing, so a stale copy cannot undo a failover's mark (a failover
// retires the database's worker anyway); it spares the DR metastore one
// get_database per database per tailer.heartbeat_interval.
const heartbeatFresh = 30 * time.Second

// cache holds what a worker knows of its own DR database's objects, so an
// event does not read back what the worker itself just wrote (three of
// the five metastore calls of a typical event).
//
// It is only ever a copy of what the worker wrote or read: the worker is
// the only writer of its database's objects, with two exceptions that
// reset it: a cross-database rename, which another worker applies into
// this database (the cache is reset after every event that names another
// database), and any failed step (the metastore may hold part of it).
// Objects of other databases are never cached. An entry holding nil means
// "known not to exist"; a missing entry means unknown.
//
// The database object itself has one more writer: `hivedr failover`,
// which marks it failed over (drparam.FailedOverAt). So the database is
// trusted for dbFresh after it was last read from the metastore (not
// after the worker last wrote it), and read again after that: an applier
// that keeps running over a failed-over database halts failed_over within
// dbFresh instead of writing into the new primary from a stale copy.
//
// A table the worker created itself (since the cache was last reset) is
// whole: the worker wrote every partition it has, so the cache keeps
// which exist (their values, beyond the bound on the objects it keeps),
// and a partition not among them does not exist, with no metastore read.
// A bootstrap's partitions of a table its TABLE record created, and the
// ADD_PARTITION events after a CREATE_TABLE, are written without asking
// the metastore for partitions it cannot have (a get_partitions_by_names
// of 1000 names per batch).
type cache struct {
	db     string
	dbRead time.Time // when dbs[db] was last read from the metastore
	dbs    map[string]*hive_metastore.Database
	tables map[TableKey]*hive_metastore.Table
	parts  map[PartKey]*hive_metastore.Partition
	// whole are the tables created by the worker, each with the values
	// (joined) of its partitions that exist; wholeParts counts them all.
	whole      map[TableKey]map[string]bool
	wholeParts int
	// scratchSwept: the worker dropped the scratch tables a crash left in
	// its database (executor.dropScratch); not reset with the rest, only
	// cleared after a reset's rename or drop failed (executor.sweepAgain).
	scratchSwept bool
}

func newCache(db string) *cache {
	c := &cache{db: lower(db)}
	c.reset()
	return c
}

// cacheIdle is how long a worker applies no event before its cache
// forgets the tables and partitions it holds (worker.head, when the queue
// is found empty: each heartbeat wakes it). The cached objects are parsed
// from the events and share their text, so every table a worker created
// kept its event's whole message: at 2,000 databases behind, 64 MiB of
// messages by the 30,000th table, and growing with every table. An idle
// database's next event reads what it needs again.
const cacheIdle = 10 * time.Second

// forget drops the cached tables and partitions (the database, which
// every event reads, stays for its own freshness rule).
func (c *cache) forget() {
	c.tables = map[TableKey]*hive_metastore.Table{}
	c.parts = map[PartKey]*hive_metastore.Partition{}
	c.whole, c.wholeParts = map[TableKey]map[string]bool{}, 0
}

func (c *cache) reset() {
	c.dbRead = time.Time{}
	c.dbs = map[string]*hive_metastore.Database{}
	c.forget()
}

// maxWholeParts bounds the partition values the whole tables keep; past
// it the table being written is no longer whole (its partitions are read
// from the metastore again).
const maxWholeParts = 500000

// absent reports whether partition k is known not to exist: its table is
// whole and has no such partition.
func (c *cache) absent(k PartKey) bool {
	w := c.whole[k.TableKey]
	return w != nil && !w[k.Values]
}

// exists records that partitions of tk exist (or not) in a whole table.
func (c *cache) exists(tk TableKey, values [][]string, exist bool) {
	w := c.whole[tk]
	if w == nil {
		return
	}
	for _, v := range values {
		k := strings.Join(v, "/")
		switch {
		case exist && !w[k]:
			w[k] = true
			c.wholeParts++
		case !exist && w[k]:
			delete(w, k)
			c.wholeParts--
		}
	}
	if c.wholeParts > maxWholeParts {
		c.wholeParts -= len(w)
		delete(c.whole, tk)
	}
}

// apply records the effect of actions that ran successfully. Actions whose
// effect the cache does not model (renames, database drops) reset it.
func (c *cache) apply(actions []Action) {
	for _, a := range actions {
		switch a := a.(type) {
		case CreateDatabase:
			c.putDB(a.DB.Name, a.DB)
		case AlterDatabase:
			c.putDB(a.Name, a.DB)
		case CreateTable:
			c.putTable(a.Table)
			if k := tableKey(a.Table.DbName, a.Table.TableName); k.DB == c.db {
				c.dropWhole(k)
				c.whole[k] = map[string]bool{}
			}
		case AlterTable:
			if lower(a.Table.DbName) != lower(a.DB) || lower(a.Table.TableName) != lower(a.Name) {
				c.reset()
				return
			}
			c.putTable(a.Table)
		case DropTable:
			k := tableKey(a.DB, a.Name)
			if k.DB != c.db {
				c.reset()
				return
			}
			c.tables[k] = nil
			c.dropWhole(k)
			for pk := range c.parts {
				if pk.TableKey == k {
					delete(c.parts, pk)
				}
			}
		case AddPartitions:
			c.putParts(a.DB, a.Table, a.Parts)
			values := make([][]string, len(a.Parts))
			for i, p := range a.Parts {
				values[i] = p.Values
			}
			c.exists(tableKey(a.DB, a.Table), values, true)
		case AlterPartitions:
			c.putParts(a.DB, a.Table, a.Parts)
		case DropPartitions:
			tk := tableKey(a.DB, a.Table)
			for _, v := range a.Values {
				c.parts[partKey(tk, v)] = nil
			}
			c.exists(tk, a.Values, false)
		case PruneFiles, PruneObsolete, ReplAllocate, ReplAbort, PublishCompacted, PruneCompacted:
		default: // DropDatabase, RenamePartition, anything new
			c.reset()
			return
		}
	}
}

func (c *cache) dropWhole(k TableKey) {
	c.wholeParts -= len(c.whole[k])
	delete(c.whole, k)
}

// cachedDB returns the cached copy of the worker's own database, if there
// is one read less than dbFresh ago.
func (c *cache) cachedDB(name string, now time.Time) (db *hive_metastore.Database, ok bool) {
	return c.cachedDBWithin(name, now, dbFresh)
}

// cachedDBWithin is cachedDB trusting a copy read less than fresh ago.
func (c *cache) cachedDBWithin(name string, now time.Time, fresh time.Duration) (db *hive_metastore.Database, ok bool) {
	if name != c.db || now.Sub(c.dbRead) >= fresh {
		return nil, false
	}
	db, ok = c.dbs[name]
	return db, ok
}

// readDB records the worker's own database as just read.
func (c *cache) readDB(name string, db *hive_metastore.Database, now time.Time) {
	if name == c.db {
		c.dbs[name], c.dbRead = db, now
	}
}

func (c *cache) putDB(name string, db *hive_metastore.Database) {
	if lower(name) == c.db {
		c.dbs[c.db] = db
	}
}

func (c *cache) putTable(t *hive_metastore.Table) {
	k := tableKey(t.DbName, t.TableName)
	if k.DB == c.db {
		c.tables[k] = t
	}
}

// maxCachedParts bounds the partitions a cache holds: a bootstrap writes
// every partition of its database, and holding them all as Thrift
// objects would hold the database. Past it the partitions are forgotten
// (read again when an event needs one).
const maxCachedParts = 20000

func (c *cache) putParts(db, table string, parts []*hive_metastore.Partition) {
	tk := tableKey(db, table)
	if tk.DB != c.db {
		return
	}
	if len(c.parts)+len(parts) > maxCachedParts {
		c.parts = map[PartKey]*hive_metastore.Partition{}
	}
	for _, p := range parts {
		c.parts[partKey(tk, p.Values)] = p
	}
}
