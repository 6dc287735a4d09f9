package workload

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/beltran/gohive/hive_metastore"
	"github.com/colinmarc/hdfs/v2"

	"github.com/hivedr/hivedr/internal/hms"
)

// PopulatedParam is the source database parameter Populate writes last,
// once every table, partition and file of the warehouse exists: its value
// is the layout's fingerprint (WarehouseSpec.Fingerprint), so a later run
// with the same layout reuses the database and one with another layout,
// or after an interrupted population, drops and rebuilds it.
const PopulatedParam = "bench.populated"

// WarehouseSpec is the layout of a database that Populate builds quickly:
// Tables tables cycling through four kinds (external partitioned, managed
// partitioned, external unpartitioned, managed unpartitioned), Partitions
// partitions spread evenly over the partitioned ones, and one tiny data
// file in every partition and unpartitioned table.
type WarehouseSpec struct {
	Database   string
	Tables     int
	Partitions int
	// External is the root of the database and its external tables, e.g.
	// hdfs://nn/external: the database at External/<db>.db.
	External string
	// Warehouse is the root of managed tables: Warehouse/<db>.db/<table>,
	// as the metastore places them.
	Warehouse string
	// Batch is the number of partitions per add_partitions call
	// (default 1000).
	Batch int
	// Writers is the number of files written at once (default 8).
	Writers int
	// NoFiles leaves partitions and tables without data files (a
	// metadata-only warehouse).
	NoFiles bool
}

func (s *WarehouseSpec) ensureDefaults() {
	if s.Batch <= 0 {
		s.Batch = 1000
	}
	if s.Writers <= 0 {
		s.Writers = 8
	}
}

// Fingerprint names the layout: the value of PopulatedParam.
func (s WarehouseSpec) Fingerprint() string {
	if s.NoFiles {
		return fmt.Sprintf("tables=%d partitions=%d files=0", s.Tables, s.Partitions)
	}
	return fmt.Sprintf("tables=%d partitions=%d", s.Tables, s.Partitions)
}

// WarehouseTable is one table of a WarehouseSpec's layout.
type WarehouseTable struct {
	Name    string
	Managed bool
	// Keys are the partition keys (none: unpartitioned).
	Keys []string
	// Partitions is how many partitions the table has.
	Partitions int
}

// Layout returns the tables of the spec, in creation order. It is pure:
// the same spec always gives the same tables and partitions, so a run
// that reuses a populated database knows what it holds without listing.
func (s WarehouseSpec) Layout() []WarehouseTable {
	var tables []WarehouseTable
	partitioned := 0
	for i := 0; i < s.Tables; i++ {
		kind := i % 4
		t := WarehouseTable{Managed: kind == 1 || kind == 3}
		switch kind {
		case 0:
			t.Name, t.Keys = fmt.Sprintf("ext_part_%03d", i), []string{"ds"}
		case 1:
			t.Name, t.Keys = fmt.Sprintf("man_part_%03d", i), []string{"dt", "region"}
		case 2:
			t.Name = fmt.Sprintf("ext_flat_%03d", i)
		case 3:
			t.Name = fmt.Sprintf("man_flat_%03d", i)
		}
		if len(t.Keys) > 0 {
			partitioned++
		}
		tables = append(tables, t)
	}
	if partitioned == 0 {
		return tables
	}
	each, extra := s.Partitions/partitioned, s.Partitions%partitioned
	for i := range tables {
		if len(tables[i].Keys) == 0 {
			continue
		}
		tables[i].Partitions = each
		if extra > 0 {
			tables[i].Partitions++
			extra--
		}
	}
	return tables
}

// PartitionValues returns the values of the table's partition i: ds
// p000000.. for one key; dt (one day per 4 partitions) and region (one of
// four) for two.
func (t WarehouseTable) PartitionValues(i int) []string {
	if len(t.Keys) == 1 {
		return []string{fmt.Sprintf("p%06d", i)}
	}
	day := time.Date(2020, 1, 1, 0, 0, 0, 0, time.UTC).AddDate(0, 0, i/4)
	return []string{day.Format("2006-01-02"), []string{"eu", "us", "apac", "latam"}[i%4]}
}

