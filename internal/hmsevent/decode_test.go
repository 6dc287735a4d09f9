package hmsevent

import (
	"bytes"
	"compress/gzip"
	"encoding/base64"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/hivedr/hivedr/internal/hms"
	"github.com/hivedr/hivedr/internal/hmslog"
	"github.com/hivedr/hivedr/schemas"
)

// decodeFixture is one notification captured from the real metastore by
// testdata/capture.
type decodeFixture struct {
	name string
	raw  hmslog.RawEvent
}

func loadDecodeFixtures(tb testing.TB) []decodeFixture {
	tb.Helper()
	return loadFixtureDir(tb, "events")
}

// loadFixtureDir reads the fixtures capture wrote into testdata/dir.
func loadFixtureDir(tb testing.TB, dir string) []decodeFixture {
	tb.Helper()
	paths, err := filepath.Glob(filepath.Join("testdata", dir, "*.json"))
	if err != nil {
		tb.Fatal(err)
	}
	if len(paths) == 0 {
		tb.Fatalf("no fixtures in testdata/%s: run go run ./internal/hmsevent/testdata/capture", dir)
	}
	sort.Strings(paths)
	out := make([]decodeFixture, 0, len(paths))
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			tb.Fatal(err)
		}
		var f struct {
			EventID       int64             `json:"eventId"`
			EventTime     int64             `json:"eventTime"`
			EventType     schemas.EventType `json:"eventType"`
			CatName       string            `json:"catName"`
			DBName        string            `json:"dbName"`
			TableName     string            `json:"tableName"`
			MessageFormat string            `json:"messageFormat"`
			Message       string            `json:"message"`
		}
		if err := json.Unmarshal(b, &f); err != nil {
			tb.Fatalf("%s: %v", p, err)
		}
		out = append(out, decodeFixture{name: filepath.Base(p), raw: hmslog.RawEvent{
			EventID: f.EventID, EventTime: f.EventTime, EventType: f.EventType,
			Catalog: f.CatName, Database: f.DBName, Table: f.TableName,
			MessageFormat: f.MessageFormat, Message: f.Message,
		}})
	}
	return out
}

// decodeWantPayload is the payload type each event type decodes to; ""
// means a nil payload.
var decodeWantPayload = map[schemas.EventType]string{
	schemas.EventCreateDatabase:         "*schemas.DatabaseChange",
	schemas.EventAlterDatabase:          "*schemas.DatabaseChange",
	schemas.EventDropDatabase:           "*schemas.DatabaseChange",
	schemas.EventCreateTable:            "*schemas.TableChange",
	schemas.EventAlterTable:             "*schemas.TableChange",
	schemas.EventDropTable:              "*schemas.TableChange",
	schemas.EventAddPartition:           "*schemas.PartitionChange",
	schemas.EventAlterPartition:         "*schemas.PartitionChange",
	schemas.EventAlterPartitions:        "*schemas.PartitionChange",
	schemas.EventDropPartition:          "*schemas.PartitionChange",
	schemas.EventInsert:                 "*schemas.InsertData",
	schemas.EventOpenTxn:                "*schemas.Transaction",
	schemas.EventCommitTxn:              "*schemas.Transaction",
	schemas.EventAbortTxn:               "*schemas.Transaction",
	schemas.EventAcidWrite:              "*schemas.Transaction",
	schemas.EventAllocWriteID:           "*schemas.WriteIDAllocation",
	schemas.EventUpdateTableColStat:     "*schemas.ColumnStats",
	schemas.EventDeleteTableColStat:     "*schemas.ColumnStats",
	schemas.EventUpdatePartitionColStat: "*schemas.ColumnStats",
	schemas.EventDeletePartitionColStat: "*schemas.ColumnStats",
}

func payloadTypeName(p schemas.Payload) string {
	if p == nil {
		return ""
	}
	return reflect.TypeOf(p).String()
}

// TestDecodeFixtures decodes every captured notification: none has an
// error, each has the payload type of its event type, the envelope is
// copied and the raw message kept.
func TestDecodeFixtures(t *testing.T) {
	for _, f := range loadDecodeFixtures(t) {
		t.Run(f.name, func(t *testing.T) {
			ev := Decode(f.raw)
			if len(ev.Errors) != 0 {
				t.Fatalf("errors: %+v", ev.Errors)
			}
			if got, want := payloadTypeName(ev.Payload), decodeWantPayload[f.raw.EventType]; got != want {
				t.Errorf("payload type = %q, want %q", got, want)
			}
			if ev.EventID != f.raw.EventID || ev.EventType != f.raw.EventType ||
				!ev.EventTime.Equal(time.Unix(f.raw.EventTime, 0)) {
				t.Errorf("envelope = %d %s %v, want %d %s %d", ev.EventID, ev.EventType, ev.EventTime,
					f.raw.EventID, f.raw.EventType, f.raw.EventTime)
			}
			if ev.Database != f.raw.Database || ev.Table != f.raw.Table {
				t.Errorf("database.table = %s.%s, want %s.%s", ev.Database, ev.Table, f.raw.Database, f.raw.Table)
			}
			if ev.Catalog == "" {
				t.Error("empty catalog")
			}
			if ev.Message != f.raw.Message || ev.MessageFormat != f.raw.MessageFormat {
				t.Error("raw message not kept as given")
			}
			if !slices.IsSorted(ev.Databases) || len(slices.Compact(slices.Clone(ev.Databases))) != len(ev.Databases) {
				t.Errorf("databases not a sorted set: %v", ev.Databases)
			}
			if f.raw.Database != "" && !slices.Contains(ev.Databases, f.raw.Database) {
				t.Errorf("databases %v lack the event's own %q", ev.Databases, f.raw.Database)
			}
			for _, file := range ev.Files {
				if !strings.Contains(file.URI, "://") || strings.Contains(file.URI, "#") {
					t.Errorf("bad file URI %q", file.URI)
				}
			}
		})
	}
}

