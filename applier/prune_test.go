package applier

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hivedr/hivedr/internal/acid"

	"github.com/hivedr/hivedr/internal/fs"
	"github.com/hivedr/hivedr/internal/location"
	"github.com/hivedr/hivedr/internal/state"
	"github.com/hivedr/hivedr/schemas"
)

// routerListing is a DR filesystem as the router answers: it lists a
// directory in the router's own spelling of the files under it (the
// configured authority, s3 for s3a, bare paths for file:), whatever
// spelling the caller asked in. The listing is keyed by the directory
// exactly as the test expects prune to ask for it, so the fake depends on
// no parser.
type routerListing struct {
	listing map[string][]string // Dir as passed -> files in the router's spelling
	removed []string
}

func (f *routerListing) List(_ context.Context, dir string) ([]string, error) {
	files, ok := f.listing[dir]
	if !ok {
		return nil, errors.New("routerListing: unexpected directory " + dir)
	}
	var out []string
	for _, l := range files {
		if !slices.Contains(f.removed, l) {
			out = append(out, l)
		}
	}
	return out, nil
}

// Walk is walker over the same listing: the files of dir, as a
// recursive listing of it would give them.
func (f *routerListing) Walk(ctx context.Context, dir string, fn func(loc string, size int64) error) error {
	files, err := f.List(ctx, dir)
	if err != nil {
		return err
	}
	for _, l := range files {
		if err := fn(l, 1); err != nil {
			return err
		}
	}
	return nil
}

func (f *routerListing) Remove(_ context.Context, loc string) error {
	f.removed = append(f.removed, loc)
	return nil
}

// TestPruneComparesCanonicalLocations runs an INSERT OVERWRITE's prune
// where the router spells locations one way and the path mapping (Keep,
// and the completions' targets behind WrittenAfter) another. Only the
// files the overwrite did not write and no later event wrote may go.
func TestPruneComparesCanonicalLocations(t *testing.T) {
	const event = 10
	tests := []struct {
		name string
		// dir is PruneFiles.Dir as the plan passes it (the mapping's
		// spelling); mapped is the mapping's spelling of the directory the
		// files' targets start with; listed is the router's.
		dir, mapped, listed string
	}{
		{"hdfs host without port", "hdfs://dr-nn/w/t", "hdfs://dr-nn/w/t", "hdfs://dr-nn:8020/w/t"},
		{"hdfs host with port", "hdfs://dr-nn:8020/w/t", "hdfs://dr-nn:8020/w/t", "hdfs://dr-nn:8020/w/t"},
		{"hdfs nameservice", "hdfs://ns1/w/t", "hdfs://ns1/w/t", "hdfs://ns1:8020/w/t"},
		{"upper-case host and scheme", "HDFS://DR-NN:8020/w/t", "HDFS://DR-NN:8020/w/t", "hdfs://dr-nn:8020/w/t"},
		{"s3a mapping, s3 router", "s3a://dr-bucket/w/t", "s3a://dr-bucket/w/t", "s3://dr-bucket/w/t"},
		{"s3n mapping, upper-case bucket", "s3n://DR-Bucket/w/t", "s3n://DR-Bucket/w/t", "s3://dr-bucket/w/t"},
		{"trailing slash on the directory", "hdfs://dr-nn:8020/w/t/", "hdfs://dr-nn:8020/w/t", "hdfs://dr-nn:8020/w/t"},
		{"doubled slashes in the mapping", "hdfs://dr-nn:8020/w//t", "hdfs://dr-nn:8020/w//t/", "hdfs://dr-nn:8020/w/t"},
		{"file:/ single slash", "file:/dr/w/t", "file:/dr/w/t", "/dr/w/t"},
		{"file:/// empty authority", "file:///dr/w/t", "file:///dr/w/t", "/dr/w/t"},
		{"file://localhost", "file://localhost/dr/w/t", "file://localhost/dr/w/t", "/dr/w/t"},
		{"bare path mapping, file:/ listing", "/dr/w/t", "/dr/w/t", "/dr/w/t"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			mapped := func(name string) string { return trimSlash(tt.mapped) + "/" + name }
			listed := func(name string) string { return tt.listed + "/" + name }
			files := &routerListing{listing: map[string][]string{tt.dir: {
				listed("kept"), listed("later"), listed("old"), listed("earlier"),
				listed("_SUCCESS"), listed(".hidden"),
			}}}
			store, err := state.OpenCompletions(t.TempDir())
			if err != nil {
				t.Fatal(err)
			}
			defer store.Close()
			// The copy of a later event already wrote "later"; "earlier"
			// was written by an event before this one, so it is stale.
			if err := store.Put([]state.Completion{
				{TaskID: "20-0", EventID: event + 10, Target: mapped("later"), Status: "COPIED"},
				{TaskID: "5-0", EventID: event - 5, Target: mapped("earlier"), Status: "COPIED"},
				{TaskID: "10-0", EventID: event, Target: mapped("kept"), Status: "COPIED"},
			}, "completions", map[int32]int64{0: 3}); err != nil {
				t.Fatal(err)
			}
			x := &executor{files: files, writtenAfter: store.WrittenAfter}
			err = x.prune(context.Background(), PruneFiles{Dir: tt.dir, Keep: []string{mapped("kept")}, EventID: event})
			if err != nil {
				t.Fatal(err)
			}
			slices.Sort(files.removed)
			if want := []string{listed("earlier"), listed("old")}; !slices.Equal(files.removed, want) {
				t.Errorf("removed %q, want exactly %q (kept: the overwrite's own file, a later event's, hidden names)", files.removed, want)
			}
		})
	}
}

func trimSlash(s string) string {
	for len(s) > 1 && s[len(s)-1] == '/' {
		s = s[:len(s)-1]
	}
	return s
}

