package fs

import (
	"context"
	"errors"
	"fmt"
	"hash"
	"hash/crc32"
	"io"
	iofs "io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"

	"github.com/hivedr/hivedr/internal/location"
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Local is the FS of the local filesystem. Locations are absolute paths, or
// file:///p, file://localhost/p or file:/p, all the path /p. It never
// follows a symbolic link at the path itself: Stat describes the link,
// Open and Checksum refuse it, and Commit replaces the link rather than
// writing through it. A symbolic link among the path's directories is
// refused. Stat, Open, Checksum, Create, Commit, Remove and Discard work
// in the file's directory opened as an os.Root (openDir), each directory
// on the way opened in its parent and checked to be the one looked at,
// so a directory swapped for a link while they work cannot take them
// anywhere else.
type Local struct{}

// NewLocal returns the local FS.
func NewLocal() *Local { return &Local{} }

var _ FS = (*Local)(nil)

// localPath returns the filesystem path of loc.
func localPath(loc string) (string, error) {
	l, err := location.Parse(loc)
	if err != nil {
		return "", err
	}
	if !l.IsLocal() { // file:///p, file://localhost/p and file:/p parse as /p
		return "", fmt.Errorf("location %s is not on the local filesystem", loc)
	}
	p := filepath.FromSlash(l.Path)
	if err := noLinkedDirs(p); err != nil {
		return "", fmt.Errorf("location %s: %w", loc, err)
	}
	return p, nil
}

// noLinkedDirs refuses a path whose directories include a symbolic link:
// root checks compare path names, so a linked directory would let a
// location under a root read or write anywhere (guarantee 7). The last
// element is checked by each operation (O_NOFOLLOW, Lstat).
func noLinkedDirs(p string) error {
	dir := filepath.Dir(p)
	if dir == p {
		return nil
	}
	var parts []string
	for d := dir; ; d = filepath.Dir(d) {
		parts = append(parts, d)
		if filepath.Dir(d) == d {
			break
		}
	}
	for i := len(parts) - 1; i >= 0; i-- {
		fi, err := os.Lstat(parts[i])
		if errors.Is(err, os.ErrNotExist) {
			return nil // nothing below exists yet
		}
		if err != nil {
			return err
		}
		if fi.Mode()&os.ModeSymlink != 0 {
			return fmt.Errorf("directory %s is a symbolic link, not followed", parts[i])
		}
	}
	return nil
}

// openDir opens the directory holding the local path p as an os.Root
// and returns it with p's last element, the name to work on in it (p "/"
// is "." in "/"). It walks down from / one directory at a time, each
// opened in its parent's Root (so it is the parent's entry, never a path
// resolved again) after an Lstat that refuses a symbolic link, and
// checked to be the directory the Lstat saw (os.SameFile): a directory
// replaced by a link between the two is refused, not followed. With
// create, a missing directory is made (0755). The caller closes the Root.
func openDir(op, loc, p string, create bool) (*os.Root, string, error) {
	dir, name := filepath.Split(p)
	if name == "" {
		name = "."
	}
	r, err := os.OpenRoot(string(filepath.Separator))
	if err != nil {
		return nil, "", fmt.Errorf("%s %s: %w", op, loc, err)
	}
	walked := ""
	for _, elem := range strings.Split(filepath.Clean(dir), string(filepath.Separator)) {
		if elem == "" {
			continue
		}
		walked += string(filepath.Separator) + elem
		sub, err := openSubdir(r, elem, walked, create)
		r.Close()
		if err != nil {
			return nil, "", localError(op, loc, err)
		}
		r = sub
	}
	return r, name, nil
}

// openDirIfAny is openDir of loc without create, answering no Root and
// no error when a directory of loc is missing (nothing to remove there).
func openDirIfAny(op, loc string) (*os.Root, string, error) {
	p, err := localPath(loc)
	if err != nil {
		return nil, "", err
	}
	r, name, err := openDir(op, loc, p, false)
	if errors.Is(err, ErrNotExist) {
		return nil, "", nil
	}
	return r, name, err
}

// openLocalDir opens the directory at the local path p itself as an
// os.Root, walked down to as openDir walks to a file's.
func openLocalDir(op, loc, p string) (*os.Root, error) {
	r, name, err := openDir(op, loc, p, false)
	if err != nil || name == "." {
		return r, err
	}
	defer r.Close()
	d, err := openSubdir(r, name, p, false)
	if err != nil {
		return nil, localError(op, loc, err)
	}
	return d, nil
}

// readDirIn returns the entries of the directory r, sorted by name.
func readDirIn(r *os.Root) ([]os.DirEntry, error) {
	d, err := r.Open(".")
	if err != nil {
		return nil, err
	}
	defer d.Close()
	es, err := d.ReadDir(-1)
	slices.SortFunc(es, func(a, b os.DirEntry) int { return strings.Compare(a.Name(), b.Name()) })
	return es, err
}

// renameIn renames name in the directory from to newName in the
// directory to (renameat on the two directories, so neither path is
// resolved again).
func renameIn(from *os.Root, name string, to *os.Root, newName string) error {
	fd, err := from.Open(".")
	if err != nil {
		return err
	}
	defer fd.Close()
	td, err := to.Open(".")
	if err != nil {
		return err
	}
	defer td.Close()
	return os.NewSyscallError("renameat", syscall.Renameat(int(fd.Fd()), name, int(td.Fd()), newName))
}

// errLinkedDir is the refusal of a symbolic link among a path's
// directories.
var errLinkedDir = errors.New("is a symbolic link, not followed")

// openSubdir opens the directory name in r (path is its full path, for
// errors), refusing a symbolic link or a directory that changed between
// its Lstat and its opening; with create it makes it when missing.
func openSubdir(r *os.Root, name, path string, create bool) (*os.Root, error) {
	fi, err := r.Lstat(name)
	if errors.Is(err, os.ErrNotExist) && create {
		if err := r.Mkdir(name, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
			return nil, err
		}
		fi, err = r.Lstat(name)
	}
	if err != nil {
		return nil, err
	}
	if fi.Mode()&os.ModeSymlink != 0 {
		return nil, fmt.Errorf("directory %s %w", path, errLinkedDir)
	}
	sub, err := r.OpenRoot(name)
	if err != nil {
		return nil, err
	}
	if got, err := sub.Stat("."); err != nil || !os.SameFile(fi, got) {
		sub.Close()
		return nil, fmt.Errorf("directory %s changed while it was opened (a symbolic link put in its place?): %w", path, errLinkedDir)
	}
	return sub, nil
}

// openIn opens name in the directory r for reading, refusing a symbolic
// link: name is Lstat'd, opened, and the file opened checked to be the
// one the Lstat saw, so a link put in its place between the two is not
// followed (os.Root would follow one that stays in r).
func openIn(r *os.Root, name string) (*os.File, error) {
	fi, err := r.Lstat(name)
	if err != nil {
		return nil, err
	}
	if fi.Mode()&os.ModeSymlink != 0 {
		return nil, syscall.ELOOP
	}
	f, err := r.Open(name)
	if err != nil {
		return nil, err
	}
	if got, err := f.Stat(); err != nil || !os.SameFile(fi, got) {
		f.Close()
		return nil, syscall.ELOOP
	}
	return f, nil
}

// Stat implements FS. It does not follow a symbolic link at path.
func (*Local) Stat(ctx context.Context, loc string) (FileInfo, error) {
	p, err := localPath(loc)
	if err != nil {
		return FileInfo{}, err
	}
	r, name, err := openDir("stat", loc, p, false)
	if err != nil {
		return FileInfo{}, err
	}
	defer r.Close()
	fi, err := r.Lstat(name)
	if err != nil {
		return FileInfo{}, localError("stat", loc, err)
	}
	return FileInfo{
		Size:      fi.Size(),
		ModTime:   fi.ModTime(),
		IsDir:     fi.IsDir(),
		IsSymlink: fi.Mode()&os.ModeSymlink != 0,
	}, nil
}

// localError wraps err from an os call on loc, wrapping ErrNotExist too
// when the file is missing.
func localError(op, loc string, err error) error {
	if errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("%s %s: %w", op, loc, ErrNotExist)
	}
	if errors.Is(err, errLinkedDir) {
		return fmt.Errorf("%s %s: %w", op, loc, err)
	}
	if errors.Is(err, syscall.ELOOP) {
		return fmt.Errorf("%s %s: %w", op, loc, errLinkedDir)
	}
	return fmt.Errorf("%s %s: %w", op, loc, err)
}

