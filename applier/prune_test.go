package applier

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/hivedr/hivedr/internal/fs"
	"github.com/hivedr/hivedr/internal/state"
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
		{name: "a file of a subdirectory", listed: []string{"hdfs://dr-nn:8020/w/t/old", "hdfs://dr-nn:8020/w/t/dt=1/old"}},
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

func (f noSource) List(ctx context.Context, dir string) ([]string, error) {
	if dir == "hdfs://src-nn/w/t" {
		return nil, fmt.Errorf("location %s: %w", dir, fs.ErrNoStore)
	}
	return f.routerListing.List(ctx, dir)
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
	want := map[string]int{"dirs hdfs://dr:9000/w/t": 1, "files hdfs://dr:9000/w/t/ds=1": 1, "files hdfs://dr:9000/w/t/ds=2": 1,
		"files hdfs://src:8020/w/t/ds=2": 1}
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
	if got, want := files.listed(), map[string]int{"files hdfs://dr:9000/w/t/ds=3": 1}; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("listings %v, want %v", got, want)
	}
}
