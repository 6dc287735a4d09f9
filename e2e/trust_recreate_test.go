package e2e

import (
	"errors"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/beltran/gohive/hive_metastore"

	wl "github.com/hivedr/hivedr/e2e/workload"
	"github.com/hivedr/hivedr/internal/fs"
	"github.com/hivedr/hivedr/internal/hms"
	"github.com/hivedr/hivedr/internal/location"
)

// TestTrustRecreateSamePath recreates objects at the path an earlier
// object of the same name used, after the earlier one's files were on DR:
//
//   - an external partition with three files, dropped, its files removed
//     on the source, and added again with one file;
//   - an external table with three files, dropped, its files removed,
//     created again at the same location and given one file;
//   - a managed (not transactional) table with three files, dropped (the
//     metastore deletes its directory), created again at the same
//     location and given one file;
//   - a transactional table whose last write was a base (base_3 over two
//     deltas), dropped (the metastore deletes its directory) and created
//     again at the same location, then written until its write IDs reach
//     3 again: a DR reader that still found the old base_3 would read it
//     instead of the new deltas.
//
// Once the pipeline has caught up with the source, each DR directory
// holds what the source's holds, file by file (recursively; hidden
// staging names excepted), a DR reader of the transactional table sees
// the files a source reader sees, and hivedr verify finds nothing.
func TestTrustRecreateSamePath(t *testing.T) {
	u := uniq(t)
	db := "recreate_" + u
	pt := startPipeline(t, 15*time.Minute, db)
	ctx, w := pt.ctx, pt.w
	must := func(what string, err error) { t.Helper(); mustDo(t, what, err) }
	cols := []string{"id bigint", "note string"}
	day := []string{"2024-01-01"}
	const acidTbl = "acid_tbl"
	acidTx := acidCommitter(t, pt, db, acidTbl)

	// The first incarnations, three files (or directories) each.
	must("create database", w.CreateDatabase(ctx, db))
	must("create ext_part", w.CreateTable(ctx, db, "ext_part", wl.TableSpec{Columns: cols, PartitionKeys: []string{"dt"}}))
	_, err := w.AddPartitions(ctx, db, "ext_part", [][]string{day}, 4)
	must("add ext_part's partition", err)
	for range 2 {
		_, err := w.Insert(ctx, db, "ext_part", day, 3)
		must("insert into ext_part", err)
	}
	must("create ext_tbl", w.CreateTable(ctx, db, "ext_tbl", wl.TableSpec{Columns: cols}))
	for range 3 {
		_, err := w.Insert(ctx, db, "ext_tbl", nil, 3)
		must("insert into ext_tbl", err)
	}
	must("create managed_tbl", pt.createManaged(db, "managed_tbl", cols))
	for range 3 {
		_, err := w.Insert(ctx, db, "managed_tbl", nil, 3)
		must("insert into managed_tbl", err)
	}
	must("create "+acidTbl, w.CreateACIDTable(ctx, db, acidTbl, wl.ACIDTableSpec{Columns: cols}))
	acidTx(false)
	acidTx(false)
	acidTx(true)
	rig := &acidRig{pipelineTest: pt}
	// The cleaner runs once the deltas are copied: they are the files of
	// committed writes, which the replica needs before the base's commit.
	rig.caughtUpToHead(3 * time.Minute)
	must("clean "+acidTbl, w.CleanObsolete(ctx, db, acidTbl, nil))
	dirs := pt.recreateDirs(db, "ext_part", "ext_tbl", "managed_tbl", acidTbl)
	pt.sameListings(dirs, time.Minute)
	for _, d := range dirs[:3] {
		if n := len(pt.listing(pt.srcFS, d)); n != 3 {
			t.Fatalf("%s holds %d files before the drops, want 3", d, n)
		}
	}
	if got := pt.listing(pt.srcFS, dirs[3]); len(got) != 1 || !strings.HasPrefix(slices.Collect(maps.Keys(got))[0], "base_0000003/") {
		t.Fatalf("%s holds %v before the drop, want base_0000003 only", dirs[3], got)
	}

	// Dropped, their files gone from the source, made again at the same
	// paths with fewer files.
	must("drop ext_part's partition", w.DropPartitions(ctx, db, "ext_part", [][]string{day}, true))
	_, err = w.AddPartitions(ctx, db, "ext_part", [][]string{day}, 2)
	must("add ext_part's partition again", err)
	must("drop ext_tbl", w.DropTable(ctx, db, "ext_tbl", true))
	must("create ext_tbl again", w.CreateTable(ctx, db, "ext_tbl", wl.TableSpec{Columns: cols}))
	_, err = w.Insert(ctx, db, "ext_tbl", nil, 2)
	must("insert into ext_tbl again", err)
	must("drop managed_tbl", w.DropTable(ctx, db, "managed_tbl", false))
	if got := pt.listing(pt.srcFS, dirs[2]); len(got) != 0 {
		t.Fatalf("the metastore left %v in managed_tbl's directory %s", got, dirs[2])
	}
	must("create managed_tbl again", pt.createManaged(db, "managed_tbl", cols))
	_, err = w.Insert(ctx, db, "managed_tbl", nil, 2)
	must("insert into managed_tbl again", err)
	must("drop "+acidTbl, w.DropTable(ctx, db, acidTbl, false))
	must("create "+acidTbl+" again", w.CreateACIDTable(ctx, db, acidTbl, wl.ACIDTableSpec{Columns: cols}))
	for range 3 { // write IDs 1..3: up to the old base's
		acidTx(false)
	}

	rig.caughtUpToHead(3 * time.Minute)
	if got := pt.recreateDirs(db, "ext_part", "ext_tbl", "managed_tbl", acidTbl); !slices.Equal(got, dirs) {
		t.Fatalf("the objects moved: %v, then %v", dirs, got)
	}
	pt.sameListings(dirs, time.Minute)
	pt.sameVisible(db+"."+acidTbl, dirs[3])
	if out, errOut, code := runTool(t, 3*time.Minute, "verify", "-config", pt.conf, "-db", db, "-sample", "1"); code != 0 {
		t.Errorf("hivedr verify exited %d:\n%s%s", code, out, errOut)
	}
}