// openRegular opens the regular file at p for reading, in its directory
// opened by openDir, refusing a symbolic link or anything but a regular
// file.
func openRegular(op, loc, p string) (*os.File, error) {
	r, name, err := openDir(op, loc, p, false)
	if err != nil {
		return nil, err
	}
	defer r.Close()
	f, err := openIn(r, name)
	if err != nil {
		return nil, localError(op, loc, err)
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, localError(op, loc, err)
	}
	if !fi.Mode().IsRegular() {
		f.Close()
		return nil, fmt.Errorf("%s %s: not a regular file (%s)", op, loc, fi.Mode().Type())
	}
	return f, nil
}

// Open implements FS.
func (*Local) Open(ctx context.Context, loc string, off, n int64) (io.ReadCloser, error) {
	p, err := localPath(loc)
	if err != nil {
		return nil, err
	}
	if off < 0 {
		return nil, fmt.Errorf("open %s: negative offset %d", loc, off)
	}
	f, err := openRegular("open", loc, p)
	if err != nil {
		return nil, err
	}
	if n < 0 {
		n = 1<<63 - 1 - off
	}
	return &readCloser{Reader: io.NewSectionReader(f, off, n), Closer: f}, nil
}

type readCloser struct {
	io.Reader
	io.Closer
}

