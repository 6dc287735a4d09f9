package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"hash/crc32"
	"io"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/beltran/gohive/hive_metastore"

	wl "github.com/hivedr/hivedr/e2e/workload"
	"github.com/hivedr/hivedr/internal/config"
	"github.com/hivedr/hivedr/internal/fs"
	"github.com/hivedr/hivedr/internal/hms"
	"github.com/hivedr/hivedr/internal/testenv"
)

// stackFS returns the fs.HDFS of one site of the local stack.
func stackFS(t *testing.T, env *testenv.Env, site testenv.Site) *fs.HDFS {
	t.Helper()
	h, err := fs.NewHDFS(fs.HDFSConfig{
		NameNodes: []string{env.Get(t, "HIVEDR_HDFS_"+string(site)+"_NAMENODE")},
		WebHDFS:   env.Get(t, "HIVEDR_HDFS_"+string(site)+"_HTTP"),
		User:      "hivedr",
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Close() })
	return h
}

// stackMapping returns the path mapping of the default configuration,
// pointed at the stack's two HDFS clusters.
func stackMapping(t *testing.T, env *testenv.Env) func(string) (string, error) {
	t.Helper()
	c := config.Default()
	c.Replication.PathMappings = []config.PathMapping{{
		Source: "hdfs://" + env.Get(t, "HIVEDR_HDFS_SRC_NAMENODE") + "/",
		Target: "hdfs://" + env.Get(t, "HIVEDR_HDFS_DR_NAMENODE") + "/",
	}}
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	return c.Replication.MapPath
}

func identity(s string) (string, error) { return s, nil }

// notifications returns the events of the databases dbs after event start.
func notifications(t *testing.T, ctx context.Context, c *hms.Client, start int64, dbs ...string) []*hive_metastore.NotificationEvent {
	t.Helper()
	var out []*hive_metastore.NotificationEvent
	max := int32(1000)
	for {
		resp, err := c.GetNextNotification(ctx, &hive_metastore.NotificationEventRequest{LastEvent: start, MaxEvents: &max})
		if err != nil {
			t.Fatalf("get_next_notification after %d: %v", start, err)
		}
		if len(resp.Events) == 0 {
			return out
		}
		for _, e := range resp.Events {
			start = e.EventId
			if e.DbName != nil && slices.Contains(dbs, strings.ToLower(*e.DbName)) {
				out = append(out, e)
			}
		}
	}
}

