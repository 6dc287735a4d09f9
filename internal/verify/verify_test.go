package verify

import (
	"context"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/beltran/gohive/hive_metastore"

	"github.com/hivedr/hivedr/internal/acid"
	"github.com/hivedr/hivedr/internal/fs"
	"github.com/hivedr/hivedr/internal/hms"
	"github.com/hivedr/hivedr/schemas"
)

func TestMerge(t *testing.T) {
	var got []string
	merge([]string{"a", "c", "d"}, []string{"b", "c", "e"}, func(n string, inA, inB bool) bool {
		got = append(got, fmt.Sprintf("%s:%v%v", n, inA, inB))
		return true
	})
	want := []string{"a:truefalse", "b:falsetrue", "c:truetrue", "d:truefalse", "e:falsetrue"}
	if !slices.Equal(got, want) {
		t.Errorf("merge = %v, want %v", got, want)
	}
	n := 0
	merge([]string{"a", "b"}, nil, func(string, bool, bool) bool { n++; return false })
	if n != 1 {
		t.Errorf("merge went on after fn returned false: %d calls", n)
	}
}

func TestPartitionValues(t *testing.T) {
	for name, want := range map[string][]string{
		"dt=2026-12-01":           {"2026-12-01"},
		"dt=2026-12-01/hr=07":     {"2026-12-01", "07"},
		"p=a%2Fb%3Dc":             {"a/b=c"},
		"p=100%25":                {"100%"},
		"p=__HIVE_DEFAULT_PART__": {"__HIVE_DEFAULT_PART__"},
	} {
		if got := partitionValues(name); !slices.Equal(got, want) {
			t.Errorf("partitionValues(%q) = %q, want %q", name, got, want)
		}
	}
}

func TestIgnoredParameter(t *testing.T) {
	for k, want := range map[string]bool{
		"repl.last.id": true, "repl.target.for": true, "hivedr.halted": true, "hivedr.skipped.12": true,
		"transient_lastDdlTime": true, "numFiles": true, "totalSize": true, "COLUMN_STATS_ACCURATE": true,
		"EXTERNAL": false, "comment": false, "owner_team": false, "replication": false,
	} {
		if got := IgnoredParameter(k); got != want {
			t.Errorf("IgnoredParameter(%q) = %v, want %v", k, got, want)
		}
	}
}

// TestPendingCovers: which differences pending events explain.
func TestPendingCovers(t *testing.T) {
	tbl := func(name string) *schemas.Table { return &schemas.Table{Database: "db", Name: name} }
	cases := []struct {
		name   string
		events []*schemas.Event
		covers map[string]bool // table ("" the database) -> in flight
	}{
		{"nothing pending", nil, map[string]bool{"": false, "t": false}},
		{"an alter of one table", []*schemas.Event{{EventType: schemas.EventAlterTable,
			Payload: &schemas.TableChange{Before: tbl("t"), After: tbl("t")}}},
			map[string]bool{"": true, "t": true, "u": false}},
		{"a rename: both names", []*schemas.Event{{EventType: schemas.EventAlterTable,
			Payload: &schemas.TableChange{Before: tbl("old"), After: tbl("new")}}},
			map[string]bool{"old": true, "new": true, "u": false}},
		{"a partition of one table", []*schemas.Event{{EventType: schemas.EventAddPartition, Database: "db", Table: "t",
			Payload: &schemas.PartitionChange{Table: tbl("t"), After: []schemas.Partition{{Values: []string{"1"}}}}}},
			map[string]bool{"t": true, "u": false}},
		{"an alter of the database: every table", []*schemas.Event{{EventType: schemas.EventAlterDatabase}},
			map[string]bool{"": true, "t": true, "u": true}},
		{"a bootstrap record: every table", []*schemas.Event{{EventType: schemas.EventSnapshotTable,
			Snapshot: &schemas.SnapshotInfo{}, Payload: &schemas.TableChange{After: tbl("t")}}},
			map[string]bool{"t": true, "u": true}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := &pending{tables: map[string]string{}}
			for _, ev := range c.events {
				p.add("db", ev, "pending")
			}
			for table, want := range c.covers {
				if got := p.covers(table) != ""; got != want {
					t.Errorf("covers(%q) = %v, want %v", table, got, want)
				}
			}
		})
	}
}