// createManaged creates db.name as a managed text table that is not
// transactional, in the metastore's default location for it, and checks
// that the metastore kept it managed.
func (pt *pipelineTest) createManaged(db, name string, cols []string) error {
	var fields []*hive_metastore.FieldSchema
	for _, c := range cols {
		n, typ, _ := strings.Cut(c, " ")
		fields = append(fields, &hive_metastore.FieldSchema{Name: n, Type: typ})
	}
	t := &hive_metastore.Table{
		TableName: name, DbName: db, Owner: "hivedr", TableType: "MANAGED_TABLE", Parameters: map[string]string{},
		Sd: &hive_metastore.StorageDescriptor{
			Cols:         fields,
			InputFormat:  "org.apache.hadoop.mapred.TextInputFormat",
			OutputFormat: "org.apache.hadoop.hive.ql.io.HiveIgnoreKeyTextOutputFormat",
			SerdeInfo: &hive_metastore.SerDeInfo{SerializationLib: "org.apache.hadoop.hive.serde2.lazy.LazySimpleSerDe",
				Parameters: map[string]string{"serialization.format": "1"}},
			Parameters: map[string]string{},
		},
	}
	if err := pt.src.CreateTable(pt.ctx, t); err != nil {
		return err
	}
	res, err := pt.src.GetTableReq(pt.ctx, hms.TableRequest(db, name))
	if err != nil {
		return err
	}
	if got := res.Table.TableType; got != "MANAGED_TABLE" {
		return fmt.Errorf("the metastore made %s.%s a %s", db, name, got)
	}
	return nil
}

