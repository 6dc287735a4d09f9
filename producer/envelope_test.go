package producer

import (
	"testing"
	"time"

	"github.com/hivedr/hivedr/internal/config"
	"github.com/hivedr/hivedr/schemas"
)

func TestEnvelope(t *testing.T) {
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	src := config.Source{Name: "site-a", Kind: config.SourcePostgres, Metastore: "hms-a:9083", PostgresDSN: "postgres://hive:secret@pg/hms"}
	for _, tc := range []struct {
		name string
		ev   schemas.Event
		op   schemas.Op
		snap bool
	}{
		{"event", schemas.Event{EventID: 7, EventTime: at, EventType: schemas.EventCreateTable, Catalog: "hive", Database: "db", Table: "t"}, schemas.OpCreate, false},
		{"bootstrap record", schemas.Event{EventID: 7, EventTime: at, EventType: schemas.EventSnapshotTable, Database: "db", Table: "t",
			Snapshot: &schemas.SnapshotInfo{BootstrapID: "b"}}, schemas.OpRead, true},
		{"discontinuity", schemas.Event{EventID: 7, EventTime: at, EventType: schemas.EventDiscontinuity, Database: "db",
			Snapshot: &schemas.SnapshotInfo{CutEventID: 7}}, schemas.OpMarker, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ev := tc.ev
			envelope(&ev, &src, "v9")
			want := schemas.SourceInfo{Name: "site-a", Metastore: "hms-a:9083", Reader: "postgres", Version: "v9", Catalog: "hive",
				EventID: 7, EventTime: at, Database: "db", Table: tc.ev.Table, Snapshot: tc.snap}
			if ev.Op != tc.op {
				t.Errorf("op %q, want %q", ev.Op, tc.op)
			}
			if ev.SourceInfo == nil || *ev.SourceInfo != want {
				t.Errorf("source_info %+v, want %+v", ev.SourceInfo, want)
			}
		})
	}
}
