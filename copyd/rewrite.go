package copyd

import (
	"context"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"strings"

	"github.com/hivedr/hivedr/internal/fs"
	"github.com/hivedr/hivedr/internal/iceberg"
	"github.com/hivedr/hivedr/schemas"
)

// maxRewrite bounds the size of a file the engine rewrites: it holds the
// file and its rewrite in memory. Iceberg metadata files, manifest lists
// and manifests are kilobytes to a few megabytes; position delete files
// a few megabytes to tens.
const maxRewrite = 256 << 20

// rewriteKinds are the CopyTask.Rewrite values the engine knows.
var rewriteKinds = map[string]iceberg.Kind{
	schemas.RewriteIcebergMetadata:        iceberg.KindMetadata,
	schemas.RewriteIcebergManifestList:    iceberg.KindManifestList,
	schemas.RewriteIcebergManifest:        iceberg.KindManifest,
	schemas.RewriteIcebergPositionDeletes: iceberg.KindPositionDeletes,
}

// readError is a failure to read a source file during a rewrite: the
// store's error, retried as any copy's.
type readError struct{ err error }

func (r *readError) Error() string { return r.err.Error() }
func (r *readError) Unwrap() error { return r.err }

// newRewriter is the engine's Iceberg rewriter: it reads source files
// (inside the source roots only) through the engine's stores and maps
// paths with the replication's mapping, refusing a DR path outside the
// target roots.
func (e *Engine) newRewriter() *iceberg.Rewriter {
	return &iceberg.Rewriter{
		Map: func(src string) (string, error) {
			if e.cfg.MapPath == nil {
				return "", errors.New("no path mapping configured to rewrite it with")
			}
			to, err := e.cfg.MapPath(src)
			if err != nil {
				return "", err
			}
			if _, err := confine("DR path", to, e.tgt); err != nil {
				return "", err
			}
			return to, nil
		},
		Read: func(ctx context.Context, p string) ([]byte, error) {
			loc, err := confine("source", p, e.src)
			if err != nil {
				return nil, err
			}
			f, fp, err := e.r.Split(loc)
			if err != nil {
				return nil, fmt.Errorf("no store for %s: %w", loc, err)
			}
			rc, err := f.Open(ctx, fp, 0, -1)
			if err != nil {
				return nil, &readError{fmt.Errorf("read %s: %w", loc, err)}
			}
			defer rc.Close()
			b, err := io.ReadAll(io.LimitReader(rc, maxRewrite+1))
			if err != nil {
				return nil, &readError{fmt.Errorf("read %s: %w", loc, err)}
			}
			if len(b) > maxRewrite {
				return nil, fmt.Errorf("%s is larger than the %d MiB a rewrite holds in memory", loc, maxRewrite>>20)
			}
			return b, nil
		},
	}
}

// attemptRewrite copies src to tgt rewritten for DR's paths (task.Rewrite
// says how): the rewrite is computed from the source, compared with the
// target (SKIPPED_IDENTICAL when equal), else written through staging and
// verified against the bytes written. Iceberg files are never changed in
// place, so a source that is gone was removed (expired) since its commit:
// SOURCE_GONE, and the applier decides. A file the rewrite cannot read or
// map (a path outside the mappings, a format it does not know) fails the
// task naming it.
func (e *Engine) attemptRewrite(ctx context.Context, task schemas.CopyTask, src, tgt string) (result, error) {
	kind, ok := rewriteKinds[task.Rewrite]
	if !ok {
		return result{}, permanent(fmt.Errorf("task %s: rewrite %q of %s: not a rewrite this copyd knows", task.TaskID, task.Rewrite, src))
	}
	if e.cfg.MapPath == nil {
		return result{}, permanent(fmt.Errorf("task %s: %s of %s needs the replication's path mappings, and none are configured", task.TaskID, kind, src))
	}
	from, err := e.observe(ctx, src, EventChecksum{}, false)
	if err != nil {
		return result{}, err
	}
	switch {
	case !from.Exists:
		return result{status: schemas.StatusSourceGone, length: -1,
			evidence: "source " + src + ": does not exist (Iceberg files are written once: removed since its commit)"}, nil
	case from.IsDir || from.IsSymlink:
		return result{}, permanent(fmt.Errorf("rewrite %s of %s: not a file", kind, src))
	}
	out, err := e.rw.Rewrite(ctx, src, kind)
	if err != nil {
		var re *readError
		if errors.As(err, &re) {
			return result{}, err
		}
		return result{}, permanent(fmt.Errorf("rewrite %s: %w", src, err))
	}
	crc := crc32.Checksum(out, castagnoli)
	to, err := e.observe(ctx, tgt, EventChecksum{}, false)
	if err != nil {
		return result{}, err
	}
	how := fmt.Sprintf("rewritten for the DR paths as an Iceberg %s: %d bytes from %d", kind, len(out), from.Size)
	dirs, err := e.keepDirs(ctx, src, tgt, to)
	if err != nil {
		return result{}, err
	}
	if to.Exists && !to.IsDir && to.HasCRC && to.CRC32C == crc && to.Size == int64(len(out)) {
		if err := remark(ctx, to, task); err != nil {
			return result{}, err
		}
		return result{status: schemas.StatusSkippedIdentical, length: to.Size, crc: &crc,
			verification: "crc32c:rewrite+target (target already identical to the rewrite; " + how + ")" + dirs.describe()}, nil
	}
	w, _, err := e.writeCommit(ctx, task, to, int64(len(out)), func(w fs.Writer) (uint32, error) {
		if _, err := w.Write(out); err != nil {
			return 0, fmt.Errorf("write %s: %w", to.loc, err)
		}
		e.m.moved(len(out))
		return crc, nil
	})
	if err != nil {
		return result{}, err
	}
	ts, tok, err := targetChecksum(ctx, to, w)
	if err != nil {
		return result{}, err
	}
	checks := []string{"rewrite"}
	if tok {
		if ts.CRC32C != crc {
			return result{}, e.removeBad(ctx, to, fmt.Sprintf("CRC32C mismatch: wrote %08x (the rewrite of %s), the target store reports %08x (%s) for %s after the commit",
				crc, src, ts.CRC32C, ts.Source, to.loc))
		}
		checks = append(checks, "target")
	} else {
		got, err := e.readRange(ctx, to, 0, int64(len(out)))
		if err != nil {
			return result{}, err
		}
		if c := crc32.Checksum(got, castagnoli); c != crc || len(got) != len(out) {
			return result{}, e.removeBad(ctx, to, fmt.Sprintf("read back %d bytes with CRC32C %08x from %s, wrote %d with %08x",
				len(got), c, to.loc, len(out), crc))
		}
		checks = append(checks, "reread")
	}
	return result{status: schemas.StatusCopied, length: int64(len(out)), crc: &crc,
		verification: "crc32c:" + strings.Join(checks, "+") + " (" + how + ")" + dirs.describe()}, nil
}
