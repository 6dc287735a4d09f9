// Package workload drives a real Hive Metastore and its filesystem the way
// Hive's client does, so that every step leaves real events in the
// metastore's notification log, and compares two metastores (a source and
// its DR replica) object by object and file by file.
//
// It is shared by the end-to-end tests and the demo, so it returns errors
// and never fails a test itself.
package workload

import (
	"context"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"math/rand/v2"
	"path"
	"strconv"
	"strings"
	"time"

	"github.com/beltran/gohive/hive_metastore"

	"github.com/hivedr/hivedr/internal/fs"
	"github.com/hivedr/hivedr/internal/hms"
	"github.com/hivedr/hivedr/internal/location"
)

// Files reads a store: what Compare needs. *fs.HDFS implements it.
type Files interface {
	// Walk calls fn with the location and size of every file under the
	// directory dir, recursively; a missing dir is an error wrapping
	// fs.ErrNotExist.
	Walk(ctx context.Context, dir string, fn func(location string, size int64) error) error
	// Open reads n bytes (n < 0: to the end) of the file at location from
	// offset off.
	Open(ctx context.Context, location string, off, n int64) (io.ReadCloser, error)
}

// FileSystem is what a Source writes data files through: fs.FS plus a
// recursive listing. *fs.HDFS implements it.
type FileSystem interface {
	fs.FS
	Walk(ctx context.Context, dir string, fn func(location string, size int64) error) error
}

// checksummer is implemented by stores that report the file checksum Hive's
// client puts in INSERT events (*fs.HDFS: the hex of HDFS's
// MD5-of-MD5-of-CRC32C FileChecksum).
type checksummer interface {
	FileChecksum(ctx context.Context, location string) (string, bool, error)
}

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// File is a data file a Source wrote.
type File struct {
	// Location is the full location, e.g. hdfs://nn:8020/external/db.db/t/000000_0.
	Location string
	Size     int64
	CRC32C   uint32
	// Removed is set once the file is known to be gone: the workload
	// replaced or deleted it, or the metastore deleted it (truncate, drop
	// database).
	Removed bool
}

// Source performs workload steps on a metastore and its filesystem as
// Hive's client does: data files are written before the metadata that
// names them, INSERT events are fired for loads, and basic statistics are
// updated with an alter before each INSERT event.
//
// Tables are EXTERNAL_TABLE in text format (LazySimpleSerDe), under Root
// unless a location is given. A Source is not safe for concurrent use (nor
// is its hms.Client).
type Source struct {
	// HMS is the metastore to change.
	HMS *hms.Client
	// FS holds the data files.
	FS FileSystem
	// Root is where databases are created, e.g.
	// hdfs://127.0.0.1:18020/external: database d at Root/d.db and its
	// tables at Root/d.db/<table>.
	Root string
	// NoChecksums leaves FilesAddedChecksum out of INSERT events. Hive's
	// client sends the FileChecksum of each new file when the filesystem
	// has one (HDFS does), which the metastore logs when change
	// management is on.
	NoChecksums bool
	// NoStats skips the alter_table / alter_partition that Hive's client
	// sends before an INSERT event to update basic statistics (numFiles,
	// totalSize), so that a load makes a single event.
	NoStats bool

	rng   *rand.Rand
	files []File
}

// NewSource returns a Source that changes the metastore c and writes data
// files through files, creating databases under root.
func NewSource(c *hms.Client, files FileSystem, root string) *Source {
	seed := uint64(time.Now().UnixNano())
	return &Source{HMS: c, FS: files, Root: strings.TrimSuffix(root, "/"), rng: rand.New(rand.NewPCG(seed, seed>>1|1))}
}

// Files returns every data file the Source wrote, in the order written; a
// file rewritten at the same location appears once per write.
func (s *Source) Files() []File { return append([]File(nil), s.files...) }