// A listing prune cannot trust, or a location it cannot compare, halts the
// database (RefusedError) before anything is removed.
func TestPruneRefusesWhatItCannotCompare(t *testing.T) {
	store, err := state.OpenCompletions(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	const dir = "hdfs://dr-nn/w/t"
	for _, tt := range []struct {
		name   string
		listed []string
		keep   []string
		dir    string
	}{
		{name: "a file of another directory", listed: []string{"hdfs://dr-nn:8020/w/t/old", "hdfs://dr-nn:8020/w/u/old"}},
		{name: "a file of the directory's parent", listed: []string{"hdfs://dr-nn:8020/w/t/old", "hdfs://dr-nn:8020/w/old"}},
		{name: "the directory itself", listed: []string{"hdfs://dr-nn:8020/w/t"}},
		{name: "a file of another cluster", listed: []string{"hdfs://dr-nn:8020/w/t/old", "hdfs://dr-nn:8021/w/t/old"}},
		{name: "a listed location that does not parse", listed: []string{"hdfs://dr-nn:8020/w/t/old", "w/t/rel"}},
		{name: "a kept location that does not parse", listed: []string{"hdfs://dr-nn:8020/w/t/old"}, keep: []string{"hdfs://dr-nn/w/t/../x"}},
		{name: "a directory that does not parse", listed: []string{"hdfs://dr-nn:8020/w/t/old"}, dir: "hdfs://dr-nn/w/t?x"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			d := tt.dir
			if d == "" {
				d = dir
			}
			files := &routerListing{listing: map[string][]string{d: tt.listed}}
			x := &executor{files: files, writtenAfter: store.WrittenAfter}
			err := x.prune(context.Background(), PruneFiles{Dir: d, Keep: tt.keep, EventID: 10})
			var re *RefusedError
			if !errors.As(err, &re) {
				t.Fatalf("prune = %v, want a RefusedError", err)
			}
			if len(files.removed) != 0 {
				t.Errorf("removed %q before refusing", files.removed)
			}
		})
	}
	x := &executor{writtenAfter: store.WrittenAfter}
	var re *RefusedError
	if err := x.prune(context.Background(), PruneFiles{Dir: dir, EventID: 10}); !errors.As(err, &re) {
		t.Errorf("prune with no DR filesystem = %v, want a RefusedError", err)
	}
}

// noSource is a routerListing whose source directory no configured
// filesystem holds.
type noSource struct{ *routerListing }

func (f noSource) Walk(ctx context.Context, dir string, fn func(loc string, size int64) error) error {
	if dir == "hdfs://src-nn/w/t" {
		return fmt.Errorf("location %s: %w", dir, fs.ErrNoStore)
	}
	return f.routerListing.Walk(ctx, dir, fn)
}

// TestPruneKeepsWhatTheSourceHolds: a later INSERT's copy can be on DR
// before the applier has read its completion (copyd renames into place,
// then commits). An INSERT OVERWRITE re-driven in that window must not
// remove it: the source directory still holds that name. A stale file the
// source no longer holds goes.
func TestPruneKeepsWhatTheSourceHolds(t *testing.T) {
	const dr, src = "hdfs://dr-nn:8020/w/t", "hdfs://src-nn/w/t"
	store, err := state.OpenCompletions(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	for _, tt := range []struct {
		name   string
		source string
		files  Files
		want   []string
	}{
		{"the source names the later file", src, nil, []string{dr + "/000000_0_copy_1"}},
		{"no source directory named: completions alone", "", nil, []string{dr + "/000000_0_copy_1", dr + "/000000_0_copy_2"}},
		{"no filesystem for the source: completions alone", src, noSource{}, []string{dr + "/000000_0_copy_1", dr + "/000000_0_copy_2"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			listing := &routerListing{listing: map[string][]string{
				dr:  {dr + "/000000_0", dr + "/000000_0_copy_1", dr + "/000000_0_copy_2"},
				src: {"hdfs://src-nn:8020/w/t/000000_0", "hdfs://src-nn:8020/w/t/000000_0_copy_2"},
			}}
			var files Files = listing
			if ns, ok := tt.files.(noSource); ok {
				ns.routerListing = listing
				files = ns
			}
			x := &executor{files: files, writtenAfter: store.WrittenAfter}
			err := x.prune(context.Background(), PruneFiles{Dir: dr, Keep: []string{dr + "/000000_0"}, EventID: 10, Source: tt.source})
			if err != nil {
				t.Fatal(err)
			}
			slices.Sort(listing.removed)
			if !slices.Equal(listing.removed, tt.want) {
				t.Errorf("removed %q, want %q", listing.removed, tt.want)
			}
		})
	}
}

// TestPruneListsWhatExists: a plan pruning several directories of one
// parent (a bootstrap's batch of partitions) lists the parent's
// subdirectories once and lists only the directories that exist; a
// directory holding only what the prune keeps needs no listing of the
// source; one holding a stale file is listed on both sides and the file
// goes. A prune alone lists its directory as before.
func TestPruneListsWhatExists(t *testing.T) {
	ctx := context.Background()
	files := newMemFiles()
	const tbl = "hdfs://dr:9000/w/t"
	files.put(tbl + "/ds=1/keep")
	files.put(tbl + "/ds=2/keep")
	files.put(tbl + "/ds=2/stale")
	files.put("hdfs://src:8020/w/t/ds=2/keep") // the source side, listed by the same fake
	x := &executor{files: files, writtenAfter: func(string, int64) (bool, error) { return false, nil }}
	acts := []Action{
		PruneFiles{Dir: tbl + "/ds=1", Keep: []string{tbl + "/ds=1/keep"}, EventID: 5, Source: "hdfs://src:8020/w/t/ds=1"},
		PruneFiles{Dir: tbl + "/ds=2", Keep: []string{tbl + "/ds=2/keep"}, EventID: 5, Source: "hdfs://src:8020/w/t/ds=2"},
		PruneFiles{Dir: tbl + "/ds=3", EventID: 5, Source: "hdfs://src:8020/w/t/ds=3"},
		PruneFiles{Dir: tbl + "/ds=4", EventID: 5, Source: "hdfs://src:8020/w/t/ds=4"},
	}
	x.prepare(acts)
	for _, a := range acts {
		if err := x.run(ctx, a); err != nil {
			t.Fatal(err)
		}
	}
	want := map[string]int{"dirs hdfs://dr:9000/w/t": 1, "walk hdfs://dr:9000/w/t/ds=1": 1, "walk hdfs://dr:9000/w/t/ds=2": 1,
		"walk hdfs://src:8020/w/t/ds=2": 1}
	if got := files.listed(); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("listings %v, want %v", got, want)
	}
	if files.has(tbl+"/ds=2/stale") || !files.has(tbl+"/ds=2/keep") || !files.has(tbl+"/ds=1/keep") {
		t.Errorf("files after the prunes: %v", files.files)
	}

	// Alone, a prune lists its own directory, and the source only when
	// the directory holds something not kept.
	x = &executor{files: files, writtenAfter: func(string, int64) (bool, error) { return false, nil }}
	a := PruneFiles{Dir: tbl + "/ds=3", EventID: 6, Source: "hdfs://src:8020/w/t/ds=3"}
	x.prepare([]Action{a})
	if err := x.run(ctx, a); err != nil {
		t.Fatal(err)
	}
	if got, want := files.listed(), map[string]int{"walk hdfs://dr:9000/w/t/ds=3": 1}; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("listings %v, want %v", got, want)
	}
}