// fakeMS is a metastore of databases, tables and partitions in memory.
type fakeMS struct {
	dbs    map[string]*hive_metastore.Database
	tables map[string]*hive_metastore.Table       // db.table
	parts  map[string][]*hive_metastore.Partition // db.table
	calls  map[string]int
	maxReq int // the most partitions asked in one call
	// maxOut is the most partitions or names one call returned: what a
	// reader of the answers holds at a time.
	maxOut int
	// unordered answers filters out of name order (a metastore whose
	// order verify cannot rely on).
	unordered bool
	t         *testing.T // fails on a filter the fake cannot parse
	// writeIDs are the transactional tables' states, by db.table.
	writeIDs map[string]acid.WriteIDs
}

func newFakeMS() *fakeMS {
	return &fakeMS{dbs: map[string]*hive_metastore.Database{}, tables: map[string]*hive_metastore.Table{},
		parts: map[string][]*hive_metastore.Partition{}, calls: map[string]int{}, writeIDs: map[string]acid.WriteIDs{}}
}

func notFound() error { return &hive_metastore.NoSuchObjectException{Message: "no such object"} }

func (m *fakeMS) GetOpenTxns(context.Context) (*hive_metastore.GetOpenTxnsResponse, error) {
	return &hive_metastore.GetOpenTxnsResponse{TxnHighWaterMark: 100}, nil
}

// GetValidWriteIds answers from writeIDs.
func (m *fakeMS) GetValidWriteIds(_ context.Context, req *hive_metastore.GetValidWriteIdsRequest) (*hive_metastore.GetValidWriteIdsResponse, error) {
	res := &hive_metastore.GetValidWriteIdsResponse{}
	for _, n := range req.FullTableNames {
		w, ok := m.writeIDs[n]
		if !ok {
			return nil, &hive_metastore.MetaException{Message: "no write ids of " + n}
		}
		t := &hive_metastore.TableValidWriteIds{FullTableName: n, WriteIdHighWaterMark: w.HighWaterMark}
		ids := append(slices.Clone(w.Open), w.Aborted...)
		slices.Sort(ids)
		t.AbortedBits = make([]byte, (len(ids)+7)/8)
		for i, id := range ids {
			t.InvalidWriteIds = append(t.InvalidWriteIds, id)
			if slices.Contains(w.Aborted, id) {
				t.AbortedBits[i/8] |= 1 << (i % 8)
			}
		}
		res.TblValidWriteIds = append(res.TblValidWriteIds, t)
	}
	return res, nil
}

func (m *fakeMS) GetAllDatabases(context.Context) ([]string, error) {
	var out []string
	for n := range m.dbs {
		out = append(out, n)
	}
	return out, nil
}

func (m *fakeMS) GetDatabase(_ context.Context, name string) (*hive_metastore.Database, error) {
	if d, ok := m.dbs[name]; ok {
		return d, nil
	}
	return nil, notFound()
}

func (m *fakeMS) GetAllTables(_ context.Context, db string) ([]string, error) {
	var out []string
	for k := range m.tables {
		if d, t, _ := strings.Cut(k, "."); d == db {
			out = append(out, t)
		}
	}
	return out, nil
}

func (m *fakeMS) GetTableReq(_ context.Context, req *hive_metastore.GetTableRequest) (*hive_metastore.GetTableResult_, error) {
	if t, ok := m.tables[req.DbName+"."+req.TblName]; ok {
		return &hive_metastore.GetTableResult_{Table: t}, nil
	}
	return nil, notFound()
}

func (m *fakeMS) name(db, table string, p *hive_metastore.Partition) string {
	return hms.PartitionName(m.tables[db+"."+table].PartitionKeys, p.Values)
}

func (m *fakeMS) GetPartitionNames(_ context.Context, db, table string, _ int16) ([]string, error) {
	m.calls["get_partition_names"]++
	var out []string
	for _, p := range m.parts[db+"."+table] {
		out = append(out, m.name(db, table, p))
	}
	m.maxOut = max(m.maxOut, len(out))
	return out, nil
}

