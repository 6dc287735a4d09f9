package fs

import (
	"bytes"
	"context"
	"errors"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

func crcOf(b []byte) uint32 { return crc32.Checksum(b, castagnoli) }

// write creates loc with data through f and returns the unfinished writer.
func write(t *testing.T, f FS, loc string, data []byte) Writer {
	t.Helper()
	w, err := f.Create(context.Background(), loc, int64(len(data)))
	if err != nil {
		t.Fatalf("Create %s: %v", loc, err)
	}
	if _, err := w.Write(data); err != nil {
		t.Fatalf("Write %s: %v", loc, err)
	}
	return w
}

// dirNames lists dir's entries.
func dirNames(t *testing.T, dir string) []string {
	t.Helper()
	es, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range es {
		names = append(names, e.Name())
	}
	return names
}

func TestLocalCommitIsAtomic(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	loc := filepath.Join(dir, "a", "b", "part-0")
	data := []byte("hello, warehouse")
	l := NewLocal()

	w := write(t, l, loc, data)
	if _, err := l.Stat(ctx, loc); !errors.Is(err, ErrNotExist) {
		t.Fatalf("before Commit: Stat = %v, want ErrNotExist", err)
	}
	staging := w.Staging()
	if filepath.Dir(staging) != filepath.Dir(loc) || !IsStagingName(filepath.Base(staging)) {
		t.Fatalf("staging %s is not a staging file beside %s", staging, loc)
	}
	if err := w.Commit(ctx, crcOf(data)); err != nil {
		t.Fatalf("Commit: %v", err)
	}
	got, err := os.ReadFile(loc)
	if err != nil || !bytes.Equal(got, data) {
		t.Fatalf("after Commit: %q, %v; want %q", got, err, data)
	}
	if names := dirNames(t, filepath.Dir(loc)); len(names) != 1 {
		t.Errorf("after Commit the directory holds %v, want only the file", names)
	}
	fi, err := l.Stat(ctx, "file://"+loc)
	if err != nil || fi.Size != int64(len(data)) || fi.IsDir || fi.IsSymlink {
		t.Errorf("Stat = %+v, %v", fi, err)
	}
	sum, ok, err := l.Checksum(ctx, loc)
	if err != nil || !ok || sum.CRC32C != crcOf(data) || sum.Source != "computed" {
		t.Errorf("Checksum = %+v, %v, %v; want %08x", sum, ok, err, crcOf(data))
	}
	if err := w.Abort(ctx); err != nil {
		t.Errorf("Abort after Commit: %v", err)
	}
	if _, err := os.Stat(loc); err != nil {
		t.Errorf("Abort after Commit removed the file: %v", err)
	}
}

func TestLocalReplace(t *testing.T) {
	ctx := context.Background()
	loc := filepath.Join(t.TempDir(), "f")
	l := NewLocal()
	if err := os.WriteFile(loc, []byte("old"), 0o644); err != nil {
		t.Fatal(err)
	}
	w := write(t, l, loc, []byte("new content"))
	if got, _ := os.ReadFile(loc); string(got) != "old" {
		t.Fatalf("before Commit the file holds %q, want the old content", got)
	}
	if err := w.Commit(ctx, crcOf([]byte("new content"))); err != nil {
		t.Fatal(err)
	}
	if got, _ := os.ReadFile(loc); string(got) != "new content" {
		t.Fatalf("after Commit the file holds %q", got)
	}
}

func TestLocalAbortLeavesNothing(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	loc := filepath.Join(dir, "f")
	l := NewLocal()
	w := write(t, l, loc, []byte("partial"))
	if err := w.Abort(ctx); err != nil {
		t.Fatal(err)
	}
	if names := dirNames(t, dir); len(names) != 0 {
		t.Fatalf("after Abort the directory holds %v", names)
	}
	if err := w.Commit(ctx, 0); err == nil {
		t.Fatal("Commit after Abort succeeded")
	}
}

func TestLocalCommitRefusesWrongCRC(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	loc := filepath.Join(dir, "f")
	l := NewLocal()
	data := []byte("bytes")
	w := write(t, l, loc, data)
	err := w.Commit(ctx, crcOf(data)+1)
	var ce *ChecksumError
	if !errors.As(err, &ce) || ce.Got != crcOf(data) || !ce.HasGot {
		t.Fatalf("Commit with a wrong CRC = %v, want a ChecksumError", err)
	}
	if _, err := os.Stat(loc); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a refused Commit published the file: %v", err)
	}
	if err := w.Abort(ctx); err != nil {
		t.Fatal(err)
	}
	if names := dirNames(t, dir); len(names) != 0 {
		t.Fatalf("after Abort the directory holds %v", names)
	}
}

