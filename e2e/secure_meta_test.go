package e2e

import (
	"context"
	"fmt"
	"os"
	"path"
	"strings"
	"testing"
	"time"

	"github.com/colinmarc/hdfs/v2"

	"github.com/hivedr/hivedr/internal/fs"
	"github.com/hivedr/hivedr/internal/location"
)

// A restricted warehouse, as TestSecurePipeline's workload writes it:
// every data file and every directory above it (below the workload's
// root) gets metadata of its own, as Hive's tables restricted by their
// directories' modes have, and the pipeline's copyd keeps it
// (copyd.preserve, preserveConf); checkDRMetadata then compares the two
// sites.

// The metadata the workload gives, by depth below its root: the database
// directory, the table directory, partition directories, and files.
var (
	restrictedDB   = fs.Meta{Owner: "etl", Group: "analysts", Perm: 0o751, HasPerm: true}
	restrictedTbl  = fs.Meta{Owner: "etl", Group: "finance", Perm: 0o750, HasPerm: true}
	restrictedPart = fs.Meta{Owner: "svc", Group: "finance", Perm: 0o770, HasPerm: true}
	restrictedFile = fs.Meta{Owner: "etl", Group: "analysts", Perm: 0o640, HasPerm: true}
)

// preserveConf is the copyd.preserve of a pipeline over a restricted
// warehouse: everything kept, etl named etl_dr and group finance
// dr_finance on DR.
const preserveConf = `  preserve:
    owner: true
    group: true
    permission: true
    times: true
    users: {etl: etl_dr}
    groups: {finance: dr_finance}`

// preservedName is a source user or group as preserveConf names it on DR.
func preservedName(n string) string {
	switch n {
	case "etl":
		return "etl_dr"
	case "finance":
		return "dr_finance"
	}
	return n
}

// restrictedFS is the source filesystem a workload writes through: each
// file it commits, and the directories above it below root, get the
// restricted metadata (and the file a modification time with
// milliseconds) before the workload's next metastore call names the
// file, so that copyd copies it with that metadata. Its FS must be able
// to set owners (a superuser).
type restrictedFS struct {
	*fs.HDFS
	root location.Location
}

func (r restrictedFS) Create(ctx context.Context, loc string, size int64) (fs.Writer, error) {
	w, err := r.HDFS.Create(ctx, loc, size)
	if err != nil {
		return nil, err
	}
	return &restrictedWriter{Writer: w, fs: r, loc: loc}, nil
}

type restrictedWriter struct {
	fs.Writer
	fs  restrictedFS
	loc string
}

func (w *restrictedWriter) Commit(ctx context.Context, crc uint32) error {
	if err := w.Writer.Commit(ctx, crc); err != nil {
		return err
	}
	l, err := location.Parse(w.loc)
	if err != nil {
		return err
	}
	rel, ok := l.Rel(w.fs.root)
	if !ok {
		return fmt.Errorf("restricted workload: %s is not under %s", w.loc, w.fs.root)
	}
	segs := strings.Split(rel, "/")
	for i := range segs[:len(segs)-1] {
		m := restrictedPart
		switch i {
		case 0:
			m = restrictedDB
		case 1:
			m = restrictedTbl
		}
		dir := location.Append(w.fs.root.String(), strings.Join(segs[:i+1], "/"))
		if _, err := w.fs.KeepDir(ctx, dir, m); err != nil {
			return fmt.Errorf("restricted workload: %w", err)
		}
	}
	m := restrictedFile
	// An hour ago, with milliseconds (never a whole second).
	m.ModTime = time.UnixMilli(time.Now().Add(-time.Hour).Unix()*1000 + 321)
	if err := w.fs.SetFileMeta(ctx, w.loc, m); err != nil {
		return fmt.Errorf("restricted workload: %w", err)
	}
	return nil
}

// checkDRMetadata compares, for every data file the DR holds under each
// of the databases' directories below root (a cluster path such as
// /external: the pipelines map every path to itself), its owner, group,
// mode and modification time with its source file's, and those of every
// directory between it and root with its source directory's, users and
// groups named as preserveConf names them on DR. It returns how many
// files and directories it compared, and fails the test on a difference.
func checkDRMetadata(t *testing.T, src, dr *hdfs.Client, root string, dbs []string) (files, dirs int) {
	t.Helper()
	meta := func(c *hdfs.Client, p string) (string, os.FileInfo) {
		fi, err := c.Stat(p)
		if err != nil {
			t.Fatalf("stat %s: %v", p, err)
		}
		hf := fi.(*hdfs.FileInfo)
		return fmt.Sprintf("%s:%s %04o", hf.Owner(), hf.OwnerGroup(), fi.Mode().Perm()), fi
	}
	want := func(p string) (string, os.FileInfo) {
		fi, err := src.Stat(p)
		if err != nil {
			t.Fatalf("stat source %s: %v", p, err)
		}
		hf := fi.(*hdfs.FileInfo)
		return fmt.Sprintf("%s:%s %04o", preservedName(hf.Owner()), preservedName(hf.OwnerGroup()), fi.Mode().Perm()), fi
	}
	seen := map[string]bool{}
	for _, db := range dbs {
		dbDir := path.Join(root, db+".db")
		err := dr.Walk(dbDir, func(p string, fi os.FileInfo, err error) error {
			if err != nil {
				if os.IsNotExist(err) && p == dbDir {
					return nil
				}
				return err
			}
			if fi.IsDir() || location.Hidden(strings.TrimPrefix(p, root+"/")) {
				return nil
			}
			files++
			got, dfi := meta(dr, p)
			w, sfi := want(p)
			if got != w || !dfi.ModTime().Equal(sfi.ModTime()) {
				t.Errorf("DR file %s: %s %s; source's: %s %s", p, got, dfi.ModTime().UTC().Format(time.RFC3339Nano),
					w, sfi.ModTime().UTC().Format(time.RFC3339Nano))
			}
			for d := path.Dir(p); d != root && strings.HasPrefix(d, root+"/"); d = path.Dir(d) {
				if seen[d] {
					continue
				}
				seen[d] = true
				dirs++
				got, _ := meta(dr, d)
				if w, _ := want(d); got != w {
					t.Errorf("DR directory %s: %s; source's: %s", d, got, w)
				}
			}
			return nil
		})
		if err != nil {
			t.Fatalf("walk DR %s: %v", dbDir, err)
		}
	}
	return files, dirs
}