// TestDecodeEnumNames: an event type spelled with EventMessage.EventType's
// enum name instead of its value (ALLOC_WRITE_ID for ALLOC_WRITE_ID_EVENT)
// decodes as the value does, and keeps its spelling.
func TestDecodeEnumNames(t *testing.T) {
	fs := loadDecodeFixtures(t)
	for alias, canonical := range map[schemas.EventType]schemas.EventType{
		"ALLOC_WRITE_ID":           schemas.EventAllocWriteID,
		"UPDATE_TABLE_COLUMN_STAT": schemas.EventUpdateTableColStat,
	} {
		i := slices.IndexFunc(fs, func(f decodeFixture) bool { return f.raw.EventType == canonical })
		if i < 0 {
			t.Fatalf("no %s fixture", canonical)
		}
		raw := fs[i].raw
		want := Decode(raw)
		raw.EventType = alias
		got := Decode(raw)
		if len(got.Errors) > 0 || got.EventType != alias || payloadTypeName(got.Payload) != payloadTypeName(want.Payload) ||
			len(got.Files) != len(want.Files) {
			t.Errorf("%s: %s event with %d files, errors %v; want it decoded as %s (%s, %d files)", alias, payloadTypeName(got.Payload),
				len(got.Files), got.Errors, canonical, payloadTypeName(want.Payload), len(want.Files))
		}
	}
}

// decodeFind returns the decoded events of the fixtures that match.
func decodeFind(t *testing.T, fs []decodeFixture, eventType schemas.EventType, match func(hmslog.RawEvent, schemas.Event) bool) []schemas.Event {
	t.Helper()
	var out []schemas.Event
	for _, f := range fs {
		if f.raw.EventType != eventType {
			continue
		}
		ev := Decode(f.raw)
		if match == nil || match(f.raw, ev) {
			out = append(out, ev)
		}
	}
	if len(out) == 0 {
		t.Fatalf("no %s fixture matches", eventType)
	}
	return out
}

func onTable(db, table string) func(hmslog.RawEvent, schemas.Event) bool {
	return func(r hmslog.RawEvent, _ schemas.Event) bool { return r.Database == db && r.Table == table }
}

func columnNames(cs []schemas.Column) []string {
	var out []string
	for _, c := range cs {
		out = append(out, c.Name)
	}
	return out
}

func TestDecodeDatabaseEvents(t *testing.T) {
	fs := loadDecodeFixtures(t)
	ev := decodeFind(t, fs, schemas.EventCreateDatabase, onTable("cap_sales", ""))[0]
	dc := ev.Payload.(*schemas.DatabaseChange)
	if dc.Before != nil || dc.After == nil || dc.After.Name != "cap_sales" || dc.After.Parameters["owner.team"] != "sales" {
		t.Errorf("CREATE_DATABASE payload = %+v", dc)
	}
	if dc.After.Location == "" {
		t.Error("CREATE_DATABASE: no location")
	}

	ev = decodeFind(t, fs, schemas.EventAlterDatabase, onTable("cap_sales", ""))[0]
	dc = ev.Payload.(*schemas.DatabaseChange)
	if dc.Before == nil || dc.After == nil || dc.Before.Parameters["retention.days"] != "" || dc.After.Parameters["retention.days"] != "30" {
		t.Errorf("ALTER_DATABASE payload = %+v / %+v", dc.Before, dc.After)
	}

	ev = decodeFind(t, fs, schemas.EventDropDatabase, onTable("cap_sales", ""))[0]
	dc = ev.Payload.(*schemas.DatabaseChange)
	if dc.After != nil || dc.Before == nil || dc.Before.Name != "cap_sales" {
		t.Errorf("DROP_DATABASE payload = %+v", dc)
	}
	if !slices.Equal(ev.Databases, []string{"cap_sales"}) {
		t.Errorf("DROP_DATABASE databases = %v", ev.Databases)
	}
}