func TestLocalDiscard(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	loc := filepath.Join(dir, "f")
	l := NewLocal()
	w := write(t, l, loc, []byte("left behind by a crash"))
	staging := w.Staging()
	if err := l.Discard(ctx, loc, staging); err != nil {
		t.Fatal(err)
	}
	if names := dirNames(t, dir); len(names) != 0 {
		t.Fatalf("after Discard the directory holds %v", names)
	}
	if err := l.Discard(ctx, loc, staging); err != nil {
		t.Fatalf("Discard of a gone staging file: %v", err)
	}
	if err := l.Discard(ctx, loc, ""); err != nil {
		t.Fatalf("Discard with no staging: %v", err)
	}

	// Discard never deletes what is not a staging file of the path.
	other := filepath.Join(dir, "other")
	if err := os.WriteFile(other, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	sub := filepath.Join(dir, "sub")
	for _, s := range []string{
		other,
		filepath.Join(dir, ".other.hivedr-0123456789abcdef.staging"),
		filepath.Join(sub, ".f.hivedr-0123456789abcdef.staging"),
		filepath.Join(dir, ".f.hivedr-0123.staging"),
		filepath.Join(dir, ".f.hivedr-0123456789abcdeg.staging"),
	} {
		if err := l.Discard(ctx, loc, s); err == nil || !strings.Contains(err.Error(), loc) {
			t.Errorf("Discard(%s, %s) = %v, want a refusal naming the path", loc, s, err)
		}
	}
	if _, err := os.Stat(other); err != nil {
		t.Fatal(err)
	}
}

func TestLocalOpenRange(t *testing.T) {
	ctx := context.Background()
	loc := filepath.Join(t.TempDir(), "f")
	if err := os.WriteFile(loc, []byte("0123456789"), 0o644); err != nil {
		t.Fatal(err)
	}
	l := NewLocal()
	for _, c := range []struct {
		off, n int64
		want   string
	}{
		{0, -1, "0123456789"}, {3, 4, "3456"}, {8, -1, "89"}, {8, 10, "89"}, {10, -1, ""}, {20, 5, ""}, {5, 0, ""},
	} {
		r, err := l.Open(ctx, loc, c.off, c.n)
		if err != nil {
			t.Fatalf("Open(%d, %d): %v", c.off, c.n, err)
		}
		got, err := io.ReadAll(r)
		r.Close()
		if err != nil || string(got) != c.want {
			t.Errorf("Open(%d, %d) read %q, %v; want %q", c.off, c.n, got, err, c.want)
		}
	}
	if _, err := l.Open(ctx, loc+"-missing", 0, -1); !errors.Is(err, ErrNotExist) {
		t.Errorf("Open of a missing file = %v, want ErrNotExist", err)
	}
	if _, err := l.Open(ctx, filepath.Dir(loc), 0, -1); err == nil {
		t.Errorf("Open of a directory succeeded")
	}
}

func TestLocalSymlinks(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	outside := filepath.Join(t.TempDir(), "secret")
	if err := os.WriteFile(outside, []byte("outside the roots"), 0o644); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, "link")
	if err := os.Symlink(outside, link); err != nil {
		t.Fatal(err)
	}
	l := NewLocal()
	fi, err := l.Stat(ctx, link)
	if err != nil || !fi.IsSymlink {
		t.Fatalf("Stat of a symlink = %+v, %v; want IsSymlink", fi, err)
	}
	if _, err := l.Open(ctx, link, 0, -1); err == nil || !strings.Contains(err.Error(), link) {
		t.Errorf("Open followed a symlink (err %v)", err)
	}
	if _, _, err := l.Checksum(ctx, link); err == nil {
		t.Errorf("Checksum followed a symlink")
	}
	// Commit replaces the link; the file it pointed to is untouched.
	w := write(t, l, link, []byte("new"))
	if err := w.Commit(ctx, crcOf([]byte("new"))); err != nil {
		t.Fatal(err)
	}
	if got, _ := os.ReadFile(outside); string(got) != "outside the roots" {
		t.Errorf("writing over a symlink changed its target: %q", got)
	}
	if fi, err := os.Lstat(link); err != nil || !fi.Mode().IsRegular() {
		t.Errorf("after Commit %s is %v, %v; want a regular file", link, fi.Mode(), err)
	}
}

