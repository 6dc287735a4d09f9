package producer

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hivedr/hivedr/internal/config"
	"github.com/hivedr/hivedr/internal/fs"
	"github.com/hivedr/hivedr/schemas"
)

func TestListDirs(t *testing.T) {
	ext := func(loc string, keys ...string) *schemas.Table {
		t := &schemas.Table{Database: "db", Name: "t", TableType: "EXTERNAL_TABLE", Location: loc}
		for _, k := range keys {
			t.PartitionKeys = append(t.PartitionKeys, schemas.Column{Name: k})
		}
		return t
	}
	managed := &schemas.Table{Database: "db", Name: "m", TableType: "MANAGED_TABLE", Location: "/w/m"}
	parts := func(locs ...string) []schemas.Partition {
		var ps []schemas.Partition
		for i, l := range locs {
			ps = append(ps, schemas.Partition{Values: []string{fmt.Sprint(i)}, Location: l})
		}
		return ps
	}
	cases := []struct {
		name string
		ev   schemas.Event
		want []string
	}{
		{"external create", schemas.Event{EventType: schemas.EventCreateTable, Payload: &schemas.TableChange{After: ext("/e/t")}}, []string{"/e/t"}},
		{"partitioned external create: partitions bring the files", schemas.Event{EventType: schemas.EventCreateTable, Payload: &schemas.TableChange{After: ext("/e/t", "dt")}}, nil},
		{"managed create: the metastore lists", schemas.Event{EventType: schemas.EventCreateTable, Payload: &schemas.TableChange{After: managed}}, nil},
		{"files already listed", schemas.Event{EventType: schemas.EventCreateTable, Files: []schemas.FileRef{{URI: "/e/t/f"}}, Payload: &schemas.TableChange{After: ext("/e/t")}}, nil},
		{"alter in place", schemas.Event{EventType: schemas.EventAlterTable, Payload: &schemas.TableChange{Before: ext("/e/t"), After: ext("/e/t")}}, nil},
		{"alter to another spelling of the same location", schemas.Event{EventType: schemas.EventAlterTable, Payload: &schemas.TableChange{Before: ext("hdfs://nn/e/t"), After: ext("hdfs://NN:8020/e/t/")}}, nil},
		{"alter partition to another spelling", schemas.Event{EventType: schemas.EventAlterPartition, Payload: &schemas.PartitionChange{Table: ext("/e/t", "dt"), Before: parts("/e/t/dt=0"), After: parts("file:/e/t/dt=0")}}, nil},
		{"alter to a new location", schemas.Event{EventType: schemas.EventAlterTable, Payload: &schemas.TableChange{Before: ext("/e/t"), After: ext("/e/t2")}}, []string{"/e/t2"}},
		{"truncate", schemas.Event{EventType: schemas.EventAlterTable, Payload: &schemas.TableChange{Before: ext("/e/t"), After: ext("/e/t2"), IsTruncate: true}}, nil},
		{"add partitions", schemas.Event{EventType: schemas.EventAddPartition, Payload: &schemas.PartitionChange{Table: ext("/e/t", "dt"), After: parts("/e/t/dt=0", "/e/t/dt=1")}}, []string{"/e/t/dt=0", "/e/t/dt=1"}},
		{"add partitions of a managed table", schemas.Event{EventType: schemas.EventAddPartition, Payload: &schemas.PartitionChange{Table: managed, After: parts("/w/m/dt=0")}}, nil},
		{"alter partition in place", schemas.Event{EventType: schemas.EventAlterPartition, Payload: &schemas.PartitionChange{Table: ext("/e/t", "dt"), Before: parts("/e/t/dt=0"), After: parts("/e/t/dt=0")}}, nil},
		{"alter partition to a new location", schemas.Event{EventType: schemas.EventAlterPartition, Payload: &schemas.PartitionChange{Table: ext("/e/t", "dt"), Before: parts("/e/t/dt=0"), After: parts("/x/dt=0")}}, []string{"/x/dt=0"}},
		{"drop partition", schemas.Event{EventType: schemas.EventDropPartition, Payload: &schemas.PartitionChange{Table: ext("/e/t", "dt"), Before: parts("/e/t/dt=0")}}, nil},
	}
	for _, c := range cases {
		if got := listDirs(&c.ev); !slices.Equal(got, c.want) {
			t.Errorf("%s: listDirs = %v, want %v", c.name, got, c.want)
		}
	}
}

// fakeLister lists fixed files per directory and records the directories
// it was asked for. A directory listed under "boom" fails that many
// times (every time for -1) before it answers; under "nostore", it is on
// no configured store.
type fakeLister struct {
	files map[string][]string
	boom  map[string]int
	asked []string
}

