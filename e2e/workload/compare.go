package workload

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"slices"
	"strings"

	"github.com/beltran/gohive/hive_metastore"

	"github.com/hivedr/hivedr/internal/fs"
	"github.com/hivedr/hivedr/internal/hms"
	"github.com/hivedr/hivedr/internal/location"
	"github.com/hivedr/hivedr/internal/verify"
)

// IgnoredParameter reports whether Compare ignores the database, table or
// partition parameter key because it legitimately differs between a
// source and its replica: the same list `hivedr verify` ignores
// (verify.IgnoredParameter says which and why).
func IgnoredParameter(key string) bool { return verify.IgnoredParameter(key) }

// Snapshot is what one metastore holds of some databases, with the data
// files of their tables and partitions.
type Snapshot struct {
	// Databases by name; a database asked for but absent is not here.
	Databases map[string]*Database
}

// Database is one database of a Snapshot.
type Database struct {
	Name       string
	Location   string
	Parameters map[string]string
	Tables     map[string]*Table // by name
}

// Table is one table of a Snapshot.
type Table struct {
	Database, Name string
	Type           string // EXTERNAL_TABLE, MANAGED_TABLE, VIRTUAL_VIEW...
	Location       string
	Columns        []Column
	PartitionKeys  []Column
	InputFormat    string
	OutputFormat   string
	SerDe          string
	Parameters     map[string]string
	// Partitions by Key of their values; nil for an unpartitioned table.
	Partitions map[string]*Partition
	// Files of an unpartitioned table, by name relative to Location; a
	// partitioned table's files are its partitions'.
	Files map[string]FileSum
}

// Partition is one partition of a Snapshot.
type Partition struct {
	Values     []string
	Location   string
	Columns    []Column
	Parameters map[string]string
	// Files by name relative to Location.
	Files map[string]FileSum
}

// Column is a column or partition key.
type Column = verify.Column

// FileSum is a data file's length and the CRC32C of its bytes.
type FileSum struct {
	Size   int64
	CRC32C uint32
}

// Key returns the map key of a partition with these values.
func Key(values []string) string { return strings.Join(values, "/") }

// Counts sums a database's contents.
type Counts struct {
	Tables, Partitions, Files int
	Bytes                     int64
}

// Counts returns what the database holds.
func (d *Database) Counts() Counts {
	var c Counts
	for _, t := range d.Tables {
		tc := t.Counts()
		c.Tables++
		c.Partitions += tc.Partitions
		c.Files += tc.Files
		c.Bytes += tc.Bytes
	}
	return c
}

// Counts returns what the table holds (Tables is 1).
func (t *Table) Counts() Counts {
	c := Counts{Tables: 1, Partitions: len(t.Partitions)}
	add := func(files map[string]FileSum) {
		for _, f := range files {
			c.Files++
			c.Bytes += f.Size
		}
	}
	add(t.Files)
	for _, p := range t.Partitions {
		add(p.Files)
	}
	return c
}

// Capture reads the databases dbs from the metastore c and every data file
// of their tables and partitions through files, reading each file whole to
// compute its CRC32C (fine for test sizes). Names starting with "." or "_"
// (hidden, staging and marker files) are skipped; a missing directory
// holds no files.
func Capture(ctx context.Context, c *hms.Client, files Files, dbs []string) (*Snapshot, error) {
	s := &Snapshot{Databases: map[string]*Database{}}
	for _, name := range dbs {
		db, err := c.GetDatabase(ctx, name)
		if isNotFound(err) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("get database %s from %s: %w", name, c.Addr(), err)
		}
		d := &Database{Name: db.Name, Location: db.LocationUri, Parameters: db.Parameters, Tables: map[string]*Table{}}
		s.Databases[d.Name] = d
		names, err := c.GetAllTables(ctx, db.Name)
		if err != nil {
			return nil, fmt.Errorf("list tables of %s on %s: %w", db.Name, c.Addr(), err)
		}
		for _, tn := range names {
			t, err := captureTable(ctx, c, files, db.Name, tn)
			if isNotFound(err) {
				continue // dropped while we looked
			}
			if err != nil {
				return nil, err
			}
			d.Tables[t.Name] = t
		}
	}
	return s, nil
}

