package iceberg

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

// The fixture, testdata/t1, is a format-v2 table written by Apache
// Iceberg 1.10.0 (e2e/stack/iceberg's tool) through the stack's source
// metastore and copied out of HDFS: create, append 30 rows, a position
// delete, a schema and a spec change, append 20, replace two partitions,
// another position delete. files.jsonl and snapshots.jsonl are what the
// reference implementation read of it (its current snapshot's manifests
// and files; its snapshots).
const (
	srcRoot = "hdfs://127.0.0.1:18020/warehouse/icefix.db/t1"
	current = "00007-48623ead-4f10-4e6e-9fc5-ea9d2850edb5.metadata.json"
)

// fixture reads the table's files by their source paths.
func fixture(t testing.TB) ReadFile {
	t.Helper()
	return func(_ context.Context, p string) ([]byte, error) {
		rel, ok := strings.CutPrefix(p, srcRoot+"/")
		if !ok {
			return nil, fmt.Errorf("%s: not under %s", p, srcRoot)
		}
		return os.ReadFile(filepath.Join("testdata", "t1", filepath.FromSlash(rel)))
	}
}

func metadataFile(t testing.TB, prefix string) *Metadata {
	t.Helper()
	ms, _ := filepath.Glob(filepath.Join("testdata", "t1", "metadata", prefix+"-*.metadata.json"))
	if len(ms) != 1 {
		t.Fatalf("metadata %s: %v", prefix, ms)
	}
	b, err := os.ReadFile(ms[0])
	if err != nil {
		t.Fatal(err)
	}
	m, err := ParseMetadata(b)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// reference is what the reference implementation listed of the current
// snapshot: its manifests (with the snapshot that added each) and files.
type reference struct {
	manifests map[string]int64
	files     map[string]string // path -> data_file or delete_file
	list      string
}

func readReference(t testing.TB) reference {
	t.Helper()
	f, err := os.Open(filepath.Join("testdata", "files.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	ref := reference{manifests: map[string]int64{}, files: map[string]string{}}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var l struct {
			List     string `json:"manifest_list"`
			Manifest string `json:"manifest"`
			Added    int64  `json:"added_snapshot_id"`
			Data     string `json:"data_file"`
			Delete   string `json:"delete_file"`
		}
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
			t.Fatal(err)
		}
		switch {
		case l.List != "":
			ref.list = l.List
		case l.Manifest != "":
			ref.manifests[l.Manifest] = l.Added
		case l.Data != "":
			ref.files[l.Data] = "data_file"
		case l.Delete != "":
			ref.files[l.Delete] = "delete_file"
		}
	}
	return ref
}

func TestParseMetadata(t *testing.T) {
	m := metadataFile(t, "00007")
	cur := m.Current()
	if cur == nil || cur.ID != 476369605742544063 || m.FormatVersion != 2 || len(m.Snapshots) != 5 || m.Location != srcRoot {
		t.Fatalf("parsed %+v (current %+v)", m, cur)
	}
	if want := readReference(t).list; cur.ManifestList != want {
		t.Errorf("current manifest list %s, the reference read %s", cur.ManifestList, want)
	}
	if m0 := metadataFile(t, "00000"); m0.Current() != nil || len(m0.Snapshots) != 0 {
		t.Errorf("a new table's metadata has a current snapshot: %+v", m0.Current())
	}
	for _, bad := range []string{`{`, `{"format-version": 3, "location": "x"}`, `{"format-version": 2}`} {
		if _, err := ParseMetadata([]byte(bad)); err == nil {
			t.Errorf("ParseMetadata(%s) took it", bad)
		}
	}
}

