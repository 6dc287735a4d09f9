package fs

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"slices"
	"sync/atomic"
	"testing"
	"time"
)

// TestProdLocalRoot: a directory of the locations the local FS reads and
// writes is swapped again and again for a symbolic link to a directory
// elsewhere while it works under it (the race between checking a path's
// directories and opening it). No open, checksum, stat or listing ever
// reaches the directory elsewhere and no file is ever written there: each
// is done in the directory that was checked, opened as an os.Root.
func TestProdLocalRoot(t *testing.T) {
	ctx := context.Background()
	base := t.TempDir()
	root, outside := filepath.Join(base, "root"), filepath.Join(base, "outside")
	dir, moved := filepath.Join(root, "a"), filepath.Join(root, "a.real")
	for _, d := range []string{dir, outside} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	inside, secret := []byte("inside the root"), []byte("outside the root, longer")
	if err := os.WriteFile(filepath.Join(dir, "f"), inside, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"f", "only-outside"} {
		if err := os.WriteFile(filepath.Join(outside, name), secret, 0o644); err != nil {
			t.Fatal(err)
		}
	}

	stop, done := make(chan struct{}), make(chan struct{})
	var flips atomic.Int64
	go func() {
		defer close(done)
		for {
			select {
			case <-stop:
				return
			default:
			}
			// a is the real directory, then a link to outside, then the
			// real directory again. A step that finds a directory the
			// local FS made while a was away (Create makes the missing
			// directories of its location) removes it and tries again.
			for _, step := range []func() error{
				func() error { return os.Rename(dir, moved) },
				func() error { return os.Symlink(outside, dir) },
				func() error { return os.Remove(dir) },
				func() error { return os.Rename(moved, dir) },
			} {
				err := step()
				for try := 0; err != nil && try < 100; try++ {
					if err = os.RemoveAll(dir); err == nil {
						err = step()
					}
				}
				if err != nil {
					t.Errorf("the swap: %v", err)
					return
				}
			}
			flips.Add(1)
		}
	}()

	l := NewLocal()
	loc := filepath.Join(dir, "f")
	reads := 0
	escaped := func() bool {
		if rc, err := l.Open(ctx, loc, 0, -1); err == nil {
			b, err := io.ReadAll(rc)
			rc.Close()
			if err == nil && string(b) == string(secret) {
				t.Errorf("Open %s read the file outside the root", loc)
				return true
			}
			if string(b) == string(inside) {
				reads++
			}
		}
		if c, _, err := l.Checksum(ctx, loc); err == nil && c.CRC32C == crcOf(secret) {
			t.Errorf("Checksum %s read the file outside the root", loc)
			return true
		}
		if fi, err := l.Stat(ctx, loc); err == nil && fi.Size == int64(len(secret)) {
			t.Errorf("Stat %s described the file outside the root", loc)
			return true
		}
		if names, err := l.List(ctx, dir); err == nil && slices.Contains(names, filepath.Join(dir, "only-outside")) {
			t.Errorf("List %s listed the directory outside the root: %q", dir, names)
			return true
		}
		if w, err := l.Create(ctx, filepath.Join(dir, "g"), 1); err == nil {
			if _, err := w.Write([]byte("g")); err != nil || w.Commit(ctx, crcOf([]byte("g"))) != nil {
				w.Abort(ctx)
			}
		}
		return false
	}
	for end := time.Now().Add(time.Second); time.Now().Before(end) && !escaped(); {
	}
	close(stop)
	<-done
	if names := dirNames(t, outside); !slices.Equal(names, []string{"f", "only-outside"}) {
		t.Errorf("the directory outside the root holds %q, want f and only-outside alone: a write went through the link", names)
	}
	if flips.Load() == 0 || reads == 0 {
		t.Errorf("%d swaps, %d reads of the file inside: the race was not run", flips.Load(), reads)
	}
}