// Location is the table's location under the spec's roots.
func (s WarehouseSpec) Location(t WarehouseTable) string {
	root := s.External
	if t.Managed {
		root = s.Warehouse
	}
	return strings.TrimSuffix(root, "/") + "/" + s.Database + ".db/" + t.Name
}

// TableObject returns the metastore table to create for t in database db
// located at loc (text format, columns id bigint and note string).
func (t WarehouseTable) TableObject(db, loc string) *hive_metastore.Table {
	typ, params := "EXTERNAL_TABLE", map[string]string{"EXTERNAL": "TRUE"}
	if t.Managed {
		typ, params = "MANAGED_TABLE", map[string]string{}
	}
	var keys []*hive_metastore.FieldSchema
	for _, k := range t.Keys {
		keys = append(keys, &hive_metastore.FieldSchema{Name: k, Type: "string"})
	}
	return &hive_metastore.Table{
		TableName: t.Name, DbName: db, Owner: "hivedr", TableType: typ, Parameters: params, PartitionKeys: keys,
		Sd: &hive_metastore.StorageDescriptor{
			Cols:         []*hive_metastore.FieldSchema{{Name: "id", Type: "bigint"}, {Name: "note", Type: "string"}},
			Location:     loc,
			InputFormat:  "org.apache.hadoop.mapred.TextInputFormat",
			OutputFormat: "org.apache.hadoop.hive.ql.io.HiveIgnoreKeyTextOutputFormat",
			SerdeInfo: &hive_metastore.SerDeInfo{
				SerializationLib: "org.apache.hadoop.hive.serde2.lazy.LazySimpleSerDe",
				Parameters:       map[string]string{"serialization.format": "1"},
			},
			Parameters: map[string]string{},
		},
	}
}

// PartitionObjects returns the metastore objects of the table's partitions
// [from, to) of table object tb (its location and columns).
func (t WarehouseTable) PartitionObjects(tb *hive_metastore.Table, from, to int) []*hive_metastore.Partition {
	parts := make([]*hive_metastore.Partition, 0, to-from)
	for i := from; i < to; i++ {
		vals := t.PartitionValues(i)
		sd := *tb.Sd
		sd.Location = strings.TrimSuffix(tb.Sd.Location, "/") + "/" + partitionNameOf(t.Keys, vals)
		parts = append(parts, &hive_metastore.Partition{
			Values: vals, DbName: tb.DbName, TableName: tb.TableName, Sd: &sd, Parameters: map[string]string{},
		})
	}
	return parts
}

func partitionNameOf(keys, vals []string) string {
	var b strings.Builder
	for i, k := range keys {
		if i > 0 {
			b.WriteByte('/')
		}
		b.WriteString(k + "=" + vals[i])
	}
	return b.String()
}

// fileData is the tiny data file written at loc: two text rows that name
// it, so files differ.
func fileData(loc string) []byte {
	return []byte("1" + fieldSep + loc + "\n2" + fieldSep + strconv.Itoa(len(loc)) + "\n")
}

// PutFunc writes data to a new file at the full location loc, creating
// its parent directories. Stage and Populate call it from several
// goroutines at once.
type PutFunc func(ctx context.Context, loc string, data []byte) error