// TestAddedEverything: walked from no earlier state, the table's
// snapshots reach every file in its directory (nothing was expired)
// except the metadata files, and what the reference implementation read
// of the current snapshot.
func TestAddedEverything(t *testing.T) {
	ctx := context.Background()
	files, err := Added(ctx, nil, metadataFile(t, "00007"), fixture(t))
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]Kind{}
	order := map[Kind]int{}
	last := -1
	for i, f := range files {
		if _, dup := got[f.Path]; dup {
			t.Errorf("%s listed twice", f.Path)
		}
		got[f.Path] = f.Kind
		rank := map[Kind]int{KindData: 0, KindPositionDeletes: 0, KindEqualityDeletes: 0, KindStatistics: 0, KindManifest: 1, KindManifestList: 2}[f.Kind]
		if rank < last {
			t.Errorf("file %d (%s, a %s) after a file that names files", i, f.Path, f.Kind)
		}
		last = rank
		order[f.Kind]++
	}
	var onDisk []string
	err = filepath.WalkDir(filepath.Join("testdata", "t1"), func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || strings.HasSuffix(p, ".metadata.json") {
			return err
		}
		rel, _ := filepath.Rel(filepath.Join("testdata", "t1"), p)
		onDisk = append(onDisk, srcRoot+"/"+filepath.ToSlash(rel))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range onDisk {
		if _, ok := got[p]; !ok {
			t.Errorf("%s is in the table's directory, not in what its snapshots reach", p)
		}
	}
	if len(got) != len(onDisk) {
		t.Errorf("%d files reached, %d in the directory", len(got), len(onDisk))
	}
	ref := readReference(t)
	for p, kind := range ref.files {
		k, ok := got[p]
		if !ok || (kind == "data_file") != (k == KindData) {
			t.Errorf("the reference's %s %s: reached as %v (%v)", kind, p, k, ok)
		}
	}
	for p := range ref.manifests {
		if got[p] != KindManifest {
			t.Errorf("the reference's manifest %s: reached as %v", p, got[p])
		}
	}
	t.Logf("reached: %v", order)
}

// TestAddedIncremental: a commit brings the files its new snapshot
// added, not the ones earlier snapshots reach; a commit without a new
// snapshot (a spec change) brings none.
func TestAddedIncremental(t *testing.T) {
	ctx := context.Background()
	files, err := Added(ctx, metadataFile(t, "00006"), metadataFile(t, "00007"), fixture(t))
	if err != nil {
		t.Fatal(err)
	}
	ref := readReference(t)
	var want []string
	for p, added := range ref.manifests {
		if added == 476369605742544063 {
			want = append(want, p)
		}
	}
	want = append(want, ref.list)
	// The second delete, of row 2000002 (day 2024-01-03, bucket 2).
	want = append(want, srcRoot+"/data/day=2024-01-03/id_bucket_4=2/delete-e9823fd1-e02f-4735-88a8-89b70689ba25.parquet")
	var got []string
	for _, f := range files {
		got = append(got, f.Path)
	}
	sort.Strings(got)
	sort.Strings(want)
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("the last commit brings\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if files, err := Added(ctx, metadataFile(t, "00003"), metadataFile(t, "00004"), fixture(t)); err != nil || len(files) != 0 {
		t.Errorf("a spec change brings %v (%v), want nothing", files, err)
	}
}