// TestPrunable: what a recursive prune may remove, by path below the
// pruned directory, and the ACID directory a removal may leave empty.
func TestPrunable(t *testing.T) {
	staging := ".bucket_00000.hivedr-0123456789abcdef.staging"
	if !fs.IsStagingName(staging) {
		t.Fatalf("%q is not a staging name (fs.IsStagingName)", staging)
	}
	for _, tt := range []struct {
		rel      string
		prunable bool
		acidDir  string
	}{
		{"000000_0", true, ""},
		{"000000_0_copy_2", true, ""},
		{"dt=1/000000_0", true, ""},
		{"HIVE_UNION_SUBDIR_1/000000_0", true, ""},
		{"HIVE_UNION_SUBDIR_2/delta_0000001_0000001_0000/bucket_00000", true, "HIVE_UNION_SUBDIR_2/delta_0000001_0000001_0000"},
		{"base_0000003/bucket_00000", true, "base_0000003"},
		{"base_0000003/_metadata_acid", true, "base_0000003"},
		{"delta_0000002_0000002_0000/_orc_acid_version", true, "delta_0000002_0000002_0000"},
		{"delete_delta_0000004_0000004_0000/bucket_00000", true, "delete_delta_0000004_0000004_0000"},
		{"base_0000003/" + staging, false, "base_0000003"},
		{staging, false, ""},
		{".hivedr-compacted.base_0000005_v0000009/bucket_00000", false, ""},
		{"_tmp.000000_0", false, ""},
		{"_tmp.dt=1/000000_0", false, ""},
		{"_SUCCESS", false, ""},
		{".hive-staging_hive_2024/-ext-10000/000000_0", false, ""},
		{"dt=1/_metadata_acid", false, ""},
	} {
		if got := prunable(tt.rel); got != tt.prunable {
			t.Errorf("prunable(%q) = %v, want %v", tt.rel, got, tt.prunable)
		}
		if got := acidDirOf(tt.rel); got != tt.acidDir {
			t.Errorf("acidDirOf(%q) = %q, want %q", tt.rel, got, tt.acidDir)
		}
	}
}

// emptiedFiles is memFiles that records the directories asked to go when
// empty (RemoveEmptyDir).
type emptiedFiles struct {
	*memFiles
	emptied []string
}

func (e *emptiedFiles) RemoveEmptyDir(_ context.Context, loc string) error {
	e.emptied = append(e.emptied, loc)
	return nil
}

// TestPruneRecursive: a table made again where an earlier one lived. The
// prune removes, at any depth, what the event does not name and the
// source does not hold (an old base_N and its metadata, an old union
// subdirectory), asks the ACID directories it emptied to go, and keeps
// hidden names (a copy in flight, a compaction's staged directory), a
// later event's copy and what the source holds now, under a compactor's
// directory's replica name too.
func TestPruneRecursive(t *testing.T) {
	const dir, src = "hdfs://dr:9000/w/t", "hdfs://src:8020/w/t"
	files := &emptiedFiles{memFiles: newMemFiles()}
	for _, rel := range []string{
		"base_0000003/bucket_00000", "base_0000003/_metadata_acid", // the old table's
		"HIVE_UNION_SUBDIR_1/000000_0",            // the old table's
		"delta_0000001_0000001_0000/bucket_00000", // the event names it
		"delta_0000002_0000002_0000/bucket_00000", // a later event's copy
		"delta_0000002_0000002_0000/.bucket_00001.hivedr-0123456789abcdef.staging",
		"base_0000004/bucket_00000", // the source's base_0000004_v0000010, copied under its replica name
		".hivedr-compacted.base_0000009_v0000011/bucket_00000",
		"_tmp.000000_0",
	} {
		files.put(dir + "/" + rel)
	}
	files.put(src + "/delta_0000001_0000001_0000/bucket_00000")
	files.put(src + "/base_0000004_v0000010/bucket_00000")
	later := dir + "/delta_0000002_0000002_0000/bucket_00000"
	x := &executor{files: files, writtenAfter: func(target string, e int64) (bool, error) { return target == later && e == 7, nil }}
	a := PruneFiles{Dir: dir, Keep: []string{dir + "/delta_0000001_0000001_0000/bucket_00000"}, EventID: 7, Source: src}
	if err := x.prune(context.Background(), a); err != nil {
		t.Fatal(err)
	}
	var left []string
	for f := range files.files {
		if rel, ok := strings.CutPrefix(f, dir+"/"); ok {
			left = append(left, rel)
		}
	}
	slices.Sort(left)
	want := []string{".hivedr-compacted.base_0000009_v0000011/bucket_00000", "_tmp.000000_0", "base_0000004/bucket_00000",
		"delta_0000001_0000001_0000/bucket_00000", "delta_0000002_0000002_0000/.bucket_00001.hivedr-0123456789abcdef.staging",
		"delta_0000002_0000002_0000/bucket_00000"}
	if !slices.Equal(left, want) {
		t.Errorf("left\n  %q\nwant\n  %q", left, want)
	}
	if want := []string{dir + "/base_0000003"}; !slices.Equal(files.emptied, want) {
		t.Errorf("asked to remove the empty directories %q, want %q", files.emptied, want)
	}
}

