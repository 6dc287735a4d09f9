package producer

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/hivedr/hivedr/internal/config"
	"github.com/hivedr/hivedr/internal/fs"
	"github.com/hivedr/hivedr/schemas"
)

// The Iceberg table of internal/iceberg's tests, written by the
// reference implementation under the stack's source HDFS.
const (
	iceRoot = "hdfs://127.0.0.1:18020/warehouse/icefix.db/t1"
	iceMeta = iceRoot + "/metadata/"
)

// iceFiles reads the table's files from internal/iceberg/testdata; a file
// named in fail fails that many reads first (every read for -1).
type iceFiles struct {
	fakeLister
	fail  map[string]int
	reads []string
}

func (f *iceFiles) ReadFile(_ context.Context, loc string, limit int64) ([]byte, error) {
	f.reads = append(f.reads, loc)
	if n := f.fail[loc]; n != 0 {
		f.fail[loc] = n - 1
		return nil, errors.New("datanode unreachable")
	}
	rel, ok := strings.CutPrefix(loc, iceRoot+"/")
	if !ok {
		return nil, fmt.Errorf("%s: %w", loc, fs.ErrNotExist)
	}
	b, err := os.ReadFile(filepath.Join("..", "internal", "iceberg", "testdata", "t1", filepath.FromSlash(rel)))
	if errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("%s: %w", loc, fs.ErrNotExist)
	}
	return b, err
}

func metaFile(t *testing.T, prefix string) string {
	t.Helper()
	ms, _ := filepath.Glob(filepath.Join("..", "internal", "iceberg", "testdata", "t1", "metadata", prefix+"-*.metadata.json"))
	if len(ms) != 1 {
		t.Fatalf("metadata %s: %v", prefix, ms)
	}
	return iceMeta + filepath.Base(ms[0])
}

func iceTable(meta, prev string) *schemas.Table {
	p := map[string]string{"table_type": "ICEBERG", "metadata_location": meta, "EXTERNAL": "TRUE"}
	if prev != "" {
		p["previous_metadata_location"] = prev
	}
	return &schemas.Table{Database: "icefix", Name: "t1", TableType: "EXTERNAL_TABLE", Location: iceRoot, Parameters: p}
}

func iceLister(t *testing.T, f *iceFiles, roots ...string) (*lister, *[]time.Duration) {
	t.Helper()
	pol := config.Replication{SourceRoots: roots,
		PathMappings: []config.PathMapping{{Source: "hdfs://127.0.0.1:18020/", Target: "hdfs://dr-nn:8020/"}}}
	if err := pol.Validate(); err != nil {
		t.Fatal(err)
	}
	var slept []time.Duration
	clock := time.Unix(1_800_000_000, 0)
	return &lister{l: f, pol: &pol, retryFor: time.Minute, log: slog.New(slog.NewTextHandler(io.Discard, nil)),
		now: func() time.Time { return clock },
		sleep: func(_ context.Context, d time.Duration) bool {
			slept = append(slept, d)
			clock = clock.Add(d)
			return true
		}}, &slept
}