// Checksum implements FS by reading the file: the local filesystem keeps
// no checksum of its own.
func (*Local) Checksum(ctx context.Context, loc string) (Checksum, bool, error) {
	p, err := localPath(loc)
	if err != nil {
		return Checksum{}, false, err
	}
	f, err := openRegular("checksum", loc, p)
	if err != nil {
		return Checksum{}, false, err
	}
	defer f.Close()
	h := crc32.New(castagnoli)
	if _, err := io.Copy(h, ctxReader{ctx, f}); err != nil {
		return Checksum{}, false, fmt.Errorf("checksum %s: %w", loc, err)
	}
	return Checksum{CRC32C: h.Sum32(), Source: "computed"}, true, nil
}

// ctxReader stops reading when ctx is done.
type ctxReader struct {
	ctx context.Context
	r   io.Reader
}

func (r ctxReader) Read(p []byte) (int, error) {
	if err := r.ctx.Err(); err != nil {
		return 0, err
	}
	return r.r.Read(p)
}

// Create implements FS. The bytes go to a new staging file beside the
// target, created with O_EXCL so it can be neither an existing file nor a
// symbolic link planted there.
func (l *Local) Create(ctx context.Context, loc string, size int64) (Writer, error) {
	staging, err := l.StagingFor(loc)
	if err != nil {
		return nil, err
	}
	return l.CreateStaged(ctx, loc, staging, size)
}

// StagingFor implements StagedCreator: the path of a new staging file
// beside loc. Nothing is created.
func (*Local) StagingFor(loc string) (string, error) {
	p, err := localPath(loc)
	if err != nil {
		return "", err
	}
	dir, base := filepath.Split(p)
	if base == "" {
		return "", fmt.Errorf("create %s: no file name", loc)
	}
	name, err := stagingName(base)
	if err != nil {
		return "", err
	}
	return filepath.Join(dir, name), nil
}

// CreateStaged implements StagedCreator: Create, writing to staging, a
// staging path of loc that StagingFor returned.
func (*Local) CreateStaged(ctx context.Context, loc, staging string, size int64) (Writer, error) {
	p, err := localPath(loc)
	if err != nil {
		return nil, err
	}
	sp, err := localPath(staging)
	if err != nil {
		return nil, fmt.Errorf("create %s: %w", loc, err)
	}
	if !isStagingFor(filepath.ToSlash(p), filepath.ToSlash(sp)) {
		return nil, fmt.Errorf("create %s: %s is not one of its staging files", loc, staging)
	}
	dir, name, err := openDir("create", loc, p, true)
	if err != nil {
		return nil, err
	}
	// O_EXCL: a new file, never a link planted at the name (os.Root
	// follows none with O_CREATE|O_EXCL).
	f, err := dir.OpenFile(filepath.Base(sp), os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		dir.Close()
		return nil, fmt.Errorf("create %s: staging file: %w", loc, err)
	}
	return &localWriter{loc: loc, path: p, staging: sp, dir: dir, name: name, f: f, crc: crc32.New(castagnoli)}, nil
}