func TestDecodeTableEvents(t *testing.T) {
	fs := loadDecodeFixtures(t)

	ev := decodeFind(t, fs, schemas.EventCreateTable, onTable("cap_sales", "orders"))[0]
	tc := ev.Payload.(*schemas.TableChange)
	if tc.Before != nil || tc.After == nil {
		t.Fatalf("CREATE_TABLE payload = %+v", tc)
	}
	tbl := tc.After
	if tbl.Database != "cap_sales" || tbl.Name != "orders" || tbl.TableType != "EXTERNAL_TABLE" {
		t.Errorf("table = %s.%s %s", tbl.Database, tbl.Name, tbl.TableType)
	}
	if got := columnNames(tbl.Columns); !slices.Equal(got, []string{"id", "amount", "note"}) {
		t.Errorf("columns = %v", got)
	}
	if tbl.Columns[1].Type != "decimal(10,2)" || tbl.Columns[0].Comment != "captured id" {
		t.Errorf("column detail = %+v", tbl.Columns)
	}
	if got := columnNames(tbl.PartitionKeys); !slices.Equal(got, []string{"dt", "region"}) {
		t.Errorf("partition keys = %v", got)
	}
	if !strings.HasSuffix(tbl.Location, "/cap_sales.db/orders") || tbl.Storage.SerdeLib != "org.apache.hadoop.hive.serde2.lazy.LazySimpleSerDe" ||
		tbl.Storage.SerdeParameters["field.delim"] != "," || tbl.Storage.InputFormat != "org.apache.hadoop.mapred.TextInputFormat" {
		t.Errorf("location/storage = %s %+v", tbl.Location, tbl.Storage)
	}
	if tbl.ThriftJSON == "" || !strings.HasPrefix(tbl.ThriftJSON, "{") {
		t.Error("table thrift json not kept")
	}
	if tbl.CreateTime == 0 {
		t.Error("no create time")
	}

	// ADD COLUMN: same name, one more column after.
	ev = decodeFind(t, fs, schemas.EventAlterTable, func(r hmslog.RawEvent, e schemas.Event) bool {
		tc := e.Payload.(*schemas.TableChange)
		return r.Table == "orders" && len(tc.After.Columns) > len(tc.Before.Columns)
	})[0]
	tc = ev.Payload.(*schemas.TableChange)
	if got := columnNames(tc.After.Columns); !slices.Equal(got, []string{"id", "amount", "note", "channel"}) || tc.IsTruncate {
		t.Errorf("add column: after columns = %v truncate=%v", got, tc.IsTruncate)
	}

	// TRUNCATE of an unpartitioned table. The stack's metastore logs no
	// event for truncating an external table and cannot create managed
	// ones yet, so this is the captured ADD COLUMN message with
	// isTruncateOp set, as json-0.2.
	add := decodeFind(t, fs, schemas.EventAlterTable, onTable("cap_sales", "orders"))[0]
	ev = Decode(decodeRewrite(t, add, func(m map[string]any) { m["isTruncateOp"] = "true" }))
	if tc := ev.Payload.(*schemas.TableChange); len(ev.Errors) != 0 || !tc.IsTruncate || tc.After.Name != "orders" {
		t.Errorf("truncate: %+v errors %v", tc, ev.Errors)
	}

	// Rename within a database.
	ev = decodeFind(t, fs, schemas.EventAlterTable, func(_ hmslog.RawEvent, e schemas.Event) bool {
		tc := e.Payload.(*schemas.TableChange)
		return tc.Before.Name == "customers" && tc.After.Name == "clients" && tc.Before.Database == tc.After.Database
	})[0]
	if ev.Table != "clients" || !slices.Equal(ev.Databases, []string{"cap_sales"}) {
		t.Errorf("rename within: table=%s databases=%v", ev.Table, ev.Databases)
	}

	// Rename across databases concerns both.
	ev = decodeFind(t, fs, schemas.EventAlterTable, func(_ hmslog.RawEvent, e schemas.Event) bool {
		tc := e.Payload.(*schemas.TableChange)
		return tc.Before.Database != tc.After.Database
	})[0]
	tc = ev.Payload.(*schemas.TableChange)
	if tc.Before.Database != "cap_sales" || tc.After.Database != "cap_archive" || tc.After.Name != "clients" {
		t.Errorf("move: %s.%s -> %s.%s", tc.Before.Database, tc.Before.Name, tc.After.Database, tc.After.Name)
	}
	if !slices.Equal(ev.Databases, []string{"cap_archive", "cap_sales"}) {
		t.Errorf("move databases = %v", ev.Databases)
	}

	ev = decodeFind(t, fs, schemas.EventDropTable, onTable("cap_sales", "orders"))[0]
	if tc := ev.Payload.(*schemas.TableChange); tc.After != nil || tc.Before == nil || tc.Before.Name != "orders" {
		t.Errorf("DROP_TABLE payload = %+v", tc)
	}
}