func captureTable(ctx context.Context, c *hms.Client, files Files, db, name string) (*Table, error) {
	ht, err := getTable(ctx, c, db, name)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", c.Addr(), err)
	}
	t := &Table{
		Database: db, Name: ht.TableName, Type: ht.TableType,
		PartitionKeys: verify.Columns(ht.PartitionKeys), Parameters: ht.Parameters,
	}
	if sd := ht.Sd; sd != nil {
		t.Location, t.Columns, t.InputFormat, t.OutputFormat = sd.Location, verify.Columns(sd.Cols), sd.InputFormat, sd.OutputFormat
		if sd.SerdeInfo != nil {
			t.SerDe = sd.SerdeInfo.SerializationLib
		}
	}
	if len(ht.PartitionKeys) == 0 {
		if t.Location != "" {
			if t.Files, err = captureFiles(ctx, files, t.Location); err != nil {
				return nil, fmt.Errorf("files of %s.%s: %w", db, name, err)
			}
		}
		return t, nil
	}
	parts, err := c.GetPartitions(ctx, db, name, -1)
	if err != nil {
		return nil, fmt.Errorf("get partitions of %s.%s from %s: %w", db, name, c.Addr(), err)
	}
	t.Partitions = map[string]*Partition{}
	for _, hp := range parts {
		p := &Partition{Values: hp.Values, Parameters: hp.Parameters}
		if hp.Sd != nil {
			p.Location, p.Columns = hp.Sd.Location, verify.Columns(hp.Sd.Cols)
		}
		if p.Location != "" {
			if p.Files, err = captureFiles(ctx, files, p.Location); err != nil {
				return nil, fmt.Errorf("files of %s.%s partition %v: %w", db, name, hp.Values, err)
			}
		}
		t.Partitions[Key(p.Values)] = p
	}
	return t, nil
}

// captureFiles returns the data files under dir by relative name.
func captureFiles(ctx context.Context, files Files, dir string) (map[string]FileSum, error) {
	dir = strings.TrimSuffix(dir, "/")
	out := map[string]FileSum{}
	var locs []string
	err := files.Walk(ctx, dir, func(loc string, _ int64) error {
		if rel, ok := location.Below(dir, loc); ok && !location.Hidden(rel) {
			locs = append(locs, loc)
		}
		return nil
	})
	if errors.Is(err, fs.ErrNotExist) {
		return out, nil
	}
	if err != nil {
		return nil, err
	}
	for _, loc := range locs {
		rel, _ := location.Below(dir, loc)
		sum, err := fileSum(ctx, files, loc)
		if errors.Is(err, fs.ErrNotExist) {
			continue // removed while we looked
		}
		if err != nil {
			return nil, err
		}
		out[rel] = sum
	}
	return out, nil
}

func fileSum(ctx context.Context, files Files, loc string) (FileSum, error) {
	r, err := files.Open(ctx, loc, 0, -1)
	if err != nil {
		return FileSum{}, err
	}
	defer r.Close()
	h := crc32.New(castagnoli)
	n, err := io.Copy(h, r)
	if err != nil {
		return FileSum{}, fmt.Errorf("read %s: %w", loc, err)
	}
	return FileSum{Size: n, CRC32C: h.Sum32()}, nil
}

func isNotFound(err error) bool {
	var nso *hive_metastore.NoSuchObjectException
	return errors.As(err, &nso)
}

// Diff is one difference between a source and its replica, worded as
// `hivedr verify` words it.
type Diff = verify.Diff

