package applier

import (
	"fmt"
	"strings"

	"github.com/beltran/gohive/hive_metastore"
)

// Action is one change to the DR metastore or DR files. Executors run a
// Decision's actions in order; each is idempotent on its own.
type Action interface {
	fmt.Stringer
	isAction()
}

// CreateDatabase creates a DR database.
type CreateDatabase struct{ DB *hive_metastore.Database }

// AlterDatabase replaces a DR database's definition (also how the
// database's repl.last.id advances).
type AlterDatabase struct {
	Name string
	DB   *hive_metastore.Database
}

// DropDatabase drops a DR database with its tables. Data stays (see
// DropTable).
type DropDatabase struct{ Name string }

// CreateTable creates a DR table.
type CreateTable struct{ Table *hive_metastore.Table }

// AlterTable replaces a DR table's definition; a different name or
// database in Table renames it.
type AlterTable struct {
	DB, Name string
	Table    *hive_metastore.Table
}

// DropTable drops a DR table's metadata. Its files stay: a managed
// table's go with the PruneFiles planned before it (prunes.go), which
// keeps what later events' copies wrote there (copies run ahead of
// metadata).
type DropTable struct{ DB, Name string }

// AddPartitions adds DR partitions in one batch.
type AddPartitions struct {
	DB, Table string
	Parts     []*hive_metastore.Partition
}

// AlterPartitions replaces DR partitions' definitions in one batch.
type AlterPartitions struct {
	DB, Table string
	Parts     []*hive_metastore.Partition
}

// RenamePartition gives a DR partition new values.
type RenamePartition struct {
	DB, Table string
	Values    []string
	Part      *hive_metastore.Partition
}

// DropPartitions drops DR partitions' metadata (files stay, as for
// DropTable). Names, when set, are the metastore's names of the same
// partitions (Values[i] is named Names[i]): the executor then drops them
// in pages, one call each, instead of one call per partition.
type DropPartitions struct {
	DB, Table string
	Values    [][]string
	Names     []string
}

// PruneFiles removes the data files under Dir, at any depth, that are
// not in Keep and that the source directory does not hold: after an
// INSERT OVERWRITE or a truncate removed them at the source, when an
// object is made (its directory to hold what the event names) and when a
// managed one is dropped (prunes.go). Hidden names are never touched. The
// executor keeps any file a copy task of a later event wrote (copies run
// ahead of metadata), so pruning never removes data the replica will
// need next.
type PruneFiles struct {
	Dir     string
	Keep    []string
	EventID int64
	// Source is the source directory Dir replicates, when the event names
	// it: a DR file whose name the source directory still holds is kept
	// (see executor.prune).
	Source string
}

// ExpireIceberg removes the DR files that only the snapshots an Iceberg
// commit expired reached (iceberg.Expired of DR's metadata Prev, the
// table's pointer before the commit, and Next, its pointer after), under
// the table's DR location Root only, sparing a file a copy of a later
// event wrote. Nothing when the commit expired nothing.
type ExpireIceberg struct {
	DB, Table  string
	Root       string
	Prev, Next string
	EventID    int64
}

func (CreateDatabase) isAction()  {}
func (AlterDatabase) isAction()   {}
func (DropDatabase) isAction()    {}
func (CreateTable) isAction()     {}
func (AlterTable) isAction()      {}
func (DropTable) isAction()       {}
func (AddPartitions) isAction()   {}
func (AlterPartitions) isAction() {}
func (RenamePartition) isAction() {}
func (DropPartitions) isAction()  {}
func (PruneFiles) isAction()      {}
func (ExpireIceberg) isAction()   {}

func (a CreateDatabase) String() string { return "create database " + a.DB.Name }
func (a AlterDatabase) String() string  { return "alter database " + a.Name }
func (a DropDatabase) String() string   { return "drop database " + a.Name }
func (a CreateTable) String() string {
	return "create table " + a.Table.DbName + "." + a.Table.TableName
}
func (a AlterTable) String() string {
	if a.Table.DbName != a.DB || a.Table.TableName != a.Name {
		return "rename table " + a.DB + "." + a.Name + " to " + a.Table.DbName + "." + a.Table.TableName
	}
	return "alter table " + a.DB + "." + a.Name
}
func (a DropTable) String() string { return "drop table " + a.DB + "." + a.Name }
func (a AddPartitions) String() string {
	return fmt.Sprintf("add partitions %s.%s %s", a.DB, a.Table, partValues(a.Parts))
}
func (a AlterPartitions) String() string {
	return fmt.Sprintf("alter partitions %s.%s %s", a.DB, a.Table, partValues(a.Parts))
}
func (a RenamePartition) String() string {
	return fmt.Sprintf("rename partition %s.%s %v to %v", a.DB, a.Table, a.Values, a.Part.Values)
}
func (a DropPartitions) String() string {
	return fmt.Sprintf("drop partitions %s.%s %v", a.DB, a.Table, a.Values)
}
func (a PruneFiles) String() string {
	return fmt.Sprintf("prune files under %s keeping %d", a.Dir, len(a.Keep))
}

func partValues(ps []*hive_metastore.Partition) string {
	var b strings.Builder
	for i, p := range ps {
		if i > 0 {
			b.WriteByte(' ')
		}
		fmt.Fprintf(&b, "%v", p.Values)
	}
	return b.String()
}

func (a ExpireIceberg) String() string {
	return fmt.Sprintf("remove the files of expired Iceberg snapshots of %s.%s (%s -> %s)", a.DB, a.Table, a.Prev, a.Next)
}
