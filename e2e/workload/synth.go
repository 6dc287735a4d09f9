package workload

import (
	"context"
	"errors"
	"fmt"
	"hash/crc32"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync"

	"github.com/beltran/gohive/hive_metastore"

	"github.com/hivedr/hivedr/internal/verify"
)

// Synth is a synthetic warehouse whose changes are written as notification
// rows straight into a log of the metastore's shape (SynthLog), as fast as
// asked, instead of through a metastore (which caps near 20 events/s on a
// small machine). Its events are those a real metastore logs for the same
// changes (messages built as the DbNotificationListener builds them, from
// captured templates: synthmsg.go), about objects that exist: every table
// an event names was created by an earlier event, and every data file an
// event brings in is written to the source filesystem before the event
// (Stage), so the tailer lists and copies real files. Snapshot returns
// what the events describe, to compare the replica with.
//
// The warehouse: each database holds TablesPerDB external text tables
// partitioned like the template (by dt and region), each with
// InitialPartitions partitions of one file at set-up. The steps of a run
// (PlanStep) either add a partition with one file (ADD_PARTITION) or load
// a file into one of the set-up partitions (ALTER_PARTITION with the new
// statistics, then INSERT listing the file, as Hive's client does), or
// the same without files (an empty partition; a statistics update).
// Loads go only to set-up partitions so that staging a run's files before the
// run cannot put a file in a directory the tailer has yet to list for an
// ADD_PARTITION: stage a run only once the set-up's events are tailed.
//
// A Synth is not safe for concurrent use.
type Synth struct {
	spec   SynthSpec
	tpl    *MessageTemplates
	dbs    []*hive_metastore.Database
	tables []*SynthTable
	nextID int64
}

// SynthSpec lays out a Synth.
type SynthSpec struct {
	Databases   []string
	TablesPerDB int
	// External is the root of the databases: database d at External/d.db,
	// its tables below. Warehouse is their managed root (the databases'
	// managed location).
	External, Warehouse string
	// CMRoot is the source's change-management root. When set, INSERT
	// file entries carry the file's checksum (Checksummer) and CMRoot, as
	// the metastore logs them with change management on.
	CMRoot string
	// InitialPartitions per table at set-up, each with a file (loads go
	// there; a table without any takes partition adds only).
	InitialPartitions int
	// Rows per data file.
	Rows int
}

// SynthTable is one table of a Synth.
type SynthTable struct {
	obj   *hive_metastore.Table
	parts []*synthPartition
	// setup is how many partitions the set-up made (the ones loads go to).
	setup int
}

type synthPartition struct {
	values   []string
	loc      string
	files    []File
	size     int64
	ts       int32
	params   map[string]string // beyond the basic statistics
	analyzed int
}

// DB is the table's database.
func (t *SynthTable) DB() string { return t.obj.DbName }

// Name is the table's name.
func (t *SynthTable) Name() string { return t.obj.TableName }

// StepKind names what a step does.
type StepKind string

// The kinds of steps.
const (
	StepCreateDatabase StepKind = "create_database"
	StepCreateTable    StepKind = "create_table"
	StepAddPartition   StepKind = "add_partition"
	StepLoad           StepKind = "load"
	StepAnalyze        StepKind = "analyze"
	StepReinsert       StepKind = "reinsert"
)

// SynthStep is one change of a Synth: the data files to write before its
// events (Stage) and the events (Rows).
type SynthStep struct {
	Kind StepKind
	// DB is the database the step changes; Table the table (nil for a
	// database).
	DB    string
	Table *SynthTable
	// Files are written by Stage; Data holds their bytes until then.
	Files []File
	Data  [][]byte
	// Types are the event types the step logs, in order.
	Types []string

	checksums []string
	rows      func(ts int64) []LogRow
}

// Rows returns the step's notification rows, their messages stamped ts
// (the message's own timestamp; EVENT_TIME is the append's). Call it after
// Stage: INSERT messages carry the files' checksums.
func (s *SynthStep) Rows(ts int64) []LogRow { return s.rows(ts) }

// Checksummer gives a file's checksum as Hive's client sends it with an
// INSERT (*fs.HDFS: the hex of the HDFS FileChecksum).
type Checksummer interface {
	FileChecksum(ctx context.Context, location string) (string, bool, error)
}

