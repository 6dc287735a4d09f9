package copyd

import (
	"context"
	"os"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/hivedr/hivedr/internal/fs"
	"github.com/hivedr/hivedr/internal/location"
	"github.com/hivedr/hivedr/schemas"
)

func TestDirPairs(t *testing.T) {
	L := location.MustParse
	roots := func(s ...string) []location.Location {
		var out []location.Location
		for _, r := range s {
			out = append(out, L(r))
		}
		return out
	}
	for _, tt := range []struct {
		name               string
		src, tgt           string
		srcRoots, tgtRoots []location.Location
		want               [][2]string // source, target directory paths, top-down
	}{
		{"table, partition and delta directories", "hdfs://s/warehouse/db.db/t/dt=1/delta_1_1/bucket_0",
			"hdfs://d/warehouse/db.db/t/dt=1/delta_1_1/bucket_0", roots("hdfs://s/warehouse"), roots("hdfs://d/warehouse"),
			[][2]string{{"/warehouse/db.db", "/warehouse/db.db"}, {"/warehouse/db.db/t", "/warehouse/db.db/t"},
				{"/warehouse/db.db/t/dt=1", "/warehouse/db.db/t/dt=1"}, {"/warehouse/db.db/t/dt=1/delta_1_1", "/warehouse/db.db/t/dt=1/delta_1_1"}}},
		{"the shallower root ends it (target root /)", "hdfs://s/external/db.db/t/f", "hdfs://d/external/db.db/t/f",
			roots("hdfs://s/external"), roots("hdfs://d/"),
			[][2]string{{"/external/db.db", "/external/db.db"}, {"/external/db.db/t", "/external/db.db/t"}}},
		{"a renamed directory ends it", "hdfs://s/wh/sales.db/t/f", "hdfs://d/wh/sales_dr.db/t/f",
			roots("hdfs://s/wh"), roots("hdfs://d/wh"), [][2]string{{"/wh/sales.db/t", "/wh/sales_dr.db/t"}}},
		{"a file right under the root", "hdfs://s/wh/f", "hdfs://d/wh/f", roots("hdfs://s/wh"), roots("hdfs://d/wh"), nil},
		{"the deepest root counts", "hdfs://s/wh/db.db/t/f", "hdfs://d/wh/db.db/t/f",
			roots("hdfs://s/", "hdfs://s/wh/db.db"), roots("hdfs://d/"), [][2]string{{"/wh/db.db/t", "/wh/db.db/t"}}},
		{"different depths below the roots", "hdfs://s/a/b/db.db/t/f", "hdfs://d/x/db.db/t/f",
			roots("hdfs://s/a/b"), roots("hdfs://d/x"), [][2]string{{"/a/b/db.db", "/x/db.db"}, {"/a/b/db.db/t", "/x/db.db/t"}}},
		{"outside the roots", "hdfs://s/other/t/f", "hdfs://d/wh/t/f", roots("hdfs://s/wh"), roots("hdfs://d/wh"), nil},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var got [][2]string
			for _, p := range dirPairs(L(tt.src), L(tt.tgt), tt.srcRoots, tt.tgtRoots) {
				got = append(got, [2]string{p.src.Path, p.tgt.Path})
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("dirPairs = %v, want %v", got, tt.want)
			}
		})
	}
}

// metaFixture copies between two stores that keep metadata, with every
// kind of metadata kept and the source user etl named etl_dr on DR.
type metaFixture struct {
	src, dr *memMetaFS
	e       *Engine
	m       *Metrics
}

var (
	srcMtime = time.Date(2025, 11, 5, 8, 30, 12, 345e6, time.UTC)
	dbMeta   = fs.Meta{Owner: "etl", Group: "analysts", Perm: 0o750, HasPerm: true}
	tblMeta  = fs.Meta{Owner: "etl", Group: "finance", Perm: 0o770, HasPerm: true}
	partMeta = fs.Meta{Owner: "svc", Group: "finance", Perm: 0o700, HasPerm: true}
	fileMeta = fs.Meta{Owner: "etl", Group: "analysts", Perm: 0o640, HasPerm: true, ModTime: srcMtime}
)

const tblDir = "/warehouse/sales.db/t"