func TestDecodePartitionEvents(t *testing.T) {
	fs := loadDecodeFixtures(t)

	ev := decodeFind(t, fs, schemas.EventAddPartition, onTable("cap_sales", "orders"))[0]
	pc := ev.Payload.(*schemas.PartitionChange)
	if pc.Table == nil || pc.Table.Name != "orders" || len(pc.Before) != 0 || len(pc.After) != 2 {
		t.Fatalf("ADD_PARTITION payload = %+v", pc)
	}
	if !slices.Equal(pc.After[0].Values, []string{"2024-01-01", "eu"}) || !slices.Equal(pc.After[1].Values, []string{"2024-01-02", "us"}) {
		t.Errorf("added values = %v %v", pc.After[0].Values, pc.After[1].Values)
	}
	if !strings.HasSuffix(pc.After[0].Location, "/orders/dt=2024-01-01/region=eu") || pc.After[0].Storage == nil ||
		pc.After[0].ThriftJSON == "" || !slices.Equal(columnNames(pc.After[0].Columns), []string{"id", "amount", "note"}) {
		t.Errorf("added partition = %+v", pc.After[0])
	}

	ev = decodeFind(t, fs, schemas.EventAlterPartition, func(_ hmslog.RawEvent, e schemas.Event) bool {
		return !e.Payload.(*schemas.PartitionChange).IsTruncate
	})[0]
	pc = ev.Payload.(*schemas.PartitionChange)
	if len(pc.Before) != 1 || len(pc.After) != 1 || pc.After[0].Parameters["hivedr.note"] != "altered" ||
		pc.Before[0].Parameters["hivedr.note"] != "" || !slices.Equal(pc.After[0].Values, []string{"2024-01-01", "eu"}) {
		t.Errorf("ALTER_PARTITION payload = %+v", pc)
	}

	ev = decodeFind(t, fs, schemas.EventAlterPartition, func(_ hmslog.RawEvent, e schemas.Event) bool {
		return e.Payload.(*schemas.PartitionChange).IsTruncate
	})[0]
	if pc := ev.Payload.(*schemas.PartitionChange); !slices.Equal(pc.After[0].Values, []string{"2024-01-02", "us"}) {
		t.Errorf("truncated partition = %v", pc.After[0].Values)
	}

	ev = decodeFind(t, fs, schemas.EventDropPartition, onTable("cap_sales", "orders"))[0]
	pc = ev.Payload.(*schemas.PartitionChange)
	if len(pc.Before) != 1 || !slices.Equal(pc.Before[0].Values, []string{"2024-01-01", "eu"}) || len(pc.After) != 0 {
		t.Errorf("DROP_PARTITION payload = %+v", pc)
	}
}

// TestDecodeAlterPartitions decodes the batched ALTER_PARTITIONS event
// (Hive 4.1+, not written by the stack's 4.0 metastore): the captured
// ADD_PARTITION message has its shape, plus isTruncateOp.
func TestDecodeAlterPartitions(t *testing.T) {
	add := decodeFind(t, loadDecodeFixtures(t), schemas.EventAddPartition, onTable("cap_sales", "orders"))[0]
	raw := decodeRewrite(t, add, func(m map[string]any) {
		m["isTruncateOp"] = "true"
		delete(m, "partitionFiles")
	})
	raw.EventType = schemas.EventAlterPartitions
	ev := Decode(raw)
	pc, ok := ev.Payload.(*schemas.PartitionChange)
	if len(ev.Errors) != 0 || !ok || !pc.IsTruncate || len(pc.After) != 2 || !slices.Equal(pc.After[1].Values, []string{"2024-01-02", "us"}) {
		t.Errorf("ALTER_PARTITIONS = %+v errors %v", ev.Payload, ev.Errors)
	}
}

func TestDecodeInsertEvents(t *testing.T) {
	fs := loadDecodeFixtures(t)

	ev := decodeFind(t, fs, schemas.EventInsert, onTable("cap_sales", "customers"))[0]
	ins := ev.Payload.(*schemas.InsertData)
	if ins.Replace || ins.Partition != nil || ins.Table == nil || ins.Table.Name != "customers" {
		t.Errorf("INSERT payload = %+v", ins)
	}
	if len(ev.Files) != 2 {
		t.Fatalf("INSERT files = %+v", ev.Files)
	}
	f := ev.Files[0]
	if !strings.HasSuffix(f.URI, "/customers/000000_0") || f.Checksum != "0000020000000000000000003f7c5b1a0000000000000000" {
		t.Errorf("INSERT file 0 = %+v", f)
	}
	if ev.Files[1].Checksum != "00000200000000000000000011aa22bb0000000000000000" {
		t.Errorf("INSERT file 1 = %+v", ev.Files[1])
	}

	ev = decodeFind(t, fs, schemas.EventInsert, onTable("cap_sales", "orders"))[0]
	ins = ev.Payload.(*schemas.InsertData)
	if !ins.Replace || ins.Partition == nil || !slices.Equal(ins.Partition.Values, []string{"2024-01-02", "us"}) {
		t.Errorf("INSERT OVERWRITE payload = %+v", ins)
	}
	if len(ev.Files) != 1 || !strings.HasSuffix(ev.Files[0].URI, "/dt=2024-01-02/region=us/000000_0") || ev.Files[0].Checksum != "" {
		t.Errorf("INSERT OVERWRITE files = %+v", ev.Files)
	}
}