func (f *fakeLister) Walk(_ context.Context, dir string, fn func(string, int64) error) error {
	f.asked = append(f.asked, dir)
	if n := f.boom[dir]; n != 0 {
		f.boom[dir] = n - 1
		return errors.New("namenode unreachable")
	}
	if dir == "nostore" || strings.HasPrefix(dir, "hdfs://unknown") {
		return fmt.Errorf("location %s: %w: no HDFS cluster is configured for it", dir, fs.ErrNoStore)
	}
	files, ok := f.files[dir]
	if !ok {
		return fmt.Errorf("walk %s: %w", dir, fs.ErrNotExist)
	}
	for _, l := range files {
		if err := fn(l, 1); err != nil {
			return err
		}
	}
	return nil
}

// testLister is a lister over f with the policy's roots /e and
// hdfs://src-nn:8020/_landing, retrying for retryFor on a clock it owns.
func testLister(t *testing.T, f *fakeLister, retryFor time.Duration) (*lister, *[]time.Duration) {
	t.Helper()
	pol := config.Replication{
		SourceRoots:  []string{"/e/", "hdfs://src-nn/_landing/", "hdfs://unknown-nn/e/"},
		PathMappings: []config.PathMapping{{Source: "/e/", Target: "/dr/e/"}, {Source: "hdfs://src-nn/", Target: "hdfs://dr-nn/"}},
	}
	if err := pol.Validate(); err != nil {
		t.Fatal(err)
	}
	var slept []time.Duration
	clock := time.Unix(1_800_000_000, 0)
	return &lister{l: f, pol: &pol, retryFor: retryFor, log: slog.New(slog.NewTextHandler(io.Discard, nil)),
		now: func() time.Time { return clock },
		sleep: func(_ context.Context, d time.Duration) bool {
			slept = append(slept, d)
			clock = clock.Add(d)
			return true
		}}, &slept
}

func partsEvent(id int64, locs ...string) *schemas.Event {
	tbl := &schemas.Table{Database: "db", Name: "t", TableType: "EXTERNAL_TABLE", Location: "/e/t", PartitionKeys: []schemas.Column{{Name: "dt"}}}
	var ps []schemas.Partition
	for i, l := range locs {
		ps = append(ps, schemas.Partition{Values: []string{fmt.Sprint(i)}, Location: l})
	}
	return &schemas.Event{EventID: id, EventType: schemas.EventAddPartition, Databases: []string{"db"}, Payload: &schemas.PartitionChange{Table: tbl, After: ps}}
}

func uris(files []schemas.FileRef) []string {
	var out []string
	for _, f := range files {
		out = append(out, f.URI)
	}
	return out
}

func TestListerList(t *testing.T) {
	f := &fakeLister{files: map[string][]string{
		"/e/t/dt=1": {"/e/t/dt=1/000000_0", "/e/t/dt=1/_SUCCESS", "/e/t/dt=1/.hive-staging/x", "/e/t/dt=1/sub/000001_0"},
		// The metastore spells the directory its way, the lister answers
		// in canonical form: hidden names are looked for below the
		// directory only (a directory above may well be named _landing).
		"HDFS://SRC-NN/_landing/t/dt=3/": {"hdfs://src-nn:8020/_landing/t/dt=3/000000_0",
			"hdfs://src-nn:8020/_landing/t/dt=3/_SUCCESS", "hdfs://src-nn:8020/_landing/t/dt=3/.hive-staging/x"},
	}}
	l, slept := testLister(t, f, time.Minute)
	files, errs, err := l.list(context.Background(), partsEvent(7, "/e/t/dt=1", "/e/t/dt=2", "HDFS://SRC-NN/_landing/t/dt=3/"))
	if err != nil || len(errs) > 0 {
		t.Fatalf("list: %v, %v", errs, err)
	}
	want := []string{"/e/t/dt=1/000000_0", "/e/t/dt=1/sub/000001_0", "hdfs://src-nn:8020/_landing/t/dt=3/000000_0"}
	if got := uris(files); !slices.Equal(got, want) {
		t.Errorf("files %v, want %v (hidden names skipped, a missing directory gives none)", got, want)
	}
	if len(*slept) != 0 {
		t.Errorf("slept %v with nothing failing", *slept)
	}
}