func newMetaFixture(t *testing.T, p Preserve) *metaFixture {
	t.Helper()
	f := &metaFixture{src: newMemMetaFS("hive"), dr: newMemMetaFS("hivedr"), m: NewMetrics()}
	r := &memResolver{stores: map[string]fs.FS{srcNN: f.src, drNN: f.dr}}
	clock := &fakeClock{t: time.Unix(1_800_000_000, 0)}
	e, err := NewEngine(EngineConfig{
		SourceRoots: []string{srcNN + "/warehouse"}, CMRoots: []string{cmDir}, TargetRoots: []string{drNN + "/warehouse"},
		Retries: 2, Preserve: p, Now: clock.Now, Sleep: clock.Sleep,
	}, r, f.m)
	if err != nil {
		t.Fatal(err)
	}
	f.e = e
	f.src.mkdir(srcNN+"/warehouse/sales.db", dbMeta)
	f.src.mkdir(srcNN+tblDir, tblMeta)
	for _, part := range []string{"dt=1", "dt=2"} {
		f.src.mkdir(srcNN+tblDir+"/"+part, partMeta)
	}
	return f
}

var keepAll = Preserve{Owner: true, Group: true, Perm: true, Times: true, Users: map[string]string{"etl": "etl_dr"}}

// file puts a source file (under the table directory) and returns its
// copy task.
func (f *metaFixture) file(rel string, data []byte) schemas.CopyTask {
	f.src.putMeta(srcNN+tblDir+"/"+rel, data, fileMeta)
	return schemas.CopyTask{TaskID: "t-" + rel, EventID: 9, Database: "sales",
		SourceURI: srcNN + tblDir + "/" + rel, TargetURI: drNN + tblDir + "/" + rel}
}

// mapped is m as DR keeps it (users mapped; directories without times).
func mapped(m fs.Meta) fs.Meta {
	if m.Owner == "etl" {
		m.Owner = "etl_dr"
	}
	return m
}

func (f *metaFixture) wantDR(t *testing.T, rel string, want fs.Meta) {
	t.Helper()
	got, ok := f.dr.metaOf(drNN + rel)
	if !ok || got != want {
		t.Errorf("DR %s: %+v (present %v), want %+v", rel, got, ok, want)
	}
}

// TestKeepDirs: the directories a copy writes into get their source
// directories' owner, group and mode: made so when missing, repaired when
// they differ, checked once per directory (the file's own directory
// again for each new file, and all of them again when that one had to be
// made again); the target root is left alone.
func TestKeepDirs(t *testing.T) {
	ctx := context.Background()
	f := newMetaFixture(t, keepAll)
	// The DR metastore made the table's directory already, its own way
	// (and the database's, as the store makes it).
	f.dr.mkdir(drNN+tblDir, fs.Meta{Owner: "hive", Group: "hive", Perm: 0o755, HasPerm: true})

	c := f.e.Copy(ctx, f.file("dt=1/a", []byte("first file")))
	if c.Status != schemas.StatusCopied {
		t.Fatalf("copy: %s %s", c.Status, c.Error)
	}
	f.wantDR(t, "/warehouse/sales.db", mapped(dbMeta))
	f.wantDR(t, tblDir, mapped(tblMeta))
	f.wantDR(t, tblDir+"/dt=1", partMeta)
	f.wantDR(t, tblDir+"/dt=1/a", mapped(fileMeta))
	f.wantDR(t, "/warehouse", f.dr.defaultMeta(true)) // the root is not copyd's
	if !strings.Contains(c.Verification, "directories given their source's metadata: 1 made, 2 repaired") {
		t.Errorf("verification %q does not count the directories", c.Verification)
	}
	if made, fixed := testutil.ToFloat64(f.m.dirsMade), testutil.ToFloat64(f.m.repaired.WithLabelValues("directory")); made != 1 || fixed != 2 {
		t.Errorf("metrics: %v made, %v repaired; want 1, 2", made, fixed)
	}

	// A second file in the same directory: only that directory is looked
	// at, and no source directory.
	srcBefore, drBefore := len(f.src.callLog()), len(f.dr.callLog())
	if c := f.e.Copy(ctx, f.file("dt=1/b", []byte("second file"))); c.Status != schemas.StatusCopied {
		t.Fatalf("copy: %s %s", c.Status, c.Error)
	}
	srcCalls, drCalls := f.src.callLog()[srcBefore:], f.dr.callLog()[drBefore:]
	if n := countCalls(drCalls, "keepdir"); n != 1 || !hasCall(drCalls, "keepdir "+drNN+tblDir+"/dt=1") {
		t.Errorf("second file: DR calls %q; want one keepdir, of dt=1", drCalls)
	}
	if slices.Contains(srcCalls, "stat "+srcNN+tblDir+"/dt=1") || slices.Contains(srcCalls, "stat "+srcNN+tblDir) {
		t.Errorf("second file: source directories read again: %q", srcCalls)
	}

	// The DR table dropped and made again by the DR metastore (0755):
	// copyd makes the partition again and repairs the table's directory.
	f.dr.rmdir(drNN + tblDir)
	f.dr.mkdir(drNN+tblDir, fs.Meta{Owner: "hive", Group: "hive", Perm: 0o755, HasPerm: true})
	if c := f.e.Copy(ctx, f.file("dt=1/c", []byte("after the drop"))); c.Status != schemas.StatusCopied ||
		!strings.Contains(c.Verification, "1 made, 1 repaired") {
		t.Fatalf("copy after the drop: %s %s %q", c.Status, c.Error, c.Verification)
	}
	f.wantDR(t, tblDir, mapped(tblMeta))
	f.wantDR(t, tblDir+"/dt=1", partMeta)
}