func TestLocalRemove(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	loc := filepath.Join(dir, "f")
	if err := os.WriteFile(loc, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	l := NewLocal()
	if err := l.Remove(ctx, loc); err != nil {
		t.Fatal(err)
	}
	if err := l.Remove(ctx, loc); err != nil {
		t.Fatalf("Remove of a missing file: %v", err)
	}
	if err := l.Remove(ctx, dir); err == nil {
		t.Fatalf("Remove of a directory succeeded")
	}
}

func TestLocalRefusesBadLocations(t *testing.T) {
	ctx := context.Background()
	l := NewLocal()
	for _, loc := range []string{"relative/f", "/a/../etc/passwd", "/a/./b", "hdfs://nn:8020/f", "file://host/f", "s3://b/k"} {
		if _, err := l.Stat(ctx, loc); err == nil || errors.Is(err, ErrNotExist) || !strings.Contains(err.Error(), loc) {
			t.Errorf("Stat(%q) = %v, want a refusal naming it", loc, err)
		}
	}
}

// TestLocalLinkedDirectories: a symbolic link among a location's
// directories is refused for reads and writes, so nothing outside a root is
// reached through a linked directory inside it.
func TestLocalLinkedDirectories(t *testing.T) {
	ctx := context.Background()
	root, outside := t.TempDir(), t.TempDir()
	if err := os.WriteFile(filepath.Join(outside, "secret"), []byte("outside the roots"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, filepath.Join(root, "linked")); err != nil {
		t.Fatal(err)
	}
	l := NewLocal()
	secret := filepath.Join(root, "linked", "secret")
	if _, err := l.Open(ctx, secret, 0, -1); err == nil || !strings.Contains(err.Error(), "symbolic link") {
		t.Errorf("Open through a linked directory: err %v, want a refusal", err)
	}
	if _, err := l.Stat(ctx, secret); err == nil {
		t.Error("Stat through a linked directory succeeded")
	}
	if _, err := l.Create(ctx, filepath.Join(root, "linked", "planted"), 1); err == nil {
		t.Error("Create through a linked directory succeeded")
	}
	if _, err := os.Stat(filepath.Join(outside, "planted")); !os.IsNotExist(err) {
		t.Errorf("a file was planted outside the root: %v", err)
	}
	if err := l.Remove(ctx, secret); err == nil {
		t.Error("Remove through a linked directory succeeded")
	}
}

// TestLocalEventMarks: a file written with an event mark carries it once
// in place (set on the staging file, kept by the rename); a mark can be
// read and moved on a file in place; a file without one answers ok
// false. On a filesystem without user extended attributes every file
// answers ok false and marking is a no-op.
func TestLocalEventMarks(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	l := NewLocal()
	probe := filepath.Join(dir, "probe")
	if err := os.WriteFile(probe, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	supported := syscall.Setxattr(probe, "user.hivedr.probe", []byte("1"), 0) == nil
	t.Logf("user extended attributes in %s: %v", dir, supported)

	loc := filepath.Join(dir, "t", "000000_0")
	data := []byte("rows")
	w := write(t, l, loc, data)
	w.(EventMarkWriter).MarkEvent(143)
	if err := w.Commit(ctx, crcOf(data)); err != nil {
		t.Fatal(err)
	}
	id, ok, err := l.EventMark(ctx, loc)
	if err != nil || ok != supported || supported && id != 143 {
		t.Fatalf("EventMark after a marked write = %d, %v, %v; want 143 (supported %v)", id, ok, err, supported)
	}
	if err := l.SetEventMark(ctx, loc, 200); err != nil {
		t.Fatal(err)
	}
	if id, ok, err := l.EventMark(ctx, loc); err != nil || ok != supported || supported && id != 200 {
		t.Errorf("EventMark after SetEventMark = %d, %v, %v; want 200", id, ok, err)
	}
	plain := filepath.Join(dir, "plain")
	if err := os.WriteFile(plain, data, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, ok, err := l.EventMark(ctx, plain); ok || err != nil {
		t.Errorf("EventMark of an unmarked file = %v, %v; want none", ok, err)
	}
	if _, _, err := l.EventMark(ctx, filepath.Join(dir, "missing")); !errors.Is(err, ErrNotExist) {
		t.Errorf("EventMark of a missing file: %v, want ErrNotExist", err)
	}
}