// TestListIceberg: the tailer lists an Iceberg commit's files from its
// metadata, not its directory: a new table brings its metadata file; a
// commit, what its new snapshot added and the new metadata file, each
// marked with its rewrite; a change that keeps the pointer, nothing. A
// read that fails for a while is retried; metadata that stays unreadable
// is LISTING_FAILED and a file outside the roots PATH_OUTSIDE_ROOTS,
// naming it.
func TestListIceberg(t *testing.T) {
	ctx := context.Background()
	m0, m6, m7 := metaFile(t, "00000"), metaFile(t, "00006"), metaFile(t, "00007")
	create := &schemas.Event{EventID: 10, EventType: schemas.EventCreateTable, Databases: []string{"icefix"},
		Payload: &schemas.TableChange{After: iceTable(m0, "")}}
	commit := &schemas.Event{EventID: 17, EventType: schemas.EventAlterTable, Databases: []string{"icefix"},
		Payload: &schemas.TableChange{Before: iceTable(m6, metaFile(t, "00005")), After: iceTable(m7, m6)}}
	rename := &schemas.Event{EventID: 18, EventType: schemas.EventAlterTable, Databases: []string{"icefix"},
		Payload: &schemas.TableChange{Before: iceTable(m7, m6), After: func() *schemas.Table { t := iceTable(m7, m6); t.Name = "t2"; return t }()}}

	f := &iceFiles{fail: map[string]int{}}
	l, _ := iceLister(t, f, "hdfs://127.0.0.1:18020/warehouse/")
	files, errs, err := l.list(ctx, create)
	if err != nil || len(errs) != 0 || len(files) != 1 || files[0].URI != m0 || files[0].Rewrite != schemas.RewriteIcebergMetadata {
		t.Fatalf("a new table: %+v %+v %v, want its metadata file alone", files, errs, err)
	}
	if len(f.asked) != 0 {
		t.Errorf("the table's directory was listed: %v", f.asked)
	}

	files, errs, err = l.list(ctx, commit)
	if err != nil || len(errs) != 0 {
		t.Fatal(errs, err)
	}
	var got []string
	for _, fr := range files {
		got = append(got, strings.TrimPrefix(fr.URI, iceRoot+"/")+" "+fr.Rewrite)
	}
	sort.Strings(got)
	want := []string{
		"data/day=2024-01-03/id_bucket_4=2/delete-e9823fd1-e02f-4735-88a8-89b70689ba25.parquet iceberg-position-deletes",
		"metadata/00007-48623ead-4f10-4e6e-9fc5-ea9d2850edb5.metadata.json iceberg-metadata",
		"metadata/1d271c5f-1780-47d2-bc7b-ee02f9df0a85-m0.avro iceberg-manifest",
		"metadata/snap-476369605742544063-1-1d271c5f-1780-47d2-bc7b-ee02f9df0a85.avro iceberg-manifest-list",
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("the last commit's files:\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if files[len(files)-1].URI != m7 {
		t.Errorf("the metadata file is not the last of the commit's files: %v", files)
	}

	if files, errs, err := l.list(ctx, rename); err != nil || len(files)+len(errs) != 0 {
		t.Errorf("a rename: %+v %+v %v, want nothing", files, errs, err)
	}

	// A read failing twice, then answering.
	f.fail[m7] = 2
	l, slept := iceLister(t, f, "hdfs://127.0.0.1:18020/warehouse/")
	if files, errs, err := l.list(ctx, commit); err != nil || len(errs) != 0 || len(files) != 4 || len(*slept) != 2 {
		t.Errorf("after two failed reads: %d files, %+v, %v, slept %v", len(files), errs, err, *slept)
	}
	// Unreadable for good: LISTING_FAILED naming the metadata.
	f.fail[m7] = -1
	if files, errs, err := l.list(ctx, commit); err != nil || len(files) != 0 || len(errs) != 1 ||
		errs[0].Kind != schemas.ErrListingFailed || errs[0].Path != m7 || !strings.Contains(errs[0].Message, "datanode unreachable") {
		t.Errorf("unreadable metadata: %+v %+v %v", files, errs, err)
	}
	delete(f.fail, m7)
	// Not Iceberg metadata: LISTING_FAILED at once.
	bad := &schemas.Event{EventID: 19, EventType: schemas.EventAlterTable, Databases: []string{"icefix"},
		Payload: &schemas.TableChange{Before: iceTable(m7, m6), After: iceTable(iceRoot+"/data/day=2024-01-01/data-116687fe-bc38-44f9-87b2-9ed283d10bc5.parquet", m7)}}
	l, slept = iceLister(t, f, "hdfs://127.0.0.1:18020/warehouse/")
	if _, errs, err := l.list(ctx, bad); err != nil || len(errs) != 1 || errs[0].Kind != schemas.ErrListingFailed || len(*slept) != 0 {
		t.Errorf("a pointer to a data file: %+v %v (slept %v)", errs, err, *slept)
	}
	// Metadata outside the source roots is never read.
	f.reads = nil
	l, _ = iceLister(t, f, "hdfs://127.0.0.1:18020/warehouse/other/")
	if _, errs, err := l.list(ctx, commit); err != nil || len(errs) != 1 || errs[0].Kind != schemas.ErrPathOutsideRoots || errs[0].Path != m7 || len(f.reads) != 0 {
		t.Errorf("metadata outside the roots: %+v %v (read %v)", errs, err, f.reads)
	}
}

// TestListIcebergCachesMetadata: a commit's previous metadata is the
// metadata the table's last commit listed, so the tailer reads and
// parses each metadata file once; the cache keeps at most its bound.
func TestListIcebergCachesMetadata(t *testing.T) {
	ctx := context.Background()
	m5, m6, m7 := metaFile(t, "00005"), metaFile(t, "00006"), metaFile(t, "00007")
	commit := func(id int64, before, after, beforePrev string) *schemas.Event {
		return &schemas.Event{EventID: id, EventType: schemas.EventAlterTable, Databases: []string{"icefix"},
			Payload: &schemas.TableChange{Before: iceTable(before, beforePrev), After: iceTable(after, before)}}
	}
	f := &iceFiles{fail: map[string]int{}}
	l, _ := iceLister(t, f, "hdfs://127.0.0.1:18020/warehouse/")
	l.meta = newMetadataCache(3)
	for _, ev := range []*schemas.Event{commit(16, m5, m6, ""), commit(17, m6, m7, m5)} {
		if files, errs, err := l.list(ctx, ev); err != nil || len(errs) != 0 || len(files) == 0 {
			t.Fatalf("event %d: %+v %+v %v", ev.EventID, files, errs, err)
		}
	}
	reads := map[string]int{}
	for _, r := range f.reads {
		reads[r]++
	}
	if reads[m5] != 1 || reads[m6] != 1 || reads[m7] != 1 {
		t.Errorf("metadata reads over two commits: m5 %d, m6 %d, m7 %d; want each once", reads[m5], reads[m6], reads[m7])
	}
	// Bounded: m6 was put first (before m5: a commit parses its new
	// metadata first) and leaves when a fourth comes in.
	l.meta.put("x", l.meta.get(m7))
	if l.meta.get(m6) != nil || l.meta.get(m5) == nil || l.meta.get(m7) == nil || len(l.meta.byLoc) != 3 {
		t.Errorf("cache of 3 after m6, m5, m7, x: holds %d, m5 %v, m6 %v, m7 %v",
			len(l.meta.byLoc), l.meta.get(m5) != nil, l.meta.get(m6) != nil, l.meta.get(m7) != nil)
	}
}
