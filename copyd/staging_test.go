package copyd

import (
	"bytes"
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/hivedr/hivedr/internal/fs"
	"github.com/hivedr/hivedr/internal/state"
	"github.com/hivedr/hivedr/schemas"
)

// interruptedFixture is an Engine whose staging log is a real state store
// (Pebble in a temporary directory), holding the writes a killed run left:
// two begun on the DR store (one with a staging file there, one whose
// staging is already gone) and one outside the target roots.
func interruptedFixture(t *testing.T) (*fixture, *state.Store, *bytes.Buffer) {
	t.Helper()
	st, err := state.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	var logged bytes.Buffer
	f := newFixture(t, func(c *EngineConfig) {
		c.Staging = st
		c.Logger = slog.New(slog.NewTextHandler(&logged, nil))
	})
	ctx := context.Background()
	a := task("a", "", "")
	w, err := f.dr.Create(ctx, a.TargetURI, 3)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []state.Staging{
		{TaskID: a.TaskID, Location: a.TargetURI, Staging: w.Staging()},
		{TaskID: "7-b", Location: task("b", "", "").TargetURI, Staging: "gone-already"},
		{TaskID: "7-c", Location: srcNN + "/warehouse/sales.db/t/c", Staging: "outside"},
	} {
		if err := st.Begin(ctx, p.TaskID, p.Location, p.Staging); err != nil {
			t.Fatal(err)
		}
	}
	return f, st, &logged
}

// TestDiscardInterrupted: at start, the writes a killed run left in
// progress are discarded through their stores and forgotten; one whose
// target is outside the target roots is neither read nor discarded, and
// stays recorded with a warning.
func TestDiscardInterrupted(t *testing.T) {
	f, st, logged := interruptedFixture(t)
	n, err := f.e.DiscardInterrupted(context.Background())
	if err != nil || n != 2 {
		t.Fatalf("DiscardInterrupted = %d, %v; want 2 discarded", n, err)
	}
	if len(f.dr.staged) != 0 {
		t.Errorf("staging files left on the DR store: %v", f.dr.staged)
	}
	for _, c := range []string{"discard " + task("a", "", "").TargetURI, "discard " + task("b", "", "").TargetURI} {
		if !hasCall(f.dr.callLog(), c) {
			t.Errorf("no %q in the DR store's calls %v", c, f.dr.callLog())
		}
	}
	if calls := f.src.callLog(); len(calls) != 0 {
		t.Errorf("the source store was called: %v", calls)
	}
	left, err := st.Pending()
	if err != nil || len(left) != 1 || left[0].Staging != "outside" {
		t.Fatalf("still recorded: %+v, %v; want only the write outside the target roots", left, err)
	}
	if !strings.Contains(logged.String(), "outside the target roots") || !strings.Contains(logged.String(), "staging=outside") {
		t.Errorf("no warning naming the write left in place:\n%s", logged)
	}
	// A second start has nothing more to discard.
	if n, err := f.e.DiscardInterrupted(context.Background()); err != nil || n != 0 {
		t.Errorf("second DiscardInterrupted = %d, %v; want 0", n, err)
	}
}

// TestDiscardInterruptedFails: a store that cannot discard stops the sweep
// with an error naming the write, which stays recorded for the next start.
func TestDiscardInterruptedFails(t *testing.T) {
	f, st, _ := interruptedFixture(t)
	f.dr.fault("discard", syscall.ECONNREFUSED)
	n, err := f.e.DiscardInterrupted(context.Background())
	if err == nil || n != 0 || !strings.Contains(err.Error(), "task 7-a") || !strings.Contains(err.Error(), "connection refused") {
		t.Fatalf("DiscardInterrupted = %d, %v; want an error naming task 7-a and the cause", n, err)
	}
	if left, _ := st.Pending(); len(left) != 3 {
		t.Errorf("recorded after the failure: %+v; want all 3", left)
	}
	if n, err := f.e.DiscardInterrupted(context.Background()); err != nil || n != 2 {
		t.Errorf("retried DiscardInterrupted = %d, %v; want 2 discarded", n, err)
	}
}

// beginCheck is a StagingLog that records each Begin and checks that the
// staging file it names does not exist yet.
type beginCheck struct {
	t       *testing.T
	begun   []string
	existed []string
	ended   int
}

func (b *beginCheck) Begin(_ context.Context, _, _, staging string) error {
	b.begun = append(b.begun, staging)
	if _, err := os.Lstat(staging); err == nil {
		b.existed = append(b.existed, staging)
	}
	return nil
}

func (b *beginCheck) End(context.Context, string, string, string) error { b.ended++; return nil }

func (b *beginCheck) Pending() ([]state.Staging, error) { return nil, nil }

// TestStagingRecordedBeforeCreate: on a store that names staging files
// first (fs.StagedCreator), a write is recorded before its staging file
// exists, so a kill between the two cannot leave an unrecorded file.
func TestStagingRecordedBeforeCreate(t *testing.T) {
	dir := t.TempDir()
	src, dst := filepath.Join(dir, "src"), filepath.Join(dir, "dst")
	if err := os.MkdirAll(src, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(src, "f"), []byte("some bytes"), 0o644); err != nil {
		t.Fatal(err)
	}
	log := &beginCheck{t: t}
	e, err := NewEngine(EngineConfig{SourceRoots: []string{src}, TargetRoots: []string{"file://" + dst}, Retries: 1, Staging: log},
		localResolver{fs.NewLocal()}, nil)
	if err != nil {
		t.Fatal(err)
	}
	c := e.Copy(context.Background(), schemas.CopyTask{TaskID: "1-0", SourceURI: filepath.Join(src, "f"), TargetURI: filepath.Join(dst, "f")})
	if c.Status != schemas.StatusCopied {
		t.Fatalf("copy: %+v", c)
	}
	if len(log.begun) != 1 || len(log.existed) != 0 || log.ended != 1 {
		t.Fatalf("staging log: begun %v, existing at Begin %v, %d ended: want one recorded before it existed, then ended",
			log.begun, log.existed, log.ended)
	}
	if filepath.Dir(log.begun[0]) != dst || !fs.IsStagingName(filepath.Base(log.begun[0])) {
		t.Errorf("recorded staging %q: want a staging name in %s", log.begun[0], dst)
	}
}
