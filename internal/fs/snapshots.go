package fs

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/hivedr/hivedr/internal/location"
	"github.com/hivedr/hivedr/internal/webhdfs"
)

// HDFS snapshots a tailer takes of source directories for a bootstrap's
// copies (producer's DirSnapshots), through WebHDFS: which directories
// are snapshottable, creating, listing and deleting snapshots.

// ErrNoSnapshots is returned (wrapped) for a location whose store has no
// snapshots (S3, local files).
var ErrNoSnapshots = errors.New("the store takes no snapshots")

// SnapshottableDirs lists the snapshottable directories of the cluster
// (GETSNAPSHOTTABLEDIRECTORYLIST: every one for a superuser, those the
// user owns otherwise), as canonical locations.
func (h *HDFS) SnapshottableDirs(ctx context.Context) ([]string, error) {
	dirs, err := h.web.GetSnapshottableDirectoryList(ctx)
	if err != nil {
		return nil, fmt.Errorf("snapshottable directories of hdfs://%s: %w", h.authority, err)
	}
	out := make([]string, len(dirs))
	for i, d := range dirs {
		out[i] = h.location(d)
	}
	return out, nil
}

// CreateSnapshot snapshots the directory dir under name.
func (h *HDFS) CreateSnapshot(ctx context.Context, dir, name string) error {
	p, err := h.path(dir)
	if err != nil {
		return err
	}
	if _, err := h.web.CreateSnapshot(ctx, p, name); err != nil {
		return fmt.Errorf("create snapshot %s of %s: %w", name, dir, err)
	}
	return nil
}

// DeleteSnapshot deletes dir's snapshot name; one gone already (or a
// directory gone, which HDFS allows only without snapshots) is not an
// error.
func (h *HDFS) DeleteSnapshot(ctx context.Context, dir, name string) error {
	p, err := h.path(dir)
	if err != nil {
		return err
	}
	err = h.web.DeleteSnapshot(ctx, p, name)
	var re *webhdfs.RemoteError
	switch {
	case err == nil:
		return nil
	case errors.As(err, &re) && (re.Exception == "FileNotFoundException" ||
		re.Exception == "SnapshotException" && strings.Contains(re.Message, "does not exist")):
		return nil
	}
	return fmt.Errorf("delete snapshot %s of %s: %w", name, dir, err)
}

// SnapshotNames lists the names of dir's snapshots (those deleted but not
// yet collected left out).
func (h *HDFS) SnapshotNames(ctx context.Context, dir string) ([]string, error) {
	p, err := h.path(dir)
	if err != nil {
		return nil, err
	}
	snaps, err := h.web.GetSnapshotList(ctx, p)
	if err != nil {
		return nil, fmt.Errorf("snapshots of %s: %w", dir, err)
	}
	var out []string
	for _, s := range snaps {
		if !s.Deleted {
			out = append(out, s.Name)
		}
	}
	return out, nil
}

// snapshotFS returns the HDFS cluster holding loc and loc's canonical
// form.
func (r *Router) snapshotFS(loc string) (*HDFS, string, error) {
	f, l, err := r.Split(loc)
	if err != nil {
		return nil, "", err
	}
	h, ok := f.(*HDFS)
	if !ok {
		return nil, "", fmt.Errorf("location %s: %w", loc, ErrNoSnapshots)
	}
	return h, l, nil
}

// SnapshottableDirs lists the snapshottable directories at or under root
// on the cluster holding it (HDFS.SnapshottableDirs), as canonical
// locations.
func (r *Router) SnapshottableDirs(ctx context.Context, root string) ([]string, error) {
	h, l, err := r.snapshotFS(root)
	if err != nil {
		return nil, err
	}
	rl, err := location.Parse(l)
	if err != nil {
		return nil, err
	}
	all, err := h.SnapshottableDirs(ctx)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, d := range all {
		if dl, err := location.Parse(d); err == nil {
			if _, in := dl.Rel(rl); in {
				out = append(out, dl.String())
			}
		}
	}
	return out, nil
}

// CreateSnapshot snapshots the directory dir (HDFS only) under name.
func (r *Router) CreateSnapshot(ctx context.Context, dir, name string) error {
	h, l, err := r.snapshotFS(dir)
	if err != nil {
		return err
	}
	return h.CreateSnapshot(ctx, l, name)
}

// DeleteSnapshot deletes dir's snapshot name (HDFS.DeleteSnapshot).
func (r *Router) DeleteSnapshot(ctx context.Context, dir, name string) error {
	h, l, err := r.snapshotFS(dir)
	if err != nil {
		return err
	}
	return h.DeleteSnapshot(ctx, l, name)
}

// SnapshotNames lists dir's snapshots (HDFS.SnapshotNames).
func (r *Router) SnapshotNames(ctx context.Context, dir string) ([]string, error) {
	h, l, err := r.snapshotFS(dir)
	if err != nil {
		return nil, err
	}
	return h.SnapshotNames(ctx, l)
}