// TestPlanPrunesMadeAndDropped: the planner's choices of PruneFiles for
// objects made and dropped (prunes.go), in order with their metadata.
func TestPlanPrunesMadeAndDropped(t *testing.T) {
	orders, customers := srcOrders, srcCustomers
	acidT, acidP := srcACID("sales", "ledger"), srcACID("sales", "events", "dt")
	acidPart := srcPart(acidP, "2024-01-01")
	prune := func(dir string, keep int) string {
		return fmt.Sprintf("prune files under %s keeping %d", drPath(dir), keep)
	}
	for _, tt := range []struct {
		name    string
		ev      *schemas.Event
		state   Replica
		outcome Outcome
		actions []string
		// source is the source directory each prune names (in order).
		source []string
	}{
		{name: "an external table made: its directory holds the files the event names",
			ev:    createTable(50, customers, customers.Location+"/000000_0", customers.Location+"/sub/000000_0"),
			state: drState(drDB("sales", 40)), outcome: Apply,
			actions: []string{prune(customers.Location, 2), "create table sales.customers", "alter database sales"},
			source:  []string{customers.Location}},
		{name: "a transactional table made: its directory starts empty, as the source's",
			ev: createTable(50, acidT), state: drState(drDB("sales", 40)), outcome: Apply,
			actions: []string{prune(acidT.Location, 0), "create table sales.ledger", "alter database sales"},
			source:  []string{acidT.Location}},
		{name: "a table made over an incarnation DR never saw dropped",
			ev: createTable(50, customers), state: drState(drDB("sales", 40), drTable(customers, 30)), outcome: Apply,
			actions: []string{prune(customers.Location, 0), "drop table sales.customers", "create table sales.customers", "alter database sales"},
			source:  []string{customers.Location}},
		{name: "partitions added: each directory holds its files",
			ev:    addParts(50, orders, []schemas.Partition{srcP1, srcP2}, partFile(srcP1, "a"), partFile(srcP1, "b"), partFile(srcP2, "c")),
			state: drState(drDB("sales", 40), drTable(orders, 20)), outcome: Apply,
			actions: []string{prune(srcP1.Location, 2), prune(srcP2.Location, 1), "add partitions sales.orders [2024-01-01] [2024-01-02]", "alter database sales"},
			source:  []string{srcP1.Location, srcP2.Location}},
		{name: "a partition of a transactional table added",
			ev: addParts(50, acidP, []schemas.Partition{acidPart}), state: drState(drDB("sales", 40), drTable(acidP, 20)), outcome: Apply,
			actions: []string{prune(acidPart.Location, 0), "add partitions sales.events [2024-01-01]", "alter database sales"},
			source:  []string{acidPart.Location}},
		{name: "a managed table dropped: its directory pruned first",
			ev: dropTable(50, acidT), state: drState(drDB("sales", 40), drTable(acidT, 20)), outcome: Apply,
			actions: []string{prune(acidT.Location, 0), "drop table sales.ledger", "alter database sales"},
			source:  []string{acidT.Location}},
		{name: "an external table dropped: its files stay, as the source's",
			ev: dropTable(50, customers), state: drState(drDB("sales", 40), drTable(customers, 20)), outcome: Apply,
			actions: []string{"drop table sales.customers", "alter database sales"}},
		{name: "a managed table's drop re-driven after it: nothing left to do",
			ev: dropTable(50, acidT), state: drState(drDB("sales", 40)), outcome: NoOp,
			actions: []string{"alter database sales"}},
		{name: "a managed table's drop when DR holds a newer incarnation: its files stay",
			ev: dropTable(50, acidT), state: drState(drDB("sales", 40), drTable(acidT, 55)), outcome: NoOp,
			actions: []string{"alter database sales"}},
		{name: "managed partitions dropped: those on DR pruned first",
			ev:    dropParts(50, acidP, acidPart, srcPart(acidP, "2024-01-02")),
			state: drState(drDB("sales", 40), drTable(acidP, 20), drPart(acidP, acidPart, 30)), outcome: Apply,
			actions: []string{prune(acidPart.Location, 0), "drop partitions sales.events [[2024-01-01]]", "alter database sales"},
			source:  []string{acidPart.Location}},
		{name: "external partitions dropped: their files stay",
			ev: dropParts(50, orders, srcP1), state: drState(drDB("sales", 40), drTable(orders, 20), drPart(orders, srcP1, 30)), outcome: Apply,
			actions: []string{"drop partitions sales.orders [[2024-01-01]]", "alter database sales"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			d := planChecked(t, Input{DB: "sales", Source: "src", Event: tt.ev, Replica: tt.state, Copies: copied(tt.ev), Policy: testPolicy{}})
			if d.Outcome != tt.outcome {
				t.Fatalf("%s %s (%s), want %s", d.Outcome, d.Reason, d.Detail, tt.outcome)
			}
			if got := actionNames(d.Actions); !slices.Equal(got, tt.actions) {
				t.Errorf("actions\n  %q\nwant\n  %q", got, tt.actions)
			}
			var sources []string
			for _, a := range d.Actions {
				if p, ok := a.(PruneFiles); ok {
					sources = append(sources, p.Source)
					if p.EventID != tt.ev.EventID {
						t.Errorf("%s at event %d, want %d", p, p.EventID, tt.ev.EventID)
					}
				}
			}
			if !slices.Equal(sources, tt.source) {
				t.Errorf("prunes name the source directories %q, want %q", sources, tt.source)
			}
		})
	}
}