// TestKeepDirsRefused: the NameNode refusing to set a directory's
// metadata fails the copy at once, naming the directory, the user and the
// operation, before any file is written.
func TestKeepDirsRefused(t *testing.T) {
	f := newMetaFixture(t, keepAll)
	dir := drNN + "/warehouse/sales.db"
	f.dr.fault("keepdir", &fs.PermissionError{Location: dir, Dir: true, User: "hivedr",
		Op: "chown to etl_dr:analysts (changing the owner needs the HDFS superuser)", Err: os.ErrPermission})
	c := f.e.Copy(context.Background(), f.file("dt=1/a", []byte("refused")))
	if c.Status != schemas.StatusFailed || c.Attempts != 1 ||
		!strings.Contains(c.Error, "keep metadata of directory "+dir+": user hivedr may not chown to etl_dr:analysts") {
		t.Fatalf("copy: %s after %d attempts: %q; want FAILED at once naming the directory, user and chown", c.Status, c.Attempts, c.Error)
	}
	if calls := f.dr.callLog(); hasCall(calls, "create") {
		t.Errorf("a file was written after the refusal: %q", calls)
	}
}

// TestKeepDirsWhatIsAsked: directories keep only what copyd.preserve
// asks for, nothing when it keeps only times, and a source directory that
// is gone gives its DR counterpart nothing (it is made as the store makes
// it, and looked at again next time).
func TestKeepDirsWhatIsAsked(t *testing.T) {
	ctx := context.Background()
	f := newMetaFixture(t, Preserve{Perm: true})
	if c := f.e.Copy(ctx, f.file("dt=1/a", []byte("x"))); c.Status != schemas.StatusCopied {
		t.Fatalf("copy: %s %s", c.Status, c.Error)
	}
	def := f.dr.defaultMeta(true)
	def.Perm = tblMeta.Perm
	f.wantDR(t, tblDir, def)

	f = newMetaFixture(t, Preserve{Times: true})
	if c := f.e.Copy(ctx, f.file("dt=1/a", []byte("x"))); c.Status != schemas.StatusCopied {
		t.Fatalf("copy: %s %s", c.Status, c.Error)
	}
	if calls := f.dr.callLog(); hasCall(calls, "keepdir") {
		t.Errorf("times only: directories looked at: %q", calls)
	}

	// The source file is gone with its partition; its change-management
	// copy is copied into a partition directory with no source to follow.
	f = newMetaFixture(t, keepAll)
	data := []byte("moved to the cmroot")
	tk := f.file("dt=2/a", data)
	f.src.rmdir(srcNN + tblDir + "/dt=2")
	f.src.putMeta(CMPath(cmDir, "a", crcHex(data)), data, fileMeta)
	tk.Checksum, tk.CMRoot = crcHex(data), cmDir
	for range 2 {
		c := f.e.Copy(ctx, tk)
		if c.Status != schemas.StatusCopied && c.Status != schemas.StatusSkippedIdentical {
			t.Fatalf("copy from the cmroot: %s %s", c.Status, c.Error)
		}
	}
	f.wantDR(t, tblDir+"/dt=2", f.dr.defaultMeta(true))
	f.wantDR(t, tblDir, mapped(tblMeta))
	if n := countCalls(f.src.callLog(), "stat "+srcNN+tblDir+"/dt=2"); n < 2 {
		t.Errorf("the missing source directory was looked for %d times; want once per copy (not cached)", n)
	}
}

