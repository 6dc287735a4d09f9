package schemas

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/linkedin/goavro/v2"
)

// memRegistry is an in-memory Registry: IDs are global, a schema text
// registered again under a subject gets its old ID.
type memRegistry struct {
	mu       sync.Mutex
	schemas  []string         // ID i+1 is schemas[i]
	subjects map[string][]int // IDs by subject, oldest first
	compat   map[string]string
	fetches  int
}

func newMemRegistry() *memRegistry {
	return &memRegistry{subjects: map[string][]int{}, compat: map[string]string{}}
}

func (r *memRegistry) Register(_ context.Context, subject, schema string) (int, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, id := range r.subjects[subject] {
		if r.schemas[id-1] == schema {
			return id, nil
		}
	}
	r.schemas = append(r.schemas, schema)
	id := len(r.schemas)
	r.subjects[subject] = append(r.subjects[subject], id)
	return id, nil
}

func (r *memRegistry) SchemaByID(_ context.Context, id int) (string, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.fetches++
	if id < 1 || id > len(r.schemas) {
		return "", fmt.Errorf("%w %d", ErrUnknownSchemaID, id)
	}
	return r.schemas[id-1], nil
}

func (r *memRegistry) SetCompatibility(_ context.Context, subject, level string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.compat[subject] = level
	return nil
}

func newSerde(t testing.TB) (*Serde, *memRegistry) {
	t.Helper()
	reg := newMemRegistry()
	s, err := NewSerde(context.Background(), reg)
	if err != nil {
		t.Fatal(err)
	}
	return s, reg
}

var (
	t0 = time.Date(2025, 3, 14, 15, 9, 26, 535_000_000, time.UTC)
	t1 = t0.Add(1234 * time.Millisecond)
)

func testTable(db, name string, ncols int) *Table {
	t := &Table{
		Database:         db,
		Name:             name,
		Owner:            "etl",
		TableType:        "MANAGED_TABLE",
		Location:         "hdfs://src-nn:8020/warehouse/" + db + ".db/" + name,
		PartitionKeys:    []Column{{Name: "ds", Type: "string", Comment: "day"}},
		Parameters:       map[string]string{"transactional": "true", "numFiles": "5"},
		ViewOriginalText: "select 1",
		ViewExpandedText: "select 1 as `_c0`",
		CreateTime:       1741964966,
		WriteID:          42,
		ThriftJSON:       `{"1":{"str":"` + name + `"}}`,
		Storage: Storage{
			InputFormat:     "org.apache.hadoop.hive.ql.io.orc.OrcInputFormat",
			OutputFormat:    "org.apache.hadoop.hive.ql.io.orc.OrcOutputFormat",
			SerdeLib:        "org.apache.hadoop.hive.ql.io.orc.OrcSerde",
			SerdeParameters: map[string]string{"serialization.format": "1"},
			Compressed:      true,
			NumBuckets:      4,
			BucketColumns:   []string{"id"},
			Parameters:      map[string]string{"orc.compress": "ZLIB"},
		},
	}
	for i := range ncols {
		t.Columns = append(t.Columns, Column{Name: fmt.Sprintf("col_%d", i), Type: "decimal(10,2)", Comment: fmt.Sprintf("column %d", i)})
	}
	return t
}

func testPartition(ds string) Partition {
	return Partition{
		Values:     []string{ds},
		Location:   "hdfs://src-nn:8020/warehouse/sales.db/orders/ds=" + ds,
		Parameters: map[string]string{"numFiles": "1"},
		Columns:    []Column{{Name: "id", Type: "bigint"}},
		Storage:    &Storage{InputFormat: "in", OutputFormat: "out", SerdeLib: "serde", NumBuckets: -1},
		CreateTime: 1741964967,
		WriteID:    7,
		ThriftJSON: `{"1":{"lst":["str",1,"` + ds + `"]}}`,
	}
}

// testEvent returns an event with every field set and the given payload.
func testEvent(p Payload) *Event {
	return &Event{
		EventID:       1001,
		EventTime:     t0,
		EventType:     "ALTER_TABLE",
		Catalog:       "hive",
		Database:      "sales",
		Table:         "orders",
		Databases:     []string{"archive", "sales"},
		Source:        "prod-hms",
		MessageFormat: "gzip(json-2.0)",
		Message:       "H4sIAAAAAAAA/6tWKkktLlGyUlAqS8wpTVWqBQB3f8pKEgAAAA==",
		Payload:       p,
		Files: []FileRef{
			{URI: "hdfs://src-nn:8020/warehouse/sales.db/orders/delta_1_1/bucket_0", Checksum: "abc", CMRoot: "hdfs://src-nn:8020/cmroot", Subdir: "delta_1_1", TaskID: "1001-0", Rewrite: RewriteIcebergManifest},
			{URI: "hdfs://src-nn:8020/warehouse/sales.db/orders/000000_0", TaskID: "1001-1"},
		},
		Errors: []EventError{
			{Kind: ErrDecode, Message: "bad json"},
			{Kind: ErrUnknownEventType, Message: "FOO"},
			{Kind: ErrPathOutsideRoots, Message: "outside", Path: "hdfs://elsewhere/x"},
			{Kind: ErrUnknown, Message: "?"},
		},
		PreviousEventID: id(998),
		Op:              OpUpdate,
		SourceInfo: &SourceInfo{Name: "prod-hms", Metastore: "hms:9083", Reader: "postgres", Version: "v1.2.3", Catalog: "hive",
			EventID: 1001, EventTime: t0, Database: "sales", Table: "orders"},
	}
}

func id(v int64) *int64 { return &v }

