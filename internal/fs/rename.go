package fs

import (
	"context"
	"errors"
	"fmt"
	"os"
	"syscall"
)

// ErrExist marks a rename whose target is already there.
var ErrExist = errors.New("target already exists")

// ErrNoAtomicRename marks a store that cannot move a directory in one
// step (S3: a "directory" is a key prefix, moved object by object, so a
// reader could see it half moved).
var ErrNoAtomicRename = errors.New("the store cannot rename a directory atomically")

// RenameDir moves the directory from to the location to, atomically: a
// reader of the store sees it at one place or the other, never part at
// each. Both must be on the same store; to must not exist (ErrExist) and
// its parent must. A missing from is an error wrapping ErrNotExist. On S3
// it fails with ErrNoAtomicRename.
func (r *Router) RenameDir(ctx context.Context, from, to string) error {
	ff, fl, err := r.Split(from)
	if err != nil {
		return err
	}
	tf, tl, err := r.Split(to)
	if err != nil {
		return err
	}
	if ff != tf {
		return fmt.Errorf("rename %s to %s: not on the same store", from, to)
	}
	switch s := ff.(type) {
	case *HDFS:
		return s.renameDir(ctx, fl, tl)
	case *Local:
		return s.renameDir(fl, tl)
	}
	return fmt.Errorf("rename %s to %s: %w", from, to, ErrNoAtomicRename)
}

// Exists reports whether anything (file or directory) is at loc.
func (r *Router) Exists(ctx context.Context, loc string) (bool, error) {
	f, l, err := r.Split(loc)
	if err != nil {
		return false, err
	}
	switch s := f.(type) {
	case *HDFS:
		p, err := s.path(l)
		if err != nil {
			return false, err
		}
		c, err := s.conn(ctx)
		if err != nil {
			return false, fmt.Errorf("stat %s: %w", loc, err)
		}
		_, err = c.Stat(p)
		if errors.Is(err, os.ErrNotExist) {
			return false, nil
		}
		if err != nil {
			return false, fmt.Errorf("stat %s: %w", loc, err)
		}
		return true, nil
	}
	// Local: Stat describes a directory too (in its parent opened as an
	// os.Root).
	_, err = f.Stat(ctx, l)
	if errors.Is(err, ErrNotExist) {
		return false, nil
	}
	return err == nil, err
}

func (h *HDFS) renameDir(ctx context.Context, from, to string) error {
	fp, err := h.path(from)
	if err != nil {
		return err
	}
	tp, err := h.path(to)
	if err != nil {
		return err
	}
	c, err := h.conn(ctx)
	if err != nil {
		return fmt.Errorf("rename %s: %w", from, err)
	}
	fi, err := c.Stat(fp)
	if err != nil {
		return hdfsError("rename", from, err)
	}
	if !fi.IsDir() {
		return fmt.Errorf("rename %s: not a directory", from)
	}
	// The client renames with overwrite, which would replace an empty
	// directory at to: refuse any target.
	if _, err := c.Stat(tp); err == nil {
		return fmt.Errorf("rename %s to %s: %w", from, to, ErrExist)
	} else if !errors.Is(err, os.ErrNotExist) {
		return hdfsError("rename", to, err)
	}
	if err := c.Rename(fp, tp); err != nil {
		return hdfsError("rename", from, err)
	}
	return nil
}

// RemoveEmptyDir removes the directory at loc when it is empty; a
// missing one, or one that holds anything (a file a copy is writing
// meanwhile), is left as it is and is no error. Stores without
// directories (S3) have nothing to remove.
func (r *Router) RemoveEmptyDir(ctx context.Context, loc string) error {
	f, l, err := r.Split(loc)
	if err != nil {
		return err
	}
	switch s := f.(type) {
	case *HDFS:
		p, err := s.path(l)
		if err != nil {
			return err
		}
		c, err := s.conn(ctx)
		if err != nil {
			return fmt.Errorf("remove directory %s: %w", loc, err)
		}
		names, err := c.ReadDir(p)
		if errors.Is(err, os.ErrNotExist) || err == nil && len(names) > 0 {
			return nil
		}
		if err != nil {
			return hdfsError("remove directory", loc, err)
		}
		// Not recursive: the NameNode refuses a directory that is no
		// longer empty.
		if err := c.Remove(p); err != nil && !errors.Is(err, os.ErrNotExist) && !isNotEmpty(err) {
			return hdfsError("remove directory", loc, err)
		}
		return nil
	case *Local:
		return s.removeEmptyDir(l)
	}
	return nil
}

// isNotEmpty reports whether err refuses to remove a directory that is
// not empty.
func isNotEmpty(err error) bool {
	return errors.Is(err, syscall.ENOTEMPTY)
}