// TestIcebergPathRewrite: rewritten for other roots, no file of the
// table names a source path; the manifest lists' lengths and the
// manifests' delete file sizes are the rewritten files'; the rewritten
// table reaches the same files under the new roots; the position
// deletes name the same rows of the moved data files; a rewrite is the
// same bytes every time.
func TestIcebergPathRewrite(t *testing.T) {
	ctx := context.Background()
	const drRoot = "hdfs://dr-cluster:8020/dr/warehouse/icefix.db/t1"
	m := func(p string) (string, error) {
		rel, ok := strings.CutPrefix(p, srcRoot)
		if !ok {
			return "", fmt.Errorf("outside %s", srcRoot)
		}
		return drRoot + rel, nil
	}
	src := metadataFile(t, "00007")
	files, err := Added(ctx, nil, src, fixture(t))
	if err != nil {
		t.Fatal(err)
	}
	rw := &Rewriter{Map: m, Read: fixture(t)}
	dr := map[string][]byte{}
	for _, f := range files {
		b, err := rw.Rewrite(ctx, f.Path, f.Kind)
		if err != nil {
			t.Fatal(err)
		}
		to, _ := m(f.Path)
		dr[to] = b
		if f.Kind.Rewritten() {
			again, err := (&Rewriter{Map: m, Read: fixture(t)}).Rewrite(ctx, f.Path, f.Kind)
			if err != nil || !bytes.Equal(again, b) {
				t.Errorf("%s rewritten twice: different bytes (%v)", f.Path, err)
			}
		}
	}
	metaSrc, err := fixture(t)(ctx, srcRoot+"/metadata/"+current)
	if err != nil {
		t.Fatal(err)
	}
	meta, err := RewriteMetadata(metaSrc, m)
	if err != nil {
		t.Fatal(err)
	}
	dr[drRoot+"/metadata/"+current] = meta
	for p, b := range dr {
		if bytes.Contains(b, []byte("127.0.0.1:18020")) {
			t.Errorf("%s names a source path", p)
		}
	}
	read := func(_ context.Context, p string) ([]byte, error) {
		b, ok := dr[p]
		if !ok {
			return nil, fmt.Errorf("%s: not written on DR", p)
		}
		return b, nil
	}
	drMeta, err := ParseMetadata(meta)
	if err != nil {
		t.Fatal(err)
	}
	if drMeta.Location != drRoot || drMeta.Current().ID != src.Current().ID || len(drMeta.MetadataLog) != len(src.MetadataLog) {
		t.Errorf("rewritten metadata: location %s, current %d, %d metadata-log entries", drMeta.Location, drMeta.Current().ID, len(drMeta.MetadataLog))
	}
	drFiles, err := Added(ctx, nil, drMeta, read)
	if err != nil {
		t.Fatal(err)
	}
	if len(drFiles) != len(files) {
		t.Errorf("the rewritten table reaches %d files, the source %d", len(drFiles), len(files))
	}
	for i, f := range drFiles {
		if want, _ := m(files[i].Path); f.Path != want || f.Kind != files[i].Kind {
			t.Errorf("file %d: %s %s, want %s %s", i, f.Kind, f.Path, files[i].Kind, want)
		}
		if f.Size >= 0 && f.Size != int64(len(dr[f.Path])) {
			t.Errorf("%s (%s): the metadata says %d bytes, the rewritten file has %d", f.Path, f.Kind, f.Size, len(dr[f.Path]))
		}
	}
	for _, s := range drMeta.Snapshots {
		mfs, err := ReadManifestList(dr[s.ManifestList])
		if err != nil {
			t.Fatal(err)
		}
		for _, mf := range mfs {
			if mf.Length != int64(len(dr[mf.Path])) {
				t.Errorf("manifest list %s: %s length %d, the rewritten manifest has %d", s.ManifestList, mf.Path, mf.Length, len(dr[mf.Path]))
			}
		}
	}
	deletes := 0
	for _, f := range files {
		if f.Kind != KindPositionDeletes {
			continue
		}
		before, _ := fixture(t)(ctx, f.Path)
		to, _ := m(f.Path)
		a, err := PositionDeletes(before)
		if err != nil {
			t.Fatal(err)
		}
		b, err := PositionDeletes(dr[to])
		if err != nil {
			t.Fatal(err)
		}
		if len(a) == 0 || len(a) != len(b) {
			t.Fatalf("%s: %d rows, rewritten %d", f.Path, len(a), len(b))
		}
		for i := range a {
			if want, _ := m(a[i].Path); b[i].Path != want || b[i].Pos != a[i].Pos {
				t.Errorf("%s row %d: %+v, want %s at %d", to, i, b[i], want, a[i].Pos)
			}
			if _, ok := dr[b[i].Path]; !ok {
				t.Errorf("%s row %d names %s, which the rewritten table does not reach", to, i, b[i].Path)
			}
		}
		deletes += len(b)
	}
	if deletes == 0 {
		t.Error("no position delete rewritten")
	}
}