// testPayloads has one payload of every branch, all fields set.
func testPayloads() map[string]Payload {
	db := func(n string) *Database {
		return &Database{Name: n, Description: "d", Location: "hdfs://src/" + n, ManagedLocation: "hdfs://src/m/" + n, Owner: "o", Parameters: map[string]string{"k": "v"}}
	}
	p1, p2 := testPartition("2025-03-01"), testPartition("2025-03-02")
	return map[string]Payload{
		branchDatabaseChange:    &DatabaseChange{Before: db("a"), After: db("b")},
		branchTableChange:       &TableChange{Before: testTable("sales", "orders", 3), After: testTable("archive", "orders", 4), IsTruncate: true},
		branchPartitionChange:   &PartitionChange{Table: testTable("sales", "orders", 2), Before: []Partition{p1}, After: []Partition{p1, p2}, IsTruncate: true},
		branchInsertData:        &InsertData{Table: testTable("sales", "orders", 2), Partition: &p2, Replace: true},
		branchTransaction:       &Transaction{TxnIDs: []int64{5, 6, 7}, WriteIDs: []TableWriteID{{Database: "sales", Table: "orders", WriteID: 9}}},
		branchWriteIDAllocation: &WriteIDAllocation{Database: "sales", Table: "orders", Allocations: []TxnWriteID{{TxnID: 5, WriteID: 9}, {TxnID: 6, WriteID: 10}}},
		branchColumnStats:       &ColumnStats{Database: "sales", Table: "orders", PartitionValues: []string{"2025-03-01"}, Columns: []string{"id", "amount"}, StatsJSON: `{"1":{}}`},
		branchCompaction: &Compaction{TxnID: 123, CompactionID: 7, Type: "MAJOR", Database: "sales", Table: "orders", Partition: "dt=2025-03-01",
			Location: "hdfs://src/warehouse/sales.db/orders/dt=2025-03-01", Dirs: []string{"base_0000005_v0000123"}},
	}
}

func crc(v uint32) *uint32 { return &v }

func testRecords() map[string]any {
	recs := map[string]any{
		"CopyTask": &CopyTask{TaskID: "1001-0", EventID: 1001, EventTime: t0, Database: "sales", Table: "orders",
			SourceURI: "hdfs://src/a", TargetURI: "hdfs://dr/a", Checksum: "abc", CMRoot: "hdfs://src/cm", Subdir: "delta_1_1", Rewrite: RewriteIcebergPositionDeletes},
		"CopyCompletion": &CopyCompletion{TaskID: "1001-0", EventID: 1001, Database: "sales", SourceURI: "hdfs://src/a", TargetURI: "hdfs://dr/a",
			Status: StatusSourceGone, Length: 1 << 40, CRC32C: crc(0xFFFFFFFF), Verification: "crc32c:source+target", CopiedFrom: "hdfs://src/cm/x",
			Error: "e", Evidence: "looked everywhere", Attempts: 3, Started: t0, Finished: t1},
		"Heartbeat":      &Heartbeat{Database: "sales", ScannedEventID: 1001, ScannedEventTime: t0, SourceHeadEventID: 1002, Sent: t1, Source: "prod-hms", PreviousEventID: id(990)},
		"HeartbeatFirst": &Heartbeat{Database: "sales", ScannedEventID: 1001, ScannedEventTime: t0, SourceHeadEventID: 1002, Sent: t1, PreviousEventID: id(0)},
		"TailerCheckpoint": &TailerCheckpoint{Source: "prod-hms", LastEventID: 1001, LastEventTime: t0, Written: t1, State: StateChainBroken,
			TopicLastEventIDs: map[string]int64{"sales": 1001, "archive": 990, "hr": 0}},
		"TailerCheckpointBootstrapping": &TailerCheckpoint{Source: "prod-hms", LastEventID: 1001, LastEventTime: t0, Written: t1, State: StateRunning,
			RequestsOffset: 7, Bootstraps: []BootstrapState{
				{Database: "sales", BootstrapID: "b-1", RequestID: "r-1", Reason: "requested", CutEventID: 990, CutEventTime: t0,
					Phase: PhaseSnapshot, WithData: true, DoneTable: "orders", DonePartition: "dt=2025-03-01", Seq: 12,
					TablesTotal: 40, TablesDone: 3, PartitionsDone: 9, Files: 20, Bytes: 1 << 33, Started: t1,
					HDFSSnapshots:   []string{"hdfs://src-nn:8020/warehouse/.snapshot/hivedr-b-1"},
					TableInProgress: "orders_v2", PublishedTables: []string{"customers", "orders", "orders_v2"}, SnapshotEventID: 995,
					TxnsTrackedAbove: -1, TableInProgressIncarnation: "id:4077"},
				{Database: "hr", BootstrapID: "b-2", CutEventID: 1000, Phase: PhaseCatchup, Tables: []string{"people"}, CatchupEventID: 1000,
					OpenTxns: []OpenTxn{{TxnID: 41, FirstEventID: 990, Databases: []string{"hr", "sales"}}}, TxnsTrackedAbove: 40},
			},
			SnapshotReleases: []SnapshotRelease{
				{BootstrapID: "b-1", HDFSSnapshots: []string{"hdfs://src-nn:8020/warehouse/.snapshot/hivedr-b-1"}, Tasks: -1, Completed: 3},
				{BootstrapID: "b-0", HDFSSnapshots: []string{"hdfs://src-nn:8020/external/x/.snapshot/hivedr-b-0"}, Tasks: 40, Completed: 39},
			},
			CompletionsOffsets: []int64{0, 17, 1 << 40},
			OpenTxns:           []OpenTxn{{TxnID: 41, FirstEventID: 990, Databases: []string{"hr", "sales"}}, {TxnID: 1 << 40, FirstEventID: 1001}},
			TxnsTrackedAbove:   40},
		"BootstrapRequest": &BootstrapRequest{RequestID: "r-1", Source: "prod-hms", Databases: []string{"sales", "fin_*"},
			Tables: []string{"orders"}, Reason: "requested", RequestedBy: "ops@host", RequestedAt: t0},
		"EventSnapshotBegin": &Event{EventID: 990, EventType: EventSnapshotBegin, Database: "sales", Databases: []string{"sales"},
			MessageFormat: "hivedr", Payload: &DatabaseChange{After: &Database{Name: "sales", Owner: "etl"}},
			Snapshot:        &SnapshotInfo{BootstrapID: "b-1", CutEventID: 990, Seq: 1, WithData: true, Reason: "requested", Tables: []string{"orders"}},
			PreviousEventID: id(980), Op: OpRead,
			SourceInfo: &SourceInfo{Name: "prod-hms", Catalog: "hive", EventID: 990, EventTime: t0, Database: "sales", Snapshot: true}},
		"EventSnapshotEnd": &Event{EventID: 990, EventType: EventSnapshotEnd, Database: "sales", MessageFormat: "hivedr",
			Snapshot: &SnapshotInfo{BootstrapID: "b-1", CutEventID: 990, Seq: 44, TableCount: 2, PartitionCount: 40, FileCount: 80, ByteCount: 1 << 40}},
		"EventSnapshotTableACID": &Event{EventID: 990, EventType: EventSnapshotTable, Database: "sales", Table: "orders", MessageFormat: "hivedr",
			Snapshot: &SnapshotInfo{BootstrapID: "b-1", CutEventID: 990, StampEventID: 993, Seq: 2, WithData: true,
				WriteIDs: &SnapshotWriteIDs{HighWaterMark: 1 << 40, Aborted: []int64{3, 7}, Open: []int64{1<<40 - 1}}}},
		"EventSnapshotTableACIDNone": &Event{EventID: 990, EventType: EventSnapshotTable, Database: "sales", Table: "orders", MessageFormat: "hivedr",
			Snapshot: &SnapshotInfo{BootstrapID: "b-1", CutEventID: 990, Seq: 2, WriteIDs: &SnapshotWriteIDs{}}},
		"EventNilPayload":   testEvent(nil),
		"EventMinimal":      &Event{EventID: 1, EventType: "OPEN_TXN", MessageFormat: "json-0.2", Message: "{}"},
		"EventFirstOnTopic": &Event{EventID: 2, EventType: "CREATE_DATABASE", MessageFormat: "json-0.2", Message: "{}", PreviousEventID: id(0)},
	}
	for branch, p := range testPayloads() {
		recs["Event/"+branch] = testEvent(p)
	}
	for _, s := range []CopyStatus{StatusUnknown, StatusCopied, StatusSkippedIdentical, StatusFailed} {
		recs["CopyCompletion/"+string(s)] = &CopyCompletion{TaskID: "t", Status: s, Length: -1, CRC32C: crc(0), Attempts: 1}
	}
	return recs
}

