package copyd

import (
	"fmt"
	"strings"
	"time"

	"github.com/hivedr/hivedr/internal/fs"
)

// Preserve says which metadata of a source file its DR copy keeps, as
// DistCp -p does, and how user and group names map between the sites.
// The metadata comes from the source file's status when it is copied and
// is set on the staging file before it is renamed into place, so the
// target never appears without it. A copy that cannot keep what is asked
// fails (permanently) with an error saying why; it is never dropped.
type Preserve struct {
	// Owner, Group, Perm and Times keep the owner, the group, the
	// permission bits and the modification time.
	Owner, Group, Perm, Times bool
	// Users and Groups map source names to DR names; a name not listed
	// is kept as it is.
	Users, Groups map[string]string
}

// Any reports whether p keeps anything.
func (p Preserve) Any() bool { return p.Owner || p.Group || p.Perm || p.Times }

// keepsDirs reports whether p keeps anything of directories: their owner,
// group or permission bits (not their times, which every file renamed into
// them changes).
func (p Preserve) keepsDirs() bool { return p.Owner || p.Group || p.Perm }

// dirMeta returns what the DR counterpart of a source directory whose
// status is fi keeps of it: Meta without the modification time.
func (p Preserve) dirMeta(fi fs.FileInfo) fs.Meta {
	m := p.Meta(fi)
	m.ModTime = time.Time{}
	return m
}

// Meta returns what a copy of a file whose source status is fi sets on
// its target. Metadata the source's store does not keep (an S3 object has
// no owner or permission bits) is not asked for.
func (p Preserve) Meta(fi fs.FileInfo) fs.Meta {
	var m fs.Meta
	if p.Owner && fi.Owner != "" {
		m.Owner = mapName(p.Users, fi.Owner)
	}
	if p.Group && fi.Group != "" {
		m.Group = mapName(p.Groups, fi.Group)
	}
	if p.Perm && fi.HasPerm {
		m.Perm, m.HasPerm = fi.Perm.Perm(), true
	}
	if p.Times {
		m.ModTime = fi.ModTime
	}
	return m
}

func mapName(m map[string]string, name string) string {
	if v, ok := m[name]; ok {
		return v
	}
	return name
}

// give hands w (a Writer or SplitWriter to target) the metadata of the
// source file fi. A target store that cannot keep metadata is an error
// naming what was asked, not a copy without it.
func (p Preserve) give(fi fs.FileInfo, target string, w any) error {
	m := p.Meta(fi)
	if m.IsZero() {
		return nil
	}
	ms, ok := w.(fs.MetaSetter)
	if !ok {
		return noMetaStore(target, m)
	}
	ms.SetMeta(m)
	return nil
}

// noMetaStore is the permanent error of a copy to target, on a store that
// keeps no file metadata, asked to keep m.
func noMetaStore(target string, m fs.Meta) error {
	return permanent(fmt.Errorf("copy to %s: copyd.preserve asks to keep %s, and the target's store keeps no file metadata (only HDFS does)",
		target, describeMeta(m)))
}

// describeMeta names what m sets.
func describeMeta(m fs.Meta) string {
	var parts []string
	if m.Owner != "" {
		parts = append(parts, "owner "+m.Owner)
	}
	if m.Group != "" {
		parts = append(parts, "group "+m.Group)
	}
	if m.HasPerm {
		parts = append(parts, fmt.Sprintf("permission %04o", m.Perm))
	}
	if !m.ModTime.IsZero() {
		parts = append(parts, "mtime "+m.ModTime.UTC().Format("2006-01-02T15:04:05.000Z"))
	}
	return strings.Join(parts, ", ")
}