func TestDecodeTransactionEvents(t *testing.T) {
	fs := loadDecodeFixtures(t)

	open := decodeFind(t, fs, schemas.EventOpenTxn, nil)[0]
	txns := open.Payload.(*schemas.Transaction).TxnIDs
	if len(txns) != 2 || txns[1] != txns[0]+1 || len(open.Databases) != 0 {
		t.Fatalf("OPEN_TXN = %v databases %v", txns, open.Databases)
	}

	allocs := decodeFind(t, fs, schemas.EventAllocWriteID, nil)
	a := allocs[0].Payload.(*schemas.WriteIDAllocation)
	if a.Table != "events_acid" || len(a.Allocations) != 1 || a.Allocations[0].TxnID != txns[0] || a.Allocations[0].WriteID < 1 {
		t.Errorf("ALLOC_WRITE_ID = %+v", a)
	}

	// The captured COMMIT_TXN and ABORT_TXN carry no write IDs: the stack's
	// metastore cannot create ACID tables (their ORC formats live in
	// hive-exec, which it does not load), so no ACID_WRITE_EVENT is
	// captured either. These messages are built after Hive's
	// JSONCommitTxnMessage, JSONAcidWriteMessage and JSONAbortTxnMessage,
	// with a captured table object.
	tableObj := decodeFieldOf(t, decodeFind(t, fs, schemas.EventCreateTable, onTable("cap_sales", "orders"))[0], "tableObjJson")
	txn := txns[0]
	commit := Decode(hmslog.RawEvent{EventID: 100, EventTime: 1700000000, EventType: schemas.EventCommitTxn, MessageFormat: hms.FormatJSON,
		Message: decodeMarshal(t, map[string]any{
			"txnid": txn, "timestamp": 1700000000, "server": "", "servicePrincipal": "",
			"writeIds":      []int64{3, 1},
			"databases":     []string{"cap_sales", "cap_archive"},
			"tables":        []string{"events_acid", "events_acid"},
			"partitions":    []any{nil, nil},
			"tableObjs":     []string{tableObj, tableObj},
			"partitionObjs": []any{nil, nil},
			"files": []string{
				"hdfs://nn:8020/warehouse/cap_sales.db/events_acid/delta_0000003_0000003_0000/bucket_00000_0#c1#hdfs://nn:8020/cmroot#delta_0000003_0000003_0000" +
					"]hdfs://nn:8020/warehouse/cap_sales.db/events_acid/delta_0000003_0000003_0000/bucket_00001_0#c2#hdfs://nn:8020/cmroot#delta_0000003_0000003_0000",
				"hdfs://nn:8020/warehouse/cap_archive.db/events_acid/delta_0000001_0000001_0000/bucket_00000_0###delta_0000001_0000001_0000",
			},
		})})
	ct := commit.Payload.(*schemas.Transaction)
	if len(commit.Errors) != 0 || !slices.Equal(ct.TxnIDs, []int64{txn}) {
		t.Errorf("COMMIT_TXN = %+v errors %v", ct, commit.Errors)
	}
	wantW := []schemas.TableWriteID{
		{Database: "cap_sales", Table: "events_acid", WriteID: 3, Files: []string{
			"hdfs://nn:8020/warehouse/cap_sales.db/events_acid/delta_0000003_0000003_0000/bucket_00000_0",
			"hdfs://nn:8020/warehouse/cap_sales.db/events_acid/delta_0000003_0000003_0000/bucket_00001_0"}},
		{Database: "cap_archive", Table: "events_acid", WriteID: 1, Files: []string{
			"hdfs://nn:8020/warehouse/cap_archive.db/events_acid/delta_0000001_0000001_0000/bucket_00000_0"}},
	}
	if !slices.Equal(commit.Databases, []string{"cap_archive", "cap_sales"}) || !reflect.DeepEqual(ct.WriteIDs, wantW) {
		t.Errorf("COMMIT_TXN databases = %v write ids = %+v", commit.Databases, ct.WriteIDs)
	}
	if len(commit.Files) != 3 || commit.Files[1].Checksum != "c2" || commit.Files[1].CMRoot != "hdfs://nn:8020/cmroot" ||
		commit.Files[2].Subdir != "delta_0000001_0000001_0000" || commit.Files[2].Checksum != "" {
		t.Errorf("COMMIT_TXN files = %+v", commit.Files)
	}

	acid := Decode(hmslog.RawEvent{EventType: schemas.EventAcidWrite, Database: "cap_sales", Table: "events_acid", MessageFormat: hms.FormatJSON,
		Message: decodeMarshal(t, map[string]any{
			"txnid": txn, "writeId": 3, "timestamp": 1700000000, "server": "", "servicePrincipal": "",
			"database": "cap_sales", "table": "events_acid", "partition": nil, "tableObjJson": tableObj, "partitionObjJson": nil,
			"files": []string{"hdfs://nn:8020/warehouse/cap_sales.db/events_acid/delta_0000003_0000003_0000/bucket_00000_0#c1#hdfs://nn:8020/cmroot#delta_0000003_0000003_0000"},
		})})
	at := acid.Payload.(*schemas.Transaction)
	wantA := []schemas.TableWriteID{{Database: "cap_sales", Table: "events_acid", WriteID: 3, Files: wantW[0].Files[:1]}}
	if len(acid.Errors) != 0 || !slices.Equal(at.TxnIDs, []int64{txn}) || !reflect.DeepEqual(at.WriteIDs, wantA) {
		t.Errorf("ACID_WRITE = %+v errors %v", at, acid.Errors)
	}
	if len(acid.Files) != 0 {
		t.Errorf("ACID_WRITE has event files %+v: its files are copied at the commit", acid.Files)
	}

	abort := Decode(hmslog.RawEvent{EventType: schemas.EventAbortTxn, MessageFormat: hms.FormatGzipJSON,
		Message: gzipBase64(t, decodeMarshal(t, map[string]any{"txnid": txns[1], "timestamp": 1, "server": "", "servicePrincipal": "", "dbsUpdated": []string{"cap_sales"}}))})
	if got := abort.Payload.(*schemas.Transaction).TxnIDs; !slices.Equal(got, txns[1:2]) || !slices.Equal(abort.Databases, []string{"cap_sales"}) {
		t.Errorf("ABORT_TXN txns = %v databases %v", got, abort.Databases)
	}
}