// NativePut writes files with a native HDFS client: mkdir, create, write,
// close, the fewest NameNode calls a file takes (no staging name and no
// checksum read-back, which fs.HDFS does for copies). Population needs
// speed, not atomic publication: its files exist before the metadata that
// names them.
func NativePut(c *hdfs.Client) PutFunc {
	return func(ctx context.Context, loc string, data []byte) error {
		p, err := hdfsPath(loc)
		if err != nil {
			return err
		}
		if err := c.MkdirAll(path.Dir(p), 0o755); err != nil {
			return fmt.Errorf("mkdir %s: %w", path.Dir(p), err)
		}
		w, err := c.Create(p)
		if errors.Is(err, os.ErrExist) {
			// A rerun after an interruption: write it again.
			if err := c.Remove(p); err != nil {
				return fmt.Errorf("remove %s: %w", loc, err)
			}
			w, err = c.Create(p)
		}
		if err != nil {
			return fmt.Errorf("create %s: %w", loc, err)
		}
		if _, err := w.Write(data); err != nil {
			w.Close()
			return fmt.Errorf("write %s: %w", loc, err)
		}
		wait := 10 * time.Millisecond
		for {
			err := w.Close()
			if err == nil {
				return nil
			}
			if !hdfs.IsErrReplicating(err) {
				return fmt.Errorf("close %s: %w", loc, err)
			}
			select {
			case <-ctx.Done():
				return fmt.Errorf("close %s: %w", loc, ctx.Err())
			case <-time.After(wait):
			}
			wait = min(2*wait, time.Second)
		}
	}
}

// hdfsPath is the path of an hdfs://authority/path location.
func hdfsPath(loc string) (string, error) {
	rest, ok := strings.CutPrefix(loc, "hdfs://")
	if !ok {
		return "", fmt.Errorf("location %s: not hdfs://", loc)
	}
	i := strings.IndexByte(rest, '/')
	if i < 0 {
		return "", fmt.Errorf("location %s: no path", loc)
	}
	return rest[i:], nil
}

// PopulateResult says what Populate did.
type PopulateResult struct {
	// Reused is set when the database already held the layout.
	Reused                    bool
	Tables, Partitions, Files int
	Took                      time.Duration
}