func (m *fakeMS) GetPartitionsByNamesReq(_ context.Context, req *hive_metastore.GetPartitionsByNamesRequest) (*hive_metastore.GetPartitionsByNamesResult_, error) {
	m.calls["get_partitions_by_names"]++
	m.maxReq = max(m.maxReq, len(req.Names))
	res := &hive_metastore.GetPartitionsByNamesResult_{}
	names := map[string]bool{}
	for _, n := range req.Names {
		names[n] = true
	}
	for _, p := range m.parts[req.DbName+"."+req.TblName] {
		if names[m.name(req.DbName, req.TblName, p)] {
			res.Partitions = append(res.Partitions, p)
		}
	}
	m.maxOut = max(m.maxOut, len(res.Partitions))
	return res, nil
}

// filterTerm is one "key op literal" of the filters keysetFilter writes.
var filterTerm = regexp.MustCompile(`^(\w+) (=|>) (?:"([^"]*)"|'([^']*)')$`)

// term is one "key op literal" of a filter.
type term struct{ key, op, lit string }

// parseFilter parses a filter keysetFilter writes: terms joined by
// " and " in parentheses, joined by " or " ("" matches all).
func parseFilter(t *testing.T, filter string) [][]term {
	if filter == "" {
		return [][]term{nil}
	}
	var out [][]term
	for _, or := range strings.Split(filter, " or ") {
		var and []term
		for _, s := range strings.Split(strings.Trim(or, "()"), " and ") {
			m := filterTerm.FindStringSubmatch(s)
			if m == nil {
				t.Fatalf("filter %q: term %q", filter, s)
			}
			and = append(and, term{m[1], m[2], m[3] + m[4]})
		}
		out = append(out, and)
	}
	return out
}

// matches evaluates a parsed filter on a partition of a table with keys,
// as the metastore would (string comparisons).
func matches(f [][]term, keys []*hive_metastore.FieldSchema, vals []string) bool {
	for _, and := range f {
		all := true
		for _, x := range and {
			i := slices.IndexFunc(keys, func(k *hive_metastore.FieldSchema) bool { return k.Name == x.key })
			if (x.op == "=" && vals[i] != x.lit) || (x.op == ">" && vals[i] <= x.lit) {
				all = false
				break
			}
		}
		if all {
			return true
		}
	}
	return false
}

func (m *fakeMS) filtered(db, table, filter string) []*hive_metastore.Partition {
	keys := m.tables[db+"."+table].PartitionKeys
	for _, k := range keys {
		if k.Type != "string" {
			return nil // the metastore refuses filters on other types
		}
	}
	f := parseFilter(m.t, filter)
	var out []*hive_metastore.Partition
	for _, p := range m.parts[db+"."+table] {
		if matches(f, keys, p.Values) {
			out = append(out, p)
		}
	}
	slices.SortFunc(out, func(a, b *hive_metastore.Partition) int {
		return strings.Compare(m.name(db, table, a), m.name(db, table, b))
	})
	if m.unordered && len(out) > 1 {
		out[0], out[1] = out[1], out[0]
	}
	return out
}

func (m *fakeMS) GetPartitionsByFilter(_ context.Context, db, table, filter string, limit int16) ([]*hive_metastore.Partition, error) {
	m.calls["get_partitions_by_filter"]++
	for _, k := range m.tables[db+"."+table].PartitionKeys {
		if k.Type != "string" {
			return nil, &hive_metastore.MetaException{Message: "Filtering is supported only on partition keys of type string"}
		}
	}
	out := m.filtered(db, table, filter)
	if limit >= 0 && len(out) > int(limit) {
		out = out[:limit]
	}
	m.maxOut = max(m.maxOut, len(out))
	return out, nil
}

func (m *fakeMS) GetNumPartitionsByFilter(_ context.Context, db, table, filter string) (int32, error) {
	return int32(len(m.filtered(db, table, filter))), nil
}

// fakeFiles is a store of files by location with their CRC32C.
type fakeFiles map[string]struct {
	size int64
	crc  uint32
}

func (f fakeFiles) Walk(_ context.Context, dir string, fn func(string, int64) error) error {
	return walkMap(f, dir, func(x struct {
		size int64
		crc  uint32
	}) int64 {
		return x.size
	}, fn)
}

// walkMap is Files.Walk over a map of files by location, in name order.
func walkMap[V any](m map[string]V, dir string, size func(V) int64, fn func(string, int64) error) error {
	found := false
	for _, loc := range slices.Sorted(maps.Keys(m)) {
		if strings.HasPrefix(loc, dir+"/") {
			found = true
			if err := fn(loc, size(m[loc])); err != nil {
				return err
			}
		}
	}
	if !found {
		return fmt.Errorf("walk %s: %w", dir, fs.ErrNotExist)
	}
	return nil
}

