package producer

import (
	"context"
	"errors"

	"github.com/hivedr/hivedr/internal/hmsevent"
	"github.com/hivedr/hivedr/schemas"
)

// Snapshots reads the current state of the source metastore for a
// bootstrap: what the snapshot records carry. The Thrift implementation is
// MetastoreReader; it converts the metastore's objects with the same
// reader the tailer uses on events (TableFromThriftJSON, ...), so an
// object a bootstrap brings equals the one an event would.
type Snapshots interface {
	// Database reads a database; ErrNoSuchObject when it does not exist.
	Database(ctx context.Context, name string) (*schemas.Database, error)
	// Tables lists a database's tables (any order).
	Tables(ctx context.Context, db string) ([]string, error)
	// Table reads a table; ErrNoSuchObject when it does not exist.
	Table(ctx context.Context, db, name string) (*schemas.Table, error)
	// PartitionNames lists a page of a table's partitions by name
	// (k1=v1/k2=v2): the first limit names in byte order after after (""
	// from the first), and whether more follow. A table that does not
	// exist has none, or ErrNoSuchObject. The metastore cannot page this
	// list, so the Thrift implementation streams it and keeps only the
	// page (hms.NamesAfter): memory is bounded by limit.
	PartitionNames(ctx context.Context, db, table, after string, limit int) (names []string, more bool, err error)
	// Partitions reads the named partitions of a table; partitions gone
	// meanwhile are left out.
	Partitions(ctx context.Context, db, table string, names []string) ([]schemas.Partition, error)
}

// ErrNoSuchObject is what Snapshots returns (wrapped) for a database or
// table that does not exist (any more).
var ErrNoSuchObject = errors.New("no such object")

// TableFromThriftJSON reads a metastore Table serialized with Thrift's
// TJSONProtocol, as the notification log embeds it.
func TableFromThriftJSON(text string) (*schemas.Table, error) {
	return hmsevent.TableFromThriftJSON(text)
}

// PartitionFromThriftJSON reads a metastore Partition serialized with
// Thrift's TJSONProtocol.
func PartitionFromThriftJSON(text string) (*schemas.Partition, error) {
	return hmsevent.PartitionFromThriftJSON(text)
}

// DatabaseFromThriftJSON reads a metastore Database serialized with
// Thrift's TJSONProtocol.
func DatabaseFromThriftJSON(text string) (*schemas.Database, error) {
	return hmsevent.DatabaseFromThriftJSON(text)
}
