package applier

import (
	"github.com/beltran/gohive/hive_metastore"
)

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
type cache struct {
	db     string
	dbs    map[string]*hive_metastore.Database
	tables map[TableKey]*hive_metastore.Table
	parts  map[PartKey]*hive_metastore.Partition
}

func newCache(db string) *cache {
	c := &cache{db: lower(db)}
	c.reset()
	return c
}

func (c *cache) reset() {
	c.dbs = map[string]*hive_metastore.Database{}
	c.tables = map[TableKey]*hive_metastore.Table{}
	c.parts = map[PartKey]*hive_metastore.Partition{}
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
			for pk := range c.parts {
				if pk.TableKey == k {
					delete(c.parts, pk)
				}
			}
		case AddPartitions:
			c.putParts(a.DB, a.Table, a.Parts)
		case AlterPartitions:
			c.putParts(a.DB, a.Table, a.Parts)
		case DropPartitions:
			tk := tableKey(a.DB, a.Table)
			for _, v := range a.Values {
				c.parts[partKey(tk, v)] = nil
			}
		case PruneFiles:
		default: // DropDatabase, RenamePartition, anything new
			c.reset()
			return
		}
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