func TestRoundTrip(t *testing.T) {
	s, _ := newSerde(t)
	ctx := context.Background()
	for name, rec := range testRecords() {
		t.Run(name, func(t *testing.T) {
			b, err := s.Encode(rec)
			if err != nil {
				t.Fatal(err)
			}
			got, err := s.Decode(ctx, b)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, rec) {
				t.Fatalf("round trip changed the record:\n got  %+v\n want %+v", got, rec)
			}
			// Values encode as pointers do. (Not byte for byte: goavro
			// writes Avro maps in Go's map iteration order.)
			b2, err := s.Encode(reflect.ValueOf(rec).Elem().Interface())
			if err != nil {
				t.Fatal(err)
			}
			if got, err := s.Decode(ctx, b2); err != nil || !reflect.DeepEqual(got, rec) {
				t.Fatalf("value: %v, %+v", err, got)
			}
		})
	}
}

// TestWireFormat checks the header and that the body is plain Avro binary
// of the current schema.
func TestWireFormat(t *testing.T) {
	s, _ := newSerde(t)
	ev := testEvent(testPayloads()[branchTableChange])
	b, err := s.Encode(ev)
	if err != nil {
		t.Fatal(err)
	}
	id, _ := s.SchemaID(NameMetastoreEvent)
	if b[0] != 0 || int(binary.BigEndian.Uint32(b[1:5])) != id {
		t.Fatalf("header % x, want 00 and ID %d", b[:5], id)
	}
	sc, err := SchemaFor(NameMetastoreEvent)
	if err != nil {
		t.Fatal(err)
	}
	native, rest, err := sc.Codec.NativeFromBinary(b[5:])
	if err != nil || len(rest) != 0 {
		t.Fatalf("body: %v, %d bytes left", err, len(rest))
	}
	m := native.(map[string]any)
	if m["database"].(map[string]any)["string"] != "sales" || m["event_time"].(time.Time).UnixMilli() != t0.UnixMilli() {
		t.Fatalf("unexpected native %v", m)
	}
	if _, ok := m["payload"].(map[string]any)["io.hivedr.TableChange"]; !ok {
		t.Fatalf("payload branch: %v", m["payload"])
	}
	// "" and the zero time encode as null and 0.
	_, n, err := ToNative(&Event{})
	if err != nil {
		t.Fatal(err)
	}
	if n["database"] != nil || n["table"] != nil || n["payload"] != nil || n["event_time"] != int64(0) {
		t.Fatalf("zero event: %v", n)
	}
	// AppendEncode appends.
	out, err := s.AppendEncode([]byte("xy"), ev)
	if err != nil || string(out[:2]) != "xy" {
		t.Fatalf("AppendEncode: %v", err)
	}
	if got, err := s.Decode(context.Background(), out[2:]); err != nil || !reflect.DeepEqual(got, ev) {
		t.Fatalf("AppendEncode: %v, %+v", err, got)
	}
}