func (f fakeFiles) CRC32C(_ context.Context, loc string) (uint32, string, error) {
	x, ok := f[loc]
	if !ok {
		return 0, "", fmt.Errorf("%s: %w", loc, fs.ErrNotExist)
	}
	return x.crc, "fake", nil
}

// ReadFile: fakeFiles hold no bytes (no Iceberg table's metadata).
func (f fakeFiles) ReadFile(_ context.Context, loc string, _ int64) ([]byte, error) {
	return nil, fmt.Errorf("%s: %w", loc, fs.ErrNotExist)
}

// site builds one side: database db with a partitioned table of n
// partitions (one file each) and a flat table of one file, under root.
func site(root string, n int) (*fakeMS, fakeFiles) {
	ms, files := newFakeMS(), fakeFiles{}
	ms.dbs["db"] = &hive_metastore.Database{Name: "db", LocationUri: root + "/db.db", Parameters: map[string]string{}}
	cols := []*hive_metastore.FieldSchema{{Name: "id", Type: "bigint"}}
	sd := func(loc string) *hive_metastore.StorageDescriptor {
		return &hive_metastore.StorageDescriptor{Cols: cols, Location: loc, SerdeInfo: &hive_metastore.SerDeInfo{}}
	}
	ms.tables["db.p"] = &hive_metastore.Table{TableName: "p", DbName: "db", Sd: sd(root + "/db.db/p"),
		PartitionKeys: []*hive_metastore.FieldSchema{{Name: "dt", Type: "string"}}, Parameters: map[string]string{"k": "v"}}
	ms.tables["db.f"] = &hive_metastore.Table{TableName: "f", DbName: "db", Sd: sd(root + "/db.db/f"), Parameters: map[string]string{}}
	files[root+"/db.db/f/000000_0"] = struct {
		size int64
		crc  uint32
	}{10, 1}
	for i := range n {
		v := fmt.Sprintf("%05d", i)
		loc := root + "/db.db/p/dt=" + v
		ms.parts["db.p"] = append(ms.parts["db.p"], &hive_metastore.Partition{Values: []string{v}, Sd: sd(loc), Parameters: map[string]string{}})
		files[loc+"/000000_0"] = struct {
			size int64
			crc  uint32
		}{int64(100 + i), uint32(i)}
	}
	return ms, files
}

func runFake(t *testing.T, src, dr *fakeMS, sf, df Files, opts Options, log Log, more ...func(*Config)) (Summary, []Finding) {
	t.Helper()
	src.t, dr.t = t, t
	var got []Finding
	cfg := Config{Source: src, DR: dr, SourceFiles: sf, DRFiles: df,
		MapLocation: func(s string) (string, error) { return strings.Replace(s, "hdfs://src", "hdfs://dr", 1), nil },
		Replicated:  func(db, table string) bool { return !strings.HasPrefix(table, "tmp_") },
		Target:      "hivedr:primary", Log: log}
	for _, m := range more {
		m(&cfg)
	}
	sum, err := Run(context.Background(), cfg, opts, func(f Finding) { got = append(got, f) })
	if err != nil {
		t.Fatal(err)
	}
	return sum, got
}