// TestPruneDelay: with applier.prune_delay, the deltas a base made
// obsolete stay until the delay has passed (a DR query planned before the
// base's commit still reads them), then go; the base stays. A directory
// no longer obsolete when its removal comes due (its table dropped and
// made again meanwhile, the new table's delta_1 named as the old one's)
// stays. Without a delay they go at once.
func TestPruneDelay(t *testing.T) {
	ctx := context.Background()
	const dir = "hdfs://dr:9000/w/t"
	d1, d2, b2 := dir+"/delta_0000001_0000001_0000/bucket_00000", dir+"/delta_0000002_0000002_0000/bucket_00000", dir+"/base_0000002/bucket_00000"
	type step struct {
		after  time.Duration // since the prune
		change func(f *memFiles)
		want   []string // the files left
	}
	for _, tt := range []struct {
		name  string
		delay time.Duration
		steps []step
	}{
		{name: "no delay: at once", steps: []step{{0, nil, []string{b2}}}},
		{name: "removed once the delay has passed", delay: time.Minute, steps: []step{
			{0, nil, []string{b2, d1, d2}},
			{59 * time.Second, nil, []string{b2, d1, d2}},
			{time.Minute, nil, []string{b2}},
		}},
		{name: "made again meanwhile: the new delta stays", delay: time.Minute, steps: []step{
			{0, nil, []string{b2, d1, d2}},
			{30 * time.Second, func(f *memFiles) {
				// The drop's prune, then the new table's first write.
				for _, l := range []string{b2, d1, d2} {
					f.Remove(ctx, l)
				}
				f.put(d1)
			}, []string{d1}},
			{time.Minute, nil, []string{d1}},
		}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			files := newMemFiles()
			for _, l := range []string{d1, d2, b2} {
				files.put(l)
			}
			start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
			now := start
			x := &executor{files: files, delayed: newDelayedRemovals(tt.delay), clock: func() time.Time { return now }}
			if err := x.run(ctx, PruneObsolete{Dir: dir, Base: 2}); err != nil {
				t.Fatal(err)
			}
			for _, st := range tt.steps {
				now = start.Add(st.after)
				if st.change != nil {
					st.change(files)
				}
				if x.delayed != nil {
					if err := x.removeDue(ctx); err != nil {
						t.Fatal(err)
					}
				}
				var left []string
				for f := range files.files {
					left = append(left, f)
				}
				slices.Sort(left)
				if !slices.Equal(left, st.want) {
					t.Errorf("%s after the prune: files %q, want %q", st.after, left, st.want)
				}
			}
			if x.delayed != nil && x.delayed.pending() != 0 {
				t.Errorf("%d removals still wait", x.delayed.pending())
			}
		})
	}
}

// TestDelayedRemovalsQueue: removals come due in the order queued, each
// after the delay; none without a delay.
func TestDelayedRemovalsQueue(t *testing.T) {
	if q := newDelayedRemovals(0); q != nil {
		t.Fatalf("a zero delay makes a queue %v", q)
	}
	q := newDelayedRemovals(time.Minute)
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	q.add(t0, "a", "first", 0, []string{"a/1"})
	q.add(t0.Add(10*time.Second), "b", "second", 0, []string{"b/1"})
	for _, tt := range []struct {
		at   time.Duration
		want []string
	}{
		{59 * time.Second, nil},
		{time.Minute, []string{"first"}},
		{time.Minute, nil},
		{2 * time.Minute, []string{"second"}},
	} {
		var got []string
		for _, r := range q.take(t0.Add(tt.at)) {
			got = append(got, r.what)
		}
		if !slices.Equal(got, tt.want) {
			t.Errorf("due at +%s: %q, want %q", tt.at, got, tt.want)
		}
	}
	if q.pending() != 0 {
		t.Errorf("%d still pending", q.pending())
	}
}

// TestPlanPruneKeepsLaterCopies: a prune keeps the files later events
// name under its directory (their copies may be on DR before the applier
// reads their completions), and only those under it.
func TestPlanPruneKeepsLaterCopies(t *testing.T) {
	orders := srcOrders
	ev := addParts(50, orders, []schemas.Partition{srcP1}, partFile(srcP1, "a"))
	later := []*schemas.Event{
		insertInto(51, orders, &srcP1, partFile(srcP1, "b")),
		insertInto(52, orders, &srcP2, partFile(srcP2, "c")),
	}
	in := Input{DB: "sales", Source: "src", Event: ev, Replica: drState(drDB("sales", 40), drTable(orders, 20)),
		Copies: copied(ev), Policy: testPolicy{}, Later: later}
	d := planChecked(t, in)
	var keep []string
	for _, a := range d.Actions {
		if p, ok := a.(PruneFiles); ok {
			keep = append(keep, p.Keep...)
		}
	}
	want := []string{drPath(partFile(srcP1, "a")), drPath(partFile(srcP1, "b"))}
	if !slices.Equal(slices.Compact(slices.Sorted(slices.Values(keep))), want) {
		t.Errorf("the prune keeps %q, want %q (the event's file and the later event's under it)", keep, want)
	}
	in.Later = nil
	d = planChecked(t, in)
	for _, a := range d.Actions {
		if p, ok := a.(PruneFiles); ok && !slices.Equal(p.Keep, want[:1]) {
			t.Errorf("without later events the prune keeps %q, want %q", p.Keep, want[:1])
		}
	}
}

// TestPlanLeftOutWaitsForOwnCopies: an event left out because a later
// one removes its object waits for its own files' copies first, so none
// lands after the later event's prune; once they completed (any status)
// it is a no-op.
func TestPlanLeftOutWaitsForOwnCopies(t *testing.T) {
	orders := srcOrders
	ev := insertInto(51, orders, &srcP1, partFile(srcP1, "b"))
	in := Input{DB: "sales", Source: "src", Event: ev, Replica: drState(drDB("sales", 40), drTable(orders, 20)),
		Policy: testPolicy{}, Later: []*schemas.Event{dropParts(52, orders, srcP1)}}
	d := Plan(in)
	if d.Outcome != Wait || len(d.WaitTasks) != 1 || d.WaitTasks[0] != ev.Files[0].TaskID {
		t.Fatalf("with its copy running: %s %s %v (%s), want a wait for task %s", d.Outcome, d.Reason, d.WaitTasks, d.Detail, ev.Files[0].TaskID)
	}
	in.Copies = map[string]Copy{ev.Files[0].TaskID: {Status: schemas.StatusSourceGone}}
	if d := Plan(in); d.Outcome != NoOp || d.Reason != ReasonSuperseded {
		t.Fatalf("with its copy completed: %s %s (%s), want a no-op, superseded", d.Outcome, d.Reason, d.Detail)
	}
}