// LiveFiles returns the files written and not removed.
func (s *Source) LiveFiles() []File {
	var live []File
	for _, f := range s.files {
		if !f.Removed {
			live = append(live, f)
		}
	}
	return live
}

// TableSpec describes a table to create.
type TableSpec struct {
	// Columns are "name type", e.g. "amount decimal(12,2)".
	Columns []string
	// PartitionKeys are "name type" or a bare name (a string key).
	PartitionKeys []string
	// Location defaults to Root/<db>.db/<table>.
	Location string
	// Parameters are added to the table's; EXTERNAL=TRUE is always set.
	Parameters map[string]string
}

// CreateDatabase creates the database db located at Root/db.db.
func (s *Source) CreateDatabase(ctx context.Context, db string) error {
	owner, typ := "hivedr", hive_metastore.PrincipalType_USER
	err := s.HMS.CreateDatabase(ctx, &hive_metastore.Database{
		Name: db, LocationUri: s.Root + "/" + db + ".db", Parameters: map[string]string{},
		OwnerName: &owner, OwnerType: &typ,
	})
	if err != nil {
		return fmt.Errorf("create database %s: %w", db, err)
	}
	return nil
}

// DropDatabase drops db and its tables (CASCADE) as DROP DATABASE ...
// CASCADE does; the metastore deletes the database's directory.
func (s *Source) DropDatabase(ctx context.Context, db string) error {
	d, err := s.HMS.GetDatabase(ctx, db)
	if err != nil {
		return fmt.Errorf("drop database %s: %w", db, err)
	}
	if err := s.HMS.DropDatabase(ctx, db, true, true); err != nil {
		return fmt.Errorf("drop database %s: %w", db, err)
	}
	if err := s.recheck(ctx, d.LocationUri); err != nil {
		return fmt.Errorf("drop database %s: %w", db, err)
	}
	return nil
}

// CreateTable creates the external text table db.table.
func (s *Source) CreateTable(ctx context.Context, db, table string, spec TableSpec) error {
	cols, err := parseColumns(spec.Columns)
	if err != nil {
		return fmt.Errorf("create table %s.%s: %w", db, table, err)
	}
	keys, err := parseColumns(spec.PartitionKeys)
	if err != nil {
		return fmt.Errorf("create table %s.%s: partition keys: %w", db, table, err)
	}
	loc := spec.Location
	if loc == "" {
		loc = s.Root + "/" + db + ".db/" + strings.ToLower(table)
	}
	params := map[string]string{"EXTERNAL": "TRUE"}
	for k, v := range spec.Parameters {
		params[k] = v
	}
	t := &hive_metastore.Table{
		TableName: table, DbName: db, Owner: "hivedr", TableType: "EXTERNAL_TABLE",
		Parameters: params, PartitionKeys: keys,
		Sd: &hive_metastore.StorageDescriptor{
			Cols: cols, Location: loc,
			InputFormat:  "org.apache.hadoop.mapred.TextInputFormat",
			OutputFormat: "org.apache.hadoop.hive.ql.io.HiveIgnoreKeyTextOutputFormat",
			SerdeInfo: &hive_metastore.SerDeInfo{
				SerializationLib: "org.apache.hadoop.hive.serde2.lazy.LazySimpleSerDe",
				Parameters:       map[string]string{"serialization.format": "1"},
			},
			Parameters: map[string]string{},
		},
	}
	if err := s.HMS.CreateTable(ctx, t); err != nil {
		return fmt.Errorf("create table %s.%s: %w", db, table, err)
	}
	return nil
}

