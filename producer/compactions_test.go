package producer

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/beltran/gohive/hive_metastore"

	"github.com/hivedr/hivedr/internal/acid"
	"github.com/hivedr/hivedr/internal/hmsevent"
	"github.com/hivedr/hivedr/internal/hmslog"
	"github.com/hivedr/hivedr/schemas"
)

// TestDecodeCommitCompaction: the message as Hive 4's listener writes it
// (JSONCommitCompactionMessage) names the transaction, the compaction and
// the object.
func TestDecodeCommitCompaction(t *testing.T) {
	raw := hmslog.RawEvent{EventID: 9, EventType: "COMMIT_COMPACTION", Database: "sales", Table: "orders", MessageFormat: "json-0.2",
		Message: `{"txnid":123,"timestamp":1733300000,"server":"thrift://src:9083","servicePrincipal":"","compactionId":7,` +
			`"type":"MAJOR","dbname":"sales","tableName":"orders","partName":"dt=2024-01-01"}`}
	ev := hmsevent.Decode(raw)
	if len(ev.Errors) > 0 {
		t.Fatalf("errors %+v", ev.Errors)
	}
	c, ok := ev.Payload.(*schemas.Compaction)
	want := schemas.Compaction{TxnID: 123, CompactionID: 7, Type: "MAJOR", Database: "sales", Table: "orders", Partition: "dt=2024-01-01"}
	if !ok || c.TxnID != want.TxnID || c.CompactionID != want.CompactionID || c.Type != want.Type || c.Database != want.Database ||
		c.Table != want.Table || c.Partition != want.Partition {
		t.Fatalf("payload %+v, want %+v", ev.Payload, want)
	}
	if !slices.Equal(ev.Databases, []string{"sales"}) {
		t.Errorf("databases %v", ev.Databases)
	}
	raw.Message = `{"compactionId":7,"dbname":"sales","tableName":"orders"}`
	if ev := hmsevent.Decode(raw); len(ev.Errors) != 1 || ev.Errors[0].Kind != schemas.ErrDecode {
		t.Errorf("a message without txnid: errors %+v, want one DECODE", ev.Errors)
	}
}

// TestListCompaction: only the directories the compactor's transaction
// wrote are listed, whole with its metadata files, and named on the
// payload; the copy tasks write them under their staging names.
func TestListCompaction(t *testing.T) {
	loc := "/e/t/dt=1"
	f := &fakeLister{files: map[string][]string{loc: {
		loc + "/base_0000004_v0000123/bucket_00000", loc + "/base_0000004_v0000123/bucket_00001",
		loc + "/base_0000004_v0000123/_metadata_acid", loc + "/base_0000004_v0000123/_orc_acid_version",
		loc + "/base_0000004_v0000123/.bucket_00000.crc",
		loc + "/base_0000002_v0000100/bucket_00000", // an earlier compaction's
		loc + "/delta_0000003_0000003_0000/bucket_00000",
		loc + "/delta_0000004_0000004_0000/bucket_00000",
		loc + "/000000_0",
	}}}
	l, _ := testLister(t, f, time.Minute)
	ev := &schemas.Event{EventID: 9, EventType: schemas.EventCommitCompaction, Database: "db", Table: "t", Databases: []string{"db"},
		Payload: &schemas.Compaction{TxnID: 123, Database: "db", Table: "t", Partition: "dt=1", Location: loc}}
	files, errs, err := l.list(context.Background(), ev)
	if err != nil || len(errs) > 0 {
		t.Fatalf("list: %v, %v", errs, err)
	}
	want := []string{loc + "/base_0000004_v0000123/_metadata_acid", loc + "/base_0000004_v0000123/_orc_acid_version",
		loc + "/base_0000004_v0000123/bucket_00000", loc + "/base_0000004_v0000123/bucket_00001"}
	got := uris(files)
	slices.Sort(got)
	if !slices.Equal(got, want) {
		t.Fatalf("files %v, want %v", got, want)
	}
	for _, fr := range files {
		if fr.Subdir != "base_0000004_v0000123" {
			t.Errorf("file %s has subdir %q", fr.URI, fr.Subdir)
		}
	}
	c := ev.Payload.(*schemas.Compaction)
	if !slices.Equal(c.Dirs, []string{"base_0000004_v0000123"}) {
		t.Errorf("dirs %v", c.Dirs)
	}
	r := Routed{Event: *ev}
	r.AddFiles(files, l.pol)
	for _, task := range r.Tasks {
		if d := acid.StagingName("base_0000004_v0000123"); !slices.Contains([]string{
			"/dr/e/t/dt=1/" + d + "/bucket_00000", "/dr/e/t/dt=1/" + d + "/bucket_00001",
			"/dr/e/t/dt=1/" + d + "/_metadata_acid", "/dr/e/t/dt=1/" + d + "/_orc_acid_version"}, task.TargetURI) {
			t.Errorf("task %s writes %s, want its staging directory", task.TaskID, task.TargetURI)
		}
	}
	if len(r.Tasks) != 4 || len(r.Event.Errors) > 0 {
		t.Errorf("%d tasks, errors %+v", len(r.Tasks), r.Event.Errors)
	}

	// Outside the roots: never listed, an error on the event.
	ev.Payload = &schemas.Compaction{TxnID: 123, Database: "db", Table: "t", Location: "/elsewhere/t"}
	f.asked = nil
	if files, errs, err := l.list(context.Background(), ev); err != nil || len(files) > 0 || len(errs) != 1 ||
		errs[0].Kind != schemas.ErrPathOutsideRoots || len(f.asked) != 0 {
		t.Errorf("outside the roots: files %v, errors %+v, asked %v, err %v", files, errs, f.asked, err)
	}
}