// Compare captures the databases dbs on the source metastore src (files
// through srcFS) and on the replica dr (through drFS) and returns every
// difference between them, sorted (see Capture and DiffSnapshots).
func Compare(ctx context.Context, src, dr *hms.Client, srcFS, drFS Files, dbs []string, mapLocation func(string) (string, error)) ([]Diff, error) {
	a, err := Capture(ctx, src, srcFS, dbs)
	if err != nil {
		return nil, fmt.Errorf("capture source: %w", err)
	}
	b, err := Capture(ctx, dr, drFS, dbs)
	if err != nil {
		return nil, fmt.Errorf("capture DR: %w", err)
	}
	return DiffSnapshots(a, b, mapLocation), nil
}

// DiffSnapshots returns every difference between the source snapshot src
// and the replica snapshot dr, sorted by object then detail: databases,
// tables and partitions present on one side only; table type, columns
// (name and type, in order), partition keys, formats and SerDe;
// parameters other than those IgnoredParameter names; locations, where
// mapLocation of the source location must equal the DR location; and data
// files by relative name, length and CRC32C.
func DiffSnapshots(src, dr *Snapshot, mapLocation func(string) (string, error)) []Diff {
	var ds verify.Diffs
	for _, name := range verify.UnionKeys(src.Databases, dr.Databases) {
		a, b := src.Databases[name], dr.Databases[name]
		if !ds.Presence(name, a != nil, b != nil) {
			continue
		}
		ds.Location(name, a.Location, b.Location, mapLocation)
		ds.Params(name, a.Parameters, b.Parameters)
		for _, tn := range verify.UnionKeys(a.Tables, b.Tables) {
			diffTable(&ds, name+"."+tn, a.Tables[tn], b.Tables[tn], mapLocation)
		}
	}
	slices.SortFunc(ds, func(x, y Diff) int {
		return cmp.Or(cmp.Compare(x.Object, y.Object), cmp.Compare(x.Detail, y.Detail))
	})
	return ds
}

// diffTable records the differences of a table and its partitions.
func diffTable(ds *verify.Diffs, obj string, a, b *Table, mapLocation func(string) (string, error)) {
	if !ds.Presence(obj, a != nil, b != nil) {
		return
	}
	ds.Value(obj, "table type", a.Type, b.Type)
	ds.Columns(obj, "column", a.Columns, b.Columns)
	ds.Columns(obj, "partition key", a.PartitionKeys, b.PartitionKeys)
	ds.Value(obj, "input format", a.InputFormat, b.InputFormat)
	ds.Value(obj, "output format", a.OutputFormat, b.OutputFormat)
	ds.Value(obj, "serde", a.SerDe, b.SerDe)
	ds.Location(obj, a.Location, b.Location, mapLocation)
	ds.Params(obj, a.Parameters, b.Parameters)
	diffFiles(ds, obj, a.Files, b.Files)
	for _, k := range verify.UnionKeys(a.Partitions, b.Partitions) {
		pa, pb := a.Partitions[k], b.Partitions[k]
		var vals []string
		if pa != nil {
			vals = pa.Values
		} else {
			vals = pb.Values
		}
		pobj := obj + " partition [" + strings.Join(vals, ",") + "]"
		if !ds.Presence(pobj, pa != nil, pb != nil) {
			continue
		}
		ds.Columns(pobj, "column", pa.Columns, pb.Columns)
		ds.Location(pobj, pa.Location, pb.Location, mapLocation)
		ds.Params(pobj, pa.Parameters, pb.Parameters)
		diffFiles(ds, pobj, pa.Files, pb.Files)
	}
}

// diffFiles records the data files that differ by presence, length or
// CRC32C.
func diffFiles(ds *verify.Diffs, obj string, a, b map[string]FileSum) {
	for _, name := range verify.UnionKeys(a, b) {
		fa, okA := a[name]
		fb, okB := b[name]
		fobj := obj + " file " + name
		switch {
		case !ds.Presence(fobj, okA, okB):
		case fa.Size != fb.Size:
			ds.Add(fobj, "%d bytes on source, %d on DR", fa.Size, fb.Size)
		case fa.CRC32C != fb.CRC32C:
			ds.Add(fobj, "CRC32C %08x on source, %08x on DR", fa.CRC32C, fb.CRC32C)
		}
	}
}