// TestWorkloadCompare runs the workload package's steps against the real
// source metastore and HDFS and checks the events they leave; then checks
// that Compare finds a source equal to itself, finds the empty DR missing
// everything, finds a hand-made replica equal, and reports a changed
// column type, a changed file byte and a missing partition, each.
func TestWorkloadCompare(t *testing.T) {
	env := testenv.Require(t)
	ctx := ctxFor(t, 5*time.Minute)
	src, dr := env.HMS(t, testenv.Source), env.HMS(t, testenv.DR)
	srcFS, drFS := stackFS(t, env, testenv.Source), stackFS(t, env, testenv.DR)
	mapPath := stackMapping(t, env)
	u := uniq(t)
	fin, arch := "wl_fin_"+u, "wl_arch_"+u
	dbs := []string{fin, arch}
	start := currentEventID(t, ctx, src)

	w := wl.NewSource(src, srcFS, env.Get(t, "HIVEDR_HMS_SRC_EXTERNAL"))
	step := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	step(w.CreateDatabase(ctx, fin))
	step(w.CreateDatabase(ctx, arch))
	step(w.CreateTable(ctx, fin, "orders", wl.TableSpec{
		Columns: []string{"id bigint", "amount double", "note string"}, PartitionKeys: []string{"dt"}}))
	step(w.CreateTable(ctx, fin, "customers", wl.TableSpec{Columns: []string{"id bigint", "name string"}}))
	_, err := w.AddPartitions(ctx, fin, "orders", [][]string{{"2026-01-01"}, {"2026-01-02"}, {"2026-01-03"}}, 5)
	step(err)
	f, err := w.Insert(ctx, fin, "orders", []string{"2026-01-01"}, 3)
	step(err)
	if !strings.HasSuffix(f.Location, "/orders/dt=2026-01-01/000000_0_copy_1") {
		t.Errorf("second file of a partition is %s, want Hive's 000000_0_copy_1", f.Location)
	}
	_, err = w.InsertOverwrite(ctx, fin, "orders", []string{"2026-01-02"}, 4)
	step(err)
	for range 2 {
		_, err = w.Insert(ctx, fin, "customers", nil, 3)
		step(err)
	}
	_, err = w.InsertOverwrite(ctx, fin, "customers", nil, 2)
	step(err)
	step(w.AlterTableAddColumn(ctx, fin, "customers", "email string"))
	step(w.RenameTable(ctx, fin, "customers", "clients"))
	step(w.RenameTableAcross(ctx, fin, "clients", arch, "clients"))
	step(w.CreateTable(ctx, fin, "scratch", wl.TableSpec{Columns: []string{"x int"}}))
	_, err = w.Insert(ctx, fin, "scratch", nil, 2)
	step(err)
	step(w.Truncate(ctx, fin, "scratch", nil))
	step(w.Truncate(ctx, fin, "orders", [][]string{{"2026-01-03"}}))
	step(w.DropPartitions(ctx, fin, "orders", [][]string{{"2026-01-01"}}, false))
	step(w.DropTable(ctx, fin, "orders", true))
	step(w.CreateTable(ctx, fin, "orders", wl.TableSpec{
		Columns: []string{"order_id string", "total decimal(12,2)", "currency string"}, PartitionKeys: []string{"dt", "region"}}))
	_, err = w.AddPartitions(ctx, fin, "orders", [][]string{{"2026-02-01", "eu"}, {"2026-02-01", "us"}}, 2)
	step(err)
	_, err = w.Insert(ctx, fin, "orders", []string{"2026-02-01", "us"}, 2)
	step(err)

	// Every step left its events, in order: Hive's client updates
	// statistics with an alter before each INSERT event, a rename's event
	// carries the new name, and a truncate is an alter flagged
	// isTruncateOp followed by the plain alter that resets statistics.
	var got []string
	for _, e := range notifications(t, ctx, src, start, dbs...) {
		s := e.EventType + " " + strings.Replace(strings.Replace(*e.DbName, fin, "fin", 1), arch, "arch", 1)
		if e.TableName != nil && *e.TableName != "" {
			s += "." + *e.TableName
		}
		js, err := hms.MessageJSON(*e.MessageFormat, e.Message)
		if err != nil {
			t.Fatalf("event %d: %v", e.EventId, err)
		}
		var m struct {
			IsTruncateOp any      `json:"isTruncateOp"`
			Replace      any      `json:"replace"`
			Files        []string `json:"files"`
		}
		if err := json.Unmarshal(js, &m); err != nil {
			t.Fatalf("event %d: %v", e.EventId, err)
		}
		if fmt.Sprint(m.IsTruncateOp) == "true" {
			s += " truncate"
		}
		if e.EventType == "INSERT" {
			if fmt.Sprint(m.Replace) == "true" {
				s += " replace"
			}
			// uri#checksum#cmroot#subdir: Hive's client sends the
			// checksum, and change management is on at the source.
			if len(m.Files) != 1 || len(strings.Split(m.Files[0], "#")) < 3 || strings.Split(m.Files[0], "#")[1] == "" {
				t.Errorf("event %d %s: files %v, want one uri#checksum#cmroot", e.EventId, s, m.Files)
			}
		}
		got = append(got, s)
	}
	want := []string{
		"CREATE_DATABASE fin", "CREATE_DATABASE arch",
		"CREATE_TABLE fin.orders", "CREATE_TABLE fin.customers",
		"ADD_PARTITION fin.orders",
		"ALTER_PARTITION fin.orders", "INSERT fin.orders",
		"ALTER_PARTITION fin.orders", "INSERT fin.orders replace",
		"ALTER_TABLE fin.customers", "INSERT fin.customers",
		"ALTER_TABLE fin.customers", "INSERT fin.customers",
		"ALTER_TABLE fin.customers", "INSERT fin.customers replace",
		"ALTER_TABLE fin.customers", // add column
		"ALTER_TABLE fin.clients",   // rename
		"ALTER_TABLE arch.clients",  // move to another database
		"CREATE_TABLE fin.scratch", "ALTER_TABLE fin.scratch", "INSERT fin.scratch",
		"ALTER_TABLE fin.scratch truncate", "ALTER_TABLE fin.scratch",
		"ALTER_PARTITION fin.orders truncate", "ALTER_PARTITION fin.orders",
		"DROP_PARTITION fin.orders",
		"DROP_TABLE fin.orders", "CREATE_TABLE fin.orders",
		"ADD_PARTITION fin.orders",
		"ALTER_PARTITION fin.orders", "INSERT fin.orders",
	}
	if !slices.Equal(got, want) {
		t.Errorf("events of the workload:\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}

	// The record of files written: what is live is on the source HDFS
	// with its recorded length and CRC32C; the metastore's truncates and
	// the workload's overwrites and purges removed the rest.
	srcSnap, err := wl.Capture(ctx, src, srcFS, dbs)
	step(err)
	var inSnap []string
	for _, d := range srcSnap.Databases {
		for _, tb := range d.Tables {
			for rel := range tb.Files {
				inSnap = append(inSnap, tb.Location+"/"+rel)
			}
			for _, p := range tb.Partitions {
				for rel := range p.Files {
					inSnap = append(inSnap, p.Location+"/"+rel)
				}
			}
		}
	}
	var live []string
	for _, f := range w.LiveFiles() {
		live = append(live, f.Location)
		data := readAll(t, ctx, srcFS, f.Location)
		if int64(len(data)) != f.Size || crc32.Checksum(data, crc32.MakeTable(crc32.Castagnoli)) != f.CRC32C {
			t.Errorf("%s: %d bytes on HDFS, recorded %d (or CRC32C differs)", f.Location, len(data), f.Size)
		}
	}
	slices.Sort(inSnap)
	slices.Sort(live)
	if !slices.Equal(inSnap, live) {
		t.Errorf("files of the tables on HDFS:\n%s\nlive files recorded:\n%s", strings.Join(inSnap, "\n"), strings.Join(live, "\n"))
	}
	if n := len(w.Files()); n != 12 || len(live) != 4 {
		t.Errorf("%d files recorded, %d live; want 12 and 4", n, len(live))
	}

	// Compare: the source equals itself; the DR has none of it.
	diffs, err := wl.Compare(ctx, src, src, srcFS, srcFS, dbs, identity)
	step(err)
	if len(diffs) != 0 {
		t.Errorf("source compared with itself: %v", diffs)
	}
	diffs, err = wl.Compare(ctx, src, dr, srcFS, drFS, dbs, mapPath)
	step(err)
	wantDiffs := []string{arch + ": missing on DR", fin + ": missing on DR"}
	if !slices.Equal(diffStrings(diffs), wantDiffs) {
		t.Errorf("source vs empty DR: %q, want %q", diffStrings(diffs), wantDiffs)
	}

	// A replica made by hand equals the source; then each perturbation
	// adds its own difference and nothing else.
	t.Cleanup(func() {
		if t.Failed() {
			return // leave them to look at
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		for _, db := range dbs {
			for _, c := range []*hms.Client{src, dr} {
				if err := c.DropDatabase(ctx, db, true, true); err != nil {
					t.Logf("clean up: drop database %s on %s: %v", db, c.Addr(), err)
				}
			}
		}
	})
	replicateByHand(t, ctx, src, dr, srcFS, drFS, dbs, mapPath)
	check := func(what string, want ...string) {
		t.Helper()
		diffs, err := wl.Compare(ctx, src, dr, srcFS, drFS, dbs, mapPath)
		step(err)
		if !slices.Equal(diffStrings(diffs), want) {
			t.Fatalf("%s: diffs\n%s\nwant\n%s", what, strings.Join(diffStrings(diffs), "\n"), strings.Join(want, "\n"))
		}
	}
	check("replica made by hand")

	clients := drTable(t, ctx, dr, arch, "clients")
	clients.Sd.Cols[0].Type = "string"
	if err := dr.AlterTable(ctx, arch, "clients", clients); err != nil {
		t.Fatalf("change column type on DR: %v", err)
	}
	d1 := arch + ".clients: column id: type bigint on source, string on DR"
	check("changed column type", d1)

	eu := srcSnap.Databases[fin].Tables["orders"].Partitions[wl.Key([]string{"2026-02-01", "eu"})]
	drLoc, err := mapPath(eu.Location + "/000000_0")
	step(err)
	data := readAll(t, ctx, drFS, drLoc)
	castagnoli := crc32.MakeTable(crc32.Castagnoli)
	before := crc32.Checksum(data, castagnoli)
	data[0] ^= 1
	writeAll(t, ctx, drFS, drLoc, data)
	d2 := fmt.Sprintf("%s.orders partition [2026-02-01,eu] file 000000_0: CRC32C %08x on source, %08x on DR",
		fin, before, crc32.Checksum(data, castagnoli))
	check("changed file byte", d1, d2)

	if _, err := dr.DropPartition(ctx, fin, "orders", []string{"2026-02-01", "us"}, false); err != nil {
		t.Fatalf("drop partition on DR: %v", err)
	}
	d3 := fin + ".orders partition [2026-02-01,us]: missing on DR"
	check("missing partition", d1, d2, d3)
}

func diffStrings(ds []wl.Diff) []string {
	var out []string
	for _, d := range ds {
		out = append(out, d.String())
	}
	return out
}

func drTable(t *testing.T, ctx context.Context, c *hms.Client, db, name string) *hive_metastore.Table {
	t.Helper()
	r, err := c.GetTableReq(ctx, &hive_metastore.GetTableRequest{DbName: db, TblName: name})
	if err != nil {
		t.Fatalf("get table %s.%s from %s: %v", db, name, c.Addr(), err)
	}
	return r.Table
}

func readAll(t *testing.T, ctx context.Context, f fs.FS, loc string) []byte {
	t.Helper()
	r, err := f.Open(ctx, loc, 0, -1)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	b, err := io.ReadAll(r)
	if err != nil {
		t.Fatalf("read %s: %v", loc, err)
	}
	return b
}

func writeAll(t *testing.T, ctx context.Context, f fs.FS, loc string, data []byte) {
	t.Helper()
	w, err := f.Create(ctx, loc, int64(len(data)))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Write(data); err != nil {
		t.Fatalf("write %s: %v", loc, err)
	}
	if err := w.Commit(ctx, crc32.Checksum(data, crc32.MakeTable(crc32.Castagnoli))); err != nil {
		t.Fatal(err)
	}
}

// replicateByHand makes the DR metastore and HDFS hold what the source
// holds of dbs, at mapped locations, as the applier and copyd would (no
// applier is involved: this gives Compare a replica to check).
func replicateByHand(t *testing.T, ctx context.Context, src, dr *hms.Client, srcFS, drFS *fs.HDFS, dbs []string, mapPath func(string) (string, error)) {
	t.Helper()
	mapped := func(loc string) string {
		t.Helper()
		m, err := mapPath(loc)
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
	copyDir := func(from string, files map[string]wl.FileSum) {
		for rel := range files {
			writeAll(t, ctx, drFS, mapped(from+"/"+rel), readAll(t, ctx, srcFS, from+"/"+rel))
		}
	}
	snap, err := wl.Capture(ctx, src, srcFS, dbs)
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range dbs {
		db, err := src.GetDatabase(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		db.LocationUri = mapped(db.LocationUri)
		if err := dr.CreateDatabase(ctx, db); err != nil {
			t.Fatalf("create database %s on DR: %v", name, err)
		}
		for tn, st := range snap.Databases[name].Tables {
			// Data before metadata.
			copyDir(st.Location, st.Files)
			for _, p := range st.Partitions {
				copyDir(p.Location, p.Files)
			}
			tb := drTable(t, ctx, src, name, tn)
			tb.ID = nil // the metastore refuses a new table with an ID
			tb.Sd.Location = mapped(tb.Sd.Location)
			if err := dr.CreateTable(ctx, tb); err != nil {
				t.Fatalf("create table %s.%s on DR: %v", name, tn, err)
			}
			parts, err := src.GetPartitions(ctx, name, tn, -1)
			if err != nil {
				t.Fatal(err)
			}
			for _, p := range parts {
				p.Sd.Location = mapped(p.Sd.Location)
			}
			if len(parts) > 0 {
				if _, err := dr.AddPartitions(ctx, parts); err != nil {
					t.Fatalf("add partitions to %s.%s on DR: %v", name, tn, err)
				}
			}
		}
	}
}