// TestSkipIdenticalRepairsMeta: a target already identical to its source
// but with other metadata gets the source's (mapped), without a copy, and
// the completion and metric say so; one that has it already is left alone.
func TestSkipIdenticalRepairsMeta(t *testing.T) {
	ctx := context.Background()
	f := newMetaFixture(t, keepAll)
	data := []byte("identical on both sites")
	tk := f.file("dt=1/a", data)
	stale := fs.Meta{Owner: "hivedr", Group: "supergroup", Perm: 0o644, HasPerm: true, ModTime: srcMtime.Truncate(time.Second)}
	f.dr.putMeta(tk.TargetURI, data, stale)

	c := f.e.Copy(ctx, tk)
	if c.Status != schemas.StatusSkippedIdentical {
		t.Fatalf("copy: %s %s", c.Status, c.Error)
	}
	if want := "metadata repaired (nothing copied): owner etl_dr, group analysts, permission 0640, mtime 2025-11-05T08:30:12.345Z"; !strings.Contains(c.Verification, want) {
		t.Errorf("verification %q does not say %q", c.Verification, want)
	}
	f.wantDR(t, tblDir+"/dt=1/a", mapped(fileMeta))
	if calls := f.dr.callLog(); hasCall(calls, "create") || countCalls(calls, "setmeta") != 1 {
		t.Errorf("DR calls %q; want one setmeta and no write", calls)
	}
	if v := testutil.ToFloat64(f.m.repaired.WithLabelValues("file")); v != 1 {
		t.Errorf("hivedr_copyd_metadata_repairs_total{object=file} = %v, want 1", v)
	}

	// Again: nothing differs, nothing is set, and the directories, known
	// now and holding the file, are not looked at.
	keepdirs := countCalls(f.dr.callLog(), "keepdir")
	c = f.e.Copy(ctx, tk)
	if c.Status != schemas.StatusSkippedIdentical || strings.Contains(c.Verification, "repaired") {
		t.Fatalf("second copy: %s %q", c.Status, c.Verification)
	}
	if n := countCalls(f.dr.callLog(), "setmeta"); n != 1 {
		t.Errorf("%d setmeta calls after the second copy; want still 1", n)
	}
	if n := countCalls(f.dr.callLog(), "keepdir"); n != keepdirs {
		t.Errorf("the second copy looked at %d directories; want none", n-keepdirs)
	}

	// A refusal fails at once, naming who may not do what.
	f.dr.putMeta(tk.TargetURI, data, stale)
	f.dr.fault("setmeta", &fs.PermissionError{Location: tk.TargetURI, User: "hivedr",
		Op: "chown to etl_dr:analysts (changing the owner needs the HDFS superuser)", Err: os.ErrPermission})
	c = f.e.Copy(ctx, tk)
	if c.Status != schemas.StatusFailed || c.Attempts != 1 || !strings.Contains(c.Error, "user hivedr may not chown to etl_dr:analysts") {
		t.Fatalf("refused repair: %s after %d attempts: %q", c.Status, c.Attempts, c.Error)
	}
}

// TestSkipIdenticalNoMetaStore: an identical target on a store that keeps
// no metadata, with preserve on, fails as a copy to it would: the
// metadata is not dropped silently.
func TestSkipIdenticalNoMetaStore(t *testing.T) {
	src, dr := newMemMetaFS("hive"), newMemFS()
	r := &memResolver{stores: map[string]fs.FS{srcNN: src, drNN: dr}}
	e, err := NewEngine(EngineConfig{SourceRoots: []string{srcNN + "/warehouse"}, TargetRoots: []string{drNN + "/warehouse"},
		Preserve: keepAll}, r, nil)
	if err != nil {
		t.Fatal(err)
	}
	data := []byte("same")
	src.putMeta(srcNN+tblDir+"/f", data, fileMeta)
	dr.put(drNN+tblDir+"/f", data)
	c := e.Copy(context.Background(), schemas.CopyTask{TaskID: "x", SourceURI: srcNN + tblDir + "/f", TargetURI: drNN + tblDir + "/f"})
	if c.Status != schemas.StatusFailed || c.Attempts != 1 || !strings.Contains(c.Error, "keeps no file metadata") {
		t.Fatalf("skip to a store without metadata: %s after %d attempts: %q", c.Status, c.Attempts, c.Error)
	}
}
