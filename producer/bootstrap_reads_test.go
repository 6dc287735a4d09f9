package producer

import (
	"testing"

	"github.com/hivedr/hivedr/schemas"
)

// TestNoteTableRead: each table counts once per bootstrap, and the names
// of bootstraps no longer in progress are dropped when another bootstrap
// reads its first table.
func TestNoteTableRead(t *testing.T) {
	b1 := schemas.BootstrapState{Database: "sales", BootstrapID: "sales-1"}
	b2 := schemas.BootstrapState{Database: "sales", BootstrapID: "sales-2"}
	tl := &Tailer{m: NewMetrics(), boots: []schemas.BootstrapState{b1, b2}}
	for _, step := range []struct {
		b     *schemas.BootstrapState
		table string
		want  int64 // tables read of sales so far
		kept  int   // bootstraps whose names are kept
	}{
		{&b1, "a", 1, 1},
		{&b1, "a", 1, 1}, // the table in progress, read again on its next page
		{&b1, "b", 2, 1},
		{&b2, "a", 3, 2}, // another bootstrap's a; b1 in progress: both kept
	} {
		tl.noteTableRead(step.b, step.table)
		if got, _, _ := tl.m.BootstrapReads("sales"); got != step.want || len(tl.tablesRead) != step.kept {
			t.Fatalf("after %s read %s: %d tables read, %d bootstraps kept; want %d, %d",
				step.b.BootstrapID, step.table, got, len(tl.tablesRead), step.want, step.kept)
		}
	}
	// b1 and b2 done; a third bootstrap's first read drops their names.
	b3 := schemas.BootstrapState{Database: "sales", BootstrapID: "sales-3"}
	tl.boots = []schemas.BootstrapState{b3}
	tl.noteTableRead(&b3, "a")
	if _, ok := tl.tablesRead["sales-3"]; len(tl.tablesRead) != 1 || !ok {
		t.Errorf("names kept for %d bootstraps after the third's first read, want the third's only", len(tl.tablesRead))
	}
	if got, _, _ := tl.m.BootstrapReads("sales"); got != 4 {
		t.Errorf("%d tables read, want 4", got)
	}
}
