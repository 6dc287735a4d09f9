package fs

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
)

func TestRenameDirLocal(t *testing.T) {
	ctx := context.Background()
	r, err := NewRouter(Config{Local: true})
	if err != nil {
		t.Fatal(err)
	}
	root := t.TempDir()
	from, to := filepath.Join(root, ".staged"), filepath.Join(root, "base_0000005")
	if err := os.MkdirAll(from, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(from, "bucket_00000"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	if ok, err := r.Exists(ctx, to); err != nil || ok {
		t.Fatalf("Exists(%s) before = %v, %v", to, ok, err)
	}
	if err := r.RenameDir(ctx, from, to); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(filepath.Join(to, "bucket_00000")); err != nil || string(b) != "x" {
		t.Fatalf("renamed file: %q, %v", b, err)
	}
	if ok, err := r.Exists(ctx, from); err != nil || ok {
		t.Fatalf("Exists(%s) after = %v, %v", from, ok, err)
	}
	// Again: the source is gone.
	if err := r.RenameDir(ctx, from, to); !errors.Is(err, ErrNotExist) {
		t.Fatalf("renaming a missing directory: %v, want ErrNotExist", err)
	}
	// Onto an existing target: refused, nothing moved.
	if err := os.MkdirAll(from, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := r.RenameDir(ctx, from, to); !errors.Is(err, ErrExist) {
		t.Fatalf("renaming onto an existing directory: %v, want ErrExist", err)
	}
	// A file is not a directory.
	f := filepath.Join(root, "file")
	if err := os.WriteFile(f, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := r.RenameDir(ctx, f, filepath.Join(root, "moved")); err == nil {
		t.Fatal("renaming a file as a directory succeeded")
	}
}
