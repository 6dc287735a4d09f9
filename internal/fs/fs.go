// Package fs is hivedr's one interface to the stores that hold data files,
// with implementations for HDFS, S3 and the local filesystem (the last
// only where filesystems.local allows it). copyd moves and verifies bytes
// through it (FS, and Splitter for large files written as ranges); the
// tailer and the bootstrap list the directories of external tables with it
// (Router.Walk), the applier lists and removes DR files when it prunes
// (Router.List, Router.Remove), and `hivedr copy` walks a source tree
// (Router.Walk).
// Nothing else in hivedr reads or writes data files.
//
// Paths are full locations: hdfs://host:port/p, s3://bucket/key, or an
// absolute local path (file:///p is accepted too). A Router, built from
// the filesystems section of the configuration (Config), picks the FS for
// a location by scheme and authority, in canonical form (package
// location).
package fs

import (
	"context"
	"errors"
	"io"
	"os"
	"time"
)

// ErrNotExist is returned (wrapped) when a file does not exist.
var ErrNotExist = errors.New("file does not exist")

// FileInfo describes a file.
type FileInfo struct {
	Size    int64
	ModTime time.Time
	IsDir   bool
	// IsSymlink is set when the path itself is a symbolic link (local
	// filesystem only). The link is described, not its target: Open and
	// Checksum refuse to follow it, and Commit replaces the link itself.
	IsSymlink bool
	// Owner, Group and Perm are the file's owner, group and permission
	// bits where the store keeps them (HDFS); empty and 0 elsewhere
	// (HasPerm false).
	Owner, Group string
	Perm         os.FileMode
	HasPerm      bool
}

// Meta is the metadata a copy gives its target file before it becomes
// visible (DistCp -p): each field left zero is left as the store makes it.
type Meta struct {
	// Owner and Group, set together or alone (chown needs the HDFS
	// superuser; chgrp a member of the group who owns the file).
	Owner, Group string
	// Perm is the permission bits, when HasPerm.
	Perm    os.FileMode
	HasPerm bool
	// ModTime is the modification time; zero leaves the write's.
	ModTime time.Time
}

// Missing returns the fields of m that have does not have already:
// owner, group and permission bits, and the modification time, compared to
// the millisecond (HDFS's precision). Fields of m left zero are not
// compared. For a directory, set m's ModTime to zero.
func (m Meta) Missing(have FileInfo) Meta {
	var d Meta
	if m.Owner != "" && m.Owner != have.Owner {
		d.Owner = m.Owner
	}
	if m.Group != "" && m.Group != have.Group {
		d.Group = m.Group
	}
	if m.HasPerm && (!have.HasPerm || m.Perm.Perm() != have.Perm.Perm()) {
		d.Perm, d.HasPerm = m.Perm.Perm(), true
	}
	if !m.ModTime.IsZero() && m.ModTime.UnixMilli() != have.ModTime.UnixMilli() {
		d.ModTime = m.ModTime
	}
	return d
}

// IsZero reports whether m sets nothing.
func (m Meta) IsZero() bool {
	return m.Owner == "" && m.Group == "" && !m.HasPerm && m.ModTime.IsZero()
}

// MetaSetter is a Writer or SplitWriter whose store can keep a file's
// metadata (HDFS). SetMeta is called before Commit; the metadata is set on
// the staging file, so the target appears with it, never without.
type MetaSetter interface {
	SetMeta(m Meta)
}

// MetaKeeper is an FS that keeps owner, group and permission bits on
// directories and files, and modification times on files (HDFS), and can
// set them on what already exists, without rewriting anything. copyd uses
// it for the directories it writes into and for files it finds already
// identical.
type MetaKeeper interface {
	// KeepDir makes the directory at path, with m's owner, group and
	// permission bits, when it is missing (making missing parents above
	// it as the store's defaults have them), and gives an existing one
	// those of m's that differ from what it has. Fields of m left zero are
	// left as they are; m's ModTime is not used. A path that exists as a
	// file is an error. A refusal is a *PermissionError.
	KeepDir(ctx context.Context, path string, m Meta) (DirChange, error)
	// SetFileMeta gives the existing file at path m's fields that are set
	// (owner, group, permission bits, modification time). A refusal is a
	// *PermissionError.
	SetFileMeta(ctx context.Context, path string, m Meta) error
}