// AddPartitions adds partitions with the given values to db.table in one
// add_partitions call, as a dynamic-partition insert does: each
// partition's directory, Hive-escaped under the table's location, first
// gets a data file of rows rows (none when rows <= 0). It returns the
// files written.
func (s *Source) AddPartitions(ctx context.Context, db, table string, values [][]string, rows int) ([]File, error) {
	what := fmt.Sprintf("add partitions %v to %s.%s", values, db, table)
	t, err := s.table(ctx, db, table)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	var written []File
	var parts []*hive_metastore.Partition
	for _, vals := range values {
		name, err := partitionName(t.PartitionKeys, vals)
		if err != nil {
			return written, fmt.Errorf("%s: %w", what, err)
		}
		sd := *t.Sd
		sd.Location = strings.TrimSuffix(t.Sd.Location, "/") + "/" + name
		params := map[string]string{}
		if rows > 0 {
			f, err := s.writeData(ctx, sd.Location, t.Sd.Cols, rows)
			if err != nil {
				return written, fmt.Errorf("%s: %w", what, err)
			}
			written = append(written, f)
			if !s.NoStats {
				params["numFiles"], params["totalSize"] = "1", strconv.FormatInt(f.Size, 10)
			}
		}
		parts = append(parts, &hive_metastore.Partition{
			Values: append([]string(nil), vals...), DbName: t.DbName, TableName: t.TableName, Sd: &sd, Parameters: params,
		})
	}
	_, err = s.HMS.AddPartitionsReq(ctx, &hive_metastore.AddPartitionsRequest{
		DbName: t.DbName, TblName: t.TableName, Parts: parts, NeedResult_: true,
	})
	if err != nil {
		return written, fmt.Errorf("%s: %w", what, err)
	}
	return written, nil
}

// Insert is INSERT INTO db.table [PARTITION (vals)]: a new data file of
// rows rows (named 000000_0, or 000000_0_copy_N beside existing ones, as
// Hive names them) in the table's or existing partition's directory, a
// statistics alter, then an INSERT event listing the file. vals is nil
// for an unpartitioned table.
func (s *Source) Insert(ctx context.Context, db, table string, vals []string, rows int) (File, error) {
	return s.load(ctx, db, table, vals, rows, false)
}

// InsertOverwrite is INSERT OVERWRITE: the data files in the table's or
// partition's directory are deleted, a new one of rows rows is written,
// then statistics are altered and an INSERT event with replace=true lists
// the new file.
func (s *Source) InsertOverwrite(ctx context.Context, db, table string, vals []string, rows int) (File, error) {
	return s.load(ctx, db, table, vals, rows, true)
}

func (s *Source) load(ctx context.Context, db, table string, vals []string, rows int, replace bool) (File, error) {
	what := "insert into " + db + "." + table
	if replace {
		what = "insert overwrite " + db + "." + table
	}
	if len(vals) > 0 {
		what += fmt.Sprintf(" partition %v", vals)
	}
	t, err := s.table(ctx, db, table)
	if err != nil {
		return File{}, fmt.Errorf("%s: %w", what, err)
	}
	if len(t.PartitionKeys) != len(vals) {
		return File{}, fmt.Errorf("%s: table has %d partition keys, %d values given", what, len(t.PartitionKeys), len(vals))
	}
	loc := t.Sd.Location
	var part *hive_metastore.Partition
	if len(vals) > 0 {
		part, err = s.HMS.GetPartition(ctx, db, table, vals)
		if err != nil {
			return File{}, fmt.Errorf("%s: %w", what, err)
		}
		loc = part.Sd.Location
	}
	if replace {
		if err := s.removeData(ctx, loc); err != nil {
			return File{}, fmt.Errorf("%s: %w", what, err)
		}
	}
	f, err := s.writeData(ctx, loc, t.Sd.Cols, rows)
	if err != nil {
		return File{}, fmt.Errorf("%s: %w", what, err)
	}
	if !s.NoStats {
		if err := s.updateStats(ctx, t, part, loc); err != nil {
			return f, fmt.Errorf("%s: %w", what, err)
		}
	}
	data := &hive_metastore.InsertEventRequestData{Replace: &replace, FilesAdded: []string{f.Location}}
	if c, ok := s.FS.(checksummer); ok && !s.NoChecksums {
		sum, _, err := c.FileChecksum(ctx, f.Location)
		if err != nil {
			return f, fmt.Errorf("%s: %w", what, err)
		}
		data.FilesAddedChecksum = []string{sum}
	}
	req := &hive_metastore.FireEventRequest{
		Successful: true, DbName: &t.DbName, TableName: &t.TableName, PartitionVals: vals,
		Data: &hive_metastore.FireEventRequestData{InsertData: data},
	}
	if _, err := s.HMS.FireListenerEvent(ctx, req); err != nil {
		return f, fmt.Errorf("%s: fire INSERT event: %w", what, err)
	}
	return f, nil
}

