package workload

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"

	"github.com/beltran/gohive/hive_metastore"

	"github.com/hivedr/hivedr/internal/hmsevent"
	"github.com/hivedr/hivedr/internal/hmslog"
	"github.com/hivedr/hivedr/schemas"
)

const fixtures = "../../internal/hmsevent/testdata/events"

func decodeRow(t *testing.T, id int64, r LogRow) schemas.Event {
	t.Helper()
	ev := hmsevent.Decode(hmslog.RawEvent{EventID: id, EventTime: 1700000000, EventType: schemas.EventType(r.Type),
		Catalog: "hive", Database: r.DB, Table: r.Table, MessageFormat: r.Format, Message: r.Message})
	if len(ev.Errors) > 0 {
		t.Fatalf("event %d %s does not decode: %v", id, r.Type, ev.Errors)
	}
	return ev
}

// TestSynthTemplateRoundTrip: the template objects, written back as the
// synthetic messages write them, decode to what the captured message
// itself decodes to (names, columns, keys, formats, location and
// parameters), so the synthetic events carry what the listener logs.
func TestSynthTemplateRoundTrip(t *testing.T) {
	tpl, err := LoadMessageTemplates(fixtures)
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(fixtures, "006_add_partition.json"))
	if err != nil {
		t.Fatal(err)
	}
	var fx struct {
		EventID                                              int64
		EventType, DbName, TableName, MessageFormat, Message string
	}
	if err := json.Unmarshal(b, &fx); err != nil {
		t.Fatal(err)
	}
	want := decodeRow(t, fx.EventID, LogRow{Type: fx.EventType, DB: fx.DbName, Table: fx.TableName, Format: fx.MessageFormat, Message: fx.Message})
	wp := want.Payload.(*schemas.PartitionChange)
	wp.After = wp.After[:1] // the template is the first partition
	got := decodeRow(t, fx.EventID, AddPartitionRow(tpl.table, []*hive_metastore.Partition{tpl.part}, 1796220543))
	gp := got.Payload.(*schemas.PartitionChange)
	clearThrift := func(pc *schemas.PartitionChange) {
		pc.Table.ThriftJSON = ""
		for i := range pc.After {
			pc.After[i].ThriftJSON = ""
		}
	}
	clearThrift(wp)
	clearThrift(gp)
	if !reflect.DeepEqual(wp, gp) {
		t.Errorf("re-encoded template decodes differently:\n got %+v\nwant %+v", gp, wp)
	}
	if !reflect.DeepEqual(got.Databases, want.Databases) {
		t.Errorf("databases %v, want %v", got.Databases, want.Databases)
	}
}

// memPut keeps what put writes in memory; Stage's writers call put at
// once, so the map is behind a lock.
type memPut struct {
	mu    sync.Mutex
	files map[string][]byte
}

func (m *memPut) put(_ context.Context, loc string, data []byte) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.files[loc] = append([]byte(nil), data...)
	return nil
}

type fakeSums struct{}

func (fakeSums) FileChecksum(_ context.Context, loc string) (string, bool, error) {
	return fmt.Sprintf("sum-%d", len(loc)), true, nil
}