// TestRunFake: a replica equal to its source is clean; each kind of
// difference is found, named and classed; partitions are read in pages.
func TestRunFake(t *testing.T) {
	src, sf := site("hdfs://src", 300)
	dr, df := site("hdfs://dr", 300)
	sum, got := runFake(t, src, dr, sf, df, Options{Sample: 1, PageSize: 100}, nil)
	if len(got) != 0 || sum.Partitions != 300 || sum.Files != 301 || sum.Sampled != 301 || sum.Tables != 2 {
		t.Fatalf("equal sites: %d findings %v, summary %+v", len(got), got, sum)
	}
	if dr.maxReq > 100 {
		t.Errorf("asked %d partitions in one call, want pages of at most 100", dr.maxReq)
	}

	dr.parts["db.p"] = slices.Delete(dr.parts["db.p"], 7, 8)                             // a partition missing
	dr.tables["db.f"].Sd.Cols = []*hive_metastore.FieldSchema{{Name: "id", Type: "int"}} // a column changed
	dr.tables["db.p"].Parameters["k"] = "w"                                              // a parameter changed
	dr.tables["db.p"].Parameters["repl.last.id"] = "99"                                  // bookkeeping: ignored
	delete(df, "hdfs://dr/db.db/p/dt=00003/000000_0")                                    // a file missing
	x := df["hdfs://dr/db.db/p/dt=00004/000000_0"]
	x.crc++ // same length, other bytes
	df["hdfs://dr/db.db/p/dt=00004/000000_0"] = x
	src.tables["db.tmp_x"] = &hive_metastore.Table{TableName: "tmp_x", DbName: "db"} // out of scope: ignored
	sum, got = runFake(t, src, dr, sf, df, Options{Sample: 1, PageSize: 100}, nil)
	lines := divergedLines(t, got)
	want := []string{
		"db.f: column id: type bigint on source, int on DR",
		`db.p: parameter k: "v" on source, "w" on DR`,
		"db.p partition dt=00003 file 000000_0: missing on DR",
		"db.p partition dt=00004 file 000000_0: CRC32C 00000004 on source (fake), 00000005 on DR (fake), same length 104",
		"db.p partition dt=00007: missing on DR",
	}
	if !slices.Equal(lines, want) {
		t.Errorf("findings:\n%s\nwant:\n%s", strings.Join(lines, "\n"), strings.Join(want, "\n"))
	}
	if sum.Diverged != len(want) || sum.Clean() {
		t.Errorf("summary %+v: want %d diverged", sum, len(want))
	}

	// Unsampled, the corrupted file goes unseen: same name and length.
	_, got = runFake(t, src, dr, sf, df, Options{Sample: 0, Tables: nil, Databases: []string{"d?"}}, nil)
	for _, f := range got {
		if strings.Contains(f.Detail, "CRC32C") {
			t.Errorf("checksum compared with -sample 0: %v", f)
		}
	}
	// A pending event on p: its findings are in flight, f's are not.
	log := &fakeLog{events: []*schemas.Event{{EventType: schemas.EventAddPartition, Database: "db", Table: "p",
		Payload: &schemas.PartitionChange{Table: &schemas.Table{Database: "db", Name: "p"}}}}}
	sum, got = runFake(t, src, dr, sf, df, Options{Sample: 1}, log)
	for _, f := range got {
		if want := map[string]Class{"p": InFlight, "f": Diverged}[f.Table]; f.Class != want {
			t.Errorf("%v: class %s, want %s", f, f.Class, want)
		}
	}
	if sum.InFlight != 4 || sum.Diverged != 1 || sum.PendingEvents != 1 {
		t.Errorf("summary %+v: want 4 in flight, 1 diverged, 1 pending event", sum)
	}
}

// divergedLines are findings as "object: detail", each checked to be
// diverged (no log says otherwise).
func divergedLines(t *testing.T, got []Finding) []string {
	t.Helper()
	var lines []string
	for _, f := range got {
		if f.Class != Diverged {
			t.Errorf("%v: class %s with no log", f, f.Class)
		}
		lines = append(lines, f.Object+": "+f.Detail)
	}
	return lines
}

type fakeLog struct{ events []*schemas.Event }

func (l *fakeLog) Committed(context.Context, string) (int64, int64, bool, error) {
	return 0, int64(len(l.events)), true, nil
}

func (l *fakeLog) Events(_ context.Context, _ string, from, end int64, fn func(*schemas.Event)) error {
	for _, ev := range l.events[from:end] {
		fn(ev)
	}
	return nil
}

// bigSite is one side: database db with table p of n partitions (no
// data files), partition keys keys.
func bigSite(root string, n int, keys []*hive_metastore.FieldSchema) *fakeMS {
	ms := newFakeMS()
	ms.dbs["db"] = &hive_metastore.Database{Name: "db", LocationUri: root + "/db.db", Parameters: map[string]string{}}
	sd := func(loc string) *hive_metastore.StorageDescriptor {
		return &hive_metastore.StorageDescriptor{Cols: []*hive_metastore.FieldSchema{{Name: "id", Type: "bigint"}}, Location: loc, SerdeInfo: &hive_metastore.SerDeInfo{}}
	}
	ms.tables["db.p"] = &hive_metastore.Table{TableName: "p", DbName: "db", Sd: sd(root + "/db.db/p"), PartitionKeys: keys, Parameters: map[string]string{}}
	for i := range n {
		vals := []string{fmt.Sprintf("%05d", i)}
		if len(keys) == 2 {
			vals = []string{fmt.Sprintf("2026-%02d", i/100), fmt.Sprintf("%02d", i%100)}
		}
		ms.parts["db.p"] = append(ms.parts["db.p"], &hive_metastore.Partition{Values: vals, Sd: sd(root + "/db.db/p/" + strings.Join(vals, "_")), Parameters: map[string]string{}})
	}
	return ms
}