// updateStats sets numFiles and totalSize of the table (part nil) or
// partition from what loc holds, as Hive's client does after a load.
func (s *Source) updateStats(ctx context.Context, t *hive_metastore.Table, part *hive_metastore.Partition, loc string) error {
	n, size, err := s.dataStats(ctx, loc)
	if err != nil {
		return err
	}
	env := &hive_metastore.EnvironmentContext{Properties: map[string]string{"DO_NOT_UPDATE_STATS": "true"}}
	if part == nil {
		if t.Parameters == nil {
			t.Parameters = map[string]string{}
		}
		t.Parameters["numFiles"], t.Parameters["totalSize"] = strconv.Itoa(n), strconv.FormatInt(size, 10)
		if err := s.HMS.AlterTableWithEnvironmentContext(ctx, t.DbName, t.TableName, t, env); err != nil {
			return fmt.Errorf("update statistics: %w", err)
		}
		return nil
	}
	if part.Parameters == nil {
		part.Parameters = map[string]string{}
	}
	part.Parameters["numFiles"], part.Parameters["totalSize"] = strconv.Itoa(n), strconv.FormatInt(size, 10)
	if err := s.HMS.AlterPartitionWithEnvironmentContext(ctx, t.DbName, t.TableName, part, env); err != nil {
		return fmt.Errorf("update statistics: %w", err)
	}
	return nil
}

// AlterTableAddColumn is ALTER TABLE db.table ADD COLUMNS (cols) without
// CASCADE: the table's columns change, its partitions' do not. cols are
// "name type".
func (s *Source) AlterTableAddColumn(ctx context.Context, db, table string, cols ...string) error {
	what := fmt.Sprintf("alter table %s.%s add columns %v", db, table, cols)
	fields, err := parseColumns(cols)
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	t, err := s.table(ctx, db, table)
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	t.Sd.Cols = append(t.Sd.Cols, fields...)
	if err := s.HMS.AlterTable(ctx, db, table, t); err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	return nil
}

// RenameTable is ALTER TABLE db.from RENAME TO db.to. An external table
// keeps its location.
func (s *Source) RenameTable(ctx context.Context, db, from, to string) error {
	return s.rename(ctx, db, from, db, to)
}

// RenameTableAcross is ALTER TABLE fromDB.table RENAME TO toDB.toTable: a
// move to another database, which Hive 4's metastore accepts for external
// tables. The table keeps its location.
func (s *Source) RenameTableAcross(ctx context.Context, fromDB, table, toDB, toTable string) error {
	return s.rename(ctx, fromDB, table, toDB, toTable)
}

func (s *Source) rename(ctx context.Context, fromDB, from, toDB, to string) error {
	what := fmt.Sprintf("rename table %s.%s to %s.%s", fromDB, from, toDB, to)
	t, err := s.table(ctx, fromDB, from)
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	t.DbName, t.TableName = toDB, to
	if err := s.HMS.AlterTable(ctx, fromDB, from, t); err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	return nil
}