// TestSynthSteps: every step's rows decode without error into the objects
// the model holds, loads carry the new file with its checksum and CM
// root, and Snapshot describes what the steps did.
func TestSynthSteps(t *testing.T) {
	tpl, err := LoadMessageTemplates(fixtures)
	if err != nil {
		t.Fatal(err)
	}
	const ext, cm = "hdfs://nn:8020/external", "hdfs://nn:8020/cmroot"
	s, err := NewSynth(SynthSpec{Databases: []string{"sa", "sb"}, TablesPerDB: 2, External: ext, Warehouse: "hdfs://nn:8020/warehouse",
		CMRoot: cm, InitialPartitions: 2, Rows: 5}, tpl)
	if err != nil {
		t.Fatal(err)
	}
	steps := s.Setup(1700000000)
	rng := rand.New(rand.NewPCG(1, 2))
	for i := 0; i < 60; i++ {
		steps = append(steps, s.PlanStep(s.Tables()[i%len(s.Tables())], rng, 0.4, 0.7, 1700000001))
	}
	steps = append(steps, s.Reinsert(s.Tables()[1], 1))
	staged := &memPut{files: map[string][]byte{}}
	if err := s.Stage(context.Background(), steps, staged.put, fakeSums{}, 3); err != nil {
		t.Fatal(err)
	}
	files := staged.files // Stage has returned: no writer is left
	id := int64(0)
	kinds := map[StepKind]int{}
	for _, st := range steps {
		kinds[st.Kind]++
		rows := st.Rows(1700000002)
		if st.DB == "" || (st.Table != nil && st.Table.DB() != st.DB) {
			t.Errorf("%s step of database %q, table %v", st.Kind, st.DB, st.Table)
		}
		if len(rows) != len(st.Types) {
			t.Fatalf("%s: %d rows, %d types", st.Kind, len(rows), len(st.Types))
		}
		for i, r := range rows {
			id++
			if r.Type != st.Types[i] || r.DB != st.DB {
				t.Fatalf("%s: row %d is %s of %s, want %s of %s", st.Kind, i, r.Type, r.DB, st.Types[i], st.DB)
			}
			ev := decodeRow(t, id, r)
			switch p := ev.Payload.(type) {
			case *schemas.DatabaseChange:
				if p.After.Location != ext+"/"+r.DB+".db" {
					t.Errorf("database %s at %s", r.DB, p.After.Location)
				}
			case *schemas.TableChange:
				if p.After.TableType != "EXTERNAL_TABLE" || p.After.Location != ext+"/"+r.DB+".db/"+r.Table || len(p.After.PartitionKeys) != 2 {
					t.Errorf("table %s.%s: %+v", r.DB, r.Table, p.After)
				}
			case *schemas.PartitionChange:
				part := p.After[0]
				if !strings.HasPrefix(part.Location, ext+"/"+r.DB+".db/"+r.Table+"/dt=") {
					t.Errorf("%s partition at %s", r.Type, part.Location)
				}
				if r.Type == "ALTER_PARTITION" && reflect.DeepEqual(p.Before[0].Parameters, part.Parameters) {
					t.Errorf("ALTER_PARTITION changes no parameter: %v", part.Parameters)
				}
			case *schemas.InsertData:
				if len(ev.Files) != 1 || ev.Files[0].URI != st.Files[0].Location || ev.Files[0].CMRoot != cm ||
					ev.Files[0].Checksum != fmt.Sprintf("sum-%d", len(st.Files[0].Location)) {
					t.Errorf("INSERT files %+v, want %s with its checksum and %s", ev.Files, st.Files[0].Location, cm)
				}
				if p.Partition == nil || !strings.HasPrefix(st.Files[0].Location, p.Partition.Location+"/") {
					t.Errorf("INSERT into %+v of file %s", p.Partition, st.Files[0].Location)
				}
			default:
				t.Fatalf("%s: payload %T", r.Type, ev.Payload)
			}
		}
		for _, f := range st.Files {
			if _, ok := files[f.Location]; !ok && st.Kind == StepReinsert {
				t.Errorf("a reinsert lists %s, a file no earlier step wrote", f.Location)
			}
			if int64(len(files[f.Location])) != f.Size {
				t.Errorf("%s: %d bytes staged, model says %d", f.Location, len(files[f.Location]), f.Size)
			}
		}
	}
	if kinds[StepAddPartition] <= 8 || kinds[StepLoad] == 0 || kinds[StepAnalyze] == 0 || kinds[StepReinsert] != 1 {
		t.Errorf("steps %v: want set-up partitions, run partitions, loads and statistics updates", kinds)
	}
	snap := s.Snapshot()
	nfiles := 0
	for _, d := range snap.Databases {
		nfiles += d.Counts().Files
	}
	if nfiles != len(files) {
		t.Errorf("snapshot holds %d files, %d staged", nfiles, len(files))
	}
}
