package copyd

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hivedr/hivedr/internal/fs"
	"github.com/hivedr/hivedr/internal/iceberg"
	"github.com/hivedr/hivedr/schemas"
)

// The Iceberg table internal/iceberg's tests read (written by the
// reference implementation on the stack's source HDFS).
const (
	iceNN      = "hdfs://127.0.0.1:18020"
	iceRoot    = iceNN + "/warehouse/icefix.db/t1"
	iceDRRoot  = drNN + "/warehouse/icefix.db/t1"
	iceCurrent = iceRoot + "/metadata/00007-48623ead-4f10-4e6e-9fc5-ea9d2850edb5.metadata.json"
)

var kindRewrites = map[iceberg.Kind]string{
	iceberg.KindMetadata:        schemas.RewriteIcebergMetadata,
	iceberg.KindManifestList:    schemas.RewriteIcebergManifestList,
	iceberg.KindManifest:        schemas.RewriteIcebergManifest,
	iceberg.KindPositionDeletes: schemas.RewriteIcebergPositionDeletes,
}

type iceFixture struct {
	src, dr *memFS
	e       *Engine
	files   []iceberg.File // what the current metadata reaches, then the metadata itself
}

// newIceFixture loads the table onto a source store and makes an engine
// whose mapping moves the source cluster's /warehouse to DR's (mapPath
// replaces it when given).
func newIceFixture(t *testing.T, mapPath func(string) (string, error)) *iceFixture {
	t.Helper()
	f := &iceFixture{src: newMemFS(), dr: newMemFS()}
	dir := filepath.Join("..", "internal", "iceberg", "testdata", "t1")
	err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		f.src.put(iceRoot+"/"+filepath.ToSlash(rel), b)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if mapPath == nil {
		mapPath = func(src string) (string, error) {
			rel, ok := strings.CutPrefix(src, iceNN+"/warehouse/")
			if !ok {
				return "", fmt.Errorf("%s: under no mapping", src)
			}
			return drNN + "/warehouse/" + rel, nil
		}
	}
	r := &memResolver{stores: map[string]fs.FS{iceNN: f.src, drNN: f.dr}}
	e, err := NewEngine(EngineConfig{SourceRoots: []string{iceNN + "/warehouse"}, TargetRoots: []string{drNN + "/warehouse"},
		MapPath: mapPath, Retries: 1}, r, nil)
	if err != nil {
		t.Fatal(err)
	}
	f.e = e
	meta, _ := f.src.get(iceCurrent)
	md, err := iceberg.ParseMetadata(meta)
	if err != nil {
		t.Fatal(err)
	}
	read := func(_ context.Context, p string) ([]byte, error) {
		b, ok := f.src.get(p)
		if !ok {
			return nil, fmt.Errorf("%s: no such file", p)
		}
		return b, nil
	}
	if f.files, err = iceberg.Added(context.Background(), nil, md, read); err != nil {
		t.Fatal(err)
	}
	f.files = append(f.files, iceberg.File{Path: iceCurrent, Kind: iceberg.KindMetadata, Size: -1})
	return f
}

func (f *iceFixture) task(i int) schemas.CopyTask {
	file := f.files[i]
	return schemas.CopyTask{TaskID: fmt.Sprintf("9-%d", i), EventID: 9, Database: "icefix", Table: "t1",
		SourceURI: file.Path, TargetURI: iceDRRoot + strings.TrimPrefix(file.Path, iceRoot), Rewrite: kindRewrites[file.Kind]}
}

