package verify

import (
	"context"
	"fmt"
	"hash/crc32"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/beltran/gohive/hive_metastore"

	hfs "github.com/hivedr/hivedr/internal/fs"
	"github.com/hivedr/hivedr/internal/iceberg"
)

// byteFiles is Files over whole files held in memory, by location.
type byteFiles map[string][]byte

func (f byteFiles) Walk(_ context.Context, dir string, fn func(string, int64) error) error {
	return walkMap(f, dir, func(b []byte) int64 { return int64(len(b)) }, fn)
}

func (f byteFiles) CRC32C(_ context.Context, loc string) (uint32, string, error) {
	b, ok := f[loc]
	if !ok {
		return 0, "", fmt.Errorf("%s: %w", loc, hfs.ErrNotExist)
	}
	return crc32.Checksum(b, crc32.MakeTable(crc32.Castagnoli)), "bytes", nil
}

func (f byteFiles) ReadFile(_ context.Context, loc string, _ int64) ([]byte, error) {
	b, ok := f[loc]
	if !ok {
		return nil, fmt.Errorf("%s: %w", loc, hfs.ErrNotExist)
	}
	return b, nil
}

const (
	iceSrc = "hdfs://127.0.0.1:18020/"
	iceDR  = "hdfs://127.0.0.1:28020/"
	iceTbl = "warehouse/icefix.db/t1"
)

func iceMap(s string) (string, error) {
	rest, ok := strings.CutPrefix(s, iceSrc)
	if !ok {
		return "", fmt.Errorf("%s is not under %s", s, iceSrc)
	}
	return iceDR + rest, nil
}

// iceSites is internal/iceberg's fixture table (written by the reference
// implementation) on the source, and on DR as replication leaves it:
// what its live snapshots reach, rewritten for DR's paths where it names
// paths, and its current metadata rewritten.
func iceSites(t *testing.T) (src, dr *fakeMS, sf, df byteFiles, current string) {
	t.Helper()
	sf, df = byteFiles{}, byteFiles{}
	root := filepath.Join("..", "iceberg", "testdata", "t1")
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(p)
		rel, _ := filepath.Rel(root, p)
		sf[iceSrc+iceTbl+"/"+filepath.ToSlash(rel)] = b
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	ms, _ := filepath.Glob(filepath.Join(root, "metadata", "00007-*.metadata.json"))
	if len(ms) != 1 {
		t.Fatalf("the fixture's current metadata: %v", ms)
	}
	current = iceSrc + iceTbl + "/metadata/" + filepath.Base(ms[0])
	ctx := context.Background()
	meta, err := iceberg.ParseMetadata(sf[current])
	if err != nil {
		t.Fatal(err)
	}
	files, err := iceberg.Added(ctx, nil, meta, sf.read)
	if err != nil {
		t.Fatal(err)
	}
	rw := &iceberg.Rewriter{Map: iceMap, Read: sf.read}
	for _, f := range append(files, iceberg.File{Path: current, Kind: iceberg.KindMetadata}) {
		to, _ := iceMap(f.Path)
		b := sf[f.Path]
		if f.Kind.Rewritten() {
			if b, err = rw.Rewrite(ctx, f.Path, f.Kind); err != nil {
				t.Fatal(err)
			}
		}
		df[to] = b
	}
	site := func(root, ptr string) *fakeMS {
		ms := newFakeMS()
		ms.dbs["icefix"] = &hive_metastore.Database{Name: "icefix", LocationUri: root + "warehouse/icefix.db", Parameters: map[string]string{}}
		ms.tables["icefix.t1"] = &hive_metastore.Table{TableName: "t1", DbName: "icefix", TableType: "EXTERNAL_TABLE",
			Sd:         &hive_metastore.StorageDescriptor{Location: root + iceTbl, SerdeInfo: &hive_metastore.SerDeInfo{}},
			Parameters: map[string]string{"table_type": "ICEBERG", "EXTERNAL": "TRUE", "metadata_location": ptr}}
		return ms
	}
	drPtr, _ := iceMap(current)
	return site(iceSrc, current), site(iceDR, drPtr), sf, df, current
}

func (f byteFiles) read(ctx context.Context, p string) ([]byte, error) { return f.ReadFile(ctx, p, 0) }

// TestRunIceberg: an Iceberg table replicated with its metadata rewritten
// for DR's paths is clean (compared by snapshot, not by its directory,
// whose metadata files differ by design); a data file missing on DR, one
// with other bytes, and a DR pointer at metadata DR does not have are
// each found, naming the file.
func TestRunIceberg(t *testing.T) {
	src, dr, sf, df, current := iceSites(t)
	withMap := func(c *Config) { c.MapLocation = iceMap }
	sum, got := runFake(t, src, dr, sf, df, Options{Sample: 1}, nil, withMap)
	if len(got) != 0 || sum.Files == 0 || sum.Sampled == 0 {
		t.Fatalf("a faithful replica: %d findings %v, summary %+v", len(got), got, sum)
	}
	t.Logf("clean: %+v", sum)

	// Two data files DR's current snapshot reads.
	drPtr, _ := iceMap(current)
	meta, err := iceberg.ParseMetadata(df[drPtr])
	if err != nil {
		t.Fatal(err)
	}
	files, err := iceberg.SnapshotFiles(context.Background(), meta.Current(), df.read)
	if err != nil {
		t.Fatal(err)
	}
	var data []string
	for _, f := range files {
		if f.Kind() == iceberg.KindData {
			data = append(data, f.Path)
		}
	}
	slices.Sort(data)
	gone, changed := data[0], data[1]
	delete(df, gone)
	b := slices.Clone(df[changed])
	b[len(b)/2] ^= 0xff
	df[changed] = b
	_, got = runFake(t, src, dr, sf, df, Options{Sample: 1}, nil, withMap)
	lines := strings.Join(divergedLines(t, got), "\n")
	for _, want := range []string{
		"file " + strings.TrimPrefix(gone, iceDR+iceTbl+"/") + ": named by DR's snapshot",
		"file " + strings.TrimPrefix(changed, iceDR+iceTbl+"/") + ": CRC32C",
	} {
		if !strings.Contains(lines, want) {
			t.Errorf("findings:\n%s\nwant one with %q", lines, want)
		}
	}

	// DR pointing at metadata it does not have.
	prev := strings.Replace(current, "00007-", "00006-", 1)
	dr.tables["icefix.t1"].Parameters["metadata_location"], _ = iceMap(prev)
	_, got = runFake(t, src, dr, sf, df, Options{Sample: 1}, nil, withMap)
	lines = strings.Join(divergedLines(t, got), "\n")
	if !strings.Contains(lines, "icefix.t1 metadata_location: location") || !strings.Contains(lines, "icefix.t1: DR metadata") {
		t.Errorf("DR at another pointer: findings\n%s", lines)
	}
}
