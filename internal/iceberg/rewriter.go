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
	sizes map[string]int64
}

// maxRemembered bounds the lengths a Rewriter remembers; past it, it
// forgets them all and starts again.
const maxRemembered = 100000

// Rewrite is the file src of the given kind as it is written on DR: the
// rewrite of a kind that holds paths (Kind.Rewritten), the file itself
// otherwise.
func (r *Rewriter) Rewrite(ctx context.Context, src string, kind Kind) ([]byte, error) {
	b, err := r.Read(ctx, src)
	if err != nil {
		return nil, err
	}
	return r.rewrite(ctx, src, kind, b)
}

func (r *Rewriter) rewrite(ctx context.Context, src string, kind Kind, b []byte) ([]byte, error) {
	var out []byte
	var err error
	switch kind {
	case KindMetadata:
		out, err = RewriteMetadata(b, r.Map)
	case KindManifestList:
		out, err = RewriteManifestList(b, r.Map, func(p string) (int64, error) { return r.size(ctx, p, KindManifest) })
	case KindManifest:
		out, err = RewriteManifest(b, r.Map, func(p string) (int64, error) { return r.size(ctx, p, KindPositionDeletes) })
	case KindPositionDeletes:
		out, err = RewritePositionDeletes(b, r.Map)
	default:
		return b, nil
	}
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", kind, src, err)
	}
	r.remember(src, int64(len(out)))
	return out, nil
}

// size is the length of src's rewrite.
func (r *Rewriter) size(ctx context.Context, src string, kind Kind) (int64, error) {
	r.mu.Lock()
	n, ok := r.sizes[src]
	r.mu.Unlock()
	if ok {
		return n, nil
	}
	out, err := r.Rewrite(ctx, src, kind)
	if err != nil {
		return 0, err
	}
	return int64(len(out)), nil
}

func (r *Rewriter) remember(src string, n int64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.sizes == nil || len(r.sizes) >= maxRemembered {
		r.sizes = map[string]int64{}
	}
	r.sizes[src] = n
}