// TestRunPagesPartitions: a table of 2,000 partitions on string keys is
// read a page at a time on both sides (no metastore answer holds more
// than a page: what verify holds of a table does not grow with its
// partitions), finds a partition missing on DR and one only on DR, and
// reports progress within the table. When the pages cannot be trusted (a
// key that is not a string, an order that does not hold, a value no
// filter can quote) it lists the names in full and finds the same.
func TestRunPagesPartitions(t *testing.T) {
	str := []*hive_metastore.FieldSchema{{Name: "dt", Type: "string"}}
	two := []*hive_metastore.FieldSchema{{Name: "month", Type: "string"}, {Name: "day", Type: "string"}}
	num := []*hive_metastore.FieldSchema{{Name: "dt", Type: "int"}}
	const n, page = 2000, 50
	for _, c := range []struct {
		name      string
		keys      []*hive_metastore.FieldSchema
		unordered bool
		quote     string // a value written into the source's last partition
		paged     bool
	}{
		{name: "one string key", keys: str, paged: true},
		{name: "two string keys", keys: two, paged: true},
		{name: "quotes in a value", keys: str, quote: `x"y`, paged: true},
		{name: "an int key: listed", keys: num},
		{name: "out of name order: listed", keys: str, unordered: true},
		{name: "a backslash in a value: listed", keys: str, quote: `x\y`},
	} {
		t.Run(c.name, func(t *testing.T) {
			src, dr := bigSite("hdfs://src", n, c.keys), bigSite("hdfs://dr", n, c.keys)
			src.unordered, dr.unordered = c.unordered, c.unordered
			if c.quote != "" {
				for _, ms := range []*fakeMS{src, dr} {
					p := ms.parts["db.p"][n/2]
					p.Values[0] = c.quote
				}
			}
			missing := dr.parts["db.p"][7]
			dr.parts["db.p"] = slices.Delete(dr.parts["db.p"], 7, 8)
			extra := *dr.parts["db.p"][0]
			extra.Values = slices.Clone(extra.Values)
			extra.Values[0] = "99999"
			dr.parts["db.p"] = append(dr.parts["db.p"], &extra)
			progress := 0
			sum, got := runFake(t, src, dr, fakeFiles{}, fakeFiles{}, Options{PageSize: page, Progress: func(p Progress) {
				if p.Table == "p" {
					progress++
				}
			}}, nil)
			var lines []string
			for _, f := range got {
				lines = append(lines, f.Object+": "+f.Detail)
			}
			want := []string{
				"db.p partition " + src.name("db", "p", missing) + ": missing on DR",
				"db.p partition " + dr.name("db", "p", &extra) + ": only on DR",
			}
			slices.Sort(want)
			if !slices.Equal(lines, want) || sum.Partitions != n+1 {
				t.Fatalf("%d partitions, findings:\n%s\nwant:\n%s", sum.Partitions, strings.Join(lines, "\n"), strings.Join(want, "\n"))
			}
			if c.paged {
				if sum.ListedInFull != 0 || src.maxOut > page || dr.maxOut > page || src.calls["get_partition_names"]+dr.calls["get_partition_names"] != 0 {
					t.Errorf("paged: %d listed in full, answers of up to %d and %d partitions, %d+%d full listings; want pages of %d",
						sum.ListedInFull, src.maxOut, dr.maxOut, src.calls["get_partition_names"], dr.calls["get_partition_names"], page)
				}
				if progress < n/page {
					t.Errorf("%d progress reports within the table, want one a page (%d)", progress, n/page)
				}
			} else if sum.ListedInFull != 1 || src.maxOut < n {
				t.Errorf("listed: %d listed in full, largest answer %d; want 1 and the whole list (%d)", sum.ListedInFull, src.maxOut, n)
			}
			t.Logf("largest metastore answer: %d (source), %d (DR); %d progress reports", src.maxOut, dr.maxOut, progress)
		})
	}
}