// DropTable is DROP TABLE db.table. The metastore keeps an external
// table's files; with purge the workload then deletes the data files
// under the table's and its partitions' locations itself, as an operator
// cleaning up (or external.table.purge) would, so that a table recreated
// at the same location starts empty.
func (s *Source) DropTable(ctx context.Context, db, table string, purge bool) error {
	what := fmt.Sprintf("drop table %s.%s", db, table)
	var locs []string
	if purge {
		t, err := s.table(ctx, db, table)
		if err != nil {
			return fmt.Errorf("%s: %w", what, err)
		}
		locs = append(locs, t.Sd.Location)
		if len(t.PartitionKeys) > 0 {
			parts, err := s.HMS.GetPartitions(ctx, db, table, -1)
			if err != nil {
				return fmt.Errorf("%s: list partitions: %w", what, err)
			}
			for _, p := range parts {
				locs = append(locs, p.Sd.Location)
			}
		}
	}
	if err := s.HMS.DropTable(ctx, db, table, true); err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	for _, loc := range locs {
		if err := s.removeData(ctx, loc); err != nil {
			return fmt.Errorf("%s: purge: %w", what, err)
		}
	}
	return nil
}

// DropPartitions is ALTER TABLE db.table DROP PARTITION for each of
// values, in one drop_partitions call. The metastore keeps an external
// table's files; with purge the workload deletes the partitions' data
// files itself afterwards.
func (s *Source) DropPartitions(ctx context.Context, db, table string, values [][]string, purge bool) error {
	what := fmt.Sprintf("drop partitions %v of %s.%s", values, db, table)
	t, err := s.table(ctx, db, table)
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	names, err := partitionNames(t, values)
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	var locs []string
	if purge {
		parts, err := s.HMS.GetPartitionsByNames(ctx, db, table, names)
		if err != nil {
			return fmt.Errorf("%s: %w", what, err)
		}
		for _, p := range parts {
			locs = append(locs, p.Sd.Location)
		}
	}
	deleteData := true
	_, err = s.HMS.DropPartitionsReq(ctx, &hive_metastore.DropPartitionsRequest{
		DbName: db, TblName: table, Parts: &hive_metastore.RequestPartsSpec{Names: names},
		DeleteData: &deleteData, NeedResult_: false,
	})
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	for _, loc := range locs {
		if err := s.removeData(ctx, loc); err != nil {
			return fmt.Errorf("%s: purge: %w", what, err)
		}
	}
	return nil
}

// Truncate is TRUNCATE TABLE db.table [PARTITION ...] through the
// metastore's truncate_table: the metastore deletes the data files of the
// table, or of the partitions with the given values (all partitions when
// values is empty), and resets their statistics with an alter. Hive's
// compiler refuses TRUNCATE on external tables; the metastore itself does
// not.
func (s *Source) Truncate(ctx context.Context, db, table string, values [][]string) error {
	what := fmt.Sprintf("truncate table %s.%s", db, table)
	if len(values) > 0 {
		what += fmt.Sprintf(" partitions %v", values)
	}
	t, err := s.table(ctx, db, table)
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	var names []string
	if len(values) > 0 {
		if names, err = partitionNames(t, values); err != nil {
			return fmt.Errorf("%s: %w", what, err)
		}
	}
	// truncate_table_req, not truncate_table: the latter's partNames
	// argument always goes on the wire, as an empty list when nil, which
	// the metastore reads as "no partitions" and truncates nothing.
	req := hive_metastore.NewTruncateTableRequest()
	req.DbName, req.TableName, req.PartNames = db, table, names
	if _, err := s.HMS.TruncateTableReq(ctx, req); err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	if err := s.recheck(ctx, t.Sd.Location); err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	return nil
}

// getTable reads db.name with get_table_req (Hive 4 removed get_table).
func getTable(ctx context.Context, c *hms.Client, db, name string) (*hive_metastore.Table, error) {
	r, err := c.GetTableReq(ctx, hms.TableRequest(db, name))
	if err != nil {
		return nil, fmt.Errorf("get table %s.%s: %w", db, name, err)
	}
	if r.Table == nil {
		return nil, fmt.Errorf("get table %s.%s: no table in the answer", db, name)
	}
	return r.Table, nil
}