func decodeMarshal(t testing.TB, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// decodeMessageOf returns the message JSON of a decoded event as a map.
func decodeMessageOf(t testing.TB, ev schemas.Event) map[string]any {
	t.Helper()
	text, err := hms.MessageJSON(ev.MessageFormat, ev.Message)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(text, &m); err != nil {
		t.Fatal(err)
	}
	return m
}

func decodeFieldOf(t testing.TB, ev schemas.Event, field string) string {
	t.Helper()
	s, _ := decodeMessageOf(t, ev)[field].(string)
	if s == "" {
		t.Fatalf("event %d has no %s", ev.EventID, field)
	}
	return s
}

// decodeRewrite returns ev's raw row with its message edited, as json-0.2.
func decodeRewrite(t testing.TB, ev schemas.Event, edit func(map[string]any)) hmslog.RawEvent {
	t.Helper()
	m := decodeMessageOf(t, ev)
	edit(m)
	return hmslog.RawEvent{EventID: ev.EventID, EventTime: ev.EventTime.Unix(), EventType: ev.EventType, Catalog: ev.Catalog,
		Database: ev.Database, Table: ev.Table, MessageFormat: hms.FormatJSON, Message: decodeMarshal(t, m)}
}

func TestDecodeColumnStatsEvents(t *testing.T) {
	fs := loadDecodeFixtures(t)

	cs := decodeFind(t, fs, schemas.EventUpdateTableColStat, nil)[0].Payload.(*schemas.ColumnStats)
	if cs.Database != "cap_sales" || cs.Table != "customers" || !slices.Equal(cs.Columns, []string{"id"}) ||
		len(cs.PartitionValues) != 0 || cs.StatsJSON == "" {
		t.Errorf("UPDATE_TBL_COL_STAT = %+v", cs)
	}
	cs = decodeFind(t, fs, schemas.EventUpdatePartitionColStat, nil)[0].Payload.(*schemas.ColumnStats)
	if cs.Table != "orders" || !slices.Equal(cs.PartitionValues, []string{"2024-01-01", "eu"}) || !slices.Equal(cs.Columns, []string{"id"}) {
		t.Errorf("UPDATE_PART_COL_STAT = %+v", cs)
	}
	cs = decodeFind(t, fs, schemas.EventDeleteTableColStat, nil)[0].Payload.(*schemas.ColumnStats)
	if cs.Database != "cap_sales" || cs.Table != "customers" || !slices.Equal(cs.Columns, []string{"id"}) || cs.StatsJSON != "" {
		t.Errorf("DELETE_TBL_COL_STAT = %+v", cs)
	}
	cs = decodeFind(t, fs, schemas.EventDeletePartitionColStat, nil)[0].Payload.(*schemas.ColumnStats)
	if cs.Table != "orders" || !slices.Equal(cs.PartitionValues, []string{"2024-01-01", "eu"}) || !slices.Equal(cs.Columns, []string{"id"}) {
		t.Errorf("DELETE_PART_COL_STAT = %+v", cs)
	}
}

// TestDecodeJSONFormat decodes the same messages written by the plain
// JSON encoder (json-0.2), which logs the JSON uncompressed.
func TestDecodeJSONFormat(t *testing.T) {
	n := 0
	for _, f := range loadDecodeFixtures(t) {
		if f.raw.MessageFormat != hms.FormatGzipJSON {
			continue
		}
		text, err := hms.MessageJSON(f.raw.MessageFormat, f.raw.Message)
		if err != nil {
			t.Fatalf("%s: %v", f.name, err)
		}
		plain := f.raw
		plain.MessageFormat, plain.Message = hms.FormatJSON, string(text)
		got, want := Decode(plain), Decode(f.raw)
		if got.MessageFormat != hms.FormatJSON || got.Message != string(text) {
			t.Errorf("%s: raw json-0.2 message not kept", f.name)
		}
		got.MessageFormat, got.Message = want.MessageFormat, want.Message
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s: json-0.2 decodes to\n%+v\nwant\n%+v", f.name, got, want)
		}
		n++
	}
	if n == 0 {
		t.Skip("no gzip(json-2.0) fixture")
	}
}

func gzipBase64(t testing.TB, s string) string {
	t.Helper()
	var b bytes.Buffer
	zw := gzip.NewWriter(&b)
	if _, err := zw.Write([]byte(s)); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return base64.StdEncoding.EncodeToString(b.Bytes())
}