// localWriter writes a staging file and renames it into place, both in
// the target's directory opened as dir.
type localWriter struct {
	loc, path, staging string
	dir                *os.Root // the target's directory; closed when done
	name               string   // the target's name in dir
	f                  *os.File
	crc                hash.Hash32
	done               bool  // committed or aborted
	event              int64 // EventMarkAttr, set on the staging file before the rename
}

// MarkEvent implements EventMarkWriter.
func (w *localWriter) MarkEvent(id int64) { w.event = id }

func (w *localWriter) Write(p []byte) (int, error) {
	if w.done {
		return 0, fmt.Errorf("write %s: writer is closed", w.loc)
	}
	n, err := w.f.Write(p)
	w.crc.Write(p[:n])
	if err != nil {
		return n, fmt.Errorf("write %s: %w", w.loc, err)
	}
	return n, nil
}

// Verified implements Writer: a local filesystem checks nothing itself.
func (w *localWriter) Verified() (Checksum, bool) { return Checksum{}, false }

// Commit implements Writer. Invariant: the staging file is renamed into
// place only after its bytes are synced and their CRC32C, computed here as
// they were written, equals the caller's; the directory is synced after
// the rename so the new name survives a crash.
func (w *localWriter) Commit(ctx context.Context, crc32c uint32) error {
	if w.done {
		return fmt.Errorf("commit %s: writer is closed", w.loc)
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("commit %s: %w", w.loc, err)
	}
	if got := w.crc.Sum32(); got != crc32c {
		return &ChecksumError{Location: w.loc, Want: crc32c, Got: got, HasGot: true}
	}
	if err := w.f.Sync(); err != nil {
		return fmt.Errorf("commit %s: sync: %w", w.loc, err)
	}
	if err := w.f.Close(); err != nil {
		return fmt.Errorf("commit %s: close: %w", w.loc, err)
	}
	w.done = true
	defer w.dir.Close()
	staging := filepath.Base(w.staging)
	if err := setMarkLocal(w.loc, w.staging, w.event); err != nil {
		w.dir.Remove(staging)
		return fmt.Errorf("commit %s: %w", w.loc, err)
	}
	if err := w.dir.Rename(staging, w.name); err != nil {
		w.dir.Remove(staging)
		return fmt.Errorf("commit %s: %w", w.loc, err)
	}
	if err := syncDir(w.dir, filepath.Dir(w.path)); err != nil {
		return fmt.Errorf("commit %s: %w", w.loc, err)
	}
	return nil
}

// syncDir syncs the directory r (path names it in errors).
func syncDir(r *os.Root, path string) error {
	d, err := r.Open(".")
	if err != nil {
		return err
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("sync directory %s: %w", path, err)
	}
	return nil
}

// Abort implements Writer. It may follow a failed Commit, and does nothing
// after a successful one.
func (w *localWriter) Abort(ctx context.Context) error {
	if !w.done {
		w.f.Close()
		defer w.dir.Close()
		w.done = true
		if err := w.dir.Remove(filepath.Base(w.staging)); err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("abort %s: %w", w.loc, err)
		}
	}
	return nil
}

// Staging implements Writer: the staging file's path.
func (w *localWriter) Staging() string { return w.staging }

// Remove implements FS. It refuses a directory.
func (*Local) Remove(ctx context.Context, loc string) error {
	r, name, err := openDirIfAny("remove", loc)
	if r == nil {
		return err
	}
	defer r.Close()
	fi, err := r.Lstat(name)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("remove %s: %w", loc, err)
	}
	if fi.IsDir() {
		return fmt.Errorf("remove %s: is a directory", loc)
	}
	if err := r.Remove(name); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("remove %s: %w", loc, err)
	}
	return nil
}

// Discard implements FS. staging must name a staging file of loc (as
// Staging returned it); anything else is refused, so Discard never
// deletes another file.
func (*Local) Discard(ctx context.Context, loc, staging string) error {
	if staging == "" {
		return nil
	}
	p, err := localPath(loc)
	if err != nil {
		return err
	}
	sp, err := localPath(staging)
	if err != nil {
		return fmt.Errorf("discard %s: %w", loc, err)
	}
	if !isStagingFor(filepath.ToSlash(p), filepath.ToSlash(sp)) {
		return fmt.Errorf("discard %s: %s is not one of its staging files", loc, staging)
	}
	r, _, err := openDirIfAny("discard", loc)
	if r == nil {
		return err
	}
	defer r.Close()
	if err := r.Remove(filepath.Base(sp)); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("discard %s: %w", loc, err)
	}
	return nil
}