// NewSynth lays out the warehouse of spec with the message templates tpl.
// Nothing is written until the steps of Setup are staged and appended.
func NewSynth(spec SynthSpec, tpl *MessageTemplates) (*Synth, error) {
	if len(spec.Databases) == 0 || spec.TablesPerDB <= 0 || spec.InitialPartitions < 0 || spec.Rows <= 0 {
		return nil, fmt.Errorf("synthetic warehouse: want databases, tables and rows > 0, initial partitions >= 0: %+v", spec)
	}
	return &Synth{spec: spec, tpl: tpl, nextID: 1}, nil
}

// Databases are the warehouse's databases.
func (s *Synth) Databases() []string { return s.spec.Databases }

// DatabaseLocation is where database db lives: External/db.db.
func (s *Synth) DatabaseLocation(db string) string {
	return strings.TrimSuffix(s.spec.External, "/") + "/" + db + ".db"
}

// Objects returns database db and its tables as Setup made them (nil
// before), for a test that puts the same objects in a metastore itself.
func (s *Synth) Objects(db string) (*hive_metastore.Database, []*hive_metastore.Table) {
	var d *hive_metastore.Database
	for _, x := range s.dbs {
		if x.Name == db {
			d = x
		}
	}
	var tables []*hive_metastore.Table
	for _, t := range s.tables {
		if t.obj.DbName == db {
			tables = append(tables, t.obj)
		}
	}
	return d, tables
}

// Tables returns the tables, database by database, once Setup made them.
func (s *Synth) Tables() []*SynthTable { return s.tables }

// Setup returns the steps that create the databases, their tables and the
// tables' initial partitions, each with one file. ts is the creation time
// the objects carry.
func (s *Synth) Setup(ts int32) []*SynthStep {
	var steps []*SynthStep
	for _, name := range s.spec.Databases {
		managed := ""
		if s.spec.Warehouse != "" {
			managed = strings.TrimSuffix(s.spec.Warehouse, "/") + "/" + name + ".db"
		}
		loc := s.DatabaseLocation(name)
		d := s.tpl.Database(name, loc, managed, ts)
		s.dbs = append(s.dbs, d)
		steps = append(steps, &SynthStep{Kind: StepCreateDatabase, DB: name, Types: []string{"CREATE_DATABASE"},
			rows: func(ts int64) []LogRow { return []LogRow{CreateDatabaseRow(d, ts)} }})
		for i := 0; i < s.spec.TablesPerDB; i++ {
			tn := fmt.Sprintf("t%02d", i)
			tb := s.tpl.Table(name, tn, loc+"/"+tn, s.nextID, ts)
			s.nextID++
			t := &SynthTable{obj: tb}
			s.tables = append(s.tables, t)
			steps = append(steps, &SynthStep{Kind: StepCreateTable, DB: name, Table: t, Types: []string{"CREATE_TABLE"},
				rows: func(ts int64) []LogRow { return []LogRow{CreateTableRow(tb, ts)} }})
		}
	}
	for _, t := range s.tables {
		for i := 0; i < s.spec.InitialPartitions; i++ {
			steps = append(steps, s.addPartition(t, ts, true))
		}
		t.setup = len(t.parts)
	}
	return steps
}

// PlanStep returns the next step on table t, its choices from rng: with
// probability addShare a new partition, else a load into one of the
// table's set-up partitions. With probability fileShare the step brings a
// data file: the new partition holds one, or the load adds one
// (ALTER_PARTITION with the new statistics, then INSERT). Without, the
// partition is added empty, or the load is a statistics update alone (an
// ALTER_PARTITION, as ANALYZE logs one). ts is the time the objects carry.
func (s *Synth) PlanStep(t *SynthTable, rng *rand.Rand, addShare, fileShare float64, ts int32) *SynthStep {
	add, file := rng.Float64() < addShare || t.setup == 0, rng.Float64() < fileShare
	switch {
	case add:
		return s.addPartition(t, ts, file)
	case file:
		return s.load(t, t.parts[rng.IntN(t.setup)], ts)
	default:
		return s.analyze(t, t.parts[rng.IntN(t.setup)], ts)
	}
}