func TestDecodeBadInput(t *testing.T) {
	base := hmslog.RawEvent{EventID: 7, EventTime: 1700000000, EventType: schemas.EventCreateTable, Catalog: "hive",
		Database: "sales", Table: "t", MessageFormat: hms.FormatGzipJSON}
	tests := []struct {
		name     string
		edit     func(*hmslog.RawEvent)
		kind     schemas.EventErrorKind
		contains string
	}{
		{"bad base64", func(r *hmslog.RawEvent) { r.Message = "%%% not base64" }, schemas.ErrDecode, "base64"},
		{"bad gzip", func(r *hmslog.RawEvent) { r.Message = base64.StdEncoding.EncodeToString([]byte("plain text")) }, schemas.ErrDecode, "gzip"},
		{"bad json", func(r *hmslog.RawEvent) { r.Message = gzipBase64(t, `{"db":"sales",`) }, schemas.ErrDecode, "json"},
		{"bad json, unmodelled type", func(r *hmslog.RawEvent) {
			r.EventType, r.Message = schemas.EventCreateFunction, gzipBase64(t, `{"db":`)
		}, schemas.ErrDecode, "not valid JSON"},
		{"malformed tableObjJson", func(r *hmslog.RawEvent) {
			r.Message = gzipBase64(t, `{"db":"sales","table":"t","tableObjJson":"{\"1\":{\"str\":"}`)
		}, schemas.ErrDecode, "tableObjJson"},
		{"tableObjJson not thrift", func(r *hmslog.RawEvent) {
			r.Message = gzipBase64(t, `{"db":"sales","table":"t","tableObjJson":"[1,2,3]"}`)
		}, schemas.ErrDecode, "tableObjJson"},
		{"missing tableObjJson", func(r *hmslog.RawEvent) { r.Message = gzipBase64(t, `{"db":"sales","table":"t"}`) }, schemas.ErrDecode, "tableObjJson: empty"},
		{"unknown message format", func(r *hmslog.RawEvent) { r.MessageFormat, r.Message = "avro-1", "{}" }, schemas.ErrDecode, `unknown message format "avro-1"`},
		{"unknown event type", func(r *hmslog.RawEvent) { r.EventType, r.Message = "TELEPORT_TABLE", gzipBase64(t, `{}`) }, schemas.ErrUnknownEventType, `"TELEPORT_TABLE"`},
		{"commit with ragged write info", func(r *hmslog.RawEvent) {
			r.EventType, r.MessageFormat = schemas.EventCommitTxn, hms.FormatJSON
			r.Message = `{"txnid":5,"databases":["a","b"],"tables":["t"],"writeIds":[1,2]}`
		}, schemas.ErrDecode, "differ in length"},
		{"open txn without ids", func(r *hmslog.RawEvent) {
			r.EventType, r.MessageFormat, r.Message = schemas.EventOpenTxn, hms.FormatJSON, `{"server":""}`
		}, schemas.ErrDecode, "txnIds"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			raw := base
			tt.edit(&raw)
			ev := Decode(raw)
			if len(ev.Errors) != 1 {
				t.Fatalf("errors = %+v, want one", ev.Errors)
			}
			if e := ev.Errors[0]; e.Kind != tt.kind || !strings.Contains(e.Message, tt.contains) {
				t.Errorf("error = %s %q, want %s containing %q", e.Kind, e.Message, tt.kind, tt.contains)
			}
			if ev.Payload != nil || len(ev.Files) != 0 {
				t.Errorf("payload %v files %v on a failed decode", ev.Payload, ev.Files)
			}
			if ev.Message != raw.Message || ev.MessageFormat != raw.MessageFormat || ev.EventID != 7 || ev.EventType != raw.EventType {
				t.Error("raw event not kept")
			}
			if !slices.Equal(ev.Databases, []string{"sales"}) {
				t.Errorf("databases = %v", ev.Databases)
			}
		})
	}
}

func TestDecodeUnmodelledEventType(t *testing.T) {
	ev := Decode(hmslog.RawEvent{EventID: 1, EventType: schemas.EventCreateFunction, Database: "sales", MessageFormat: hms.FormatJSON,
		Message: `{"server":"","servicePrincipal":"","db":"sales","functionObjJson":"{}","timestamp":1}`})
	if len(ev.Errors) != 0 || ev.Payload != nil || ev.Catalog != "hive" || !slices.Equal(ev.Databases, []string{"sales"}) {
		t.Errorf("CREATE_FUNCTION = %+v", ev)
	}
}

func TestDecodeOpenTxnRange(t *testing.T) {
	ev := Decode(hmslog.RawEvent{EventType: schemas.EventOpenTxn, MessageFormat: hms.FormatJSON, Message: `{"fromTxnId":10,"toTxnId":12}`})
	if got := ev.Payload.(*schemas.Transaction).TxnIDs; !slices.Equal(got, []int64{10, 11, 12}) || len(ev.Errors) != 0 {
		t.Errorf("txns = %v errors %v", got, ev.Errors)
	}
	ev = Decode(hmslog.RawEvent{EventType: schemas.EventOpenTxn, MessageFormat: hms.FormatJSON, Message: `{"fromTxnId":1,"toTxnId":99999999999}`})
	if len(ev.Errors) != 1 || ev.Errors[0].Kind != schemas.ErrDecode {
		t.Errorf("huge range: errors %v", ev.Errors)
	}
}

