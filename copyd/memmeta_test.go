package copyd

import (
	"context"
	"os"
	"strings"
	"time"

	"github.com/hivedr/hivedr/internal/fs"
	"github.com/hivedr/hivedr/internal/location"
)

// memMetaFS is a memFS whose files and directories have owners, groups,
// permission bits and modification times, as HDFS's do: Stat reports
// them, its writers take a file's metadata before the commit
// (fs.MetaSetter), and it sets them on what exists (fs.MetaKeeper).
// Directories exist explicitly; Create makes the missing parents of a
// file as HDFS's CreateStaged does (owner user, group "supergroup", mode
// 0755). Every KeepDir and SetFileMeta is logged ("keepdir p", "setmeta
// p") and takes injected faults as other calls do.
type memMetaFS struct {
	*memFS
	user string
	meta map[string]fs.Meta // files and directories
	dirs map[string]bool
}

var (
	_ fs.MetaKeeper = (*memMetaFS)(nil)
	_ fs.FS         = (*memMetaFS)(nil)
)

func newMemMetaFS(user string) *memMetaFS {
	return &memMetaFS{memFS: newMemFS(), user: user, meta: map[string]fs.Meta{}, dirs: map[string]bool{}}
}

// defaultMeta is what the store gives what it makes without being told.
func (m *memMetaFS) defaultMeta(dir bool) fs.Meta {
	perm := os.FileMode(0o644)
	if dir {
		perm = 0o755
	}
	return fs.Meta{Owner: m.user, Group: "supergroup", Perm: perm, HasPerm: true}
}

// putMeta stores a file with its metadata (and its parent directories,
// with the store's defaults where they are missing).
func (m *memMetaFS) putMeta(p string, b []byte, meta fs.Meta) {
	m.put(p, b)
	m.mu.Lock()
	defer m.mu.Unlock()
	m.mkdirAll(parent(p))
	m.meta[p] = meta
}

// mkdir makes the directory p with meta (and any missing parents with the
// defaults), or sets the metadata of the one there.
func (m *memMetaFS) mkdir(p string, meta fs.Meta) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.mkdirAll(parent(p))
	m.dirs[p], m.meta[p] = true, meta
}

// rmdir removes the directory p and everything under it.
func (m *memMetaFS) rmdir(p string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, set := range []map[string]bool{m.dirs} {
		for k := range set {
			if k == p || strings.HasPrefix(k, p+"/") {
				delete(set, k)
			}
		}
	}
	for k := range m.files {
		if strings.HasPrefix(k, p+"/") {
			delete(m.files, k)
			delete(m.sums, k)
		}
	}
	for k := range m.meta {
		if k == p || strings.HasPrefix(k, p+"/") {
			delete(m.meta, k)
		}
	}
}

// metaOf returns what the store holds of p.
func (m *memMetaFS) metaOf(p string) (fs.Meta, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	meta, ok := m.meta[p]
	return meta, ok
}

// mkdirAll makes p and its missing parents with the defaults; m.mu held.
func (m *memMetaFS) mkdirAll(p string) {
	for d := p; d != ""; d = parent(d) {
		if !m.dirs[d] {
			m.dirs[d], m.meta[d] = true, m.defaultMeta(true)
		}
	}
}

// parent is the directory holding the location p, "" for a root.
func parent(p string) string {
	l := location.MustParse(p)
	if l.Path == "/" {
		return ""
	}
	return l.Dir().String()
}

func info(meta fs.Meta, size int64, dir bool) fs.FileInfo {
	return fs.FileInfo{Size: size, IsDir: dir, ModTime: meta.ModTime, Owner: meta.Owner, Group: meta.Group,
		Perm: meta.Perm, HasPerm: meta.HasPerm}
}

func (m *memMetaFS) Stat(ctx context.Context, p string) (fs.FileInfo, error) {
	if _, err := m.memFS.Stat(ctx, p); err != nil && !m.isDir(p) {
		return fs.FileInfo{}, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if b, ok := m.files[p]; ok {
		return info(m.meta[p], int64(len(b)), false), nil
	}
	return info(m.meta[p], 0, true), nil
}

func (m *memMetaFS) isDir(p string) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.dirs[p]
}

func (m *memMetaFS) Create(ctx context.Context, p string, size int64) (fs.Writer, error) {
	w, err := m.memFS.Create(ctx, p, size)
	if err != nil {
		return nil, err
	}
	m.mu.Lock()
	m.mkdirAll(parent(p))
	m.mu.Unlock()
	return &memMetaWriter{memWriter: w.(*memWriter), fs: m}, nil
}

func (m *memMetaFS) KeepDir(ctx context.Context, p string, want fs.Meta) (fs.DirChange, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.enter("keepdir", p); err != nil {
		return fs.DirKept, err
	}
	want.ModTime = time.Time{}
	if _, isFile := m.files[p]; isFile {
		return fs.DirKept, os.ErrExist
	}
	if !m.dirs[p] {
		m.mkdirAll(parent(p))
		meta := m.defaultMeta(true)
		apply(&meta, want)
		m.dirs[p], m.meta[p] = true, meta
		return fs.DirMade, nil
	}
	meta := m.meta[p]
	diff := want.Missing(info(meta, 0, true))
	if diff.IsZero() {
		return fs.DirKept, nil
	}
	apply(&meta, diff)
	m.meta[p] = meta
	return fs.DirFixed, nil
}

func (m *memMetaFS) SetFileMeta(ctx context.Context, p string, want fs.Meta) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.enter("setmeta", p); err != nil {
		return err
	}
	if _, ok := m.files[p]; !ok {
		return notExist("setmeta", p)
	}
	meta := m.meta[p]
	apply(&meta, want)
	m.meta[p] = meta
	return nil
}

// apply sets the fields of set on meta.
func apply(meta *fs.Meta, set fs.Meta) {
	if set.Owner != "" {
		meta.Owner = set.Owner
	}
	if set.Group != "" {
		meta.Group = set.Group
	}
	if set.HasPerm {
		meta.Perm, meta.HasPerm = set.Perm, true
	}
	if !set.ModTime.IsZero() {
		meta.ModTime = set.ModTime
	}
}

// memMetaWriter gives the committed file the metadata SetMeta asked for,
// over the store's defaults.
type memMetaWriter struct {
	*memWriter
	fs   *memMetaFS
	meta fs.Meta
}

func (w *memMetaWriter) SetMeta(m fs.Meta) { w.meta = m }

func (w *memMetaWriter) Commit(ctx context.Context, crc uint32) error {
	if err := w.memWriter.Commit(ctx, crc); err != nil {
		return err
	}
	w.fs.mu.Lock()
	defer w.fs.mu.Unlock()
	meta := w.fs.defaultMeta(false)
	meta.ModTime = time.Unix(1_900_000_000, 0) // the write's own time
	apply(&meta, w.meta)
	w.fs.meta[w.path] = meta
	return nil
}