// Populate builds the spec's database on the metastore that dial connects
// to, or reuses it when its PopulatedParam equals the spec's fingerprint.
// A database of that name without the marker (another layout, or a run
// that was interrupted) is dropped with its data first. Files are written
// through put, Writers at once; partitions are added Batch per
// add_partitions call, by two callers at once, each batch's files written
// before the call (data before metadata, as Hive does). Population makes
// events in the metastore's notification log (CREATE_TABLE,
// ADD_PARTITION, ALTER_DATABASE for the marker): a test that replicates
// the database starts its tailer after them.
func Populate(ctx context.Context, dial func(context.Context) (*hms.Client, error), put PutFunc, spec WarehouseSpec) (PopulateResult, error) {
	spec.ensureDefaults()
	start := time.Now()
	res := PopulateResult{}
	c, err := dial(ctx)
	if err != nil {
		return res, err
	}
	defer c.Close()
	db, err := c.GetDatabase(ctx, spec.Database)
	switch {
	case err == nil && db.Parameters[PopulatedParam] == spec.Fingerprint():
		res.Reused = true
		for _, t := range spec.Layout() {
			res.Tables++
			res.Partitions += t.Partitions
		}
		if !spec.NoFiles {
			res.Files = res.Partitions + (res.Tables - countPartitioned(spec.Layout()))
		}
		res.Took = time.Since(start)
		return res, nil
	case err == nil:
		if err := c.DropDatabase(ctx, spec.Database, true, true); err != nil {
			return res, fmt.Errorf("populate %s: drop the unfinished database: %w", spec.Database, err)
		}
	case !isNotFound(err):
		return res, fmt.Errorf("populate %s: %w", spec.Database, err)
	}
	owner, typ := "hivedr", hive_metastore.PrincipalType_USER
	dbLoc := strings.TrimSuffix(spec.External, "/") + "/" + spec.Database + ".db"
	if err := c.CreateDatabase(ctx, &hive_metastore.Database{
		Name: spec.Database, LocationUri: dbLoc, Parameters: map[string]string{}, OwnerName: &owner, OwnerType: &typ,
	}); err != nil {
		return res, fmt.Errorf("populate %s: create database: %w", spec.Database, err)
	}

	// Every table, then its file (unpartitioned) or its partitions in
	// batches handed to the batch workers.
	type batch struct {
		t        WarehouseTable
		tb       *hive_metastore.Table
		from, to int
	}
	batches := make(chan batch)
	var (
		mu       sync.Mutex
		firstErr error
	)
	fail := func(err error) {
		mu.Lock()
		if firstErr == nil {
			firstErr = err
		}
		mu.Unlock()
	}
	failed := func() bool {
		mu.Lock()
		defer mu.Unlock()
		return firstErr != nil
	}
	// File writers: each location is written, then reported on done.
	type fileJob struct {
		loc  string
		done *sync.WaitGroup
	}
	jobs := make(chan fileJob)
	var writers sync.WaitGroup
	for i := 0; i < spec.Writers; i++ {
		writers.Add(1)
		go func() {
			defer writers.Done()
			for j := range jobs {
				if !failed() {
					if err := put(ctx, j.loc, fileData(j.loc)); err != nil {
						fail(fmt.Errorf("populate %s: %w", spec.Database, err))
					}
				}
				j.done.Done()
			}
		}()
	}
	writeAll := func(locs []string) {
		if spec.NoFiles {
			return
		}
		var wg sync.WaitGroup
		wg.Add(len(locs))
		for _, l := range locs {
			jobs <- fileJob{loc: l, done: &wg}
		}
		wg.Wait()
	}
	var adders sync.WaitGroup
	var nParts, nFiles int
	for i := 0; i < 2; i++ {
		ac, err := dial(ctx)
		if err != nil {
			close(jobs)
			writers.Wait()
			return res, err
		}
		adders.Add(1)
		go func() {
			defer adders.Done()
			defer ac.Close()
			for b := range batches {
				if failed() {
					continue
				}
				parts := b.t.PartitionObjects(b.tb, b.from, b.to)
				locs := make([]string, len(parts))
				for k, p := range parts {
					locs[k] = p.Sd.Location + "/000000_0"
				}
				writeAll(locs)
				if failed() {
					continue
				}
				if _, err := ac.AddPartitionsReq(ctx, &hive_metastore.AddPartitionsRequest{
					DbName: b.tb.DbName, TblName: b.tb.TableName, Parts: parts, NeedResult_: false,
				}); err != nil {
					fail(fmt.Errorf("populate %s: add partitions %d..%d of %s: %w", spec.Database, b.from, b.to-1, b.t.Name, err))
				}
				mu.Lock()
				nParts += len(parts)
				if !spec.NoFiles {
					nFiles += len(parts)
				}
				mu.Unlock()
			}
		}()
	}
	for _, t := range spec.Layout() {
		if failed() {
			break
		}
		tb := t.TableObject(spec.Database, spec.Location(t))
		if len(t.Keys) == 0 {
			// The table's file before the table, as a CTAS writes it.
			writeAll([]string{tb.Sd.Location + "/000000_0"})
			if !spec.NoFiles {
				mu.Lock()
				nFiles++
				mu.Unlock()
			}
		}
		if err := c.CreateTable(ctx, tb); err != nil {
			fail(fmt.Errorf("populate %s: create table %s: %w", spec.Database, t.Name, err))
			break
		}
		res.Tables++
		for from := 0; from < t.Partitions; from += spec.Batch {
			batches <- batch{t: t, tb: tb, from: from, to: min(from+spec.Batch, t.Partitions)}
		}
	}
	close(batches)
	adders.Wait()
	close(jobs)
	writers.Wait()
	res.Partitions, res.Files = nParts, nFiles
	if firstErr != nil {
		return res, firstErr
	}
	// The marker last: only a complete population is reused.
	db, err = c.GetDatabase(ctx, spec.Database)
	if err != nil {
		return res, fmt.Errorf("populate %s: %w", spec.Database, err)
	}
	if db.Parameters == nil {
		db.Parameters = map[string]string{}
	}
	db.Parameters[PopulatedParam] = spec.Fingerprint()
	if err := c.AlterDatabase(ctx, spec.Database, db); err != nil {
		return res, fmt.Errorf("populate %s: mark it populated: %w", spec.Database, err)
	}
	res.Took = time.Since(start)
	return res, nil
}

func countPartitioned(ts []WarehouseTable) int {
	n := 0
	for _, t := range ts {
		if len(t.Keys) > 0 {
			n++
		}
	}
	return n
}