func TestNewSerdeRegisters(t *testing.T) {
	s, reg := newSerde(t)
	all, err := Schemas()
	if err != nil {
		t.Fatal(err)
	}
	if len(all) != 6 {
		t.Fatalf("%d schemas", len(all))
	}
	for _, sc := range all {
		if len(reg.subjects[sc.Name]) != 1 {
			t.Errorf("subject %s: %v", sc.Name, reg.subjects[sc.Name])
		}
		if reg.compat[sc.Name] != "BACKWARD" {
			t.Errorf("subject %s: compatibility %q", sc.Name, reg.compat[sc.Name])
		}
		if _, ok := s.SchemaID(sc.Name); !ok {
			t.Errorf("no ID for %s", sc.Name)
		}
	}
	if s.Compatibility() != "BACKWARD" {
		t.Errorf("Compatibility() = %q", s.Compatibility())
	}
	// The current schemas are known without asking the registry.
	b, err := s.Encode(testRecords()["Heartbeat"])
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Decode(context.Background(), b); err != nil || reg.fetches != 0 {
		t.Fatalf("decode: %v, %d fetches", err, reg.fetches)
	}
}

func TestEncodeErrors(t *testing.T) {
	s, _ := newSerde(t)
	for name, tc := range map[string]struct {
		v    any
		want string
	}{
		"unknown type":   {"hello", "no schema for Go type string"},
		"nil pointer":    {(*Heartbeat)(nil), "nil *Heartbeat"},
		"bad status":     {&CopyCompletion{Status: "TELEPORTED"}, `unknown CopyStatus symbol "TELEPORTED"`},
		"bad error kind": {&Event{Errors: []EventError{{Kind: "OOPS"}}}, `unknown EventErrorKind symbol "OOPS"`},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := s.Encode(tc.v)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want one containing %q", err, tc.want)
			}
		})
	}
}

