package e2e

import (
	"context"
	"encoding/binary"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/linkedin/goavro/v2"
	"github.com/twmb/franz-go/pkg/sr"

	"github.com/hivedr/hivedr/internal/testenv"
	"github.com/hivedr/hivedr/schemas"
)

// prefixedRegistry puts every subject under a per-run prefix, so a test can
// register an older schema version first on a registry that already holds
// the current one under the real subject.
type prefixedRegistry struct {
	*schemas.SRRegistry
	prefix string
}

func (r prefixedRegistry) Register(ctx context.Context, subject, schema string) (int, error) {
	return r.SRRegistry.Register(ctx, r.prefix+subject, schema)
}

func (r prefixedRegistry) SetCompatibility(ctx context.Context, subject, level string) error {
	return r.SRRegistry.SetCompatibility(ctx, r.prefix+subject, level)
}

// TestSchemasRegistry runs the schemas codec against the stack's real
// schema registry: the current schemas register under record-name subjects
// with BACKWARD compatibility, every record type round-trips, records
// written with the previous schema versions decode with their writer's
// schema fetched by ID, and the registry refuses a change that would break
// old records.
func TestSchemasRegistry(t *testing.T) {
	env := testenv.Require(t)
	cl, err := sr.NewClient(sr.URLs(env.Get(t, "HIVEDR_SCHEMA_REGISTRY")))
	if err != nil {
		t.Fatal(err)
	}
	reg := schemas.NewSRRegistry(cl)
	ctx := ctxFor(t, 2*time.Minute)
	at := time.Date(2025, 3, 14, 15, 9, 26, 535_000_000, time.UTC)

	t.Run("CurrentSchemas", func(t *testing.T) {
		s, err := schemas.NewSerde(ctx, reg)
		if err != nil {
			t.Fatal(err)
		}
		if s.Compatibility() != schemas.Compatibility {
			t.Errorf("registry did not take a subject compatibility level: %q", s.Compatibility())
		}
		all, err := schemas.Schemas()
		if err != nil {
			t.Fatal(err)
		}
		for _, sc := range all {
			id, _ := s.SchemaID(sc.Name)
			subjects, err := cl.SubjectsByID(ctx, id)
			if err != nil || !slices.Contains(subjects, sc.Name) {
				t.Errorf("schema ID %d of %s: subjects %v, %v", id, sc.Name, subjects, err)
			}
			res := cl.Compatibility(ctx, sc.Name)
			if res[0].Err != nil || res[0].Level != sr.CompatBackward {
				t.Errorf("subject %s: compatibility %v, %v", sc.Name, res[0].Level, res[0].Err)
			}
		}

		crc := uint32(0xDEADBEEF)
		table := &schemas.Table{Database: "sales", Name: "orders", Columns: []schemas.Column{{Name: "id", Type: "bigint"}},
			Parameters: map[string]string{"k": "v"}, Storage: schemas.Storage{SerdeLib: "serde", NumBuckets: -1}}
		part := schemas.Partition{Values: []string{"2025-03-01"}, Location: "hdfs://src/orders/ds=2025-03-01"}
		event := func(typ schemas.EventType, p schemas.Payload) *schemas.Event {
			return &schemas.Event{EventID: 7, EventTime: at, EventType: typ, Catalog: "hive", Database: "sales", Table: "orders",
				Databases: []string{"sales"}, Source: "e2e", MessageFormat: "json-0.2", Message: "{}", Payload: p,
				Files:  []schemas.FileRef{{URI: "hdfs://src/orders/0", TaskID: "7-0"}},
				Errors: []schemas.EventError{{Kind: schemas.ErrPathOutsideRoots, Message: "outside", Path: "/x"}}}
		}
		recs := []any{
			event(schemas.EventOpenTxn, nil),
			event(schemas.EventCreateDatabase, &schemas.DatabaseChange{After: &schemas.Database{Name: "sales", Parameters: map[string]string{"a": "b"}}}),
			event(schemas.EventCreateTable, &schemas.TableChange{After: table}),
			event(schemas.EventAddPartition, &schemas.PartitionChange{Table: table, After: []schemas.Partition{part}}),
			event(schemas.EventInsert, &schemas.InsertData{Table: table, Partition: &part, Replace: true}),
			event(schemas.EventCommitTxn, &schemas.Transaction{TxnIDs: []int64{3}, WriteIDs: []schemas.TableWriteID{{Database: "sales", Table: "orders", WriteID: 2}}}),
			event("ALLOC_WRITE_ID", &schemas.WriteIDAllocation{Database: "sales", Table: "orders", Allocations: []schemas.TxnWriteID{{TxnID: 3, WriteID: 2}}}),
			event("UPDATE_TABLE_COLUMN_STAT", &schemas.ColumnStats{Database: "sales", Table: "orders", Columns: []string{"id"}, StatsJSON: "{}"}),
			&schemas.CopyTask{TaskID: "7-0", EventID: 7, EventTime: at, Database: "sales", Table: "orders", SourceURI: "hdfs://src/a", TargetURI: "hdfs://dr/a"},
			&schemas.CopyCompletion{TaskID: "7-0", EventID: 7, Database: "sales", SourceURI: "hdfs://src/a", TargetURI: "hdfs://dr/a",
				Status: schemas.StatusCopied, Length: 10, CRC32C: &crc, Verification: "crc32c:source+target", Attempts: 1, Started: at, Finished: at.Add(time.Second)},
			&schemas.Heartbeat{Database: "sales", ScannedEventID: 7, ScannedEventTime: at, SourceHeadEventID: 9, Sent: at, Source: "e2e"},
			&schemas.TailerCheckpoint{Source: "e2e", LastEventID: 7, LastEventTime: at, Written: at, State: schemas.StateRunning},
		}
		// A second Serde decodes, as a consumer in another process would.
		s2, err := schemas.NewSerde(ctx, reg)
		if err != nil {
			t.Fatal(err)
		}
		for _, rec := range recs {
			b, err := s.Encode(rec)
			if err != nil {
				t.Fatal(err)
			}
			got, err := s2.Decode(ctx, b)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, rec) {
				t.Errorf("round trip:\n got  %+v\n want %+v", got, rec)
			}
		}

		b := binary.BigEndian.AppendUint32([]byte{0}, 1<<31-1)
		if _, err := s.Decode(ctx, append(b, 0)); err == nil || !strings.Contains(err.Error(), "unknown schema ID 2147483647") {
			t.Errorf("decode with an unknown ID: %v", err)
		}
	})

	t.Run("PreviousVersion", func(t *testing.T) {
		pre := prefixedRegistry{SRRegistry: reg, prefix: "e2e-" + uniq(t) + "."}
		t.Cleanup(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			subjects, _ := cl.Subjects(ctx)
			for _, s := range subjects {
				if strings.HasPrefix(s, pre.prefix) {
					_, _ = cl.DeleteSubject(ctx, s, sr.SoftDelete)
					_, _ = cl.DeleteSubject(ctx, s, sr.HardDelete)
				}
			}
		})
		// The old versions are registered first, as in production; then
		// NewSerde sets BACKWARD and registers the current ones, which the
		// registry accepts only if they read the old records.
		old := func(file string) (schemas.Schema, int) {
			text, err := os.ReadFile(filepath.Join("..", "schemas", "testdata", "previous", file))
			if err != nil {
				t.Fatal(err)
			}
			sc, err := schemas.ParseSchema(string(text))
			if err != nil {
				t.Fatal(err)
			}
			id, err := pre.Register(ctx, sc.Name, sc.Text)
			if err != nil {
				t.Fatal(err)
			}
			return sc, id
		}
		oldEvent, oldEventID := old("metastore_event.avsc")
		oldCompletion, oldCompletionID := old("copy_completion.avsc")
		// The version before op and source_info: the current one must
		// read it (BACKWARD checks the latest registered version).
		v3Event, v3EventID := old("metastore_event_v3.avsc")
		s, err := schemas.NewSerde(ctx, pre)
		if err != nil {
			t.Fatalf("registering the current schemas over the previous ones: %v", err)
		}
		if id, _ := s.SchemaID(schemas.NameMetastoreEvent); id == oldEventID {
			t.Fatal("current and previous MetastoreEvent share an ID")
		}
		versions, err := cl.SubjectVersions(ctx, pre.prefix+schemas.NameMetastoreEvent)
		if err != nil || len(versions) != 3 {
			t.Fatalf("subject versions %v, %v; want 3", versions, err)
		}

		wire := func(sc schemas.Schema, id int, native map[string]any) []byte {
			b, err := sc.Codec.BinaryFromNative(binary.BigEndian.AppendUint32([]byte{0}, uint32(id)), native)
			if err != nil {
				t.Fatal(err)
			}
			return b
		}
		got, err := s.Decode(ctx, wire(oldEvent, oldEventID, map[string]any{
			"event_id": int64(77), "event_time": at, "event_type": "CREATE_TABLE",
			"database": goavro.Union("string", "sales"), "table": goavro.Union("string", "orders"),
			"tailer_host": "old-host", "message_format": "json-0.2", "message": "{}",
			"payload": goavro.Union("io.hivedr.TableChange", map[string]any{
				"after": goavro.Union("io.hivedr.Table", map[string]any{
					"database": "sales", "name": "orders",
					"storage":     map[string]any{"serde_lib": "serde"},
					"create_time": int32(1741964966),
				}),
			}),
			"files": []any{map[string]any{"uri": "hdfs://src/orders/0"}},
		}))
		if err != nil {
			t.Fatal(err)
		}
		want := &schemas.Event{
			EventID: 77, EventTime: at, EventType: schemas.EventCreateTable, Catalog: "hive", Database: "sales", Table: "orders",
			MessageFormat: "json-0.2", Message: "{}",
			Payload: &schemas.TableChange{After: &schemas.Table{Database: "sales", Name: "orders",
				Storage: schemas.Storage{SerdeLib: "serde", NumBuckets: -1}, CreateTime: 1741964966}},
			Files: []schemas.FileRef{{URI: "hdfs://src/orders/0"}},
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("old event:\n got  %+v\n want %+v", got, want)
		}

		// A v3 record (no op, no source_info) decodes with empty ones.
		got, err = s.Decode(ctx, wire(v3Event, v3EventID, map[string]any{
			"event_id": int64(78), "event_time": at, "event_type": "DROP_TABLE",
			"database": goavro.Union("string", "sales"), "table": goavro.Union("string", "orders"),
			"source": "prod-hms", "message_format": "json-0.2", "message": "{}",
		}))
		if err != nil {
			t.Fatal(err)
		}
		wantV3 := &schemas.Event{EventID: 78, EventTime: at, EventType: schemas.EventDropTable, Catalog: "hive", Database: "sales",
			Table: "orders", Source: "prod-hms", MessageFormat: "json-0.2", Message: "{}"}
		if !reflect.DeepEqual(got, wantV3) {
			t.Errorf("v3 event:\n got  %+v\n want %+v", got, wantV3)
		}

		got, err = s.Decode(ctx, wire(oldCompletion, oldCompletionID, map[string]any{
			"task_id": "77-0", "event_id": int64(77), "database": "sales", "source_uri": "hdfs://src/a", "target_uri": "hdfs://dr/a",
			"status": "COPIED", "crc32c": goavro.Union("long", int64(0xDEADBEEF)),
		}))
		if err != nil {
			t.Fatal(err)
		}
		crc := uint32(0xDEADBEEF)
		wantC := &schemas.CopyCompletion{TaskID: "77-0", EventID: 77, Database: "sales", SourceURI: "hdfs://src/a", TargetURI: "hdfs://dr/a",
			Status: schemas.StatusCopied, Length: -1, CRC32C: &crc, Attempts: 1}
		if !reflect.DeepEqual(got, wantC) {
			t.Errorf("old completion:\n got  %+v\n want %+v", got, wantC)
		}

		// A field added without a default would leave old records
		// unreadable: the registry must refuse it.
		cur, err := schemas.SchemaFor(schemas.NameCopyCompletion)
		if err != nil {
			t.Fatal(err)
		}
		bad := strings.Replace(cur.Text, `"fields": [`, `"fields": [{"name": "no_default", "type": "string"},`, 1)
		if _, err := pre.Register(ctx, schemas.NameCopyCompletion, bad); err == nil {
			t.Error("registry accepted a field without a default under BACKWARD compatibility")
		}
	})
}