// Reinsert returns an INSERT into set-up partition i of table t listing
// the partition's first file again, as a load that rewrote a file of the
// same name and bytes logs it: its copy task finds the target identical
// once the file was copied. Stage writes nothing for it (the file exists)
// but reads its checksum. The rows of one Reinsert may be appended any
// number of times (a backlog of tasks without new files).
func (s *Synth) Reinsert(t *SynthTable, i int) *SynthStep {
	p := t.parts[i%t.setup]
	f := p.files[0]
	tb := t.obj
	st := &SynthStep{Kind: StepReinsert, DB: t.DB(), Table: t, Types: []string{"INSERT"}, Files: []File{f}}
	st.rows = func(ts int64) []LogRow {
		return []LogRow{InsertRow(tb, s.tpl.Partition(tb, p.values, p.loc, p.ts, p.stats()), []File{f}, st.checksums, s.spec.CMRoot, ts)}
	}
	return st
}

// partitionValues are the template keys' values of a table's partition i:
// one dt a day, cycling through four regions.
func partitionValues(keys []string, i int) []string {
	vals := make([]string, len(keys))
	for k := range keys {
		switch k {
		case 0:
			vals[k] = fmt.Sprintf("d%06d", i)
		default:
			vals[k] = []string{"eu", "us", "apac", "latam"}[i%4]
		}
	}
	return vals
}

func (s *Synth) addPartition(t *SynthTable, ts int32, withFile bool) *SynthStep {
	keys := s.tpl.PartitionKeys()
	vals := partitionValues(keys, len(t.parts))
	loc := t.obj.Sd.Location + "/" + partitionNameOf(keys, vals)
	p := &synthPartition{values: vals, loc: loc, ts: ts, params: map[string]string{}}
	st := &SynthStep{Kind: StepAddPartition, DB: t.DB(), Table: t, Types: []string{"ADD_PARTITION"}}
	if withFile {
		f, data := s.file(loc + "/000000_0")
		p.files, p.size = []File{f}, f.Size
		st.Files, st.Data = []File{f}, [][]byte{data}
	}
	t.parts = append(t.parts, p)
	params := p.stats()
	tb := t.obj
	st.rows = func(ts int64) []LogRow {
		return []LogRow{AddPartitionRow(tb, []*hive_metastore.Partition{s.tpl.Partition(tb, vals, loc, p.ts, params)}, ts)}
	}
	return st
}

func (s *Synth) load(t *SynthTable, p *synthPartition, ts int32) *SynthStep {
	f, data := s.file(p.loc + "/000000_0_copy_" + strconv.Itoa(len(p.files)))
	before := p.stats()
	p.files = append(p.files, f)
	p.size += f.Size
	after := p.stats()
	tb := t.obj
	st := &SynthStep{Kind: StepLoad, DB: t.DB(), Table: t, Files: []File{f}, Data: [][]byte{data}, Types: []string{"ALTER_PARTITION", "INSERT"}}
	st.rows = func(ts int64) []LogRow {
		b := s.tpl.Partition(tb, p.values, p.loc, p.ts, before)
		a := s.tpl.Partition(tb, p.values, p.loc, p.ts, after)
		return []LogRow{AlterPartitionRow(tb, b, a, ts), InsertRow(tb, a, st.Files, st.checksums, s.spec.CMRoot, ts)}
	}
	return st
}

// analyze updates the row count of partition p: an ALTER_PARTITION of its
// parameters alone.
func (s *Synth) analyze(t *SynthTable, p *synthPartition, ts int32) *SynthStep {
	before := p.stats()
	p.analyzed++
	p.params["numRows"] = strconv.Itoa(p.analyzed * s.spec.Rows)
	after := p.stats()
	tb := t.obj
	return &SynthStep{Kind: StepAnalyze, DB: t.DB(), Table: t, Types: []string{"ALTER_PARTITION"},
		rows: func(ts int64) []LogRow {
			b := s.tpl.Partition(tb, p.values, p.loc, p.ts, before)
			a := s.tpl.Partition(tb, p.values, p.loc, p.ts, after)
			return []LogRow{AlterPartitionRow(tb, b, a, ts)}
		}}
}