// recreateDirs are the source directories of the tables: the first's
// partition dt=2024-01-01, the others' own.
func (pt *pipelineTest) recreateDirs(db, partitioned string, tables ...string) []string {
	pt.t.Helper()
	var out []string
	for i, name := range append([]string{partitioned}, tables...) {
		res, err := pt.src.GetTableReq(pt.ctx, hms.TableRequest(db, name))
		if err != nil {
			pt.t.Fatalf("get table %s.%s: %v", db, name, err)
		}
		loc := strings.TrimSuffix(res.Table.Sd.Location, "/")
		if i == 0 {
			loc += "/dt=2024-01-01"
		}
		out = append(out, loc)
	}
	return out
}

// listing is what a reader listing dir recursively finds: each file's
// path below dir and its size, hidden names left out. A missing dir
// holds nothing.
func (pt *pipelineTest) listing(files wl.Files, dir string) map[string]int64 {
	pt.t.Helper()
	out := map[string]int64{}
	err := files.Walk(pt.ctx, dir, func(loc string, size int64) error {
		rel, ok := location.Below(dir, loc)
		if ok && !location.Hidden(rel) {
			out[rel] = size
		}
		return nil
	})
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		pt.t.Fatalf("walk %s: %v", dir, err)
	}
	return out
}

// sameListings waits up to d for each DR directory to hold exactly what
// its source directory holds; otherwise the test fails (and goes on)
// naming the differences.
func (pt *pipelineTest) sameListings(dirs []string, d time.Duration) {
	pt.t.Helper()
	diff := func() []string {
		var out []string
		for _, dir := range dirs {
			drDir, err := pt.mapLocation(dir)
			if err != nil {
				pt.t.Fatal(err)
			}
			a, b := pt.listing(pt.srcFS, dir), pt.listing(pt.drFS, drDir)
			for _, rel := range unionSorted(a, b) {
				sa, onSrc := a[rel]
				sb, onDR := b[rel]
				switch {
				case !onSrc:
					out = append(out, fmt.Sprintf("%s/%s: on DR only (%d bytes)", drDir, rel, sb))
				case !onDR:
					out = append(out, fmt.Sprintf("%s/%s: on the source only", dir, rel))
				case sa != sb:
					out = append(out, fmt.Sprintf("%s/%s: %d bytes on the source, %d on DR", dir, rel, sa, sb))
				}
			}
		}
		return out
	}
	var last []string
	deadline := time.Now().Add(d)
	tick := time.NewTicker(500 * time.Millisecond)
	defer tick.Stop()
	for ; time.Now().Before(deadline); <-tick.C {
		pt.checkAlive()
		if last = diff(); len(last) == 0 {
			return
		}
	}
	pt.t.Errorf("DR directories differ from the source's after %s:\n  %s\napplier:\n%s", d, strings.Join(last, "\n  "), tail(pt.apply.out.String(), 30))
}

// sameVisible checks that a reader of the transactional table (directory
// dir) sees the same files on both sides, each with its own side's
// write-ID state.
func (pt *pipelineTest) sameVisible(table, dir string) {
	pt.t.Helper()
	srcW, err := wl.ValidWriteIDs(pt.ctx, pt.src, []string{table})
	if err != nil {
		pt.t.Fatal(err)
	}
	drW, err := wl.ValidWriteIDs(pt.ctx, pt.dr, []string{table})
	if err != nil {
		pt.t.Fatal(err)
	}
	drDir, err := pt.mapLocation(dir)
	if err != nil {
		pt.t.Fatal(err)
	}
	a, err := wl.VisibleFiles(pt.ctx, pt.srcFS, dir, srcW[table])
	if err != nil {
		pt.t.Fatal(err)
	}
	b, err := wl.VisibleFiles(pt.ctx, pt.drFS, drDir, drW[table])
	if err != nil {
		pt.t.Fatal(err)
	}
	if !reflect.DeepEqual(a, b) {
		pt.t.Errorf("%s: a reader sees on the source (write ids %s) %v, on DR (write ids %s) %v", table, srcW[table], a, drW[table], b)
	}
}

func unionSorted(a, b map[string]int64) []string {
	var out []string
	for k := range a {
		out = append(out, k)
	}
	for k := range b {
		if _, ok := a[k]; !ok {
			out = append(out, k)
		}
	}
	slices.Sort(out)
	return out
}