func TestDecodeErrors(t *testing.T) {
	s, reg := newSerde(t)
	ctx := context.Background()
	good, err := s.Encode(testEvent(testPayloads()[branchPartitionChange]))
	if err != nil {
		t.Fatal(err)
	}
	id, _ := s.SchemaID(NameMetastoreEvent)
	withID := func(id uint32, body []byte) []byte {
		b := binary.BigEndian.AppendUint32([]byte{0}, id)
		return append(b, body...)
	}

	// A newer writer: a payload branch and a status this code does not know.
	newerEvent := mutateSchema(t, NameMetastoreEvent, func(top map[string]any) {
		for _, f := range top["fields"].([]any) {
			if f := f.(map[string]any); f["name"] == "payload" {
				f["type"] = append(f["type"].([]any), map[string]any{"type": "record", "name": "FutureChange",
					"fields": []any{map[string]any{"name": "what", "type": "string"}}})
			}
		}
	})
	futureID, _ := reg.Register(ctx, NameMetastoreEvent, newerEvent.Text)
	futureBody, err := newerEvent.Codec.BinaryFromNative(nil, map[string]any{
		"event_id": int64(5), "event_time": int64(0), "event_type": "FUTURE", "message_format": "json-0.2", "message": "{}",
		"payload": map[string]any{"io.hivedr.FutureChange": map[string]any{"what": "x"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	newerCompletion := mutateSchema(t, NameCopyCompletion, func(top map[string]any) {
		for _, f := range top["fields"].([]any) {
			if f := f.(map[string]any); f["name"] == "status" {
				enum := f["type"].(map[string]any)
				enum["symbols"] = append(enum["symbols"].([]any), "TELEPORTED")
			}
		}
	})
	teleID, _ := reg.Register(ctx, NameCopyCompletion, newerCompletion.Text)
	teleBody, err := newerCompletion.Codec.BinaryFromNative(nil, map[string]any{
		"task_id": "t", "event_id": int64(1), "database": "d", "source_uri": "s", "target_uri": "t", "status": "TELEPORTED",
	})
	if err != nil {
		t.Fatal(err)
	}
	notOurs, _ := reg.Register(ctx, "other", `{"type":"record","name":"Other","namespace":"com.example","fields":[{"name":"x","type":"int"}]}`)

	for name, tc := range map[string]struct {
		b    []byte
		want string
	}{
		"empty":           {nil, "record too short: 0 bytes"},
		"short":           {[]byte{0, 0, 0}, "record too short: 3 bytes"},
		"bad magic":       {append([]byte{0x7b}, good[1:]...), "bad magic byte 0x7b"},
		"unknown ID":      {withID(9999, good[5:]), "unknown schema ID 9999"},
		"truncated body":  {good[:len(good)-3], fmt.Sprintf("body does not decode with schema io.hivedr.MetastoreEvent (ID %d)", id)},
		"trailing bytes":  {append(append([]byte{}, good...), 1, 2), "2 bytes left over"},
		"unknown branch":  {withID(uint32(futureID), futureBody), `unknown payload branch "io.hivedr.FutureChange"`},
		"unknown symbol":  {withID(uint32(teleID), teleBody), `unknown CopyStatus symbol "TELEPORTED"`},
		"unknown record":  {withID(uint32(notOurs), []byte{2}), `unknown record type "com.example.Other"`},
		"body of garbage": {withID(uint32(id), []byte{0xff, 0xff, 0xff}), "body does not decode"},
	} {
		t.Run(name, func(t *testing.T) {
			v, err := s.Decode(ctx, tc.b)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, %v; want an error containing %q", v, err, tc.want)
			}
		})
	}
}

// mutateSchema returns a current schema changed by fn.
func mutateSchema(t *testing.T, name string, fn func(top map[string]any)) Schema {
	t.Helper()
	sc, err := SchemaFor(name)
	if err != nil {
		t.Fatal(err)
	}
	var top map[string]any
	if err := json.Unmarshal([]byte(sc.Text), &top); err != nil {
		t.Fatal(err)
	}
	fn(top)
	b, err := json.Marshal(top)
	if err != nil {
		t.Fatal(err)
	}
	out, err := ParseSchema(string(b))
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func TestCRC32COutOfRange(t *testing.T) {
	for _, v := range []int64{-1, 1 << 32} {
		_, err := FromNative(NameCopyCompletion, map[string]any{"crc32c": map[string]any{"long": v}})
		if err == nil || !strings.Contains(err.Error(), "not an unsigned 32-bit value") {
			t.Errorf("crc32c %d: %v", v, err)
		}
	}
}

// TestDefaults decodes records that have none of their fields: each takes
// the .avsc default.
func TestDefaults(t *testing.T) {
	empty := map[string]any{}
	for name, want := range map[string]any{
		NameMetastoreEvent:   &Event{Catalog: "hive"},
		NameCopyTask:         &CopyTask{},
		NameCopyCompletion:   &CopyCompletion{Status: StatusUnknown, Length: -1, Attempts: 1},
		NameHeartbeat:        &Heartbeat{SourceHeadEventID: -1},
		NameTailerCheckpoint: &TailerCheckpoint{State: StateRunning, TxnsTrackedAbove: -1},
	} {
		got, err := FromNative(name, empty)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s: got %+v, want %+v", name, got, want)
		}
	}
}

// TestEnumSymbolsMatchSchemas keeps the Go symbol lists in step with the
// .avsc files.
func TestEnumSymbolsMatchSchemas(t *testing.T) {
	found := map[string][]string{}
	var walk func(v any)
	walk = func(v any) {
		switch x := v.(type) {
		case map[string]any:
			if x["type"] == "enum" {
				var syms []string
				for _, s := range x["symbols"].([]any) {
					syms = append(syms, s.(string))
				}
				found[x["name"].(string)] = syms
				if x["default"] != syms[0] {
					t.Errorf("enum %s: default %v is not its first symbol", x["name"], x["default"])
				}
			}
			for _, c := range x {
				walk(c)
			}
		case []any:
			for _, c := range x {
				walk(c)
			}
		}
	}
	all, err := Schemas()
	if err != nil {
		t.Fatal(err)
	}
	for _, sc := range all {
		var top any
		if err := json.Unmarshal([]byte(sc.Text), &top); err != nil {
			t.Fatal(err)
		}
		walk(top)
	}
	if !reflect.DeepEqual(found["EventErrorKind"], eventErrorKinds) {
		t.Errorf("EventErrorKind: schema %v, Go %v", found["EventErrorKind"], eventErrorKinds)
	}
	if !reflect.DeepEqual(found["CopyStatus"], copyStatuses) {
		t.Errorf("CopyStatus: schema %v, Go %v", found["CopyStatus"], copyStatuses)
	}
}

// TestPreviousSchemaVersion reads records written with the older schemas
// in testdata/previous through the Serde: the writer's schema comes from
// the registry by ID, fields the old writer lacked take their defaults,
// and a field it had that the current schema dropped is ignored.
func TestPreviousSchemaVersion(t *testing.T) {
	ctx := context.Background()
	reg := newMemRegistry()
	old := func(file string) (Schema, int) {
		b, err := os.ReadFile(filepath.Join("testdata", "previous", file))
		if err != nil {
			t.Fatal(err)
		}
		sc, err := ParseSchema(string(b))
		if err != nil {
			t.Fatal(err)
		}
		id, err := reg.Register(ctx, sc.Name, sc.Text)
		if err != nil {
			t.Fatal(err)
		}
		return sc, id
	}
	// The old versions are registered first, as they were in production.
	oldEvent, oldEventID := old("metastore_event.avsc")
	oldCompletion, oldCompletionID := old("copy_completion.avsc")
	// The versions before the per-topic chain (previous_event_id,
	// topic_last_event_ids).
	v2Event, v2EventID := old("metastore_event_v2.avsc")
	v2Heartbeat, v2HeartbeatID := old("heartbeat.avsc")
	v2Checkpoint, v2CheckpointID := old("tailer_checkpoint.avsc")
	// The version before the change-data-capture envelope (op, source_info).
	v3Event, v3EventID := old("metastore_event_v3.avsc")
	// The version before snapshot.write_ids.
	v4Event, v4EventID := old("metastore_event_before_write_ids.avsc")
	s, err := NewSerde(ctx, reg)
	if err != nil {
		t.Fatal(err)
	}
	if id, _ := s.SchemaID(NameMetastoreEvent); id == oldEventID {
		t.Fatal("current and previous MetastoreEvent share an ID")
	}
	wire := func(sc Schema, id int, native map[string]any) []byte {
		b, err := sc.Codec.BinaryFromNative(binary.BigEndian.AppendUint32([]byte{0}, uint32(id)), native)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	oldTable := map[string]any{
		"database": "sales", "name": "orders", "table_type": "MANAGED_TABLE", "location": "hdfs://src/orders",
		"columns":        []any{map[string]any{"name": "id", "type": "bigint"}},
		"partition_keys": []any{map[string]any{"name": "ds", "type": "string"}},
		"parameters":     map[string]any{"k": "v"},
		"storage":        map[string]any{"input_format": "in", "output_format": "out", "serde_lib": "serde"},
		"create_time":    int32(1741964966),
	}
	wantTable := &Table{
		Database: "sales", Name: "orders", TableType: "MANAGED_TABLE", Location: "hdfs://src/orders",
		Columns:       []Column{{Name: "id", Type: "bigint"}},
		PartitionKeys: []Column{{Name: "ds", Type: "string"}},
		Parameters:    map[string]string{"k": "v"},
		Storage:       Storage{InputFormat: "in", OutputFormat: "out", SerdeLib: "serde", NumBuckets: -1},
		CreateTime:    1741964966,
	}
	for name, tc := range map[string]struct {
		b    []byte
		want any
	}{
		"event": {
			wire(oldEvent, oldEventID, map[string]any{
				"event_id": int64(77), "event_time": t0, "event_type": "ADD_PARTITION",
				"database": goavro.Union("string", "sales"), "table": goavro.Union("string", "orders"),
				"tailer_host": "old-host", "message_format": "json-0.2", "message": "{}",
				"payload": goavro.Union("io.hivedr.PartitionChange", map[string]any{
					"table": goavro.Union("io.hivedr.Table", oldTable),
					"after": []any{map[string]any{"values": []any{"2025-03-01"}, "location": "hdfs://src/orders/ds=2025-03-01",
						"storage": goavro.Union("io.hivedr.Storage", map[string]any{"serde_lib": "serde"})}},
				}),
				"files": []any{map[string]any{"uri": "hdfs://src/orders/ds=2025-03-01/0", "checksum": "c", "cm_root": "hdfs://src/cm"}},
			}),
			&Event{
				EventID: 77, EventTime: t0, EventType: "ADD_PARTITION", Catalog: "hive", Database: "sales", Table: "orders",
				MessageFormat: "json-0.2", Message: "{}",
				Payload: &PartitionChange{Table: wantTable, After: []Partition{{
					Values: []string{"2025-03-01"}, Location: "hdfs://src/orders/ds=2025-03-01",
					Storage: &Storage{SerdeLib: "serde", NumBuckets: -1},
				}}},
				Files: []FileRef{{URI: "hdfs://src/orders/ds=2025-03-01/0", Checksum: "c", CMRoot: "hdfs://src/cm"}},
			},
		},
		"event with database payload and no table": {
			wire(oldEvent, oldEventID, map[string]any{
				"event_id": int64(78), "event_time": t1, "event_type": "CREATE_DATABASE",
				"message_format": "json-0.2", "message": "{}",
				"payload": goavro.Union("io.hivedr.DatabaseChange", map[string]any{
					"after": goavro.Union("io.hivedr.Database", map[string]any{"name": "sales", "location": "hdfs://src/sales.db"}),
				}),
			}),
			&Event{
				EventID: 78, EventTime: t1, EventType: "CREATE_DATABASE", Catalog: "hive", MessageFormat: "json-0.2", Message: "{}",
				Payload: &DatabaseChange{After: &Database{Name: "sales", Location: "hdfs://src/sales.db"}},
			},
		},
		"event without previous_event_id": {
			wire(v2Event, v2EventID, map[string]any{
				"event_id": int64(79), "event_time": t1, "event_type": "DROP_DATABASE",
				"database": goavro.Union("string", "sales"), "databases": []any{"sales"},
				"message_format": "json-0.2", "message": "{}",
			}),
			&Event{EventID: 79, EventTime: t1, EventType: "DROP_DATABASE", Catalog: "hive", Database: "sales",
				Databases: []string{"sales"}, MessageFormat: "json-0.2", Message: "{}"},
		},
		"event without op and source_info": {
			wire(v3Event, v3EventID, map[string]any{
				"event_id": int64(82), "event_time": t1, "event_type": "CREATE_TABLE",
				"database": goavro.Union("string", "sales"), "table": goavro.Union("string", "orders"), "databases": []any{"sales"},
				"source": "prod-hms", "message_format": "json-0.2", "message": "{}",
				"payload":           goavro.Union("io.hivedr.TableChange", map[string]any{"after": goavro.Union("io.hivedr.Table", oldTable)}),
				"previous_event_id": goavro.Union("long", int64(81)),
			}),
			&Event{EventID: 82, EventTime: t1, EventType: "CREATE_TABLE", Catalog: "hive", Database: "sales", Table: "orders",
				Databases: []string{"sales"}, Source: "prod-hms", MessageFormat: "json-0.2", Message: "{}",
				Payload: &TableChange{After: wantTable}, PreviousEventID: id(81)},
		},
		"snapshot table without write_ids": {
			wire(v4Event, v4EventID, map[string]any{
				"event_id": int64(83), "event_time": t1, "event_type": "HIVEDR_SNAPSHOT_TABLE",
				"database": goavro.Union("string", "sales"), "table": goavro.Union("string", "orders"), "databases": []any{"sales"},
				"source": "prod-hms", "message_format": "hivedr", "message": "",
				"snapshot": goavro.Union("io.hivedr.SnapshotInfo", map[string]any{"bootstrap_id": "b-1", "cut_event_id": int64(83),
					"stamp_event_id": int64(84), "seq": int64(2)}),
				"previous_event_id": goavro.Union("long", int64(81)),
			}),
			&Event{EventID: 83, EventTime: t1, EventType: "HIVEDR_SNAPSHOT_TABLE", Catalog: "hive", Database: "sales", Table: "orders",
				Databases: []string{"sales"}, Source: "prod-hms", MessageFormat: "hivedr", PreviousEventID: id(81),
				Snapshot: &SnapshotInfo{BootstrapID: "b-1", CutEventID: 83, StampEventID: 84, Seq: 2, WithData: true}},
		},
		"heartbeat without previous_event_id": {
			wire(v2Heartbeat, v2HeartbeatID, map[string]any{
				"database": "sales", "scanned_event_id": int64(80), "scanned_event_time": t0,
				"source_head_event_id": int64(81), "sent": t1, "source": "prod-hms",
			}),
			&Heartbeat{Database: "sales", ScannedEventID: 80, ScannedEventTime: t0, SourceHeadEventID: 81, Sent: t1, Source: "prod-hms"},
		},
		"checkpoint without topic_last_event_ids": {
			wire(v2Checkpoint, v2CheckpointID, map[string]any{
				"source": "prod-hms", "last_event_id": int64(80), "last_event_time": t0, "written": t1, "state": "RUNNING",
			}),
			&TailerCheckpoint{Source: "prod-hms", LastEventID: 80, LastEventTime: t0, Written: t1, State: StateRunning, TxnsTrackedAbove: -1},
		},
		"completion": {
			wire(oldCompletion, oldCompletionID, map[string]any{
				"task_id": "77-0", "event_id": int64(77), "database": "sales", "source_uri": "hdfs://src/a", "target_uri": "hdfs://dr/a",
				"status": "COPIED", "length": int64(1234), "crc32c": goavro.Union("long", int64(0xDEADBEEF)),
			}),
			&CopyCompletion{
				TaskID: "77-0", EventID: 77, Database: "sales", SourceURI: "hdfs://src/a", TargetURI: "hdfs://dr/a",
				Status: StatusCopied, Length: 1234, CRC32C: crc(0xDEADBEEF), Attempts: 1,
			},
		},
	} {
		t.Run(name, func(t *testing.T) {
			got, err := s.Decode(ctx, tc.b)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tc.want) {
				gj, _ := json.Marshal(got)
				wj, _ := json.Marshal(tc.want)
				t.Fatalf("got  %s\nwant %s", gj, wj)
			}
		})
	}
	if reg.fetches != 7 {
		t.Errorf("%d registry fetches, want 7 (one per old schema, then cached)", reg.fetches)
	}
}

// TestDecodeConcurrent decodes old records from many goroutines (run with
// -race): the writer-schema cache must be safe.
func TestDecodeConcurrent(t *testing.T) {
	ctx := context.Background()
	reg := newMemRegistry()
	b, err := os.ReadFile(filepath.Join("testdata", "previous", "copy_completion.avsc"))
	if err != nil {
		t.Fatal(err)
	}
	sc, err := ParseSchema(string(b))
	if err != nil {
		t.Fatal(err)
	}
	id, _ := reg.Register(ctx, sc.Name, sc.Text)
	s, err := NewSerde(ctx, reg)
	if err != nil {
		t.Fatal(err)
	}
	rec, err := sc.Codec.BinaryFromNative(binary.BigEndian.AppendUint32([]byte{0}, uint32(id)), map[string]any{
		"task_id": "t", "event_id": int64(1), "database": "d", "source_uri": "s", "target_uri": "t", "status": "FAILED",
	})
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for range 16 {
		wg.Go(func() {
			for range 50 {
				v, err := s.Decode(ctx, rec)
				if err != nil {
					t.Error(err)
					return
				}
				if v.(*CopyCompletion).Status != StatusFailed {
					t.Errorf("status %v", v.(*CopyCompletion).Status)
					return
				}
			}
		})
	}
	wg.Wait()
}

// benchEvents are realistic events: a CREATE_TABLE of ten columns and an
// ADD_PARTITION of five partitions, each with a file.
func benchEvents() map[string]*Event {
	msg := strings.Repeat("H4sIAAAAAAAA/+1YbW/bNhD+K4Y+J4Ekv8T2t8RJtwJt1jXp9mEoClo6y0QpUiUpO06Q/76jJNuyLSfFgGHAmiAOj8d3xx3vjrxUOX+9ZbhvPpm66uZ4bp3", 16)
	create := &Event{
		EventID: 123456, EventTime: t0, EventType: "CREATE_TABLE", Catalog: "hive", Database: "sales", Table: "orders",
		Databases: []string{"sales"}, Source: "prod-hms", MessageFormat: "gzip(json-2.0)", Message: msg,
		Payload: &TableChange{After: testTable("sales", "orders", 10)},
	}
	add := &Event{
		EventID: 123457, EventTime: t1, EventType: "ADD_PARTITION", Catalog: "hive", Database: "sales", Table: "orders",
		Databases: []string{"sales"}, Source: "prod-hms", MessageFormat: "gzip(json-2.0)", Message: msg,
	}
	pc := &PartitionChange{Table: testTable("sales", "orders", 10)}
	for i := range 5 {
		ds := fmt.Sprintf("2025-03-%02d", i+1)
		pc.After = append(pc.After, testPartition(ds))
		add.Files = append(add.Files, FileRef{
			URI:    "hdfs://src-nn:8020/warehouse/sales.db/orders/ds=" + ds + "/000000_0",
			CMRoot: "hdfs://src-nn:8020/cmroot", TaskID: fmt.Sprintf("123457-%d", i),
		})
	}
	add.Payload = pc
	return map[string]*Event{"CreateTable": create, "AddPartition": add}
}

func BenchmarkEncodeEvent(b *testing.B) {
	s, _ := newSerde(b)
	for name, ev := range benchEvents() {
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			var n int
			for b.Loop() {
				out, err := s.Encode(ev)
				if err != nil {
					b.Fatal(err)
				}
				n = len(out)
			}
			b.ReportMetric(float64(n), "bytes/record")
		})
		b.Run(name+"/AppendReuse", func(b *testing.B) {
			b.ReportAllocs()
			var buf []byte
			for b.Loop() {
				var err error
				if buf, err = s.AppendEncode(buf[:0], ev); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func BenchmarkDecodeEvent(b *testing.B) {
	s, _ := newSerde(b)
	ctx := context.Background()
	for name, ev := range benchEvents() {
		rec, err := s.Encode(ev)
		if err != nil {
			b.Fatal(err)
		}
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := s.Decode(ctx, rec); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// TestBinaryMatchesGoavro checks the direct encoder of binary.go against
// goavro encoding ToNative's output with the current schema, for every
// record type and payload branch, fully set and empty.
func TestBinaryMatchesGoavro(t *testing.T) {
	recs := testRecords()
	for name, ev := range benchEvents() {
		recs["bench/"+name] = ev
	}
	recs["zero/Event"] = &Event{}
	recs["zero/CopyCompletion"] = &CopyCompletion{}
	recs["zero/Heartbeat"] = &Heartbeat{}
	recs["zero/TailerCheckpoint"] = &TailerCheckpoint{}
	recs["zero/CopyTask"] = &CopyTask{}
	for branch, p := range map[string]Payload{
		branchDatabaseChange:    &DatabaseChange{},
		branchTableChange:       &TableChange{After: &Table{}},
		branchPartitionChange:   &PartitionChange{After: []Partition{{}}},
		branchInsertData:        &InsertData{Partition: &Partition{}},
		branchTransaction:       &Transaction{},
		branchWriteIDAllocation: &WriteIDAllocation{},
		branchColumnStats:       &ColumnStats{},
		branchCompaction:        &Compaction{},
		"nil pointer":           (*TableChange)(nil),
	} {
		recs["zero/Event/"+branch] = &Event{Payload: p}
	}
	for name, rec := range recs {
		t.Run(name, func(t *testing.T) {
			fast, recName, err := appendBinary(nil, rec)
			if err != nil {
				t.Fatal(err)
			}
			refName, native, err := ToNative(rec)
			if err != nil {
				t.Fatal(err)
			}
			if recName != refName {
				t.Fatalf("name %s, ToNative says %s", recName, refName)
			}
			sc, err := SchemaFor(recName)
			if err != nil {
				t.Fatal(err)
			}
			ref, err := sc.Codec.BinaryFromNative(nil, native)
			if err != nil {
				t.Fatal(err)
			}
			if len(fast) != len(ref) {
				t.Fatalf("direct encoding has %d bytes, goavro's %d", len(fast), len(ref))
			}
			fastNative, rest, err := sc.Codec.NativeFromBinary(fast)
			if err != nil || len(rest) != 0 {
				t.Fatalf("direct encoding does not decode: %v (%d bytes left)", err, len(rest))
			}
			refNative, _, err := sc.Codec.NativeFromBinary(ref)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(fastNative, refNative) {
				t.Fatalf("direct encoding decodes to\n%v\ngoavro's to\n%v", fastNative, refNative)
			}
		})
	}
}

func TestNames(t *testing.T) {
	for name, p := range testPayloads() {
		if got := PayloadName(p); got != name {
			t.Errorf("PayloadName(%T) = %q, want %q", p, got, name)
		}
	}
	if PayloadName(nil) != "" || RecordName(&Event{}) != NameMetastoreEvent || RecordName(42) != "" {
		t.Error("RecordName/PayloadName of nil, *Event or a non-record is wrong")
	}
}

// readOnlyRegistry is a full registry (Registry and CompatibilitySetter)
// that fails the test on any write: a Decoder must only read by ID.
type readOnlyRegistry struct {
	t   *testing.T
	mem *memRegistry
}

func (r readOnlyRegistry) Register(_ context.Context, subject, _ string) (int, error) {
	r.t.Errorf("Register(%s) called on a read-only registry", subject)
	return 0, fmt.Errorf("read-only registry: register %s refused", subject)
}

func (r readOnlyRegistry) SetCompatibility(_ context.Context, subject, level string) error {
	r.t.Errorf("SetCompatibility(%s, %s) called on a read-only registry", subject, level)
	return fmt.Errorf("read-only registry: set compatibility of %s refused", subject)
}

func (r readOnlyRegistry) SchemaByID(ctx context.Context, id int) (string, error) {
	return r.mem.SchemaByID(ctx, id)
}

var (
	_ Registry            = readOnlyRegistry{}
	_ CompatibilitySetter = readOnlyRegistry{}
)

// TestDecoderReadOnly: a Decoder decodes every record type by writer
// schema ID, fetching each schema once, and never registers a schema or
// sets a compatibility level, even when its registry could.
func TestDecoderReadOnly(t *testing.T) {
	ctx := context.Background()
	s, mem := newSerde(t) // the writer registered the schemas
	subjects := fmt.Sprint(mem.subjects)
	d := NewDecoder(readOnlyRegistry{t: t, mem: mem})
	for round := 0; round < 2; round++ {
		for name, rec := range testRecords() {
			b, err := s.Encode(rec)
			if err != nil {
				t.Fatalf("encode %s: %v", name, err)
			}
			got, err := d.Decode(ctx, b)
			if err != nil {
				t.Fatalf("decode %s: %v", name, err)
			}
			if !reflect.DeepEqual(got, rec) {
				t.Errorf("decode %s:\n got %+v\nwant %+v", name, got, rec)
			}
		}
	}
	all, err := Schemas()
	if err != nil {
		t.Fatal(err)
	}
	if mem.fetches != len(all) {
		t.Errorf("%d schema fetches for %d writer schemas decoded twice; want one each", mem.fetches, len(all))
	}
	if got := fmt.Sprint(mem.subjects); got != subjects {
		t.Errorf("subjects changed: %s, was %s", got, subjects)
	}
	if _, err := d.Decode(ctx, binary.BigEndian.AppendUint32([]byte{0}, 999)); !errors.Is(err, ErrUnknownSchemaID) {
		t.Errorf("decode with an unknown ID: %v, want ErrUnknownSchemaID", err)
	}
}