func TestParseFileRef(t *testing.T) {
	tests := []struct {
		in   string
		want schemas.FileRef
		ok   bool
	}{
		{"hdfs://nn:8020/w/t/f", schemas.FileRef{URI: "hdfs://nn:8020/w/t/f"}, true},
		{"hdfs://nn:8020/w/t/f#abc", schemas.FileRef{URI: "hdfs://nn:8020/w/t/f", Checksum: "abc"}, true},
		{"hdfs://nn:8020/w/t/f###", schemas.FileRef{URI: "hdfs://nn:8020/w/t/f"}, true},
		{"hdfs://nn:8020/w/t/f###delta_1_1", schemas.FileRef{URI: "hdfs://nn:8020/w/t/f", Subdir: "delta_1_1"}, true},
		{"hdfs://nn:8020/w/t/f#abc#hdfs://nn:8020/cm#base_5", schemas.FileRef{URI: "hdfs://nn:8020/w/t/f", Checksum: "abc", CMRoot: "hdfs://nn:8020/cm", Subdir: "base_5"}, true},
		{"", schemas.FileRef{}, false},
		{"#abc", schemas.FileRef{}, false},
	}
	for _, tt := range tests {
		got, ok := parseFileRef(tt.in)
		if got != tt.want || ok != tt.ok {
			t.Errorf("parseFileRef(%q) = %+v %v, want %+v %v", tt.in, got, ok, tt.want, tt.ok)
		}
	}
}

func BenchmarkDecode(b *testing.B) {
	fs := loadDecodeFixtures(b)
	var bytesIn int64
	for _, f := range fs {
		bytesIn += int64(len(f.raw.Message))
	}
	b.SetBytes(bytesIn / int64(len(fs)))
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		ev := Decode(fs[i%len(fs)].raw)
		if len(ev.Errors) != 0 {
			b.Fatal(ev.Errors)
		}
	}
}

// BenchmarkDecodeParallel shows that Decode, being pure, scales across
// cores: the tailer may decode a batch on several goroutines and publish
// in event-ID order.
func BenchmarkDecodeParallel(b *testing.B) {
	fs := loadDecodeFixtures(b)
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		i := 0
		for pb.Next() {
			if ev := Decode(fs[i%len(fs)].raw); len(ev.Errors) != 0 {
				b.Error(ev.Errors)
				return
			}
			i++
		}
	})
}

// TestDecodeAcidFixtures decodes the transactional events captured from the
// stack's metastore (capture -acid): a commit of three writes in two
// databases (one into a partition), an abort, a commit of a base, a major
// compaction (the compactor's commit, which names no write, and its
// COMMIT_COMPACTION), and the CREATE_TABLE and ADD_PARTITION of
// transactional tables, whose listed files are left to the commits.
func TestDecodeAcidFixtures(t *testing.T) {
	var commits []schemas.Event
	var compactions []*schemas.Compaction
	for _, fx := range loadFixtureDir(t, "acid") {
		f, ev := fx.name, Decode(fx.raw)
		if len(ev.Errors) > 0 {
			t.Errorf("%s: %+v", f, ev.Errors)
		}
		switch ev.EventType {
		case schemas.EventCommitTxn:
			if txn := ev.Payload.(*schemas.Transaction); len(txn.WriteIDs) > 0 {
				commits = append(commits, ev)
			}
		case schemas.EventCommitCompaction:
			c, ok := ev.Payload.(*schemas.Compaction)
			if !ok || len(ev.Files) > 0 || !slices.Equal(ev.Databases, []string{"cap_acid"}) {
				t.Fatalf("%s: payload %+v, files %+v, databases %v", f, ev.Payload, ev.Files, ev.Databases)
			}
			compactions = append(compactions, c)
		case schemas.EventCreateTable, schemas.EventAddPartition:
			if len(ev.Files) > 0 {
				t.Errorf("%s: files %+v of a transactional table", f, ev.Files)
			}
		case schemas.EventAbortTxn:
			if !slices.Equal(ev.Databases, []string{"cap_acid"}) {
				t.Errorf("%s: abort databases %v", f, ev.Databases)
			}
		}
	}
	if len(commits) != 2 {
		t.Fatalf("%d commits with writes captured, want 2", len(commits))
	}
	if len(compactions) != 1 || compactions[0].Type != "MAJOR" || compactions[0].Table != "events" || compactions[0].Partition != "dt=2024-01-01" ||
		compactions[0].TxnID == 0 || compactions[0].CompactionID == 0 {
		t.Errorf("compactions %+v, want the major compaction of cap_acid.events dt=2024-01-01", compactions)
	}
	c := commits[0].Payload.(*schemas.Transaction)
	if !slices.Equal(commits[0].Databases, []string{"cap_acid", "cap_acid_other"}) || len(c.WriteIDs) != 3 || len(commits[0].Files) != 3 {
		t.Fatalf("first commit: databases %v writes %+v files %+v", commits[0].Databases, c.WriteIDs, commits[0].Files)
	}
	for i, w := range c.WriteIDs {
		if len(w.Files) != 1 || w.Files[0] != commits[0].Files[i].URI || !strings.Contains(w.Files[0], "/delta_") {
			t.Errorf("write %d: %+v, event files %+v", i, w, commits[0].Files)
		}
		if (w.Table == "events" || w.Table == "ledger") != (w.Partition == "dt=2024-01-01") {
			t.Errorf("write %d: partition %q", i, w.Partition)
		}
	}
	b := commits[1].Payload.(*schemas.Transaction)
	if len(b.WriteIDs) != 1 || !strings.Contains(b.WriteIDs[0].Files[0], "/base_") || commits[1].Files[0].Subdir == "" {
		t.Errorf("base commit: %+v files %+v", b.WriteIDs, commits[1].Files)
	}
}