// list is List on the local filesystem: the directory is opened as an
// os.Root (openLocalDir) and read through it.
func (*Local) list(ctx context.Context, loc string, dirs bool) ([]string, error) {
	p, err := localPath(loc)
	if err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	d, err := openLocalDir("list", loc, p)
	if err != nil {
		return nil, err
	}
	defer d.Close()
	entries, err := readDirIn(d)
	if err != nil {
		return nil, fmt.Errorf("list %s: %w", loc, err)
	}
	var out []string
	for _, e := range entries {
		switch {
		case dirs && e.IsDir():
			out = append(out, e.Name())
		case !dirs && e.Type().IsRegular() && !IsStagingName(e.Name()):
			out = append(out, filepath.ToSlash(filepath.Join(p, e.Name())))
		}
	}
	return out, nil
}

// walk is Router.Walk on the local filesystem: the tree under loc is
// walked through its directory opened as an os.Root, so no directory
// swapped for a link takes it elsewhere. name is loc as the caller wrote
// it, for errors.
func (*Local) walk(ctx context.Context, name, loc string, fn func(location string, size int64) error) error {
	p, err := localPath(loc)
	if err != nil {
		return err
	}
	d, err := openLocalDir("walk", name, p)
	if err != nil {
		return err
	}
	defer d.Close()
	return iofs.WalkDir(d.FS(), ".", func(rel string, e iofs.DirEntry, err error) error {
		// An entry below the directory gone since its directory was
		// read is passed over (see HDFS.Walk); the directory itself
		// missing is ErrNotExist.
		if errors.Is(err, os.ErrNotExist) && rel != "." {
			return nil
		}
		if errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("walk %s: %w", name, ErrNotExist)
		}
		if err != nil {
			return fmt.Errorf("walk %s: %w", name, err)
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		if !e.Type().IsRegular() || IsStagingName(e.Name()) {
			return nil
		}
		info, err := e.Info()
		if errors.Is(err, os.ErrNotExist) {
			return nil // gone since its directory was read
		}
		if err != nil {
			return fmt.Errorf("walk %s: %w", name, err)
		}
		return fn(filepath.Join(p, filepath.FromSlash(rel)), info.Size())
	})
}

// renameDir is Router.RenameDir on the local filesystem: from's and to's
// directories are opened as os.Roots and the directory renamed between
// them.
func (*Local) renameDir(from, to string) error {
	fp, err := localPath(from)
	if err != nil {
		return err
	}
	tp, err := localPath(to)
	if err != nil {
		return err
	}
	fd, fname, err := openDir("rename", from, fp, false)
	if err != nil {
		return err
	}
	defer fd.Close()
	fi, err := fd.Lstat(fname)
	if err != nil {
		return localError("rename", from, err)
	}
	if !fi.IsDir() {
		return fmt.Errorf("rename %s: not a directory", from)
	}
	td, tname, err := openDir("rename", to, tp, false)
	if err != nil {
		return err
	}
	defer td.Close()
	if _, err := td.Lstat(tname); err == nil {
		return fmt.Errorf("rename %s to %s: %w", from, to, ErrExist)
	}
	if err := renameIn(fd, fname, td, tname); err != nil {
		return localError("rename", from, err)
	}
	return nil
}

// removeEmptyDir is Router.RemoveEmptyDir on the local filesystem, in
// the directory's parent opened as an os.Root.
func (*Local) removeEmptyDir(loc string) error {
	r, name, err := openDirIfAny("remove directory", loc)
	if r == nil {
		return err
	}
	defer r.Close()
	d, err := openSubdir(r, name, loc, false)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return localError("remove directory", loc, err)
	}
	names, err := readDirIn(d)
	d.Close()
	if err != nil || len(names) > 0 {
		return err
	}
	if err := r.Remove(name); err != nil && !errors.Is(err, os.ErrNotExist) && !isNotEmpty(err) {
		return fmt.Errorf("remove directory %s: %w", loc, err)
	}
	return nil
}
