package iceberg

import (
	"context"
	"fmt"
	"sync"
)

// Rewriter rewrites a table's files for DR's roots. A manifest list
// records the length of every manifest it names, and a manifest the size
// of every position delete file: the rewritten ones' are found by
// rewriting them in memory (the output is a function of the input, so
// the copy written later has that length). Files are immutable, so the
// lengths are remembered by source path, up to a bound.
type Rewriter struct {
	Map  PathMap
	Read ReadFile

	mu    sync.Mutex
	sizes map[string]rewritten
}

// maxRemembered bounds the lengths a Rewriter remembers; past it, it
// forgets them all and starts again.
const maxRemembered = 100000

// Rewrite is the file src of the given kind as it is written on DR: the
// rewrite of a kind that holds paths (Kind.Rewritten), the file itself
// otherwise. A file none of whose paths moves (DR's paths are the
// source's, as with one HA nameservice name on both sites) and whose
// children's rewrites keep their lengths is the file itself, byte for
// byte.
func (r *Rewriter) Rewrite(ctx context.Context, src string, kind Kind) ([]byte, error) {
	b, err := r.Read(ctx, src)
	if err != nil {
		return nil, err
	}
	return r.rewrite(ctx, src, kind, b)
}

func (r *Rewriter) rewrite(ctx context.Context, src string, kind Kind, b []byte) ([]byte, error) {
	moved := false // a path of the file, or a child's length, changes
	m := func(p string) (string, error) {
		to, err := r.Map(p)
		if err == nil && to != p {
			moved = true
		}
		return to, err
	}
	size := func(k Kind) func(string) (int64, error) {
		return func(p string) (int64, error) {
			n, changed, err := r.size(ctx, p, k)
			if changed {
				moved = true
			}
			return n, err
		}
	}
	var out []byte
	var err error
	switch kind {
	case KindMetadata:
		out, err = RewriteMetadata(b, m)
	case KindManifestList:
		out, err = RewriteManifestList(b, m, size(KindManifest))
	case KindManifest:
		out, err = RewriteManifest(b, m, size(KindPositionDeletes))
	case KindPositionDeletes:
		out, err = RewritePositionDeletes(b, m)
	default:
		return b, nil
	}
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", kind, src, err)
	}
	if !moved {
		out = b
	}
	r.remember(src, int64(len(b)), int64(len(out)))
	return out, nil
}

// rewritten is a file's length before and after its rewrite.
type rewritten struct{ from, to int64 }

// size is the length of src's rewrite, and whether it differs from the
// file's.
func (r *Rewriter) size(ctx context.Context, src string, kind Kind) (int64, bool, error) {
	r.mu.Lock()
	n, ok := r.sizes[src]
	r.mu.Unlock()
	if ok {
		return n.to, n.to != n.from, nil
	}
	b, err := r.Read(ctx, src)
	if err != nil {
		return 0, false, err
	}
	out, err := r.rewrite(ctx, src, kind, b)
	if err != nil {
		return 0, false, err
	}
	return int64(len(out)), len(out) != len(b), nil
}

func (r *Rewriter) remember(src string, from, to int64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.sizes == nil || len(r.sizes) >= maxRemembered {
		r.sizes = map[string]rewritten{}
	}
	r.sizes[src] = rewritten{from, to}
}
