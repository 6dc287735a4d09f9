package producer

import (
	"slices"
	"strings"
	"testing"

	"github.com/hivedr/hivedr/internal/config"
	"github.com/hivedr/hivedr/schemas"
)

func testPolicy(t *testing.T) *config.Replication {
	t.Helper()
	c := config.Default()
	c.Replication = config.Replication{
		Databases: []config.DatabasePolicy{
			{Name: "finance", ExcludeTables: []string{"tmp_.*"}},
			{Name: "sales"},
		},
		SourceRoots:  []string{"hdfs://src:8020/warehouse"},
		PathMappings: []config.PathMapping{{Source: "hdfs://src:8020/", Target: "hdfs://dr:8020/"}},
	}
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	return &c.Replication
}

func tbl(db, name string) *schemas.Table { return &schemas.Table{Database: db, Name: name} }

func TestRoute(t *testing.T) {
	pol := testPolicy(t)
	tests := []struct {
		name      string
		ev        schemas.Event
		dbs       []string
		filtered  string
		tasks     []string // target URIs
		errPaths  []string
		taskOwner string
	}{
		{
			name: "database event in scope",
			ev:   schemas.Event{EventType: schemas.EventCreateDatabase, Database: "finance", Databases: []string{"finance"}},
			dbs:  []string{"finance"},
		},
		{
			name:     "database out of scope",
			ev:       schemas.Event{EventType: schemas.EventCreateDatabase, Database: "hr", Databases: []string{"hr"}},
			filtered: FilterOutOfScope,
		},
		{
			name:     "open txn concerns no database",
			ev:       schemas.Event{EventType: schemas.EventOpenTxn},
			filtered: FilterNoDatabase,
		},
		{
			name:     "excluded table",
			ev:       schemas.Event{EventType: schemas.EventCreateTable, Database: "finance", Table: "tmp_x", Databases: []string{"finance"}, Payload: &schemas.TableChange{After: tbl("finance", "tmp_x")}},
			filtered: FilterTableExcluded,
		},
		{
			name: "rename from excluded to included name still reaches the database",
			ev: schemas.Event{EventType: schemas.EventAlterTable, Database: "finance", Table: "tmp_x", Databases: []string{"finance"},
				Payload: &schemas.TableChange{Before: tbl("finance", "tmp_x"), After: tbl("finance", "ledger")}},
			dbs: []string{"finance"},
		},
		{
			name: "rename across databases reaches both",
			ev: schemas.Event{EventType: schemas.EventAlterTable, Database: "sales", Table: "orders", Databases: []string{"finance", "sales"},
				Payload: &schemas.TableChange{Before: tbl("sales", "orders"), After: tbl("finance", "orders")}},
			dbs: []string{"finance", "sales"},
		},
		{
			name: "rename into an out-of-scope database reaches the in-scope one only",
			ev: schemas.Event{EventType: schemas.EventAlterTable, Database: "sales", Table: "orders", Databases: []string{"hr", "sales"},
				Payload: &schemas.TableChange{Before: tbl("sales", "orders"), After: tbl("hr", "orders")}},
			dbs: []string{"sales"},
		},
		{
			name: "commit touching two databases",
			ev: schemas.Event{EventType: schemas.EventCommitTxn, Databases: []string{"finance", "sales"},
				Payload: &schemas.Transaction{TxnIDs: []int64{7}, WriteIDs: []schemas.TableWriteID{{Database: "finance", Table: "ledger", WriteID: 1}, {Database: "sales", Table: "orders", WriteID: 3}}}},
			dbs: []string{"finance", "sales"},
		},
		{
			name: "commit copies the files of its writes in scope only",
			ev: schemas.Event{EventID: 44, EventType: schemas.EventCommitTxn, Databases: []string{"finance", "hr"},
				Payload: &schemas.Transaction{TxnIDs: []int64{8}, WriteIDs: []schemas.TableWriteID{
					{Database: "finance", Table: "ledger", WriteID: 2, Partition: "dt=1", Files: []string{"hdfs://src:8020/warehouse/finance.db/ledger/dt=1/delta_0000002_0000002_0000/bucket_00000"}},
					{Database: "finance", Table: "tmp_x", WriteID: 1, Files: []string{"hdfs://src:8020/warehouse/finance.db/tmp_x/delta_0000001_0000001_0000/bucket_00000"}},
					{Database: "hr", Table: "people", WriteID: 5, Files: []string{"hdfs://src:8020/warehouse/hr.db/people/delta_0000005_0000005_0000/bucket_00000"}},
				}},
				Files: []schemas.FileRef{
					{URI: "hdfs://src:8020/warehouse/finance.db/ledger/dt=1/delta_0000002_0000002_0000/bucket_00000", Subdir: "delta_0000002_0000002_0000"},
					{URI: "hdfs://src:8020/warehouse/finance.db/tmp_x/delta_0000001_0000001_0000/bucket_00000"},
					{URI: "hdfs://src:8020/warehouse/hr.db/people/delta_0000005_0000005_0000/bucket_00000"},
				}},
			dbs:       []string{"finance"},
			tasks:     []string{"hdfs://dr:8020/warehouse/finance.db/ledger/dt=1/delta_0000002_0000002_0000/bucket_00000"},
			taskOwner: "finance.ledger",
		},
		{
			name: "insert files become tasks with mapped targets",
			ev: schemas.Event{EventID: 42, EventType: schemas.EventInsert, Database: "sales", Table: "orders", Databases: []string{"sales"},
				Payload: &schemas.InsertData{Table: tbl("sales", "orders")},
				Files: []schemas.FileRef{
					{URI: "hdfs://src:8020/warehouse/sales.db/orders/f0"},
					{URI: "hdfs://src:8020/warehouse/sales.db/orders/f1", Checksum: "abc"},
				}},
			dbs:       []string{"sales"},
			tasks:     []string{"hdfs://dr:8020/warehouse/sales.db/orders/f0", "hdfs://dr:8020/warehouse/sales.db/orders/f1"},
			taskOwner: "sales.orders",
		},
		{
			name: "files outside the roots are errors, not tasks",
			ev: schemas.Event{EventID: 43, EventType: schemas.EventInsert, Database: "sales", Table: "orders", Databases: []string{"sales"},
				Files: []schemas.FileRef{
					{URI: "hdfs://src:8020/etc/passwd"},
					{URI: "hdfs://src:8020/warehouse/../etc/shadow"},
					{URI: "hdfs://other:8020/warehouse/x"},
					{URI: "hdfs://src:8020/warehouse/sales.db/orders/ok"},
				}},
			dbs:       []string{"sales"},
			tasks:     []string{"hdfs://dr:8020/warehouse/sales.db/orders/ok"},
			errPaths:  []string{"hdfs://src:8020/etc/passwd", "hdfs://src:8020/warehouse/../etc/shadow", "hdfs://other:8020/warehouse/x"},
			taskOwner: "sales.orders",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := Route(tt.ev, pol)
			if r.Filtered != tt.filtered {
				t.Fatalf("filtered = %q, want %q", r.Filtered, tt.filtered)
			}
			if tt.filtered != "" {
				return
			}
			if !slices.Equal(r.Event.Databases, tt.dbs) {
				t.Errorf("databases = %v, want %v", r.Event.Databases, tt.dbs)
			}
			var targets []string
			for _, task := range r.Tasks {
				targets = append(targets, task.TargetURI)
				if got := task.Database + "." + task.Table; got != tt.taskOwner {
					t.Errorf("task %s belongs to %s, want %s", task.TaskID, got, tt.taskOwner)
				}
				if !strings.HasPrefix(task.TaskID, "4") {
					t.Errorf("task id %q does not start with the event id", task.TaskID)
				}
			}
			if !slices.Equal(targets, tt.tasks) {
				t.Errorf("task targets = %v, want %v", targets, tt.tasks)
			}
			var errPaths []string
			for _, e := range r.Event.Errors {
				if e.Kind != schemas.ErrPathOutsideRoots || !strings.Contains(e.Message, e.Path) {
					t.Errorf("error %+v: want PATH_OUTSIDE_ROOTS naming its path", e)
				}
				errPaths = append(errPaths, e.Path)
			}
			if !slices.Equal(errPaths, tt.errPaths) {
				t.Errorf("error paths = %v, want %v", errPaths, tt.errPaths)
			}
			if tx, ok := r.Event.Payload.(*schemas.Transaction); ok && tt.ev.EventID == 44 {
				if len(tx.WriteIDs) != 1 || tx.WriteIDs[0].Table != "ledger" || len(r.Event.Files) != 1 {
					t.Errorf("commit narrowed to writes %+v, files %+v: want the ledger's only", tx.WriteIDs, r.Event.Files)
				}
				if orig := tt.ev.Payload.(*schemas.Transaction); len(orig.WriteIDs) != 3 || len(tt.ev.Files) != 3 {
					t.Errorf("the caller's commit was changed: %+v", orig)
				}
			}
			// Files that became tasks carry their task ID; refused ones none.
			for _, f := range r.Event.Files {
				if (f.TaskID != "") == slices.Contains(tt.errPaths, f.URI) {
					t.Errorf("file %s has task id %q", f.URI, f.TaskID)
				}
			}
		})
	}
}

func TestRouteDoesNotAliasInput(t *testing.T) {
	ev := schemas.Event{EventID: 1, Database: "sales", Databases: []string{"sales"},
		Files: []schemas.FileRef{{URI: "hdfs://src:8020/warehouse/a"}}}
	Route(ev, testPolicy(t))
	if ev.Files[0].TaskID != "" {
		t.Fatal("Route modified its input's files")
	}
}