// TestPlanLeftOutPartitionWaitsForItsCopies: an ADD_PARTITION whose
// partition is left out (a file of it gone from the source, the partition
// dropped by a later event) still waits for the copies of that
// partition's other files; once they completed, the event adds the other
// partition alone.
func TestPlanLeftOutPartitionWaitsForItsCopies(t *testing.T) {
	ev := addParts(50, srcOrders, []schemas.Partition{srcP1, srcP2}, partFile(srcP1, "a"), partFile(srcP1, "b"), partFile(srcP2, "c"))
	in := Input{DB: "sales", Source: "src", Event: ev, Replica: drState(drDB("sales", 40), drTable(srcOrders, 20)),
		Policy: testPolicy{}, Later: []*schemas.Event{dropParts(52, srcOrders, srcP1)},
		Copies: map[string]Copy{
			ev.Files[0].TaskID: {Status: schemas.StatusSourceGone},
			ev.Files[2].TaskID: {Status: schemas.StatusCopied, TargetURI: drPath(partFile(srcP2, "c"))},
		}}
	d := Plan(in)
	if d.Outcome != Wait || len(d.WaitTasks) != 1 || d.WaitTasks[0] != ev.Files[1].TaskID {
		t.Fatalf("with a copy of the left-out partition running: %s %s %v (%s), want a wait for task %s",
			d.Outcome, d.Reason, d.WaitTasks, d.Detail, ev.Files[1].TaskID)
	}
	in.Copies[ev.Files[1].TaskID] = Copy{Status: schemas.StatusCopied, TargetURI: drPath(partFile(srcP1, "b"))}
	d = Plan(in)
	if acts := strings.Join(actionNames(d.Actions), "; "); d.Outcome != Apply || !strings.Contains(acts, "add partitions sales.orders [2024-01-02]; ") {
		t.Fatalf("with its copies complete: %s %s %s (%s), want 2024-01-02 added alone", d.Outcome, d.Reason, acts, d.Detail)
	}
}

// markedListing is a routerListing whose store keeps event marks.
type markedListing struct {
	*routerListing
	marks map[string]int64
}

func (m markedListing) EventMark(_ context.Context, loc string) (int64, bool, error) {
	id, ok := m.marks[loc]
	return id, ok, nil
}

func (m markedListing) SetEventMark(_ context.Context, loc string, id int64) error {
	m.marks[loc] = id
	return nil
}

// TestPruneKeepsFilesMarkedLater: a file a later event's copy wrote
// before the applier read its completion (and beyond its look-ahead) is
// kept by its event mark; files marked by earlier events, or unmarked,
// go. Without marks the later file went (the soak's base missing on DR
// after a recreate: copied ahead, pruned, then committed without it).
func TestPruneKeepsFilesMarkedLater(t *testing.T) {
	const dr = "hdfs://dr-nn:8020/w/t"
	listing := &routerListing{listing: map[string][]string{
		dr: {dr + "/base_0000001/bucket_00000", dr + "/delta_0000001_0000001/bucket_00000", dr + "/000000_0", dr + "/keep"},
	}}
	files := markedListing{routerListing: listing, marks: map[string]int64{
		dr + "/base_0000001/bucket_00000":          143, // a later event's copy
		dr + "/delta_0000001_0000001/bucket_00000": 90,  // an earlier incarnation's
	}}
	x := &executor{files: files, writtenAfter: func(string, int64) (bool, error) { return false, nil }}
	if err := x.prune(context.Background(), PruneFiles{Dir: dr, Keep: []string{dr + "/keep"}, EventID: 104}); err != nil {
		t.Fatal(err)
	}
	slices.Sort(listing.removed)
	if want := []string{dr + "/000000_0", dr + "/delta_0000001_0000001/bucket_00000"}; !slices.Equal(listing.removed, want) {
		t.Errorf("removed %q, want %q (the file marked by event 143 kept)", listing.removed, want)
	}
}