func partitionNames(t *hive_metastore.Table, values [][]string) ([]string, error) {
	var names []string
	for _, vals := range values {
		n, err := partitionName(t.PartitionKeys, vals)
		if err != nil {
			return nil, err
		}
		names = append(names, n)
	}
	return names, nil
}

// table gets db.table, with its storage descriptor.
func (s *Source) table(ctx context.Context, db, table string) (*hive_metastore.Table, error) {
	t, err := getTable(ctx, s.HMS, db, table)
	if err != nil {
		return nil, err
	}
	if t.Sd == nil || t.Sd.Location == "" {
		return nil, fmt.Errorf("table %s.%s has no location", db, table)
	}
	return t, nil
}

// writeData writes a new data file of rows rows for cols into dir, named
// as Hive names the output of a single-task load.
func (s *Source) writeData(ctx context.Context, dir string, cols []*hive_metastore.FieldSchema, rows int) (File, error) {
	dir = strings.TrimSuffix(dir, "/")
	existing := map[string]bool{}
	err := s.FS.Walk(ctx, dir, func(loc string, _ int64) error {
		existing[path.Base(loc)] = true
		return nil
	})
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return File{}, fmt.Errorf("list %s: %w", dir, err)
	}
	name := "000000_0"
	for i := 1; existing[name]; i++ {
		name = "000000_0_copy_" + strconv.Itoa(i)
	}
	return s.writeFile(ctx, dir+"/"+name, textRows(s.rng, cols, rows))
}

// writeFile writes data to a new file at loc, published atomically.
func (s *Source) writeFile(ctx context.Context, loc string, data []byte) (File, error) {
	crc, err := fs.WriteFile(ctx, s.FS, loc, data)
	if err != nil {
		return File{}, err
	}
	f := File{Location: loc, Size: int64(len(data)), CRC32C: crc}
	s.files = append(s.files, f)
	return f, nil
}

// dataStats counts the data files under dir and their bytes.
func (s *Source) dataStats(ctx context.Context, dir string) (n int, size int64, err error) {
	err = s.walkData(ctx, dir, func(_ string, sz int64) error {
		n++
		size += sz
		return nil
	})
	return n, size, err
}

// walkData calls fn for every data file under dir (hidden and staging
// names skipped); a missing dir holds none.
func (s *Source) walkData(ctx context.Context, dir string, fn func(loc string, size int64) error) error {
	dir = strings.TrimSuffix(dir, "/")
	err := s.FS.Walk(ctx, dir, func(loc string, size int64) error {
		rel, ok := location.Below(dir, loc)
		if !ok || location.Hidden(rel) {
			return nil
		}
		return fn(loc, size)
	})
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("list %s: %w", dir, err)
	}
	return nil
}

// removeData deletes the data files under dir, as INSERT OVERWRITE does.
func (s *Source) removeData(ctx context.Context, dir string) error {
	var locs []string
	if err := s.walkData(ctx, dir, func(loc string, _ int64) error {
		locs = append(locs, loc)
		return nil
	}); err != nil {
		return err
	}
	for _, loc := range locs {
		if err := s.FS.Remove(ctx, loc); err != nil {
			return err
		}
		s.markRemoved(loc)
	}
	return nil
}

func (s *Source) markRemoved(loc string) {
	for i := range s.files {
		if !s.files[i].Removed && location.Same(s.files[i].Location, loc) {
			s.files[i].Removed = true
		}
	}
}

// recheck marks removed the recorded files under dir that are gone.
func (s *Source) recheck(ctx context.Context, dir string) error {
	for i := range s.files {
		f := &s.files[i]
		if f.Removed {
			continue
		}
		if _, ok := location.Below(dir, f.Location); !ok {
			continue
		}
		_, err := s.FS.Stat(ctx, f.Location)
		if errors.Is(err, fs.ErrNotExist) {
			f.Removed = true
		} else if err != nil {
			return err
		}
	}
	return nil
}
