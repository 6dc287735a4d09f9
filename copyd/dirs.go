package copyd

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"

	"github.com/hivedr/hivedr/internal/fs"
	"github.com/hivedr/hivedr/internal/location"
)

// Directory metadata (copyd.preserve on a store with directories: HDFS).
//
// Hive restricts tables mostly through the modes of their directories, so
// a DR file keeping its source file's metadata is not enough: the
// directories copyd writes into keep their source directories' owner,
// group and permission bits too. Which directories: those between the
// target file and the target root it lies under (the table, partition and
// ACID delta_/base_ directories), each paired with the source directory
// at the same depth above the source file, as long as both lie strictly
// under their roots and have the same name (a path mapping that renames a
// directory ends the pairing there: the directories above it are left as
// they are). The roots themselves, and the directories above them, are
// not copyd's to set.
//
// A missing directory is made with its source directory's metadata before
// any file is written into it, so it never appears world-readable for a
// moment. An existing one whose owner, group or permission bits differ
// from its source directory's (made by the DR metastore, by an older
// copyd, by hand) gets them: once per directory per Engine (a daemon run),
// after which the metadata wanted is cached. Only the directory a new file
// is written into is looked at again (one NameNode call; none when the
// target file exists already), since the DR metastore may have dropped
// and made it again (a dropped partition added once more); when copyd has
// to make it again, the directories above it are checked again too. A change of a source directory's metadata after
// the cache took it is followed by the next daemon run. Directory
// modification times are not kept: every file renamed into a directory
// changes its time.
//
// A source directory that no longer exists gives nothing to keep: its DR
// counterpart is made as the store makes it and is not cached. A refusal
// by the NameNode (chown needs the HDFS superuser) fails the copy
// permanently, naming the directory, the user and the operation.

// maxDirCache bounds the directories an Engine remembers; past it the
// cache starts over (costing a look at each directory again, not
// correctness).
const maxDirCache = 50_000

// dirPair is a target directory and the source directory whose metadata it
// keeps, as canonical locations.
type dirPair struct{ src, tgt location.Location }

// dirPairs returns the directories above the target file tgt that copyd
// keeps the metadata of, each with its source directory above the source
// file src, top-down (see above). Pure: it reads no store.
func dirPairs(src, tgt location.Location, srcRoots, tgtRoots []location.Location) []dirPair {
	sr, ok := deepestRoot(src, srcRoots)
	if !ok {
		return nil
	}
	tr, ok := deepestRoot(tgt, tgtRoots)
	if !ok {
		return nil
	}
	var out []dirPair
	for s, t := src.Dir(), tgt.Dir(); strictlyBelow(s, sr) && strictlyBelow(t, tr) && s.Base() == t.Base(); s, t = s.Dir(), t.Dir() {
		out = append(out, dirPair{src: s, tgt: t})
	}
	slices.Reverse(out)
	return out
}

// deepestRoot returns the deepest of roots that l lies within.
func deepestRoot(l location.Location, roots []location.Location) (location.Location, bool) {
	var best location.Location
	found := false
	for _, r := range roots {
		if l.Within(r) && (!found || len(r.Path) > len(best.Path)) {
			best, found = r, true
		}
	}
	return best, found
}

// strictlyBelow reports whether l lies under root and is not root itself.
func strictlyBelow(l, root location.Location) bool {
	rel, ok := l.Rel(root)
	return ok && rel != ""
}

// dirCache holds, per target directory, the metadata it was given (its
// source directory's), once checked or made.
type dirCache struct {
	mu sync.Mutex
	m  map[location.Location]fs.Meta
}

func (c *dirCache) get(l location.Location) (fs.Meta, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	m, ok := c.m[l]
	return m, ok
}

func (c *dirCache) put(l location.Location, m fs.Meta) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil || len(c.m) >= maxDirCache {
		c.m = map[location.Location]fs.Meta{}
	}
	c.m[l] = m
}

// dirsDone counts what keepDirs did.
type dirsDone struct{ made, fixed int }

func (d *dirsDone) add(ch fs.DirChange) {
	switch ch {
	case fs.DirMade:
		d.made++
	case fs.DirFixed:
		d.fixed++
	}
}

// describe says it for a completion's verification, "" for nothing done.
func (d dirsDone) describe() string {
	if d.made == 0 && d.fixed == 0 {
		return ""
	}
	return fmt.Sprintf("; directories given their source's metadata: %d made, %d repaired", d.made, d.fixed)
}