// TestPendingStreams: 200,000 pending events of three tables are read as
// a stream; what verify keeps of them is a count and the three tables.
func TestPendingStreams(t *testing.T) {
	log := &fakeLog{}
	for i := range 200_000 {
		tbl := []string{"a", "b", "c"}[i%3]
		log.events = append(log.events, &schemas.Event{EventType: schemas.EventAlterTable,
			Payload: &schemas.TableChange{Before: &schemas.Table{Database: "db", Name: tbl}, After: &schemas.Table{Database: "db", Name: tbl}}})
	}
	p, err := newPending(context.Background(), log, nil, "db")
	if err != nil {
		t.Fatal(err)
	}
	if p.events != 200_000 || len(p.tables) != 3 || p.database != "" {
		t.Fatalf("pending: %d events, tables %v, database %v", p.events, p.tables, p.database)
	}
}

// acidSite is one side: database db with transactional table t, its
// write-ID state w and a file in each of the directories.
func acidSite(root string, w acid.WriteIDs, dirs ...string) (*fakeMS, fakeFiles) {
	ms, files := newFakeMS(), fakeFiles{}
	ms.dbs["db"] = &hive_metastore.Database{Name: "db", LocationUri: root + "/db.db", Parameters: map[string]string{}}
	ms.tables["db.t"] = &hive_metastore.Table{TableName: "t", DbName: "db", Parameters: map[string]string{"transactional": "true"},
		Sd: &hive_metastore.StorageDescriptor{Cols: []*hive_metastore.FieldSchema{{Name: "id", Type: "bigint"}}, Location: root + "/db.db/t",
			SerdeInfo: &hive_metastore.SerDeInfo{}}}
	ms.writeIDs["db.t"] = w
	for i, d := range dirs {
		files[root+"/db.db/t/"+d+"/bucket_00000"] = struct {
			size int64
			crc  uint32
		}{int64(10 + i), uint32(i)}
	}
	return ms, files
}

// TestRunTransactional: a transactional table compares by write-ID state
// and the files a reader sees (the source's aborted and open deltas, and
// a delta its base made obsolete, are not differences); a difference in
// either is diverged, and in flight while a transaction event is pending.
func TestRunTransactional(t *testing.T) {
	w := acid.WriteIDs{HighWaterMark: 5, Open: []int64{3}, Aborted: []int64{2}}
	srcDirs := []string{"delta_0000001_0000001_0000", "delta_0000002_0000002_0000", "delta_0000003_0000003_0000",
		"delta_0000004_0000004_0000", "delta_0000005_0000005_0000"}
	src, sf := acidSite("hdfs://src", w, srcDirs...)
	dr, df := acidSite("hdfs://dr", w, "delta_0000001_0000001_0000", "delta_0000004_0000004_0000", "delta_0000005_0000005_0000")
	for rel := range df { // the same bytes as the source's
		df[rel] = sf[strings.Replace(rel, "hdfs://dr", "hdfs://src", 1)]
	}
	sum, got := runFake(t, src, dr, sf, df, Options{Sample: 1}, nil)
	if len(got) != 0 || sum.Files != 3 {
		t.Fatalf("equal states and visible files: %d files, findings %v", sum.Files, got)
	}

	dr.writeIDs["db.t"] = acid.WriteIDs{HighWaterMark: 4, Aborted: []int64{2, 3}}
	delete(df, "hdfs://dr/db.db/t/delta_0000001_0000001_0000/bucket_00000")
	_, got = runFake(t, src, dr, sf, df, Options{Sample: 1}, nil)
	lines := divergedLines(t, got)
	want := []string{
		"db.t: open write IDs [3] on source, [] on DR",
		"db.t: write-ID high-water mark 5 on source, 4 on DR",
		"db.t file delta_0000001_0000001_0000/bucket_00000: missing on DR",
		"db.t file delta_0000005_0000005_0000/bucket_00000: missing on DR",
	}
	slices.Sort(lines)
	slices.Sort(want)
	if !slices.Equal(lines, want) {
		t.Errorf("findings:\n%s\nwant:\n%s", strings.Join(lines, "\n"), strings.Join(want, "\n"))
	}
	// A commit pending on the database's topic names no table of it (it
	// only allocated there): the differences are in flight.
	log := &fakeLog{events: []*schemas.Event{{EventType: schemas.EventCommitTxn, Payload: &schemas.Transaction{TxnIDs: []int64{9}}}}}
	sum, _ = runFake(t, src, dr, sf, df, Options{Sample: 1}, log)
	if sum.InFlight != len(want) || sum.Diverged != 0 {
		t.Errorf("with a commit pending: %+v, want %d in flight", sum, len(want))
	}
}