// TestCopyRewritesIceberg: copied task by task, as the tailer will
// publish them, the files of an Iceberg table land on DR with DR's paths:
// the rewritten kinds rewritten (no byte names the source cluster), the
// others byte for byte; the DR copy's metadata reaches exactly the copied
// files with the lengths and sizes they have; a second copy finds every
// file identical.
func TestCopyRewritesIceberg(t *testing.T) {
	ctx := context.Background()
	f := newIceFixture(t, nil)
	rewritten := 0
	for i := range f.files {
		c := f.e.Copy(ctx, f.task(i))
		if c.Status != schemas.StatusCopied || c.CRC32C == nil {
			t.Fatalf("%s (%s): %+v", f.files[i].Path, f.files[i].Kind, c)
		}
		got, ok := f.dr.get(c.TargetURI)
		if !ok || int64(len(got)) != c.Length || crcOf(got) != *c.CRC32C {
			t.Fatalf("%s: the completion says %d bytes crc %08x, DR holds %d (%v)", c.TargetURI, c.Length, *c.CRC32C, len(got), ok)
		}
		src, _ := f.src.get(f.files[i].Path)
		if f.files[i].Kind.Rewritten() {
			rewritten++
			if bytes.Equal(src, got) || !strings.Contains(c.Verification, "rewritten for the DR paths") {
				t.Errorf("%s: copied as is (%s)", c.TargetURI, c.Verification)
			}
		} else if !bytes.Equal(src, got) {
			t.Errorf("%s: a %s file changed on the way", c.TargetURI, f.files[i].Kind)
		}
		if bytes.Contains(got, []byte("127.0.0.1:18020")) {
			t.Errorf("%s names the source cluster", c.TargetURI)
		}
	}
	if rewritten == 0 {
		t.Fatal("nothing rewritten")
	}
	drMetaBytes, _ := f.dr.get(iceDRRoot + strings.TrimPrefix(iceCurrent, iceRoot))
	drMeta, err := iceberg.ParseMetadata(drMetaBytes)
	if err != nil {
		t.Fatal(err)
	}
	drFiles, err := iceberg.Added(ctx, nil, drMeta, func(_ context.Context, p string) ([]byte, error) {
		b, ok := f.dr.get(p)
		if !ok {
			return nil, fmt.Errorf("%s: not on DR", p)
		}
		return b, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(drFiles) != len(f.files)-1 {
		t.Errorf("DR's metadata reaches %d files, %d were copied besides it", len(drFiles), len(f.files)-1)
	}
	for _, df := range drFiles {
		b, ok := f.dr.get(df.Path)
		if !ok || (df.Size >= 0 && df.Size != int64(len(b))) {
			t.Errorf("DR's metadata names %s (%s) with %d bytes; DR holds %d (%v)", df.Path, df.Kind, df.Size, len(b), ok)
		}
	}
	for i := range f.files {
		if c := f.e.Copy(ctx, f.task(i)); c.Status != schemas.StatusSkippedIdentical {
			t.Errorf("%s copied again: %+v", f.files[i].Path, c)
		}
	}
}

// TestCopyRewriteRefusals: a rewrite the engine does not know, one with
// no mapping configured, and a file naming a path outside the mapping
// fail, naming what; a file gone from the source is SOURCE_GONE; a
// read that fails for a while is retried.
func TestCopyRewriteRefusals(t *testing.T) {
	ctx := context.Background()
	manifest := -1
	f := newIceFixture(t, nil)
	for i, file := range f.files {
		if file.Kind == iceberg.KindManifest {
			manifest = i
			break
		}
	}
	tk := f.task(manifest)
	tk.Rewrite = "iceberg-puffin"
	if c := f.e.Copy(ctx, tk); c.Status != schemas.StatusFailed || !strings.Contains(c.Error, `"iceberg-puffin"`) || !strings.Contains(c.Error, tk.SourceURI) {
		t.Errorf("an unknown rewrite: %+v", c)
	}

	r := &memResolver{stores: map[string]fs.FS{iceNN: f.src, drNN: f.dr}}
	unmapped, err := NewEngine(EngineConfig{SourceRoots: []string{iceNN + "/warehouse"}, TargetRoots: []string{drNN + "/warehouse"}}, r, nil)
	if err != nil {
		t.Fatal(err)
	}
	if c := unmapped.Copy(ctx, f.task(manifest)); c.Status != schemas.StatusFailed || !strings.Contains(c.Error, "path mappings") {
		t.Errorf("a rewrite without mappings: %+v", c)
	}

	narrow := newIceFixture(t, func(src string) (string, error) {
		if strings.Contains(src, "/data/") {
			return "", errors.New("under no mapping")
		}
		return drNN + strings.TrimPrefix(src, iceNN), nil
	})
	if c := narrow.e.Copy(ctx, narrow.task(manifest)); c.Status != schemas.StatusFailed || !strings.Contains(c.Error, "/data/") || !strings.Contains(c.Error, "under no mapping") {
		t.Errorf("a manifest naming files outside the mapping: %+v", c)
	}

	gone := f.task(manifest)
	f.src.mu.Lock()
	delete(f.src.files, gone.SourceURI)
	f.src.mu.Unlock()
	if c := f.e.Copy(ctx, gone); c.Status != schemas.StatusSourceGone || !strings.Contains(c.Evidence, "does not exist") {
		t.Errorf("a manifest gone from the source: %+v", c)
	}

	g := newIceFixture(t, nil)
	g.e.sleep = func(context.Context, time.Duration) error { return nil }
	g.src.fault("open", syscall.ECONNRESET)
	if c := g.e.Copy(ctx, g.task(manifest)); c.Status != schemas.StatusCopied || c.Attempts != 2 {
		t.Errorf("a manifest whose first read failed: %+v", c)
	}
}