// TestListerRefuses: directories that cannot be listed become error
// entries on the event, each naming its directory; those outside the
// roots are never listed at all, those on no store are not retried.
func TestListerRefuses(t *testing.T) {
	for _, c := range []struct {
		name, dir string
		kind      schemas.EventErrorKind
		says      string
		asked     int
	}{
		{"outside the roots", "/elsewhere/t/dt=1", schemas.ErrPathOutsideRoots, "outside the source roots", 0},
		{"a .. segment", "/e/t/../../elsewhere/dt=1", schemas.ErrPathOutsideRoots, `".."`, 0},
		{"root of another scheme", "file:/elsewhere/dt=1", schemas.ErrPathOutsideRoots, "outside the source roots", 0},
		{"an unknown cluster", "hdfs://unknown-nn/e/t/dt=1", schemas.ErrListingFailed, "no HDFS cluster is configured", 1},
	} {
		t.Run(c.name, func(t *testing.T) {
			f := &fakeLister{files: map[string][]string{"/e/t/dt=0": {"/e/t/dt=0/f"}}}
			l, slept := testLister(t, f, time.Minute)
			files, errs, err := l.list(context.Background(), partsEvent(7, "/e/t/dt=0", c.dir))
			if err != nil {
				t.Fatal(err)
			}
			if got := uris(files); !slices.Equal(got, []string{"/e/t/dt=0/f"}) {
				t.Errorf("files %v: the listable directory's files are still wanted", got)
			}
			if len(errs) != 1 || errs[0].Kind != c.kind || errs[0].Path != c.dir || !strings.Contains(errs[0].Message, c.says) {
				t.Fatalf("errors %+v, want one %s naming %s and saying %q", errs, c.kind, c.dir, c.says)
			}
			if n := len(f.asked) - 1; n != c.asked {
				t.Errorf("the store was asked to list %s %d times (asked %v), want %d", c.dir, n, f.asked, c.asked)
			}
			if len(*slept) != 0 {
				t.Errorf("retried (slept %v) what no retry mends", *slept)
			}
		})
	}
}

// TestListerRetries: a failing store is retried with backoff for as long
// as retryFor allows, then the event carries LISTING_FAILED; one that
// recovers in time gives its files.
func TestListerRetries(t *testing.T) {
	f := &fakeLister{files: map[string][]string{"/e/t/dt=1": {"/e/t/dt=1/f"}}, boom: map[string]int{"/e/t/dt=1": 3}}
	l, slept := testLister(t, f, time.Minute)
	files, errs, err := l.list(context.Background(), partsEvent(7, "/e/t/dt=1"))
	if err != nil || len(errs) > 0 || !slices.Equal(uris(files), []string{"/e/t/dt=1/f"}) {
		t.Fatalf("list after 3 failures: %v %v %v", files, errs, err)
	}
	if want := []time.Duration{500 * time.Millisecond, time.Second, 2 * time.Second}; !slices.Equal(*slept, want) {
		t.Errorf("backoff %v, want %v", *slept, want)
	}

	// Failing for good: attempts stop once the next wait would pass
	// retryFor: 0.5+1+2+4 = 7.5 s waited, the next 8 s would end past 10 s.
	f = &fakeLister{boom: map[string]int{"/e/t/dt=1": -1}}
	l, slept = testLister(t, f, 10*time.Second)
	_, errs, err = l.list(context.Background(), partsEvent(7, "/e/t/dt=1"))
	if err != nil {
		t.Fatal(err)
	}
	if len(errs) != 1 || errs[0].Kind != schemas.ErrListingFailed || !strings.Contains(errs[0].Message, "namenode unreachable") ||
		!strings.Contains(errs[0].Message, "after 5 attempts in 7.5s") || !strings.Contains(errs[0].Message, "event 7 ADD_PARTITION") {
		t.Fatalf("errors %+v, want LISTING_FAILED naming the event, the attempts and the last error", errs)
	}
	if want := []time.Duration{500 * time.Millisecond, time.Second, 2 * time.Second, 4 * time.Second}; !slices.Equal(*slept, want) || len(f.asked) != 5 {
		t.Errorf("slept %v (want %v), asked %d times (want 5)", *slept, want, len(f.asked))
	}

	// A listing that answers outside the directory is a store fault no
	// retry mends.
	f = &fakeLister{files: map[string][]string{"/e/t/dt=1": {"/e/t/dt=10/000000_0"}}}
	l, slept = testLister(t, f, time.Minute)
	files, errs, _ = l.list(context.Background(), partsEvent(7, "/e/t/dt=1"))
	if len(files) != 0 || len(errs) != 1 || errs[0].Kind != schemas.ErrListingFailed || len(*slept) != 0 {
		t.Errorf("a stray listing: files %v, errors %+v, slept %v", files, errs, *slept)
	}
}