// TestRunFindingsPaged: a DR table that misses every partition of its
// source's 10,000 (and one that misses every third) gives a finding per
// partition, sent a page at a time as they are made: no more than a page
// of them is ever held, the first goes out before the source's second
// page is read, and they come out in name order, each once. That holds
// when the pages are trusted, when the table is listed in full (a key
// that is not a string), and when the pages fail half-way (a value no
// filter can quote) and the lists compare what the pages did not.
func TestRunFindingsPaged(t *testing.T) {
	str := []*hive_metastore.FieldSchema{{Name: "dt", Type: "string"}}
	num := []*hive_metastore.FieldSchema{{Name: "dt", Type: "int"}}
	const n, page = 10_000, 100
	for _, c := range []struct {
		name  string
		keys  []*hive_metastore.FieldSchema
		every int    // DR keeps no partition i with i%every == 0
		quote string // the value of partition 5099 on both sides (the last of a page)
		full  int    // tables listed in full
	}{
		{name: "paged, all missing", keys: str, every: 1},
		{name: "paged, every third missing", keys: str, every: 3},
		{name: "listed in full, all missing", keys: num, every: 1, full: 1},
		{name: "pages fail half-way, every third missing", keys: str, every: 3, quote: `05099\x`, full: 1},
	} {
		t.Run(c.name, func(t *testing.T) {
			src, dr := bigSite("hdfs://src", n, c.keys), bigSite("hdfs://dr", n, c.keys)
			src.t, dr.t = t, t
			if c.quote != "" {
				src.parts["db.p"][5099].Values[0] = c.quote
				dr.parts["db.p"][5099].Values[0] = c.quote
			}
			var want []string
			var kept []*hive_metastore.Partition
			for i, p := range dr.parts["db.p"] {
				if i%c.every == 0 {
					want = append(want, "db.p partition "+src.name("db", "p", p))
					continue
				}
				kept = append(kept, p)
			}
			dr.parts["db.p"] = kept
			slices.Sort(want)
			var got []string
			readsAtFirst := -1
			reads := func() int { return src.calls["get_partitions_by_filter"] + src.calls["get_partitions_by_names"] }
			cfg := Config{Source: src, DR: dr, SourceFiles: fakeFiles{}, DRFiles: fakeFiles{},
				MapLocation: func(s string) (string, error) { return strings.Replace(s, "hdfs://src", "hdfs://dr", 1), nil },
				Replicated:  func(string, string) bool { return true }, Target: "hivedr:primary"}
			r := newRun(cfg, Options{PageSize: page}, func(f Finding) {
				if readsAtFirst < 0 {
					readsAtFirst = reads()
				}
				if f.Detail != "missing on DR" {
					t.Errorf("finding %v", f)
				}
				got = append(got, f.Object)
			})
			if err := r.all(context.Background()); err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(got, want) {
				t.Fatalf("%d findings (first %v), want %d in name order, each once (first %v)", len(got), got[:min(3, len(got))], len(want), want[:3])
			}
			if r.held > page {
				t.Errorf("held %d findings at once, want at most a page (%d)", r.held, page)
			}
			if reads() > 0 && (readsAtFirst < 0 || readsAtFirst >= reads()/2) {
				t.Errorf("the first finding went out after %d of %d partition reads: not as the pages were read", readsAtFirst, reads())
			}
			if r.sum.ListedInFull != c.full || r.sum.Partitions != n || r.sum.Diverged != len(want) {
				t.Errorf("summary %+v: want %d listed in full, %d partitions, %d diverged", r.sum, c.full, n, len(want))
			}
			t.Logf("%d findings, at most %d held; first sent after %d of %d partition reads", len(got), r.held, readsAtFirst, reads())
		})
	}
}