// stats are the partition's parameters as the metastore logs them: the
// basic statistics of its files (numFiles, totalSize) and any others set.
func (p *synthPartition) stats() map[string]string {
	m := map[string]string{"numFiles": strconv.Itoa(len(p.files)), "totalSize": strconv.FormatInt(p.size, 10), "numFilesErasureCoded": "0"}
	for k, v := range p.params {
		m[k] = v
	}
	return m
}

// file returns a new data file at loc with its bytes: Rows text rows of
// the template's columns, unique to the location.
func (s *Synth) file(loc string) (File, []byte) {
	var b strings.Builder
	h := crc32.ChecksumIEEE([]byte(loc))
	for i := 0; i < s.spec.Rows; i++ {
		fmt.Fprintf(&b, "%d,%d.%02d,%08x-%d\n", i, (int(h)+i*7919)%100000, i%100, h, i)
	}
	data := []byte(b.String())
	return File{Location: loc, Size: int64(len(data)), CRC32C: crc32.Checksum(data, castagnoli)}, data
}

// Stage writes the data files of steps through put, writers at once, and
// reads the checksum of each file a load or reinsert logs (when the spec
// has a CM root) through sums. A step's Data is released once written.
func (s *Synth) Stage(ctx context.Context, steps []*SynthStep, put PutFunc, sums Checksummer, writers int) error {
	type job struct {
		st *SynthStep
		i  int
	}
	jobs := make(chan job)
	var (
		wg       sync.WaitGroup
		mu       sync.Mutex
		firstErr error
	)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	for w := 0; w < max(1, writers); w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range jobs {
				f := j.st.Files[j.i]
				var err error
				if j.st.Data != nil {
					err = put(ctx, f.Location, j.st.Data[j.i])
				}
				if err == nil && (j.st.Kind == StepLoad || j.st.Kind == StepReinsert) && s.spec.CMRoot != "" {
					var sum string
					var ok bool
					sum, ok, err = sums.FileChecksum(ctx, f.Location)
					if err == nil && !ok {
						err = errors.New("the store gives no checksum")
					}
					j.st.checksums[j.i] = sum
				}
				if err != nil {
					mu.Lock()
					if firstErr == nil {
						firstErr = fmt.Errorf("stage %s: %w", f.Location, err)
					}
					mu.Unlock()
					cancel()
				}
			}
		}()
	}
feed:
	for _, st := range steps {
		st.checksums = make([]string, len(st.Files))
		for i := range st.Files {
			select {
			case jobs <- job{st, i}:
			case <-ctx.Done():
				break feed
			}
		}
	}
	close(jobs)
	wg.Wait()
	if firstErr != nil {
		return firstErr
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	for _, st := range steps {
		st.Data = nil
	}
	return nil
}

// Snapshot returns the warehouse as the events of every step planned so
// far describe it: what the replica must hold once they are applied.
func (s *Synth) Snapshot() *Snapshot {
	snap := &Snapshot{Databases: map[string]*Database{}}
	for _, d := range s.dbs {
		snap.Databases[d.Name] = &Database{Name: d.Name, Location: d.LocationUri, Parameters: d.Parameters, Tables: map[string]*Table{}}
	}
	for _, t := range s.tables {
		tb := t.obj
		st := &Table{Database: tb.DbName, Name: tb.TableName, Type: tb.TableType, Location: tb.Sd.Location,
			Columns: verify.Columns(tb.Sd.Cols), PartitionKeys: verify.Columns(tb.PartitionKeys),
			InputFormat: tb.Sd.InputFormat, OutputFormat: tb.Sd.OutputFormat, SerDe: tb.Sd.SerdeInfo.SerializationLib,
			Parameters: tb.Parameters, Partitions: map[string]*Partition{}}
		for _, p := range t.parts {
			sp := &Partition{Values: p.values, Location: p.loc, Columns: verify.Columns(tb.Sd.Cols), Files: map[string]FileSum{},
				Parameters: s.tpl.Partition(tb, p.values, p.loc, p.ts, p.stats()).Parameters}
			for _, f := range p.files {
				sp.Files[strings.TrimPrefix(f.Location, p.loc+"/")] = FileSum{Size: f.Size, CRC32C: f.CRC32C}
			}
			st.Partitions[Key(p.values)] = sp
		}
		snap.Databases[tb.DbName].Tables[tb.TableName] = st
	}
	return snap
}
