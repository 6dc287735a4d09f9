package fs

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestRouterList lists a local directory spelled every way a location may
// be: the answer is the canonical locations of the regular files directly
// under it, never its subdirectories' files, staging files or links.
func TestRouterList(t *testing.T) {
	ctx := context.Background()
	r, err := NewRouter(Config{Local: true})
	if err != nil {
		t.Fatal(err)
	}
	root := t.TempDir()
	dir := filepath.Join(root, "w", "t")
	mustWrite := func(p string) {
		t.Helper()
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	mustWrite(filepath.Join(dir, "b.orc"))
	mustWrite(filepath.Join(dir, "a.orc"))
	mustWrite(filepath.Join(dir, "_SUCCESS"))
	mustWrite(filepath.Join(dir, "dt=1", "deeper.orc"))
	staging, err := stagingName("c.orc")
	if err != nil {
		t.Fatal(err)
	}
	mustWrite(filepath.Join(dir, staging))
	if err := os.Symlink(filepath.Join(dir, "a.orc"), filepath.Join(dir, "link.orc")); err != nil {
		t.Fatal(err)
	}
	want := []string{dir + "/_SUCCESS", dir + "/a.orc", dir + "/b.orc"}
	for _, spelled := range []string{dir, dir + "/", "file:" + dir, "file://" + dir + "//", "file://localhost" + dir, "FILE://LocalHost" + dir} {
		got, err := r.List(ctx, spelled)
		if err != nil || !slices.Equal(got, want) {
			t.Errorf("List(%s) = %q, %v; want %q", spelled, got, err, want)
		}
	}

	// A missing directory holds no files.
	if got, err := r.List(ctx, "file:"+filepath.Join(root, "gone")); err != nil || len(got) != 0 {
		t.Errorf("List of a missing directory = %q, %v; want nothing", got, err)
	}
	// A file is not a directory; a linked directory is not listed through.
	if _, err := r.List(ctx, dir+"/a.orc"); err == nil || !strings.Contains(err.Error(), "a.orc") {
		t.Errorf("List of a file = %v, want an error naming it", err)
	}
	if err := os.Symlink(dir, filepath.Join(root, "linked")); err != nil {
		t.Fatal(err)
	}
	if got, err := r.List(ctx, filepath.Join(root, "linked")); err == nil {
		t.Errorf("List through a linked directory = %q, want an error", got)
	}
	// Refusals name the location.
	for _, bad := range []string{"hdfs://nn/w", "file://remote/w", dir + "/../t", "relative"} {
		if _, err := r.List(ctx, bad); err == nil || !strings.Contains(err.Error(), bad) {
			t.Errorf("List(%q) = %v, want an error naming it", bad, err)
		}
	}

	// Remove takes any spelling of the file; a file already gone is fine.
	if err := r.Remove(ctx, "file:"+dir+"/b.orc"); err != nil {
		t.Fatal(err)
	}
	if err := r.Remove(ctx, "file:"+dir+"/b.orc"); err != nil {
		t.Errorf("Remove of a file already gone: %v", err)
	}
	if got, _ := r.List(ctx, dir); !slices.Equal(got, []string{dir + "/_SUCCESS", dir + "/a.orc"}) {
		t.Errorf("after Remove, List = %q", got)
	}
	if err := r.Remove(ctx, "hdfs://nn/w/f"); err == nil || !strings.Contains(err.Error(), "hdfs://nn/w/f") {
		t.Errorf("Remove on an unconfigured cluster = %v, want an error naming it", err)
	}
}

// TestRouterListDirs: the subdirectories directly under a directory, by
// name; none for a missing one.
func TestRouterListDirs(t *testing.T) {
	ctx := context.Background()
	r, err := NewRouter(Config{Local: true})
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "t")
	for _, d := range []string{"ds=2", "ds=1/deeper"} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "ds=3"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	if got, err := r.ListDirs(ctx, "file://"+dir+"/"); err != nil || !slices.Equal(got, []string{"ds=1", "ds=2"}) {
		t.Errorf("ListDirs = %q, %v; want ds=1 ds=2", got, err)
	}
	if got, err := r.ListDirs(ctx, filepath.Join(dir, "gone")); err != nil || len(got) != 0 {
		t.Errorf("ListDirs of a missing directory = %q, %v; want nothing", got, err)
	}
}