// keepDirs gives the directories the target file tgt (of the copy of src)
// lies in their source directories' metadata, making those missing (see
// above). It does nothing unless copyd.preserve keeps owners, groups or
// permission bits and the target's store keeps them (fs.MetaKeeper).
func (e *Engine) keepDirs(ctx context.Context, src, tgt string, to candidate) (dirsDone, error) {
	var done dirsDone
	if _, ok := to.fs.(fs.MetaKeeper); !ok || !e.cfg.Preserve.keepsDirs() {
		return done, nil
	}
	sl, err := location.Parse(src)
	if err != nil {
		return done, permanent(err)
	}
	tl, err := location.Parse(tgt)
	if err != nil {
		return done, permanent(err)
	}
	pairs := dirPairs(sl, tl, e.src, e.tgt)
	if len(pairs) == 0 {
		return done, nil
	}
	keep := func(tgt location.Location, want fs.Meta) (fs.DirChange, error) {
		f, p, err := e.r.Split(tgt.String())
		if err != nil {
			return fs.DirKept, permanent(fmt.Errorf("no store for %s: %w", tgt, err))
		}
		mk, ok := f.(fs.MetaKeeper)
		if !ok {
			return fs.DirKept, nil
		}
		ch, err := mk.KeepDir(ctx, p, want)
		done.add(ch)
		e.m.dirsKept(ch)
		var pe *fs.PermissionError
		if errors.As(err, &pe) {
			return ch, permanent(err)
		}
		return ch, err
	}
	leaf := pairs[len(pairs)-1]
	if want, ok := e.dirs.get(leaf.tgt); ok {
		if to.Exists {
			// The target file was there a moment ago, so its directory
			// was not made again since it was checked.
			return done, nil
		}
		ch, err := keep(leaf.tgt, want)
		if err != nil || ch != fs.DirMade {
			return done, err
		}
		// Made again: the directories above it may be new too.
		pairs = pairs[:len(pairs)-1]
	}
	for _, pr := range pairs {
		want, known, err := e.sourceDirMeta(ctx, pr.src)
		if err != nil {
			return done, err
		}
		if _, err := keep(pr.tgt, want); err != nil {
			return done, err
		}
		if known {
			e.dirs.put(pr.tgt, want)
		}
	}
	return done, nil
}

// sourceDirMeta is the metadata a DR directory keeps of the source
// directory src: known is false when src no longer exists (or is not a
// directory), with nothing to keep.
func (e *Engine) sourceDirMeta(ctx context.Context, src location.Location) (m fs.Meta, known bool, err error) {
	f, p, err := e.r.Split(src.String())
	if err != nil {
		return fs.Meta{}, false, permanent(fmt.Errorf("no store for %s: %w", src, err))
	}
	fi, err := f.Stat(ctx, p)
	if errors.Is(err, fs.ErrNotExist) {
		return fs.Meta{}, false, nil
	}
	if err != nil {
		return fs.Meta{}, false, fmt.Errorf("source directory %s: %w", src, err)
	}
	if !fi.IsDir {
		return fs.Meta{}, false, nil
	}
	return e.cfg.Preserve.dirMeta(fi), true, nil
}

// repairMeta gives an existing target file that is already identical to
// its origin the origin's metadata where it differs (copyd.preserve),
// without copying anything, and says what it changed for the completion
// ("" for nothing). A store that keeps no file metadata, when some is
// asked, is refused as a copy to it is.
func (e *Engine) repairMeta(ctx context.Context, from, to candidate) (string, error) {
	want := e.cfg.Preserve.Meta(from.info)
	if want.IsZero() {
		return "", nil
	}
	mk, ok := to.fs.(fs.MetaKeeper)
	if !ok {
		return "", noMetaStore(to.loc, want)
	}
	diff := want.Missing(to.info)
	if diff.IsZero() {
		return "", nil
	}
	if err := mk.SetFileMeta(ctx, to.path, diff); err != nil {
		var pe *fs.PermissionError
		if errors.As(err, &pe) {
			return "", permanent(err)
		}
		return "", err
	}
	e.m.repaired.WithLabelValues("file").Inc()
	return "; metadata repaired (nothing copied): " + describeMeta(diff), nil
}