// TestRewriteRefusesOutsideRoots: a path the mapping does not cover is
// an error naming it, from every kind of file.
func TestRewriteRefusesOutsideRoots(t *testing.T) {
	ctx := context.Background()
	narrow := func(p string) (string, error) {
		if strings.Contains(p, "/data/") {
			return "", errors.New("outside the configured roots")
		}
		return "file:///dr" + strings.TrimPrefix(p, srcRoot), nil
	}
	files, err := Added(ctx, nil, metadataFile(t, "00007"), fixture(t))
	if err != nil {
		t.Fatal(err)
	}
	rw := &Rewriter{Map: narrow, Read: fixture(t)}
	for _, f := range files {
		_, err := rw.Rewrite(ctx, f.Path, f.Kind)
		switch {
		case f.Kind == KindData || f.Kind == KindEqualityDeletes:
			if err != nil {
				t.Errorf("%s copied as is: %v", f.Path, err)
			}
		case err == nil || !strings.Contains(err.Error(), "outside the configured roots") || !strings.Contains(err.Error(), "/data/"):
			t.Errorf("%s (%s) rewritten with data paths outside the roots: %v", f.Path, f.Kind, err)
		}
	}
}

// TestFormatV1ManifestsWithoutList: a version 1 snapshot may name its
// manifests in the metadata itself, with no manifest list: they are
// walked (each a manifest of the snapshot) and rewritten.
func TestFormatV1ManifestsWithoutList(t *testing.T) {
	ctx := context.Background()
	manifest := srcRoot + "/metadata/4c8d887a-e5bd-4288-8993-6a0d5ed7531c-m0.avro"
	v1 := fmt.Sprintf(`{"format-version": 1, "table-uuid": "u", "location": %q, "current-snapshot-id": 9007199254740993,
		"snapshots": [{"snapshot-id": 9007199254740993, "timestamp-ms": 1, "manifests": [%q]}],
		"properties": {"write.data.path": %q}}`, srcRoot, manifest, srcRoot+"/data")
	m, err := ParseMetadata([]byte(v1))
	if err != nil {
		t.Fatal(err)
	}
	if cur := m.Current(); cur == nil || cur.ID != 9007199254740993 {
		t.Fatalf("current snapshot %+v (an ID above 2^53 must stay exact)", cur)
	}
	files, err := Added(ctx, nil, m, fixture(t))
	if err != nil {
		t.Fatal(err)
	}
	want, err := fixture(t)(ctx, manifest)
	if err != nil {
		t.Fatal(err)
	}
	entries, err := ReadManifest(want)
	if err != nil {
		t.Fatal(err)
	}
	var live int
	for _, e := range entries {
		if e.Status != statusDeleted {
			live++
		}
	}
	if len(files) != live+1 || files[len(files)-1].Path != manifest || files[len(files)-1].Kind != KindManifest {
		t.Errorf("a v1 snapshot with one manifest of %d live files reaches %+v", live, files)
	}
	out, err := RewriteMetadata([]byte(v1), func(p string) (string, error) {
		return strings.Replace(p, "hdfs://127.0.0.1:18020/", "s3a://dr-bucket/", 1), nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{`"s3a://dr-bucket/warehouse/icefix.db/t1/metadata/4c8d887a-e5bd-4288-8993-6a0d5ed7531c-m0.avro"`,
		`"write.data.path":"s3a://dr-bucket/warehouse/icefix.db/t1/data"`, `9007199254740993`} {
		if !strings.Contains(string(out), s) {
			t.Errorf("rewritten v1 metadata lacks %s:\n%s", s, out)
		}
	}
	if strings.Contains(string(out), "127.0.0.1") {
		t.Errorf("rewritten v1 metadata names the source:\n%s", out)
	}
}

// TestSnapshotFiles: the files a reader of the current snapshot reads
// are the data and delete files the reference implementation listed of
// it, with its record counts.
func TestSnapshotFiles(t *testing.T) {
	ref := readReference(t)
	m := metadataFile(t, "00007")
	files, err := SnapshotFiles(context.Background(), m.Current(), fixture(t))
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, f := range files {
		k := "data_file"
		if f.Kind() != KindData {
			k = "delete_file"
		}
		if f.Records <= 0 || f.Size <= 0 {
			t.Errorf("%s: %d records, %d bytes", f.Path, f.Records, f.Size)
		}
		got[f.Path] = k
	}
	if len(ref.files) == 0 || fmt.Sprint(got) != fmt.Sprint(ref.files) {
		t.Errorf("the current snapshot's files:\n%v\nthe reference's:\n%v", got, ref.files)
	}
}

// TestExpired: with all but the last two snapshots of the fixture
// expired, what the expired snapshots alone reached is listed: with what
// the kept ones reach it makes up everything the table reached before,
// none of it is reached after, and the order is files, manifests, lists.
// A manifest list already removed is passed over; a commit that expires
// nothing lists nothing.
func TestExpired(t *testing.T) {
	ctx := context.Background()
	read := fixture(t)
	gone := func(err error) bool { return errors.Is(err, os.ErrNotExist) }
	prev := metadataFile(t, "00007")
	next := metadataFile(t, "00007")
	next.Snapshots = next.Snapshots[len(next.Snapshots)-2:]

	if files, err := Expired(ctx, prev, prev, read, gone); err != nil || len(files) != 0 {
		t.Errorf("nothing expired: %v %v", files, err)
	}
	expired, err := Expired(ctx, prev, next, read, gone)
	if err != nil {
		t.Fatal(err)
	}
	before, err := Added(ctx, nil, prev, read)
	if err != nil {
		t.Fatal(err)
	}
	after, err := Added(ctx, nil, next, read)
	if err != nil {
		t.Fatal(err)
	}
	paths := func(fs []File) map[string]bool {
		m := map[string]bool{}
		for _, f := range fs {
			m[f.Path] = true
		}
		return m
	}
	e, b, a := paths(expired), paths(before), paths(after)
	if len(e) == 0 || len(e) != len(expired) {
		t.Fatalf("expired: %d files, %d distinct", len(expired), len(e))
	}
	for p := range e {
		if a[p] || !b[p] {
			t.Errorf("%s listed as expired: reached after %v, before %v", p, a[p], b[p])
		}
	}
	for p := range b {
		if !a[p] && !e[p] {
			t.Errorf("%s was reached only by expired snapshots and is not listed", p)
		}
	}
	last := KindData
	rank := map[Kind]int{KindData: 0, KindPositionDeletes: 0, KindEqualityDeletes: 0, KindStatistics: 0, KindManifest: 1, KindManifestList: 2}
	for _, f := range expired {
		if rank[f.Kind] < rank[last] {
			t.Errorf("%s (%s) after a %s", f.Path, f.Kind, last)
		}
		last = f.Kind
	}
	kinds := map[Kind]int{}
	for _, f := range expired {
		kinds[f.Kind]++
	}
	t.Logf("expiring %d of %d snapshots: %v", len(prev.Snapshots)-len(next.Snapshots), len(prev.Snapshots), kinds)

	// A removal that stopped half-way: an expired snapshot's manifest
	// list is gone; what else is expired is still listed.
	list := prev.Snapshots[0].ManifestList
	partial, err := Expired(ctx, prev, next, func(ctx context.Context, p string) ([]byte, error) {
		if p == list {
			return nil, fmt.Errorf("%s: %w", p, os.ErrNotExist)
		}
		return read(ctx, p)
	}, gone)
	if err != nil || len(partial) == 0 || len(partial) >= len(expired) || paths(partial)[list] {
		t.Errorf("with %s gone: %d files (of %d), err %v", list, len(partial), len(expired), err)
	}
}

// TestRewriteIdentity: when DR's paths are the source's (a mapping that
// moves nothing), every file is written byte for byte as the source's.
func TestRewriteIdentity(t *testing.T) {
	ctx := context.Background()
	read := fixture(t)
	rw := &Rewriter{Map: func(p string) (string, error) { return p, nil }, Read: read}
	m := metadataFile(t, "00007")
	files, err := Added(ctx, nil, m, read)
	if err != nil {
		t.Fatal(err)
	}
	files = append(files, File{Path: srcRoot + "/metadata/" + current, Kind: KindMetadata})
	rewritten := 0
	for _, f := range files {
		if !f.Kind.Rewritten() {
			continue
		}
		got, err := rw.Rewrite(ctx, f.Path, f.Kind)
		if err != nil {
			t.Fatal(err)
		}
		want, _ := read(ctx, f.Path)
		if !bytes.Equal(got, want) {
			t.Errorf("%s (%s): %d bytes written, not the source's %d", f.Path, f.Kind, len(got), len(want))
		}
		rewritten++
	}
	if rewritten < 5 {
		t.Errorf("only %d files of kinds that are rewritten", rewritten)
	}
}