// TestCompleteCompactions: an in-scope compaction gets its directory from
// the source metastore (the table's, or the partition's); an excluded or
// out-of-scope one is not read; one whose object is gone keeps none; no
// source metastore to read from is an error on the event.
func TestCompleteCompactions(t *testing.T) {
	snaps := newMemSnaps(t)
	snaps.addTable(&hive_metastore.Table{DbName: "sales", TableName: "orders",
		Sd: &hive_metastore.StorageDescriptor{Location: "hdfs://src:8020/warehouse/sales.db/orders", SerdeInfo: &hive_metastore.SerDeInfo{}}}, 2)
	compaction := func(db, table, part string) schemas.Event {
		return schemas.Event{EventID: 5, EventType: schemas.EventCommitCompaction, Database: db, Table: table, Databases: []string{db},
			Payload: &schemas.Compaction{TxnID: 9, Database: db, Table: table, Partition: part}}
	}
	evs := []schemas.Event{
		compaction("sales", "orders", ""),
		compaction("sales", "orders", "ds=002"),
		compaction("sales", "orders", "ds=404"),
		compaction("finance", "tmp_x", ""),
		compaction("hr", "people", ""),
	}
	tl := txnTailer(t, nil, nil)
	tl.cfg.Snapshots = snaps
	if err := tl.completeCompactions(context.Background(), evs); err != nil {
		t.Fatal(err)
	}
	want := []string{"hdfs://src:8020/warehouse/sales.db/orders", "hdfs://src:8020/warehouse/sales.db/orders/ds=002", "", "", ""}
	for i, ev := range evs {
		if got := ev.Payload.(*schemas.Compaction).Location; got != want[i] || len(ev.Errors) > 0 {
			t.Errorf("event %d: location %q, errors %+v; want %q", i, got, ev.Errors, want[i])
		}
	}
	if snaps.reads["finance.tmp_x"] != 0 || snaps.reads["hr.people"] != 0 {
		t.Errorf("read out-of-scope tables: %v", snaps.reads)
	}

	tl.cfg.Snapshots = nil
	evs = []schemas.Event{compaction("sales", "orders", "")}
	if err := tl.completeCompactions(context.Background(), evs); err != nil {
		t.Fatal(err)
	}
	if errs := evs[0].Errors; len(errs) != 1 || errs[0].Kind != schemas.ErrListingFailed {
		t.Errorf("without a source metastore: errors %+v, want one LISTING_FAILED", errs)
	}
}