// Exists and RenameDir make memFiles a dirRenamer: a directory exists
// while a file lies under it.
func (m *memFiles) Exists(_ context.Context, loc string) (bool, error) {
	d, err := location.Parse(loc)
	if err != nil {
		return false, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	prefix := strings.TrimSuffix(d.String(), "/") + "/"
	for f := range m.files {
		if strings.HasPrefix(f, prefix) {
			return true, nil
		}
	}
	return false, nil
}

func (m *memFiles) RenameDir(_ context.Context, from, to string) error {
	f, err := location.Parse(from)
	if err != nil {
		return err
	}
	t, err := location.Parse(to)
	if err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	prefix := strings.TrimSuffix(f.String(), "/") + "/"
	moved := 0
	for k := range m.files {
		if rest, ok := strings.CutPrefix(k, prefix); ok {
			delete(m.files, k)
			m.files[strings.TrimSuffix(t.String(), "/")+"/"+rest] = true
			moved++
		}
	}
	m.sorted = nil
	if moved == 0 {
		return fmt.Errorf("rename %s: %w", from, fs.ErrNotExist)
	}
	return nil
}

// TestPublishCompactedReplacesAnIncompleteBase: a compaction's base
// published where DR holds a directory of the same name (an overwrite's
// base of that write ID) keeps that directory when it holds every file
// the compaction wrote (a re-drive), and replaces it when it holds fewer:
// an overwrite's base lacks the compactor's metadata file, and may lack
// files its commit left out (the soak's table read with no base on DR).
func TestPublishCompactedReplacesAnIncompleteBase(t *testing.T) {
	ctx := context.Background()
	const tbl = "hdfs://dr:9000/w/tx13"
	staging, final := tbl+"/.base_0000001_v0001895.hivedr-staging", tbl+"/base_0000001"
	for _, tt := range []struct {
		name string
		have []string // under final before
		want []string // under final after
	}{
		{"whole: kept", []string{"bucket_00000", "_metadata_acid"}, []string{"_metadata_acid", "bucket_00000"}},
		{"an overwrite's base (no compactor's metadata file): replaced, as Hive's readers choose the compactor's", []string{"bucket_00000"}, []string{"_metadata_acid", "bucket_00000"}},
		{"incomplete: replaced", []string{"_metadata_acid"}, []string{"_metadata_acid", "bucket_00000"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			files := newMemFiles()
			files.put(staging + "/bucket_00000")
			files.put(staging + "/_metadata_acid")
			for _, f := range tt.have {
				files.put(final + "/" + f)
			}
			x := &executor{files: files}
			if err := x.run(ctx, PublishCompacted{Staging: staging, Final: final}); err != nil {
				t.Fatal(err)
			}
			var got, other []string
			for f := range files.files {
				if rest, ok := strings.CutPrefix(f, final+"/"); ok {
					got = append(got, rest)
				} else {
					other = append(other, f)
				}
			}
			slices.Sort(got)
			if !slices.Equal(got, tt.want) || len(other) != 0 {
				t.Errorf("under %s: %v, elsewhere %v; want %v and nothing else (no staging, nothing aside)", final, got, other, tt.want)
			}
		})
	}
}

// TestPruneObsoleteKeepsFilesMarkedLater: the obsolete-directory prunes
// of a base or a compaction (PruneObsolete, PruneCompacted) keep a file a
// later event's copy wrote there: a table dropped and made again at the
// path names its first delta as the old one did, and its copy runs ahead
// of the applier. At once and after the prune delay alike.
func TestPruneObsoleteKeepsFilesMarkedLater(t *testing.T) {
	const dr = "hdfs://dr-nn:8020/w/t"
	newDelta := dr + "/delta_0000001_0000001_0000/000000_0" // the table made again, event 143
	oldDelta := dr + "/delta_0000002_0000002_0000/000000_0" // the old table's, event 90
	for _, c := range []struct {
		name, by string // by: the directory that makes them obsolete
		act      Action
	}{
		{"an overwrite's base", "base_0000005", PruneObsolete{Dir: dr, Base: 5, EventID: 104}},
		{"a compaction", "delta_0000001_0000005", PruneCompacted{Dir: dr, By: "delta_0000001_0000005", Table: "w.t", EventID: 104}},
	} {
		for _, delay := range []time.Duration{0, time.Minute} {
			t.Run(fmt.Sprintf("%s, delay %s", c.name, delay), func(t *testing.T) {
				listing := &routerListing{listing: map[string][]string{dr: {newDelta, oldDelta, dr + "/" + c.by + "/000000_0"}}}
				files := markedListing{routerListing: listing, marks: map[string]int64{newDelta: 143, oldDelta: 90}}
				now := time.Unix(1000, 0)
				x := &executor{files: files, delayed: newDelayedRemovals(delay), clock: func() time.Time { return now }, ms: newFakeHMS()}
				var err error
				switch a := c.act.(type) {
				case PruneObsolete:
					err = x.pruneObsolete(context.Background(), a.Dir, a.String(), a.EventID, func(top string) bool { return acid.Obsolete(top, a.Base) })
				case PruneCompacted:
					err = x.pruneCompacted(context.Background(), a)
				}
				if err != nil {
					t.Fatal(err)
				}
				if delay > 0 {
					// The copy of the table made again lands meanwhile: the
					// check at removal time keeps it too.
					now = now.Add(2 * delay)
					if err := x.removeDue(context.Background()); err != nil {
						t.Fatal(err)
					}
				}
				if want := []string{oldDelta}; !slices.Equal(listing.removed, want) {
					t.Errorf("removed %q, want %q (the file marked by event 143 kept)", listing.removed, want)
				}
			})
		}
	}
}

// TestPruneObsoleteWaitsForOpenWriteIDs: an INSERT OVERWRITE's base of
// write ID 4 committed while write ID 3 (a transaction begun before it)
// is still open on DR. A DR reader cannot use the base yet and reads the
// deltas below it, so its commit's prune keeps them (the soak found DR
// reading the table empty: the deltas pruned, the base not read); once
// write ID 3 has ended, the prune removes what the base covers.
func TestPruneObsoleteWaitsForOpenWriteIDs(t *testing.T) {
	const dr = "hdfs://dr-nn:8020/w/t"
	deltas := []string{dr + "/delta_0000001_0000001_0000/000000_0", dr + "/delta_0000002_0000002_0000/000000_0"}
	base := dr + "/base_0000004/000000_0"
	ms := newAcidHMS()
	ms.rows["w.t"] = map[int64]int64{}
	for w, state := range map[int64]string{1: "committed", 2: "committed", 3: "open", 4: "committed"} {
		txn := ms.open("src")
		ms.txns[txn] = state
		ms.rows["w.t"][w] = txn
	}
	ms.next["w.t"] = 5
	listing := &routerListing{listing: map[string][]string{dr: append(slices.Clone(deltas), base)}}
	x := &executor{files: markedListing{routerListing: listing}, delayed: newDelayedRemovals(0), clock: time.Now, ms: ms}
	prune := PruneObsolete{Dir: dr, Base: 4, Table: "w.t", EventID: 104}
	if err := x.run(context.Background(), prune); err != nil {
		t.Fatal(err)
	}
	if len(listing.removed) != 0 {
		t.Fatalf("with write ID 3 open, removed %q; want the deltas below the unread base kept", listing.removed)
	}
	ms.txns[ms.rows["w.t"][3]] = "aborted"
	if err := x.run(context.Background(), prune); err != nil {
		t.Fatal(err)
	}
	if slices.Sort(listing.removed); !slices.Equal(listing.removed, deltas) {
		t.Fatalf("with write ID 3 ended, removed %q; want %q", listing.removed, deltas)
	}
}

// TestPublishCompactedAfterAnInterruptedReplacement: an earlier
// replacement of a base of the same name (this table's, or an earlier
// table's at the same path, whose write IDs started at 1 too) removed the
// files it had set aside but left their directory; on a store with
// directories (the local one here, as HDFS) the next replacement must not
// find it in the way. The soak found the publish retried for ever:
// "move the incomplete base_0000001 aside: ... target already exists".
func TestPublishCompactedAfterAnInterruptedReplacement(t *testing.T) {
	ctx := context.Background()
	r, err := fs.NewRouter(fs.Config{Local: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	tbl := "file://" + t.TempDir() + "/tx1"
	staging, final := tbl+"/.hivedr-compacted.base_0000001_v0016777", tbl+"/base_0000001"
	for _, f := range []string{staging + "/bucket_00000", staging + "/_metadata_acid", final + "/bucket_00000"} {
		writeLocal(t, f)
	}
	aside := tbl + "/.hivedr-replaced-base_0000001"
	if err := os.MkdirAll(strings.TrimPrefix(aside, "file://")+"/sub", 0o755); err != nil {
		t.Fatal(err)
	}
	x := &executor{files: r}
	if err := x.run(ctx, PublishCompacted{Staging: staging, Final: final}); err != nil {
		t.Fatalf("publish after an interrupted replacement: %v", err)
	}
	for _, f := range []string{final + "/bucket_00000", final + "/_metadata_acid"} {
		if _, err := os.Stat(strings.TrimPrefix(f, "file://")); err != nil {
			t.Errorf("%s: %v", f, err)
		}
	}
	for _, d := range []string{aside, staging} {
		if _, err := os.Stat(strings.TrimPrefix(d, "file://")); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s left behind (%v)", d, err)
		}
	}
}

// writeLocal writes a small file at a file: location, making its
// directories.
func writeLocal(t *testing.T, loc string) {
	t.Helper()
	p := strings.TrimPrefix(loc, "file://")
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestRemoveDelayedWakesOnQueue: a worker's remover, asleep with nothing
// queued, wakes for a removal queued later and removes it once its delay
// has passed (on the real clock; polled, not timed), then sleeps again
// and does the next one too.
func TestRemoveDelayedWakesOnQueue(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	const dir = "hdfs://dr:9000/w/t"
	d1, b2 := dir+"/delta_0000001_0000001_0000/bucket_00000", dir+"/base_0000002/bucket_00000"
	d3, b4 := dir+"/delta_0000003_0000003_0000/bucket_00000", dir+"/base_0000004/bucket_00000"
	files := newMemFiles()
	w := &worker{a: &Applier{cfg: Config{Files: files}}, log: slog.New(slog.DiscardHandler), delayed: newDelayedRemovals(50 * time.Millisecond)}
	done := make(chan struct{})
	go func() { defer close(done); w.removeDelayed(ctx) }()
	left := func(want ...string) {
		t.Helper()
		deadline := time.Now().Add(30 * time.Second)
		for {
			var got []string
			files.mu.Lock()
			for f := range files.files {
				got = append(got, f)
			}
			files.mu.Unlock()
			slices.Sort(got)
			if slices.Equal(got, want) {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("files %q, want %q", got, want)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	x := &executor{files: files, delayed: w.delayed, clock: time.Now}
	for _, step := range []struct {
		put  []string
		base int64
		want []string
	}{
		{[]string{d1, b2}, 2, []string{b2}},
		{[]string{d3, b4}, 4, []string{b4}},
	} {
		time.Sleep(20 * time.Millisecond) // the remover is asleep on an empty queue
		for _, f := range step.put {
			files.put(f)
		}
		if err := x.run(ctx, PruneObsolete{Dir: dir, Base: step.base}); err != nil {
			t.Fatal(err)
		}
		left(step.want...)
	}
	cancel()
	<-done
}

// TestPruneRemovesWhatALaterTaskDidNotWrite: a later event's copy task
// that found its source gone (or failed) wrote nothing, so the file DR
// holds under that name is an older event's and the prune removes it. A
// bootstrap record's prune after a purge repair met exactly this: the
// catch-up's INSERT named 000000_0_copy_2 (gone on the source since), and
// the stale copy of an INSERT before the purge outlived the bootstrap.
func TestPruneRemovesWhatALaterTaskDidNotWrite(t *testing.T) {
	const dir, event = "hdfs://dr-nn:8020/w/t", 10
	for _, tt := range []struct {
		status string
		spared bool
	}{
		{"COPIED", true},
		{"SKIPPED_IDENTICAL", true},
		{"SOURCE_GONE", false},
		{"FAILED", false},
	} {
		t.Run(tt.status, func(t *testing.T) {
			store, err := state.OpenCompletions(t.TempDir())
			if err != nil {
				t.Fatal(err)
			}
			defer store.Close()
			if err := store.Put([]state.Completion{
				{TaskID: "20-0", EventID: event + 10, Target: dir + "/000000_0_copy_2", Status: tt.status},
			}, "completions", map[int32]int64{0: 1}); err != nil {
				t.Fatal(err)
			}
			files := &routerListing{listing: map[string][]string{dir: {dir + "/000000_0", dir + "/000000_0_copy_2"}}}
			x := &executor{files: files, writtenAfter: store.WrittenAfter}
			if err := x.prune(context.Background(), PruneFiles{Dir: dir, Keep: []string{dir + "/000000_0"}, EventID: event}); err != nil {
				t.Fatal(err)
			}
			var want []string
			if !tt.spared {
				want = []string{dir + "/000000_0_copy_2"}
			}
			if !slices.Equal(files.removed, want) {
				t.Errorf("a later task %s: removed %q, want %q", tt.status, files.removed, want)
			}
		})
	}
}