// DirChange says what KeepDir did.
type DirChange int

// What KeepDir did: nothing (the directory was there with the metadata
// asked), made the directory, or changed an existing one's metadata.
const (
	DirKept DirChange = iota
	DirMade
	DirFixed
)

// PermissionError is a store's refusal to set metadata the caller asked
// for (not a transient fault: retrying cannot help).
type PermissionError struct {
	// Location is the file or directory; Dir says which.
	Location string
	Dir      bool
	Op, User string
	Err      error
}

func (e *PermissionError) Error() string {
	what := e.Location
	if e.Dir {
		what = "directory " + e.Location
	}
	return "keep metadata of " + what + ": user " + e.User + " may not " + e.Op + ": " + e.Err.Error()
}

func (e *PermissionError) Unwrap() error { return e.Err }

// Checksum is a whole-file checksum as a store reports it.
type Checksum struct {
	// CRC32C of the whole file, independent of block or part sizes.
	CRC32C uint32
	// Source says how it was obtained, e.g. "hdfs-composite-crc",
	// "s3-full-object-crc32c", "computed".
	Source string
}

// FS is one storage system.
//
// Invariant kept by every implementation: a reader of a path never sees a
// partial file written through Create. HDFS and local writes go to a
// staging name beside the target (same directory, so the rename cannot
// cross filesystems) and are renamed into place by Commit; S3 objects
// appear only when their single put or multipart upload completes.
type FS interface {
	// Stat describes the file at path, or returns an error wrapping
	// ErrNotExist.
	Stat(ctx context.Context, path string) (FileInfo, error)
	// Open reads n bytes of the file at path from offset off (n < 0: to
	// the end).
	Open(ctx context.Context, path string, off, n int64) (io.ReadCloser, error)
	// Checksum returns the file's CRC32C as the store computes it, without
	// reading the file through this process where the store can do it
	// itself. ok is false when the store cannot say (an S3 object written
	// without a full-object checksum, for example).
	Checksum(ctx context.Context, path string) (sum Checksum, ok bool, err error)
	// Create starts writing a new file at path of the given size (-1 when
	// unknown); parents are created. Nothing is visible at path until
	// Commit; an existing file there is replaced by Commit.
	Create(ctx context.Context, path string, size int64) (Writer, error)
	// Remove deletes the file at path; a missing file is not an error.
	Remove(ctx context.Context, path string) error
	// Discard cleans up a write a crashed process left behind, given the
	// path and the Writer's Staging value: it deletes the staging file or
	// aborts the multipart upload. Already gone is not an error.
	Discard(ctx context.Context, path, staging string) error
}

// StagedCreator is an FS that names a write's staging file before it
// creates it, so that a writer can record the name first (copyd's
// StagingLog) and a crash between creating and recording cannot leave a
// staging file nobody knows of. HDFS and Local are; S3 is not (the store
// names a multipart upload when it starts it).
type StagedCreator interface {
	// StagingFor returns a new staging location for loc; it creates
	// nothing.
	StagingFor(loc string) (string, error)
	// CreateStaged is Create writing to staging, which StagingFor
	// returned for loc.
	CreateStaged(ctx context.Context, loc, staging string, size int64) (Writer, error)
}

// Writer is a file being written.
type Writer interface {
	io.Writer
	// Commit makes the file visible at its path, atomically. The CRC32C
	// the caller computed while writing is passed so stores that verify
	// on upload (S3) can refuse a mismatch.
	Commit(ctx context.Context, crc32c uint32) error
	// Abort discards what was written; the path is left as it was.
	Abort(ctx context.Context) error
	// Verified reports, after a successful Commit, the checksum the store
	// itself computed or enforced for the bytes it published (HDFS: the
	// DataNodes' COMPOSITE-CRC32C of the staging file before the rename;
	// S3: the full-object CRC32C the server checked on upload). ok is false
	// when the store did not check (local files), so a caller that wants
	// the target's own word must ask Checksum.
	Verified() (sum Checksum, ok bool)
	// Staging identifies the in-progress write (a staging path, or an S3
	// upload ID) so a restarted daemon can clean it up.
	Staging() string
}
