package applier

import (
	"context"
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	hfs "github.com/hivedr/hivedr/internal/fs"
	"github.com/hivedr/hivedr/internal/iceberg"
)

// icebergFiles is DR's files held whole in memory (Files, FileReader).
type icebergFiles struct {
	b       map[string][]byte
	removed []string
}

func (f *icebergFiles) Walk(context.Context, string, func(string, int64) error) error {
	return fmt.Errorf("not listed here: %w", hfs.ErrNotExist)
}

func (f *icebergFiles) Remove(_ context.Context, loc string) error {
	if _, ok := f.b[loc]; !ok {
		return fmt.Errorf("%s: %w", loc, hfs.ErrNotExist)
	}
	delete(f.b, loc)
	f.removed = append(f.removed, loc)
	return nil
}

func (f *icebergFiles) ReadFile(_ context.Context, loc string, _ int64) ([]byte, error) {
	b, ok := f.b[loc]
	if !ok {
		return nil, fmt.Errorf("%s: %w", loc, hfs.ErrNotExist)
	}
	return b, nil
}

const iceTable = "hdfs://127.0.0.1:18020/warehouse/icefix.db/t1"

// iceberFixture is internal/iceberg's fixture table (written by the
// reference implementation), standing for DR's copy, with the metadata
// of a commit after its current one that expires all but the last two
// snapshots (as 00008-expired.metadata.json); it returns both pointers.
func icebergFixture(t *testing.T) (f *icebergFiles, prev, next string) {
	t.Helper()
	f = &icebergFiles{b: map[string][]byte{}}
	root := filepath.Join("..", "internal", "iceberg", "testdata", "t1")
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(p)
		rel, _ := filepath.Rel(root, p)
		f.b[iceTable+"/"+filepath.ToSlash(rel)] = b
		if strings.HasPrefix(filepath.Base(p), "00007-") {
			prev = iceTable + "/" + filepath.ToSlash(rel)
		}
		return err
	})
	if err != nil || prev == "" {
		t.Fatalf("the fixture: %v (current metadata %q)", err, prev)
	}
	var m map[string]json.RawMessage
	dec := json.NewDecoder(strings.NewReader(string(f.b[prev])))
	dec.UseNumber()
	if err := dec.Decode(&m); err != nil {
		t.Fatal(err)
	}
	var snaps []json.RawMessage
	if err := json.Unmarshal(m["snapshots"], &snaps); err != nil {
		t.Fatal(err)
	}
	m["snapshots"], _ = json.Marshal(snaps[len(snaps)-2:])
	next = iceTable + "/metadata/00008-expired.metadata.json"
	f.b[next], _ = json.Marshal(m)
	return f, prev, next
}

// TestExpireIceberg: a commit that expired snapshots removes on DR what
// only those snapshots reached, in the table's location only and not
// what a later event's copy wrote; everything the new metadata reaches
// stays; run again, it removes nothing more; a commit that expired
// nothing removes nothing.
func TestExpireIceberg(t *testing.T) {
	ctx := context.Background()
	f, prev, next := icebergFixture(t)
	gone := func(err error) bool { return false }
	pm, _ := iceberg.ParseMetadata(f.b[prev])
	nm, _ := iceberg.ParseMetadata(f.b[next])
	want, err := iceberg.Expired(ctx, pm, nm, func(ctx context.Context, p string) ([]byte, error) { return f.ReadFile(ctx, p, 0) }, gone)
	if err != nil || len(want) < 3 {
		t.Fatalf("the fixture's expiry: %d files, %v", len(want), err)
	}
	var spared string // a data file a later event's copy wrote
	for _, w := range want {
		if w.Kind == iceberg.KindData {
			spared = w.Path
		}
	}
	x := &executor{files: f, log: testLogger(), writtenAfter: func(target string, eventID int64) (bool, error) {
		return target == spared && eventID == 8, nil
	}}

	// Nothing expired: nothing removed.
	if err := x.run(ctx, ExpireIceberg{DB: "icefix", Table: "t1", Root: iceTable, Prev: prev, Next: prev, EventID: 8}); err != nil || len(f.removed) != 0 {
		t.Fatalf("a commit that expired nothing: removed %v, %v", f.removed, err)
	}
	a := ExpireIceberg{DB: "icefix", Table: "t1", Root: iceTable, Prev: prev, Next: next, EventID: 8}
	if err := x.run(ctx, a); err != nil {
		t.Fatal(err)
	}
	if len(f.removed) != len(want)-1 {
		t.Errorf("removed %d files, want the %d expired but the one a later copy wrote:\n%s", len(f.removed), len(want)-1, strings.Join(f.removed, "\n"))
	}
	if _, ok := f.b[spared]; !ok {
		t.Errorf("%s, written by a later event's copy, was removed", spared)
	}
	reached, err := iceberg.Added(ctx, nil, nm, func(ctx context.Context, p string) ([]byte, error) { return f.ReadFile(ctx, p, 0) })
	if err != nil {
		t.Fatalf("the new metadata no longer reads whole on DR: %v", err)
	}
	t.Logf("removed %d files; the new metadata reaches %d, all there", len(f.removed), len(reached))

	// Run again (a crash before the pointer moved): nothing more.
	n := len(f.removed)
	if err := x.run(ctx, a); err != nil || len(f.removed) != n {
		t.Errorf("run again: removed %d more, %v", len(f.removed)-n, err)
	}

	// Only under the table's location: with the root its data directory,
	// no manifest or manifest list (under metadata/) goes.
	f, prev, next = icebergFixture(t)
	x.files = f
	if err := x.run(ctx, ExpireIceberg{DB: "icefix", Table: "t1", Root: iceTable + "/data", Prev: prev, Next: next, EventID: 9}); err != nil {
		t.Fatal(err)
	}
	for _, r := range f.removed {
		if !strings.HasPrefix(r, iceTable+"/data/") {
			t.Errorf("removed %s, outside the location %s/data", r, iceTable)
		}
	}
	if len(f.removed) == 0 {
		t.Error("nothing removed under the data directory")
	}
}
