package applier

import (
	"encoding/json"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"reflect"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"

	hms "github.com/beltran/gohive/hive_metastore"

	"github.com/hivedr/hivedr/internal/acid"
	"github.com/hivedr/hivedr/internal/drparam"
	"github.com/hivedr/hivedr/internal/hmsevent"
	"github.com/hivedr/hivedr/internal/hmslog"
	"github.com/hivedr/hivedr/schemas"
)

// Plan is pure, so these tests are tables of (event, DR state, copies,
// later events) → decision, plus whole event sequences run against an
// in-memory metastore (memMS) to check that re-drive converges.

// ---- policy

const (
	srcRoot = "hdfs://src:8020/warehouse/"
	drRoot  = "hdfs://dr:9000/warehouse/"
)

// testPolicy maps the source cluster to the DR cluster (and the captured
// fixtures' source, 127.0.0.1:18020, to the same DR cluster); anything
// else is outside the roots. Tables named "db.table" in excluded, and
// every table of the databases in excludedDBs, are out of scope.
type testPolicy struct{ excluded, excludedDBs []string }

var pathMap = []struct{ from, to string }{
	{"hdfs://src:8020/", "hdfs://dr:9000/"},
	{"hdfs://127.0.0.1:18020/", "hdfs://dr:9000/"},
	{"hdfs://127.0.0.1:20020/", "hdfs://dr:9000/"}, // the transactional fixtures' (a stack at port offset 2000)
}

func (testPolicy) MapLocation(src string) (string, error) {
	for _, m := range pathMap {
		if strings.HasPrefix(src, m.from) {
			return m.to + strings.TrimPrefix(src, m.from), nil
		}
	}
	return "", fmt.Errorf("%s is under no replicated root", src)
}

func (p testPolicy) Replicated(db, table string) bool {
	return !slices.Contains(p.excludedDBs, strings.ToLower(db)) && !slices.Contains(p.excluded, strings.ToLower(db+"."+table))
}

func drPath(src string) string {
	p, err := testPolicy{}.MapLocation(src)
	if err != nil {
		panic(err)
	}
	return p
}

// ---- source objects and events

func srcTable(db, name string, partKeys []string, cols ...string) *schemas.Table {
	t := &schemas.Table{
		Database: db, Name: name, Owner: "etl", TableType: "EXTERNAL_TABLE",
		Location:   srcRoot + db + ".db/" + name,
		Parameters: map[string]string{"EXTERNAL": "TRUE"},
		Storage: schemas.Storage{
			InputFormat:  "org.apache.hadoop.mapred.TextInputFormat",
			OutputFormat: "org.apache.hadoop.hive.ql.io.HiveIgnoreKeyTextOutputFormat",
			SerdeLib:     "org.apache.hadoop.hive.serde2.lazy.LazySimpleSerDe",
			NumBuckets:   -1,
		},
	}
	for _, c := range cols {
		n, typ, _ := strings.Cut(c, " ")
		t.Columns = append(t.Columns, schemas.Column{Name: n, Type: typ})
	}
	for _, k := range partKeys {
		t.PartitionKeys = append(t.PartitionKeys, schemas.Column{Name: k, Type: "string"})
	}
	return t
}

// renamedTo is t under a new name (an external table keeps its location).
func renamedTo(t *schemas.Table, db, name string) *schemas.Table {
	n := *t
	n.Database, n.Name = db, name
	return &n
}

// withParam is t with one more parameter.
func withParam(t *schemas.Table, k, v string) *schemas.Table {
	n := *t
	n.Parameters = map[string]string{k: v}
	for pk, pv := range t.Parameters {
		n.Parameters[pk] = pv
	}
	return &n
}

func srcPart(t *schemas.Table, values ...string) schemas.Partition {
	loc := t.Location
	for i, v := range values {
		loc += "/" + t.PartitionKeys[i].Name + "=" + v
	}
	return schemas.Partition{Values: values, Location: loc, Parameters: map[string]string{}}
}

func partWithParam(p schemas.Partition, k, v string) schemas.Partition {
	p.Parameters = map[string]string{k: v}
	return p
}

func srcEvent(id int64, typ schemas.EventType, db, table string, payload schemas.Payload, files ...string) *schemas.Event {
	ev := &schemas.Event{EventID: id, EventType: typ, Database: db, Table: table,
		Databases: []string{db}, Payload: payload}
	for i, f := range files {
		ev.Files = append(ev.Files, schemas.FileRef{URI: f, TaskID: fmt.Sprintf("%d-%d", id, i)})
	}
	return ev
}

// compaction is a COMMIT_COMPACTION of srcOrders' partition p (srcCustomers
// when p is nil) as the tailer publishes it: the directories the
// compactor wrote (dirs) and two files in each.
func compaction(id int64, p *schemas.Partition, dirs ...string) *schemas.Event {
	c := &schemas.Compaction{TxnID: 123, CompactionID: 7, Type: "MAJOR", Database: "sales", Table: srcCustomers.Name, Location: srcCustomers.Location, Dirs: dirs}
	if p != nil {
		c.Table, c.Partition, c.Location = srcOrders.Name, "dt="+p.Values[0], p.Location
	}
	var files []string
	for _, d := range dirs {
		files = append(files, c.Location+"/"+d+"/bucket_00000", c.Location+"/"+d+"/"+acid.MetadataFile)
	}
	ev := srcEvent(id, schemas.EventCommitCompaction, "sales", c.Table, c, files...)
	for i := range ev.Files {
		ev.Files[i].Subdir = dirs[i/2]
	}
	return ev
}

func createDB(id int64, db string) *schemas.Event {
	return srcEvent(id, schemas.EventCreateDatabase, db, "", &schemas.DatabaseChange{After: &schemas.Database{
		Name: db, Description: "the " + db + " database", Owner: "etl",
		Location: srcRoot + db + ".db", ManagedLocation: srcRoot + "managed/" + db + ".db",
		Parameters: map[string]string{"owner.team": db},
	}})
}

func alterDB(id int64, db string, params map[string]string) *schemas.Event {
	ev := createDB(id, db)
	ev.EventType = schemas.EventAlterDatabase
	c := ev.Payload.(*schemas.DatabaseChange)
	before := *c.After
	c.Before = &before
	c.After.Parameters = params
	return ev
}

func dropDB(id int64, db string) *schemas.Event {
	ev := createDB(id, db)
	ev.EventType = schemas.EventDropDatabase
	c := ev.Payload.(*schemas.DatabaseChange)
	c.Before, c.After = c.After, nil
	return ev
}

func createTable(id int64, t *schemas.Table, files ...string) *schemas.Event {
	return srcEvent(id, schemas.EventCreateTable, t.Database, t.Name, &schemas.TableChange{After: t}, files...)
}

func alterTable(id int64, before, after *schemas.Table) *schemas.Event {
	ev := srcEvent(id, schemas.EventAlterTable, after.Database, after.Name, &schemas.TableChange{Before: before, After: after})
	if before.Database != after.Database {
		ev.Databases = []string{before.Database, after.Database}
		sort.Strings(ev.Databases)
	}
	return ev
}

func truncateTable(id int64, t *schemas.Table) *schemas.Event {
	return srcEvent(id, schemas.EventAlterTable, t.Database, t.Name, &schemas.TableChange{Before: t, After: t, IsTruncate: true})
}

func dropTable(id int64, t *schemas.Table) *schemas.Event {
	return srcEvent(id, schemas.EventDropTable, t.Database, t.Name, &schemas.TableChange{Before: t})
}

func addParts(id int64, t *schemas.Table, parts []schemas.Partition, files ...string) *schemas.Event {
	return srcEvent(id, schemas.EventAddPartition, t.Database, t.Name, &schemas.PartitionChange{Table: t, After: parts}, files...)
}

func alterPart(id int64, t *schemas.Table, before, after schemas.Partition) *schemas.Event {
	return srcEvent(id, schemas.EventAlterPartition, t.Database, t.Name, &schemas.PartitionChange{Table: t,
		Before: []schemas.Partition{before}, After: []schemas.Partition{after}})
}

func truncatePart(id int64, t *schemas.Table, p schemas.Partition) *schemas.Event {
	ev := alterPart(id, t, p, p)
	ev.Payload.(*schemas.PartitionChange).IsTruncate = true
	return ev
}

func dropParts(id int64, t *schemas.Table, parts ...schemas.Partition) *schemas.Event {
	return srcEvent(id, schemas.EventDropPartition, t.Database, t.Name, &schemas.PartitionChange{Table: t, Before: parts})
}

func insertInto(id int64, t *schemas.Table, p *schemas.Partition, files ...string) *schemas.Event {
	return srcEvent(id, schemas.EventInsert, t.Database, t.Name, &schemas.InsertData{Table: t, Partition: p}, files...)
}

func insertOverwrite(id int64, t *schemas.Table, p *schemas.Partition, files ...string) *schemas.Event {
	ev := insertInto(id, t, p, files...)
	ev.Payload.(*schemas.InsertData).Replace = true
	return ev
}

func withErrors(ev *schemas.Event, errs ...schemas.EventError) *schemas.Event {
	ev.Errors = errs
	return ev
}

// ---- DR objects

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

func drDB(name string, last int64) *hms.Database {
	return &hms.Database{Name: name, LocationUri: drRoot + name + ".db", Parameters: map[string]string{
		drparam.Target: "hivedr:src", drparam.LastID: itoa(last), "owner.team": name}}
}

func drTable(t *schemas.Table, last int64) *hms.Table {
	return &hms.Table{DbName: t.Database, TableName: t.Name, Owner: t.Owner, TableType: t.TableType,
		PartitionKeys: fieldSchemas(t.PartitionKeys),
		Sd:            &hms.StorageDescriptor{Cols: fieldSchemas(t.Columns), Location: drPath(t.Location)},
		Parameters:    map[string]string{"EXTERNAL": "TRUE", drparam.LastID: itoa(last)}}
}

func drPart(t *schemas.Table, p schemas.Partition, last int64) *hms.Partition {
	return &hms.Partition{Values: p.Values, DbName: t.Database, TableName: t.Name,
		Sd:         &hms.StorageDescriptor{Cols: fieldSchemas(t.Columns), Location: drPath(p.Location)},
		Parameters: map[string]string{drparam.LastID: itoa(last)}}
}

// replica builds a Replica of DR objects.
func drState(objs ...any) Replica {
	r := Replica{Databases: map[string]*hms.Database{}, Tables: map[TableKey]*hms.Table{},
		Partitions: map[PartKey]*hms.Partition{}}
	for _, o := range objs {
		switch o := o.(type) {
		case *hms.Database:
			r.Databases[o.Name] = o
		case *hms.Table:
			r.Tables[tableKey(o.DbName, o.TableName)] = o
		case *hms.Partition:
			r.Partitions[partKey(tableKey(o.DbName, o.TableName), o.Values)] = o
		default:
			panic(fmt.Sprintf("replica: %T", o))
		}
	}
	return r
}

func copied(ev *schemas.Event) map[string]Copy {
	m := map[string]Copy{}
	for _, f := range ev.Files {
		m[f.TaskID] = Copy{Status: schemas.StatusCopied, TargetURI: drPath(f.URI)}
	}
	return m
}

// ---- invariants of every decision

func actionNames(as []Action) []string {
	out := make([]string, len(as))
	for i, a := range as {
		out[i] = a.String()
	}
	return out
}

// dumpReplica is a canonical text form of a Replica (JSON sorts map keys).
func dumpReplica(r Replica) string {
	var lines []string
	for k, v := range r.Databases {
		lines = append(lines, "db "+k+" "+js(v))
	}
	for k, v := range r.Tables {
		lines = append(lines, "table "+k.String()+" "+js(v))
	}
	for k, v := range r.Partitions {
		lines = append(lines, "part "+k.String()+" "+js(v))
	}
	sort.Strings(lines)
	return strings.Join(lines, "\n")
}

func js(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return string(b)
}

func isDR(loc string) bool { return loc == "" || strings.HasPrefix(loc, "hdfs://dr:9000/") }

// planChecked runs Plan and checks what every decision keeps: Plan does
// not touch its input; halts carry no actions, nor do waits but for the
// destination worker's mark of a cross-database rename (checkHandshake);
// waits and halts say why (a round of an END's convergence waits for
// nothing and drops only);
// every object written is stamped with the event and lies on the DR
// cluster; a no-op writes nothing but the database's watermark; and an
// applied event ends with the database's repl.last.id moving to it.
func planChecked(t *testing.T, in Input) Decision {
	t.Helper()
	before := dumpReplica(in.Replica)
	d := Plan(in)
	if after := dumpReplica(in.Replica); after != before {
		t.Errorf("event %d: Plan changed its input replica", in.Event.EventID)
	}
	e := in.Event.EventID
	ctx := fmt.Sprintf("event %d %s: %s %s", e, in.Event.EventType, d.Outcome, d.Reason)
	if d.Reason == "" || (d.Outcome != Apply && d.Detail == "") {
		t.Errorf("%s: no reason or detail: %+v", ctx, d)
	}
	switch d.Outcome {
	case Wait, Halt:
		switch {
		case d.Outcome == Wait && d.Reason == ReasonCrossDatabase && len(d.Actions) > 0:
			checkHandshake(t, ctx, in, d)
		case d.Outcome == Wait && d.Reason == ReasonConverging:
			// A round of an END's convergence: drops only, never the
			// database's position (the END is planned again).
			for _, a := range d.Actions {
				switch a.(type) {
				case DropTable, DropPartitions:
				default:
					t.Errorf("%s: a convergence round does %s", ctx, a)
				}
			}
		case len(d.Actions) > 0:
			t.Errorf("%s: actions %v", ctx, actionNames(d.Actions))
		}
		if d.Outcome == Wait && len(d.WaitTasks) == 0 && d.WaitDB == "" && d.Reason != ReasonConverging {
			t.Errorf("%s: waits for nothing", ctx)
		}
		if d.Outcome == Wait && d.WaitDB == strings.ToLower(in.DB) {
			t.Errorf("%s: waits for its own database", ctx)
		}
		return d
	}
	if isSnapshot(in.Event.EventType) {
		checkSnapshotDecision(t, ctx, in, d)
		return d
	}
	// A run's objects carry the IDs of the events it covers (batch.go).
	ids := []int64{e}
	if d.Covered > len(in.Batch) || (d.Covered > 0 && len(d.Results) != d.Covered+1) {
		t.Errorf("%s: covers %d of %d batch events with %d results", ctx, d.Covered, len(in.Batch), len(d.Results))
		return d
	}
	for _, ev := range in.Batch[:d.Covered] {
		ids = append(ids, ev.EventID)
	}
	stamped := func(what string, params map[string]string) {
		if !slices.Contains(ids, stamp(params)) || params[drparam.LastID] != itoa(stamp(params)) {
			t.Errorf("%s: %s has %s=%q, want one of %v", ctx, what, drparam.LastID, params[drparam.LastID], ids)
		}
	}
	onDR := func(what, loc string) {
		if !isDR(loc) {
			t.Errorf("%s: %s location %s is not on the DR cluster", ctx, what, loc)
		}
	}
	for _, a := range d.Actions {
		switch a := a.(type) {
		case CreateDatabase:
			stamped(a.String(), a.DB.Parameters)
			onDR(a.String(), a.DB.LocationUri)
			if a.DB.Parameters[drparam.Target] == "" {
				t.Errorf("%s: %s not marked as a replication target", ctx, a)
			}
		case AlterDatabase:
			stamped(a.String(), a.DB.Parameters)
			if a.DB.Parameters[drparam.Target] == "" {
				t.Errorf("%s: %s not marked as a replication target", ctx, a)
			}
			if _, ok := a.DB.Parameters[drparam.Halted]; ok {
				t.Errorf("%s: %s keeps %s", ctx, a, drparam.Halted)
			}
		case CreateTable:
			stamped(a.String(), a.Table.Parameters)
			onDR(a.String(), a.Table.Sd.Location)
		case AlterTable:
			stamped(a.String(), a.Table.Parameters)
			onDR(a.String(), a.Table.Sd.Location)
		case AddPartitions:
			for _, p := range a.Parts {
				stamped(a.String(), p.Parameters)
				onDR(a.String(), p.Sd.Location)
			}
		case AlterPartitions:
			for _, p := range a.Parts {
				stamped(a.String(), p.Parameters)
				onDR(a.String(), p.Sd.Location)
			}
		case RenamePartition:
			stamped(a.String(), a.Part.Parameters)
			onDR(a.String(), a.Part.Sd.Location)
		case PruneFiles:
			onDR(a.String(), a.Dir)
			if a.Dir == "" || !slices.Contains(ids, a.EventID) {
				t.Errorf("%s: %s: dir %q event %d", ctx, a, a.Dir, a.EventID)
			}
			for _, k := range a.Keep {
				onDR(a.String(), k)
			}
		}
	}
	db := strings.ToLower(in.DB)
	if d.Outcome == NoOp {
		for _, a := range d.Actions {
			switch a.(type) {
			case PruneFiles, PruneCompacted:
				if leftOut(d) {
					continue // what a left-out event removed goes all the same
				}
			}
			if ad, ok := a.(AlterDatabase); !ok || ad.Name != db {
				t.Errorf("%s: a no-op runs %s", ctx, a)
			}
		}
	}
	if strings.HasSuffix(string(in.Event.EventType), "_DATABASE") || in.Replica.Databases[db] == nil || len(d.Actions) == 0 {
		return d
	}
	last, ok := d.Actions[len(d.Actions)-1].(AlterDatabase)
	if !ok || last.Name != db {
		t.Errorf("%s: last action %s, want the watermark on %s", ctx, d.Actions[len(d.Actions)-1], db)
	}
	return d
}

// checkHandshake checks the one action a wait may carry: the destination
// worker of a cross-database rename (event E, from another database)
// marking its own DR database as applied up to E-1, and nothing else of
// it changed but the halt note, which goes as with any watermark.
func checkHandshake(t *testing.T, ctx string, in Input, d Decision) {
	t.Helper()
	db, e := strings.ToLower(in.DB), in.Event.EventID
	c, ok := in.Event.Payload.(*schemas.TableChange)
	if in.Event.EventType != schemas.EventAlterTable || !ok || c.Before == nil || c.After == nil ||
		strings.ToLower(c.After.Database) != db || strings.ToLower(c.Before.Database) == db {
		t.Errorf("%s: actions %v on an event that is no rename into %s from another database", ctx, actionNames(d.Actions), db)
		return
	}
	if d.WaitDB != strings.ToLower(c.Before.Database) {
		t.Errorf("%s: the destination worker waits for %q, want the source database %s", ctx, d.WaitDB, c.Before.Database)
	}
	ad, ok := d.Actions[0].(AlterDatabase)
	if len(d.Actions) != 1 || !ok || ad.Name != db || ad.DB == nil || ad.DB.Name != db {
		t.Errorf("%s: actions %v, want only the watermark of %s", ctx, actionNames(d.Actions), db)
		return
	}
	cur := in.Replica.Databases[db]
	if cur == nil || stamp(cur.Parameters) >= e-1 {
		t.Errorf("%s: marks %s at event %d, but it is at %v", ctx, db, e-1, cur)
		return
	}
	want := copyParams(cur.Parameters)
	want[drparam.LastID] = itoa(e - 1)
	delete(want, drparam.Halted)
	if got := ad.DB.Parameters; js(got) != js(want) {
		t.Errorf("%s: watermark parameters\n  %v\nwant\n  %v", ctx, got, want)
	}
	if ad.DB.LocationUri != cur.LocationUri {
		t.Errorf("%s: the watermark moves %s from %s to %s", ctx, db, cur.LocationUri, ad.DB.LocationUri)
	}
}

// ---- the table of single decisions

type planCase struct {
	name   string
	db     string // the topic's database; default "sales"
	ev     *schemas.Event
	state  Replica
	copies map[string]Copy // nil: every file of ev copied
	later  []*schemas.Event
	skip   bool
	policy Policy // nil: testPolicy{}

	outcome   Outcome
	reason    Reason
	actions   []string // String() of each action, in order
	waitTasks []string
	waitDB    string
	check     func(t *testing.T, d Decision)
}

// Shared source objects of the cases.
var (
	srcOrders    = srcTable("sales", "orders", []string{"dt"}, "id bigint", "amount decimal(10,2)")
	srcCustomers = srcTable("sales", "customers", nil, "id bigint", "name string")
	srcP1        = srcPart(srcOrders, "2024-01-01")
	srcP2        = srcPart(srcOrders, "2024-01-02")
)

func partFile(p schemas.Partition, name string) string { return p.Location + "/" + name }

func TestPlan(t *testing.T) {
	ordersV2 := srcTable("sales", "orders", []string{"region"}, "id bigint", "total double", "currency string")
	clients := renamedTo(srcCustomers, "sales", "clients")
	archived := renamedTo(srcCustomers, "archive", "customers")
	gone := func(task string) map[string]Copy {
		return map[string]Copy{task: {Status: schemas.StatusSourceGone, Error: "file not found"}}
	}
	addP1P2 := addParts(50, srcOrders, []schemas.Partition{srcP1, srcP2}, partFile(srcP1, "a"), partFile(srcP2, "b"))
	ok0gone1 := map[string]Copy{
		"50-0": {Status: schemas.StatusCopied, TargetURI: drPath(partFile(srcP1, "a"))},
		"50-1": {Status: schemas.StatusSourceGone, Error: "no such file"},
	}
	ordersState := drState(drDB("sales", 40), drTable(srcOrders, 20))
	iceV1 := withParam(withParam(srcTable("sales", "ice", nil, "id bigint"), "table_type", "ICEBERG"),
		"metadata_location", srcRoot+"sales.db/ice/metadata/00001-a.metadata.json")
	iceV2 := withParam(renamedTo(iceV1, "sales", "ice"), "previous_metadata_location", iceV1.Parameters["metadata_location"])
	iceV2.Parameters["metadata_location"] = srcRoot + "sales.db/ice/metadata/00002-b.metadata.json" // (withParam keeps a key's value)
	iceCommit := alterTable(50, iceV1, iceV2)
	drIce := func(pointer string) Replica {
		tb := drTable(iceV1, 20)
		tb.Parameters["table_type"], tb.Parameters["metadata_location"] = "ICEBERG", pointer
		return drState(drDB("sales", 40), tb)
	}
	iceAtV1 := drIce(drPath(iceV1.Parameters["metadata_location"]))
	iceCommit.Files = []schemas.FileRef{
		{URI: srcRoot + "sales.db/ice/data/a.parquet", TaskID: "50-0"},
		{URI: iceV2.Parameters["metadata_location"], TaskID: "50-1", Rewrite: schemas.RewriteIcebergMetadata},
	}
	ordersP1 := drState(drDB("sales", 40), drTable(srcOrders, 20), drPart(srcOrders, srcP1, 30))

	cases := []planCase{
		// Events the tailer could not decode or route halt, naming why.
		{name: "decode error halts", ev: withErrors(srcEvent(50, schemas.EventAddPartition, "sales", "orders", nil),
			schemas.EventError{Kind: schemas.ErrDecode, Message: "bad gzip"}),
			state: ordersState, outcome: Halt, reason: "decode"},
		{name: "unknown event type error halts", ev: withErrors(srcEvent(50, "FROB_TABLE", "sales", "orders", nil),
			schemas.EventError{Kind: schemas.ErrUnknownEventType, Message: `unknown event type "FROB_TABLE"`}),
			state: ordersState, outcome: Halt, reason: ReasonUnknownEventType},
		{name: "path outside roots halts naming the path",
			ev: withErrors(srcEvent(50, schemas.EventInsert, "sales", "customers", &schemas.InsertData{Table: srcCustomers}),
				schemas.EventError{Kind: schemas.ErrPathOutsideRoots, Message: "outside the source roots", Path: "hdfs://other:8020/x/f"}),
			state: ordersState, outcome: Halt, reason: ReasonPathOutsideRoots,
			check: func(t *testing.T, d Decision) {
				if !strings.Contains(d.Detail, "hdfs://other:8020/x/f") {
					t.Errorf("detail %q does not name the path", d.Detail)
				}
			}},
		{name: "errored event skipped by an operator moves on",
			ev: withErrors(srcEvent(50, schemas.EventAddPartition, "sales", "orders", nil),
				schemas.EventError{Kind: schemas.ErrDecode, Message: "bad gzip"}),
			state: ordersState, skip: true,
			outcome: NoOp, reason: ReasonSkippedByOperator, actions: []string{"alter database sales"}},
		{name: "errored event already applied (re-drive past a skip)",
			ev: withErrors(srcEvent(30, schemas.EventAddPartition, "sales", "orders", nil),
				schemas.EventError{Kind: schemas.ErrDecode, Message: "bad gzip"}),
			state: ordersState, outcome: NoOp, reason: ReasonAlreadyApplied},
		{name: "unknown type without error halts", ev: srcEvent(50, "FROB_TABLE", "sales", "orders", nil),
			state: ordersState, outcome: Halt, reason: ReasonUnknownEventType},
		{name: "missing payload halts decode", ev: srcEvent(50, schemas.EventCreateTable, "sales", "orders", nil),
			state: ordersState, outcome: Halt, reason: "decode"},

		// Event types the replica does nothing for still advance the watermark.
		{name: "column stats not replicated", ev: srcEvent(50, schemas.EventUpdateTableColStat, "sales", "orders",
			&schemas.ColumnStats{Database: "sales", Table: "orders"}),
			state: ordersState, outcome: NoOp, reason: ReasonNotReplicatedColumnStats, actions: []string{"alter database sales"}},
		{name: "partition column stats not replicated", ev: srcEvent(50, schemas.EventDeletePartitionColStat, "sales", "orders",
			&schemas.ColumnStats{Database: "sales", Table: "orders", PartitionValues: []string{"2024-01-01"}}),
			state: ordersState, outcome: NoOp, reason: ReasonNotReplicatedColumnStats, actions: []string{"alter database sales"}},
		{name: "functions not replicated", ev: srcEvent(50, schemas.EventCreateFunction, "sales", "", nil),
			state: ordersState, outcome: NoOp, reason: ReasonNotReplicatedFunctions, actions: []string{"alter database sales"}},
		{name: "constraints not replicated", ev: srcEvent(50, schemas.EventAddPrimaryKey, "sales", "orders", nil),
			state: ordersState, outcome: NoOp, reason: ReasonNotReplicatedConstraints, actions: []string{"alter database sales"}},
		{name: "dropped constraints not replicated", ev: srcEvent(50, schemas.EventDropConstraint, "sales", "orders", nil),
			state: ordersState, outcome: NoOp, reason: ReasonNotReplicatedConstraints, actions: []string{"alter database sales"}},

		// Transactions (acid.go); the captured ones in TestPlanAcidFixtures.
		{name: "write ID allocation opens and allocates on DR", ev: srcEvent(50, schemas.EventAllocWriteID, "sales", "orders",
			&schemas.WriteIDAllocation{Database: "sales", Table: "orders", Allocations: []schemas.TxnWriteID{{TxnID: 7, WriteID: 3}}}),
			state: ordersState, outcome: Apply, reason: ReasonApplied,
			actions: []string{"allocate write ids [{7 3}] of sales.orders (policy sales)", "alter database sales"}},
		{name: "write ID allocation for a table missing on DR halts", ev: srcEvent(50, schemas.EventAllocWriteID, "sales", "events_acid",
			&schemas.WriteIDAllocation{Database: "sales", Table: "events_acid", Allocations: []schemas.TxnWriteID{{TxnID: 7, WriteID: 1}}}),
			state: ordersState, outcome: Halt, reason: ReasonMissingObject},
		{name: "commit waits for its files", ev: srcEvent(50, schemas.EventCommitTxn, "", "", &schemas.Transaction{
			TxnIDs: []int64{7}, WriteIDs: []schemas.TableWriteID{{Database: "sales", Table: "orders", WriteID: 3, Partition: "dt=2024-01-01",
				Files: []string{srcRoot + "sales.db/orders/dt=2024-01-01/delta_0000003_0000003_0000/bucket_00000"}}}},
			srcRoot+"sales.db/orders/dt=2024-01-01/delta_0000003_0000003_0000/bucket_00000"),
			state: ordersP1, copies: map[string]Copy{}, outcome: Wait, reason: ReasonWaitingForFiles},
		{name: "commit of this database's writes, not the other's", ev: srcEvent(50, schemas.EventCommitTxn, "", "", &schemas.Transaction{
			TxnIDs: []int64{7}, WriteIDs: []schemas.TableWriteID{
				{Database: "sales", Table: "orders", WriteID: 3, Partition: "dt=2024-01-01",
					Files: []string{srcRoot + "sales.db/orders/dt=2024-01-01/delta_0000003_0000003_0000/bucket_00000"}},
				{Database: "archive", Table: "orders", WriteID: 9, Files: []string{srcRoot + "archive.db/orders/delta_0000009_0000009_0000/bucket_00000"}}}},
			srcRoot+"sales.db/orders/dt=2024-01-01/delta_0000003_0000003_0000/bucket_00000", srcRoot+"archive.db/orders/delta_0000009_0000009_0000/bucket_00000"),
			state: ordersP1, outcome: Apply, reason: ReasonApplied,
			actions: []string{"commit replicated transaction 7 (policy sales, 1 writes)", "alter database sales"},
			check: func(t *testing.T, d Decision) {
				w := d.Actions[0].(ReplCommit).Writes
				if len(w) != 1 || w[0].WriteId != 3 || w[0].GetPartition() != "dt=2024-01-01" ||
					w[0].Files != drRoot+"sales.db/orders/dt=2024-01-01/delta_0000003_0000003_0000/bucket_00000###" {
					t.Errorf("writes %+v", w)
				}
			}},
		{name: "commit of a base prunes what it covers after the commit", ev: srcEvent(50, schemas.EventCommitTxn, "", "", &schemas.Transaction{
			TxnIDs: []int64{8}, WriteIDs: []schemas.TableWriteID{{Database: "sales", Table: "orders", WriteID: 4, Partition: "dt=2024-01-01",
				Files: []string{srcRoot + "sales.db/orders/dt=2024-01-01/base_0000004/bucket_00000"}}}},
			srcRoot+"sales.db/orders/dt=2024-01-01/base_0000004/bucket_00000"),
			state: ordersP1, outcome: Apply, reason: ReasonApplied,
			actions: []string{"commit replicated transaction 8 (policy sales, 1 writes)",
				"prune what base_4 covers under " + drRoot + "sales.db/orders/dt=2024-01-01", "alter database sales"}},
		{name: "commit of a write to a partition missing on DR that a later event drops leaves the write out", ev: srcEvent(50, schemas.EventCommitTxn, "", "", &schemas.Transaction{
			TxnIDs: []int64{7}, WriteIDs: []schemas.TableWriteID{{Database: "sales", Table: "orders", WriteID: 3, Partition: "dt=2024-01-02",
				Files: []string{srcRoot + "sales.db/orders/dt=2024-01-02/delta_0000003_0000003_0000/bucket_00000"}}}},
			srcRoot+"sales.db/orders/dt=2024-01-02/delta_0000003_0000003_0000/bucket_00000"),
			state: ordersP1, later: []*schemas.Event{dropParts(60, srcOrders, srcP2)}, outcome: Apply, reason: ReasonApplied,
			actions: []string{"commit replicated transaction 7 (policy sales, 0 writes)", "alter database sales"}},
		{name: "commit of a write to a partition missing on DR halts", ev: srcEvent(50, schemas.EventCommitTxn, "", "", &schemas.Transaction{
			TxnIDs: []int64{7}, WriteIDs: []schemas.TableWriteID{{Database: "sales", Table: "orders", WriteID: 3, Partition: "dt=2024-01-02",
				Files: []string{srcRoot + "sales.db/orders/dt=2024-01-02/delta_0000003_0000003_0000/bucket_00000"}}}},
			srcRoot+"sales.db/orders/dt=2024-01-02/delta_0000003_0000003_0000/bucket_00000"),
			state: ordersP1, outcome: Halt, reason: ReasonMissingObject},
		{name: "commit of a write to a table missing on DR halts", ev: srcEvent(50, schemas.EventCommitTxn, "", "", &schemas.Transaction{
			TxnIDs: []int64{7}, WriteIDs: []schemas.TableWriteID{{Database: "sales", Table: "events_acid", WriteID: 1}}}),
			state: ordersState, outcome: Halt, reason: ReasonMissingObject},
		{name: "commit of writes elsewhere commits an allocation here without writes", ev: srcEvent(50, schemas.EventCommitTxn, "", "", &schemas.Transaction{
			TxnIDs: []int64{7}, WriteIDs: []schemas.TableWriteID{{Database: "archive", Table: "orders", WriteID: 1}}}),
			state: ordersState, outcome: Apply, reason: ReasonApplied,
			actions: []string{"commit replicated transaction 7 (policy sales, 0 writes)", "alter database sales"}},
		{name: "commit without write IDs commits without writes", ev: srcEvent(50, schemas.EventCommitTxn, "sales", "", &schemas.Transaction{TxnIDs: []int64{7}}),
			state: ordersState, outcome: Apply, reason: ReasonApplied,
			actions: []string{"commit replicated transaction 7 (policy sales, 0 writes)", "alter database sales"}},
		{name: "commit whose writes the tailer could not read halts", ev: func() *schemas.Event {
			ev := srcEvent(50, schemas.EventCommitTxn, "sales", "", &schemas.Transaction{TxnIDs: []int64{7}})
			ev.Errors = []schemas.EventError{{Kind: schemas.ErrWritesUnavailable, Message: "its first allocation has aged out"}}
			return ev
		}(), state: ordersState, outcome: Halt, reason: ReasonWritesUnavailable},
		{name: "abort aborts the DR transaction", ev: srcEvent(50, schemas.EventAbortTxn, "sales", "", &schemas.Transaction{TxnIDs: []int64{7}}),
			state: ordersState, outcome: Apply, reason: ReasonApplied,
			actions: []string{"abort replicated transaction 7 (policy sales)", "alter database sales"}},
		{name: "acid write waits for its commit", ev: srcEvent(50, schemas.EventAcidWrite, "sales", "orders", &schemas.Transaction{
			TxnIDs: []int64{7}, WriteIDs: []schemas.TableWriteID{{Database: "sales", Table: "orders", WriteID: 1}}}),
			state: ordersState, outcome: NoOp, reason: ReasonAcidWriteAtCommit, actions: []string{"alter database sales"}},
		{name: "acid write under its enum name alike", ev: srcEvent(50, "BATCH_ACID_WRITE", "sales", "orders", &schemas.Transaction{
			TxnIDs: []int64{7}, WriteIDs: []schemas.TableWriteID{{Database: "sales", Table: "orders", WriteID: 1}}}),
			state: ordersState, outcome: NoOp, reason: ReasonAcidWriteAtCommit, actions: []string{"alter database sales"}},
		{name: "column stats under its enum name not replicated", ev: srcEvent(50, "UPDATE_TABLE_COLUMN_STAT", "sales", "orders",
			&schemas.ColumnStats{Database: "sales", Table: "orders"}),
			state: ordersState, outcome: NoOp, reason: ReasonNotReplicatedColumnStats, actions: []string{"alter database sales"}},
		{name: "compaction under its enum name with no payload halts", ev: srcEvent(50, "COMMIT_COMPACTION", "sales", "orders", nil),
			state: ordersState, outcome: Halt, reason: ReasonDecode},

		// Compactions: publish what the compactor wrote (copied under a
		// staging name), then prune what it made obsolete.
		{name: "major compaction of a partition publishes its base, then prunes", ev: compaction(50, &srcP1, "base_0000004_v0000123"),
			state: ordersP1, outcome: Apply, reason: ReasonApplied,
			actions: []string{
				"publish compacted " + drPath(partFile(srcP1, ".hivedr-compacted.base_0000004_v0000123")) + " as " + drPath(partFile(srcP1, "base_0000004")),
				"prune what base_0000004 covers under " + drPath(srcP1.Location), "alter database sales"}},
		{name: "minor compaction of a table publishes both its deltas, then prunes", ev: compaction(50, nil,
			"delete_delta_0000002_0000005_v0000123", "delta_0000002_0000005_v0000123"),
			state: drState(drDB("sales", 40), drTable(srcCustomers, 20)), outcome: Apply, reason: ReasonApplied,
			actions: []string{
				"publish compacted " + drPath(srcCustomers.Location+"/.hivedr-compacted.delete_delta_0000002_0000005_v0000123") + " as " + drPath(srcCustomers.Location+"/delete_delta_0000002_0000005"),
				"publish compacted " + drPath(srcCustomers.Location+"/.hivedr-compacted.delta_0000002_0000005_v0000123") + " as " + drPath(srcCustomers.Location+"/delta_0000002_0000005"),
				"prune what delete_delta_0000002_0000005 covers under " + drPath(srcCustomers.Location),
				"prune what delta_0000002_0000005 covers under " + drPath(srcCustomers.Location), "alter database sales"}},
		{name: "compaction waits for its files", ev: compaction(50, &srcP1, "base_0000004_v0000123"), copies: map[string]Copy{},
			state: ordersP1, outcome: Wait, reason: ReasonWaitingForFiles, waitTasks: []string{"50-0", "50-1"}},
		{name: "compaction whose file is gone waits", ev: compaction(50, &srcP1, "base_0000004_v0000123"), copies: map[string]Copy{
			"50-0": {Status: schemas.StatusCopied}, "50-1": {Status: schemas.StatusSourceGone, Error: "no such file"}},
			state: ordersP1, outcome: Wait, reason: ReasonSourceGone},
		{name: "compaction whose file is gone, replaced by a later major compaction", ev: compaction(50, &srcP1, "base_0000004_v0000123"), copies: map[string]Copy{
			"50-0": {Status: schemas.StatusCopied}, "50-1": {Status: schemas.StatusSourceGone, Error: "no such file"}},
			later: []*schemas.Event{compaction(60, &srcP1, "base_0000009_v0000150")},
			state: ordersP1, outcome: NoOp, reason: ReasonSuperseded,
			actions: []string{"prune what base_0000004 covers under " + drPath(srcP1.Location), "alter database sales"}},
		{name: "minor compaction whose file is gone, covered by a later minor compaction", ev: compaction(50, &srcP1, "delta_0000016_0000019_v0000123"), copies: map[string]Copy{
			"50-0": {Status: schemas.StatusCopied}, "50-1": {Status: schemas.StatusSourceGone, Error: "no such file"}},
			later: []*schemas.Event{compaction(60, &srcP1, "delta_0000012_0000021_v0000150")},
			state: ordersP1, outcome: NoOp, reason: ReasonSuperseded,
			actions: []string{"prune what delta_0000016_0000019 covers under " + drPath(srcP1.Location), "alter database sales"}},
		{name: "minor compaction whose file is gone, a later one of other writes: waits", ev: compaction(50, &srcP1, "delta_0000016_0000019_v0000123"), copies: map[string]Copy{
			"50-0": {Status: schemas.StatusCopied}, "50-1": {Status: schemas.StatusSourceGone, Error: "no such file"}},
			later: []*schemas.Event{compaction(60, &srcP1, "delta_0000020_0000021_v0000150")},
			state: ordersP1, outcome: Wait, reason: ReasonSourceGone},
		{name: "compaction of a partition missing on DR halts", ev: compaction(50, &srcP1, "base_0000004_v0000123"),
			state: ordersState, outcome: Halt, reason: ReasonMissingObject},
		{name: "compaction of a partition missing on DR, dropped later", ev: compaction(50, &srcP1, "base_0000004_v0000123"),
			later: []*schemas.Event{dropParts(60, srcOrders, srcP1)},
			state: ordersState, outcome: NoOp, reason: ReasonSuperseded, actions: []string{"alter database sales"}},
		{name: "compaction of a partition a bootstrap stamped later", ev: compaction(50, &srcP1, "base_0000004_v0000123"),
			state:   drState(drDB("sales", 40), drTable(srcOrders, 20), drPart(srcOrders, srcP1, 55)),
			outcome: NoOp, reason: ReasonAlreadyApplied, actions: []string{"alter database sales"}},
		{name: "compaction of an object gone from the source", ev: func() *schemas.Event {
			ev := compaction(50, &srcP1)
			ev.Payload.(*schemas.Compaction).Location = ""
			return ev
		}(), state: ordersP1, outcome: NoOp, reason: ReasonCompactionGone, actions: []string{"alter database sales"}},
		{name: "compaction of another database's table halts", ev: func() *schemas.Event {
			ev := compaction(50, &srcP1, "base_0000004_v0000123")
			ev.Payload.(*schemas.Compaction).Database = "archive"
			return ev
		}(), state: ordersP1, outcome: Halt, reason: ReasonDecode},

		// The DR database.
		{name: "DR database missing halts", ev: createTable(50, srcOrders),
			state: drState(), outcome: Halt, reason: ReasonDatabaseMissing},
		{name: "a table's drop after its database's (DR database missing)", ev: dropTable(50, srcOrders),
			state: drState(), outcome: NoOp, reason: ReasonAlreadyApplied},
		{name: "a partition's drop after its database's (DR database missing)", ev: dropParts(50, srcOrders, srcP1),
			state: drState(), outcome: NoOp, reason: ReasonAlreadyApplied},
		{name: "DR database missing but dropped later", ev: createTable(50, srcOrders),
			state: drState(), later: []*schemas.Event{createTable(51, srcCustomers), dropDB(52, "sales")},
			outcome: NoOp, reason: ReasonSuperseded},
		{name: "DR database not a replica", ev: createTable(50, srcOrders),
			state:   drState(&hms.Database{Name: "sales", Parameters: map[string]string{"owner.team": "users"}}),
			outcome: Halt, reason: ReasonNotAReplica},
		{name: "DR database replicates another source", ev: createTable(50, srcOrders),
			state:   drState(&hms.Database{Name: "sales", Parameters: map[string]string{drparam.Target: "hivedr:other", drparam.LastID: "10"}}),
			outcome: Halt, reason: ReasonNotAReplica},
		{name: "DR database failed over", ev: createTable(50, srcOrders),
			state:   drState(&hms.Database{Name: "sales", Parameters: map[string]string{drparam.FailedOverAt: "2026-12-03T13:00:00Z", drparam.LastID: "40"}}),
			outcome: Halt, reason: ReasonFailedOver},
		{name: "DR database failed over refuses even an applied event", ev: createTable(30, srcOrders),
			state:   drState(&hms.Database{Name: "sales", Parameters: map[string]string{drparam.FailedOverAt: "2026-12-03T13:00:00Z", drparam.LastID: "40"}}),
			outcome: Halt, reason: ReasonFailedOver},
		{name: "DR database failed over though still marked", ev: createTable(50, srcOrders),
			state:   drState(&hms.Database{Name: "sales", Parameters: map[string]string{drparam.FailedOverAt: "2026-12-03T13:00:00Z", drparam.Target: "hivedr:src", drparam.LastID: "40"}}),
			outcome: Halt, reason: ReasonFailedOver},
		{name: "operator skip", ev: createTable(50, srcOrders), state: drState(drDB("sales", 40)), skip: true,
			outcome: NoOp, reason: ReasonSkippedByOperator, actions: []string{"alter database sales"}},
		{name: "at the DR database's watermark", ev: createTable(40, srcOrders), state: drState(drDB("sales", 40)),
			outcome: NoOp, reason: ReasonAlreadyApplied},
		{name: "below the DR database's watermark", ev: dropTable(12, srcOrders),
			state: drState(drDB("sales", 40), drTable(srcOrders, 5)), outcome: NoOp, reason: ReasonAlreadyApplied},
		{name: "create database", db: "sales", ev: createDB(10, "sales"), state: drState(),
			outcome: Apply, actions: []string{"create database sales"},
			check: func(t *testing.T, d Decision) {
				db := d.Actions[0].(CreateDatabase).DB
				if db.LocationUri != drRoot+"sales.db" || db.ManagedLocationUri == nil || *db.ManagedLocationUri != drRoot+"managed/sales.db" {
					t.Errorf("locations %s %v", db.LocationUri, db.ManagedLocationUri)
				}
				if db.Parameters["owner.team"] != "sales" || db.Parameters[drparam.Target] != "hivedr:src" || db.Description != "the sales database" {
					t.Errorf("database %+v", db)
				}
				if db.OwnerName == nil || *db.OwnerName != "etl" {
					t.Errorf("owner %v", db.OwnerName)
				}
			}},
		{name: "create database outside the roots", ev: func() *schemas.Event {
			ev := createDB(10, "sales")
			ev.Payload.(*schemas.DatabaseChange).After.Location = "s3a://elsewhere/sales.db"
			return ev
		}(), state: drState(), outcome: Halt, reason: ReasonPathOutsideRoots},
		{name: "create database naming another database", db: "archive", ev: createDB(10, "sales"),
			state: drState(), outcome: Halt, reason: "decode"},
		{name: "alter database keeps hivedr bookkeeping", ev: alterDB(50, "sales", map[string]string{"retention.days": "30"}),
			state: func() Replica {
				db := drDB("sales", 40)
				db.Parameters[drparam.SkippedPrefix+"33"] = "requested by ops"
				db.Parameters[drparam.Halted] = "event 49: ..."
				return drState(db)
			}(),
			outcome: Apply, actions: []string{"alter database sales"},
			check: func(t *testing.T, d Decision) {
				p := d.Actions[0].(AlterDatabase).DB.Parameters
				if p["retention.days"] != "30" || p[drparam.SkippedPrefix+"33"] == "" || p["owner.team"] != "" {
					t.Errorf("parameters %v", p)
				}
			}},
		{name: "alter database drops the source's own hivedr keys (a failed-over source)", ev: alterDB(50, "sales", map[string]string{
			"retention.days": "30", drparam.FailedOverAt: "2026-12-03T13:00:00Z", drparam.FailoverTarget: "hivedr:fwd", drparam.Target: "hivedr:fwd"}),
			state: drState(drDB("sales", 40)), outcome: Apply, actions: []string{"alter database sales"},
			check: func(t *testing.T, d Decision) {
				p := d.Actions[0].(AlterDatabase).DB.Parameters
				if p["retention.days"] != "30" || p[drparam.FailedOverAt] != "" || p[drparam.FailoverTarget] != "" || p[drparam.Target] != drparam.TargetMark("src") {
					t.Errorf("parameters %v", p)
				}
			}},
		{name: "drop database", ev: dropDB(60, "sales"), state: drState(drDB("sales", 40)),
			outcome: Apply, actions: []string{"drop database sales"}},
		{name: "drop database already dropped", ev: dropDB(60, "sales"), state: drState(),
			outcome: NoOp, reason: ReasonAlreadyApplied},

		// Tables.
		{name: "create table", ev: createTable(50, srcOrders), state: drState(drDB("sales", 40)),
			outcome: Apply, actions: []string{"prune files under " + drRoot + "sales.db/orders keeping 0", "create table sales.orders", "alter database sales"},
			check: func(t *testing.T, d Decision) {
				tb := d.Actions[1].(CreateTable).Table
				if tb.Sd.Location != drRoot+"sales.db/orders" || len(tb.PartitionKeys) != 1 || len(tb.Sd.Cols) != 2 ||
					tb.TableType != "EXTERNAL_TABLE" || tb.Parameters["EXTERNAL"] != "TRUE" {
					t.Errorf("table %s", js(tb))
				}
			}},
		{name: "create table outside the roots", ev: func() *schemas.Event {
			tb := *srcOrders
			tb.Location = "hdfs://other:8020/orders"
			return createTable(50, &tb)
		}(), state: drState(drDB("sales", 40)), outcome: Halt, reason: ReasonPathOutsideRoots},
		{name: "drop then recreate with a new schema", ev: createTable(50, ordersV2),
			state:   drState(drDB("sales", 40), drTable(srcOrders, 20), drPart(srcOrders, srcP1, 30)),
			outcome: Apply, actions: []string{"prune files under " + drRoot + "sales.db/orders keeping 0", "drop table sales.orders", "create table sales.orders", "alter database sales"},
			check: func(t *testing.T, d Decision) {
				tb := d.Actions[2].(CreateTable).Table
				if len(tb.Sd.Cols) != 3 || tb.Sd.Cols[1].Name != "total" || tb.PartitionKeys[0].Name != "region" {
					t.Errorf("new incarnation has schema %s", js(tb))
				}
			}},
		{name: "create table older than the table (re-drive)", ev: createTable(30, srcOrders),
			state:   drState(drDB("sales", 20), drTable(ordersV2, 35)),
			outcome: NoOp, reason: ReasonAlreadyApplied, actions: []string{"alter database sales"}},
		{name: "create table as select waits for its files", ev: createTable(50, srcCustomers,
			srcCustomers.Location+"/000000_0", srcCustomers.Location+"/000001_0"),
			state: drState(drDB("sales", 40)), copies: map[string]Copy{"50-1": {Status: schemas.StatusCopied}},
			outcome: Wait, reason: ReasonWaitingForFiles, waitTasks: []string{"50-0"}},
		{name: "alter table", ev: alterTable(50, srcOrders, ordersV2), state: ordersP1,
			outcome: Apply, actions: []string{"alter table sales.orders", "alter database sales"},
			check: func(t *testing.T, d Decision) {
				if tb := d.Actions[0].(AlterTable).Table; len(tb.Sd.Cols) != 3 {
					t.Errorf("columns %s", js(tb.Sd.Cols))
				}
			}},
		{name: "alter table older than the table (re-drive)", ev: alterTable(18, srcOrders, ordersV2),
			state:   drState(drDB("sales", 10), drTable(srcOrders, 20)),
			outcome: NoOp, reason: ReasonAlreadyApplied, actions: []string{"alter database sales"}},
		{name: "alter missing table halts", ev: alterTable(50, srcOrders, ordersV2), state: drState(drDB("sales", 40)),
			outcome: Halt, reason: ReasonMissingObject},
		{name: "alter missing table dropped later", ev: alterTable(50, srcOrders, ordersV2), state: drState(drDB("sales", 40)),
			later:   []*schemas.Event{dropTable(55, ordersV2)},
			outcome: NoOp, reason: ReasonSuperseded, actions: []string{"alter database sales"}},
		{name: "truncate table", ev: truncateTable(50, srcCustomers),
			state:   drState(drDB("sales", 40), drTable(srcCustomers, 20)),
			outcome: Apply, actions: []string{"prune files under " + drRoot + "sales.db/customers keeping 0",
				"alter table sales.customers", "alter database sales"}},
		{name: "truncate a table left out earlier", ev: truncateTable(50, srcCustomers), state: drState(drDB("sales", 40)),
			outcome: Apply, actions: []string{"prune files under " + drRoot + "sales.db/customers keeping 0",
				"create table sales.customers", "alter database sales"}},
		{name: "truncate a missing partitioned table halts", ev: truncateTable(50, srcOrders), state: drState(drDB("sales", 40)),
			outcome: Halt, reason: ReasonMissingObject},
		{name: "truncate partitioned table prunes nothing at table level", ev: truncateTable(50, srcOrders),
			state: ordersP1, outcome: Apply, actions: []string{"alter table sales.orders", "alter database sales"}},
		{name: "rename within a database", ev: alterTable(50, srcCustomers, clients),
			state:   drState(drDB("sales", 40), drTable(srcCustomers, 20)),
			outcome: Apply, actions: []string{"rename table sales.customers to sales.clients", "alter database sales"},
			check: func(t *testing.T, d Decision) {
				tb := d.Actions[0].(AlterTable).Table
				if tb.Sd.Location != drRoot+"sales.db/customers" {
					t.Errorf("location %s", tb.Sd.Location)
				}
			}},
		{name: "rename onto a name that existed before", ev: alterTable(50, srcCustomers, clients),
			state:   drState(drDB("sales", 40), drTable(srcCustomers, 20), drTable(clients, 10)),
			outcome: Apply, actions: []string{"drop table sales.clients", "rename table sales.customers to sales.clients", "alter database sales"}},
		{name: "rename already applied", ev: alterTable(50, srcCustomers, clients),
			state:   drState(drDB("sales", 40), func() *hms.Table { return drTable(clients, 50) }()),
			outcome: NoOp, reason: ReasonAlreadyApplied, actions: []string{"alter database sales"}},
		{name: "rename of a missing table halts", ev: alterTable(50, srcCustomers, clients),
			state: drState(drDB("sales", 40)), outcome: Halt, reason: ReasonMissingObject},
		{name: "rename of a table a bootstrap read under its new name", ev: alterTable(50, srcCustomers, clients),
			state:   drState(drDB("sales", 40), drTable(clients, 45)),
			outcome: Apply, actions: []string{"alter table sales.clients", "alter database sales"},
			check: func(t *testing.T, d Decision) {
				if p := d.Actions[0].(AlterTable).Table.Parameters; p[drparam.LastID] != "50" {
					t.Errorf("parameters %v", p)
				}
			}},
		{name: "rename whose new name a bootstrap read after it drops the old name", ev: alterTable(50, srcCustomers, clients),
			state:   drState(drDB("sales", 40), drTable(srcCustomers, 30), drTable(clients, 55)),
			outcome: Apply, actions: []string{"drop table sales.customers", "alter database sales"}},
		{name: "rename already applied keeps a later table of the old name", ev: alterTable(50, srcCustomers, clients),
			state:   drState(drDB("sales", 60), drTable(srcCustomers, 58), drTable(clients, 55)),
			outcome: NoOp, reason: ReasonAlreadyApplied},
		{name: "an event on a missing table renamed away later is left out", ev: addParts(45, srcOrders, []schemas.Partition{srcP1}),
			state:   drState(drDB("sales", 40), drTable(renamedTo(srcOrders, "sales", "orders_r"), 44)),
			later:   []*schemas.Event{alterTable(50, srcOrders, renamedTo(srcOrders, "sales", "orders_r"))},
			outcome: NoOp, reason: ReasonSuperseded, actions: []string{"alter database sales"}},
		{name: "rename to an excluded name drops", ev: alterTable(50, srcCustomers, renamedTo(srcCustomers, "sales", "tmp_customers")),
			policy:  testPolicy{excluded: []string{"sales.tmp_customers"}},
			state:   drState(drDB("sales", 40), drTable(srcCustomers, 20)),
			outcome: Apply, actions: []string{"drop table sales.customers", "alter database sales"}},
		// A rename from a name or database outside the scope brings a
		// table whose files were never copied: creating it would show it
		// without them (guarantee 4), so the database halts.
		{name: "rename from an excluded name halts", ev: alterTable(50, renamedTo(srcCustomers, "sales", "tmp_customers"), srcCustomers),
			policy:  testPolicy{excluded: []string{"sales.tmp_customers"}},
			state:   drState(drDB("sales", 40)),
			outcome: Halt, reason: ReasonEntersScope,
			check: func(t *testing.T, d Decision) {
				if !strings.Contains(d.Detail, "sales.customers") || !strings.Contains(d.Detail, "sales.tmp_customers") {
					t.Errorf("detail %q does not name both tables", d.Detail)
				}
			}},
		{name: "rename from an excluded name halts even with a stale holder of the name", ev: alterTable(50, renamedTo(srcCustomers, "sales", "tmp_customers"), srcCustomers),
			policy:  testPolicy{excluded: []string{"sales.tmp_customers"}},
			state:   drState(drDB("sales", 40), drTable(srcCustomers, 20)),
			outcome: Halt, reason: ReasonEntersScope},

		// A rename across databases changes both: the destination worker
		// records that its database is applied up to the event before it
		// (repl.last.id = 49) and waits; the source worker waits for that
		// mark, then renames.
		{name: "rename across databases: source worker waits while the destination is below E-1", ev: alterTable(50, srcCustomers, archived),
			state:   drState(drDB("sales", 40), drDB("archive", 48), drTable(srcCustomers, 20)),
			outcome: Wait, reason: ReasonCrossDatabase, waitDB: "archive",
			check: func(t *testing.T, d Decision) {
				if !strings.Contains(d.Detail, "49") {
					t.Errorf("detail %q does not name the event the destination must reach", d.Detail)
				}
			}},
		{name: "rename across databases: source worker renames once the destination is at E-1", ev: alterTable(50, srcCustomers, archived),
			state:   drState(drDB("sales", 40), drDB("archive", 49), drTable(srcCustomers, 20)),
			outcome: Apply, actions: []string{"rename table sales.customers to archive.customers", "alter database sales"},
			check: func(t *testing.T, d Decision) {
				tb := d.Actions[0].(AlterTable).Table
				if tb.DbName != "archive" || tb.TableName != "customers" || tb.Sd.Location != drRoot+"sales.db/customers" {
					t.Errorf("renamed to %s.%s at %s", tb.DbName, tb.TableName, tb.Sd.Location)
				}
			}},
		{name: "rename across databases: source worker drops a stale holder of the destination name", ev: alterTable(50, srcCustomers, archived),
			state:   drState(drDB("sales", 40), drDB("archive", 49), drTable(srcCustomers, 20), drTable(archived, 30)),
			outcome: Apply, actions: []string{"drop table archive.customers", "rename table sales.customers to archive.customers", "alter database sales"}},
		{name: "rename across databases: destination database not created yet", ev: alterTable(50, srcCustomers, archived),
			state: drState(drDB("sales", 40), drTable(srcCustomers, 20)), outcome: Wait, reason: ReasonCrossDatabase, waitDB: "archive"},
		{name: "rename across databases: destination worker marks E-1 and waits", db: "archive", ev: alterTable(50, srcCustomers, archived),
			state:   drState(drDB("sales", 49), drDB("archive", 45), drTable(srcCustomers, 20)),
			outcome: Wait, reason: ReasonCrossDatabase, waitDB: "sales", actions: []string{"alter database archive"},
			check: func(t *testing.T, d Decision) {
				db := d.Actions[0].(AlterDatabase).DB
				if db.Name != "archive" || db.Parameters[drparam.LastID] != "49" || db.Parameters["owner.team"] != "archive" {
					t.Errorf("watermark %s", js(db))
				}
			}},
		{name: "rename across databases: destination mark clears an earlier halt note", db: "archive", ev: alterTable(50, srcCustomers, archived),
			state: func() Replica {
				db := drDB("archive", 45)
				db.Parameters[drparam.Halted] = "event 50 ALTER_TABLE: metastore_refused: ..."
				return drState(drDB("sales", 49), db, drTable(srcCustomers, 20))
			}(),
			outcome: Wait, reason: ReasonCrossDatabase, waitDB: "sales", actions: []string{"alter database archive"}},
		{name: "rename across databases: destination worker at E-1 waits without actions", db: "archive", ev: alterTable(50, srcCustomers, archived),
			state:   drState(drDB("sales", 49), drDB("archive", 49), drTable(srcCustomers, 20)),
			outcome: Wait, reason: ReasonCrossDatabase, waitDB: "sales"},
		{name: "rename across databases: destination worker at E-1, source database missing", db: "archive", ev: alterTable(50, srcCustomers, archived),
			state:   drState(drDB("archive", 49)),
			outcome: Wait, reason: ReasonCrossDatabase, waitDB: "sales"},
		{name: "rename across databases: destination worker moves on", db: "archive", ev: alterTable(50, srcCustomers, archived),
			state:   drState(drDB("sales", 50), drDB("archive", 49), drTable(archived, 50)),
			outcome: NoOp, reason: ReasonAlreadyApplied, actions: []string{"alter database archive"}},
		{name: "rename across databases: source database applied it", db: "archive", ev: alterTable(50, srcCustomers, archived),
			state:   drState(drDB("sales", 50), drDB("archive", 49)),
			outcome: NoOp, reason: ReasonAppliedByOtherDatabase, actions: []string{"alter database archive"}},
		{name: "rename across databases: source database moved past it", db: "archive", ev: alterTable(50, srcCustomers, archived),
			state:   drState(drDB("sales", 60), drDB("archive", 49)),
			outcome: NoOp, reason: ReasonAppliedByOtherDatabase, actions: []string{"alter database archive"}},
		{name: "rename across databases: the destination marks E-1 before anything else", db: "archive", ev: alterTable(50, srcCustomers, archived),
			state:   drState(drDB("sales", 60), drDB("archive", 45)),
			outcome: Wait, reason: ReasonCrossDatabase, waitDB: "sales", actions: []string{"alter database archive"}},
		{name: "rename across databases from an excluded table halts", db: "archive", ev: alterTable(50, srcCustomers, archived),
			policy:  testPolicy{excluded: []string{"sales.customers"}},
			state:   drState(drDB("archive", 45)),
			outcome: Halt, reason: ReasonEntersScope},
		{name: "rename from an out-of-scope database halts", db: "archive", ev: alterTable(50, renamedTo(srcCustomers, "staging", "customers"), archived),
			policy:  testPolicy{excludedDBs: []string{"staging"}},
			state:   drState(drDB("archive", 45), drDB("staging", 60)),
			outcome: Halt, reason: ReasonEntersScope,
			check: func(t *testing.T, d Decision) {
				if !strings.Contains(d.Detail, "staging.customers") {
					t.Errorf("detail %q does not name the source table", d.Detail)
				}
			}},
		{name: "drop table", ev: dropTable(50, srcOrders), state: ordersP1,
			outcome: Apply, actions: []string{"drop table sales.orders", "alter database sales"}},
		{name: "drop table: DR holds a newer incarnation", ev: dropTable(50, srcOrders),
			state:   drState(drDB("sales", 40), drTable(ordersV2, 55)),
			outcome: NoOp, reason: ReasonAlreadyApplied, actions: []string{"alter database sales"}},
		{name: "drop table already dropped", ev: dropTable(50, srcOrders), state: drState(drDB("sales", 40)),
			outcome: NoOp, reason: ReasonAlreadyApplied, actions: []string{"alter database sales"}},

		// Partitions.
		{name: "add partitions", ev: addP1P2, state: ordersState,
			outcome: Apply, actions: []string{"prune files under " + drRoot + "sales.db/orders/dt=2024-01-01 keeping 1", "prune files under " + drRoot + "sales.db/orders/dt=2024-01-02 keeping 1", "add partitions sales.orders [2024-01-01] [2024-01-02]", "alter database sales"},
			check: func(t *testing.T, d Decision) {
				ps := d.Actions[2].(AddPartitions).Parts
				if ps[0].Sd.Location != drRoot+"sales.db/orders/dt=2024-01-01" || ps[0].DbName != "sales" || ps[0].TableName != "orders" {
					t.Errorf("partition %s", js(ps[0]))
				}
			}},
		{name: "add partitions waits for pending files", ev: addP1P2, state: ordersState,
			copies:  map[string]Copy{"50-0": {Status: schemas.StatusCopied}},
			outcome: Wait, reason: ReasonWaitingForFiles, waitTasks: []string{"50-1"}},
		{name: "add partitions: source gone, nothing removes it", ev: addP1P2, state: ordersState, copies: ok0gone1,
			outcome: Wait, reason: ReasonSourceGone, waitTasks: []string{"50-1"}},
		{name: "add partitions: copy failed, nothing removes it", ev: addP1P2, state: ordersState,
			copies:  map[string]Copy{"50-0": {Status: schemas.StatusFailed, Error: "checksum mismatch"}, "50-1": {Status: schemas.StatusCopied}},
			outcome: Wait, reason: ReasonCopyFailed, waitTasks: []string{"50-0"}},
		{name: "add partitions: dropped before its files were copied", ev: addP1P2, state: ordersState, copies: ok0gone1,
			later:   []*schemas.Event{alterTable(51, srcOrders, withParam(srcOrders, "x", "y")), dropParts(52, srcOrders, srcP2)},
			outcome: Apply, actions: []string{"prune files under " + drRoot + "sales.db/orders/dt=2024-01-01 keeping 1", "add partitions sales.orders [2024-01-01]", "alter database sales"}},
		{name: "add partitions: table dropped later", ev: addP1P2, state: ordersState, copies: ok0gone1,
			later:   []*schemas.Event{dropTable(52, srcOrders)},
			outcome: Apply, actions: []string{"prune files under " + drRoot + "sales.db/orders/dt=2024-01-01 keeping 1", "add partitions sales.orders [2024-01-01]", "alter database sales"}},
		{name: "add partitions: overwritten later", ev: addP1P2, state: ordersState, copies: ok0gone1,
			later:   []*schemas.Event{insertOverwrite(52, srcOrders, &srcP2, partFile(srcP2, "c"))},
			outcome: Apply, actions: []string{"prune files under " + drRoot + "sales.db/orders/dt=2024-01-01 keeping 1", "add partitions sales.orders [2024-01-01]", "alter database sales"}},
		{name: "add partitions: truncated later", ev: addP1P2, state: ordersState, copies: ok0gone1,
			later:   []*schemas.Event{truncatePart(52, srcOrders, srcP2)},
			outcome: Apply, actions: []string{"prune files under " + drRoot + "sales.db/orders/dt=2024-01-01 keeping 1", "add partitions sales.orders [2024-01-01]", "alter database sales"}},
		{name: "add partitions: a later drop of another partition does not count", ev: addP1P2, state: ordersState, copies: ok0gone1,
			later:   []*schemas.Event{dropParts(52, srcOrders, srcP1)},
			outcome: Wait, reason: ReasonSourceGone, waitTasks: []string{"50-1"}},
		{name: "add partitions: a later event that halts hides what follows", ev: addP1P2, state: ordersState, copies: ok0gone1,
			later: []*schemas.Event{withErrors(srcEvent(51, schemas.EventAlterTable, "sales", "orders", nil),
				schemas.EventError{Kind: schemas.ErrDecode, Message: "bad"}), dropParts(52, srcOrders, srcP2)},
			outcome: Wait, reason: ReasonSourceGone},
		{name: "add partitions: all left out", ev: addParts(50, srcOrders, []schemas.Partition{srcP2}, partFile(srcP2, "b")),
			state: ordersState, copies: gone("50-0"), later: []*schemas.Event{dropParts(52, srcOrders, srcP2)},
			outcome: NoOp, reason: ReasonSuperseded, actions: []string{"alter database sales"}},
		{name: "add partitions: a table file pending", ev: addParts(50, srcOrders, []schemas.Partition{srcP1}, partFile(srcP1, "a"), srcOrders.Location+"/_metadata"),
			state: ordersState, copies: map[string]Copy{"50-0": {Status: schemas.StatusCopied}},
			outcome: Wait, reason: ReasonWaitingForFiles, waitTasks: []string{"50-1"}},
		{name: "add partitions resumed after a crash that added some",
			ev:      addP1P2,
			state:   drState(drDB("sales", 40), drTable(srcOrders, 20), drPart(srcOrders, srcP1, 50)),
			copies:  map[string]Copy{"50-1": {Status: schemas.StatusCopied}}, // 50-0's completion no longer known
			outcome: Apply, actions: []string{"prune files under " + drRoot + "sales.db/orders/dt=2024-01-02 keeping 1", "add partitions sales.orders [2024-01-02]", "alter database sales"}},
		{name: "add partitions to a missing table halts", ev: addP1P2, state: drState(drDB("sales", 40)),
			outcome: Halt, reason: ReasonMissingObject},
		{name: "add partitions already applied", ev: addP1P2,
			state:   drState(drDB("sales", 40), drTable(srcOrders, 20), drPart(srcOrders, srcP1, 50), drPart(srcOrders, srcP2, 50)),
			outcome: NoOp, reason: ReasonAlreadyApplied, actions: []string{"alter database sales"}},
		{name: "add partition outside the roots", ev: func() *schemas.Event {
			p := srcP1
			p.Location = "hdfs://other:8020/x"
			return addParts(50, srcOrders, []schemas.Partition{p})
		}(), state: ordersState, outcome: Halt, reason: ReasonPathOutsideRoots},
		{name: "alter partition", ev: alterPart(50, srcOrders, srcP1, partWithParam(srcP1, "k", "v")), state: ordersP1,
			outcome: Apply, actions: []string{"alter partitions sales.orders [2024-01-01]", "alter database sales"},
			check: func(t *testing.T, d Decision) {
				if p := d.Actions[0].(AlterPartitions).Parts[0]; p.Parameters["k"] != "v" {
					t.Errorf("parameters %v", p.Parameters)
				}
			}},
		{name: "alter partition older than it", ev: alterPart(25, srcOrders, srcP1, partWithParam(srcP1, "k", "v")),
			state:   drState(drDB("sales", 20), drTable(srcOrders, 20), drPart(srcOrders, srcP1, 30)),
			outcome: NoOp, reason: ReasonAlreadyApplied, actions: []string{"alter database sales"}},
		{name: "rename partition", ev: alterPart(50, srcOrders, srcP1, srcPart(srcOrders, "2024-02-01")), state: ordersP1,
			outcome: Apply, actions: []string{"rename partition sales.orders [2024-01-01] to [2024-02-01]", "alter database sales"}},
		{name: "alter missing partition halts", ev: alterPart(50, srcOrders, srcP2, partWithParam(srcP2, "k", "v")), state: ordersP1,
			outcome: Halt, reason: ReasonMissingObject},
		{name: "alter missing partition dropped later", ev: alterPart(50, srcOrders, srcP2, partWithParam(srcP2, "k", "v")), state: ordersP1,
			later:   []*schemas.Event{dropParts(55, srcOrders, srcP2)},
			outcome: NoOp, reason: ReasonSuperseded, actions: []string{"alter database sales"}},
		{name: "truncate partition", ev: truncatePart(50, srcOrders, srcP1), state: ordersP1,
			outcome: Apply, actions: []string{"prune files under " + drRoot + "sales.db/orders/dt=2024-01-01 keeping 0",
				"alter partitions sales.orders [2024-01-01]", "alter database sales"}},
		{name: "truncate partition left out earlier", ev: truncatePart(50, srcOrders, srcP2), state: ordersP1,
			outcome: Apply, actions: []string{"prune files under " + drRoot + "sales.db/orders/dt=2024-01-02 keeping 0",
				"add partitions sales.orders [2024-01-02]", "alter database sales"}},
		{name: "drop partitions", ev: dropParts(50, srcOrders, srcP1, srcP2), state: ordersP1,
			outcome: Apply, actions: []string{"drop partitions sales.orders [[2024-01-01]]", "alter database sales"}},
		{name: "drop partitions already dropped", ev: dropParts(50, srcOrders, srcP2), state: ordersP1,
			outcome: NoOp, reason: ReasonAlreadyApplied, actions: []string{"alter database sales"}},
		{name: "drop partitions of a dropped table", ev: dropParts(50, srcOrders, srcP1), state: drState(drDB("sales", 40)),
			outcome: NoOp, reason: ReasonAlreadyApplied, actions: []string{"alter database sales"}},

		// Inserts.
		{name: "insert into a table", ev: insertInto(50, srcCustomers, nil, srcCustomers.Location+"/000000_0"),
			state:   drState(drDB("sales", 40), drTable(srcCustomers, 20)),
			outcome: Apply, actions: []string{"alter table sales.customers", "alter database sales"},
			check: func(t *testing.T, d Decision) {
				if tb := d.Actions[0].(AlterTable).Table; tb.Sd.Location != drRoot+"sales.db/customers" || tb.Parameters["EXTERNAL"] != "TRUE" {
					t.Errorf("table %s", js(tb))
				}
			}},
		{name: "insert into a partition", ev: insertInto(50, srcOrders, &srcP1, partFile(srcP1, "c")), state: ordersP1,
			outcome: Apply, actions: []string{"alter partitions sales.orders [2024-01-01]", "alter database sales"}},
		{name: "insert waits for its files", ev: insertInto(50, srcOrders, &srcP1, partFile(srcP1, "c"), partFile(srcP1, "d")), state: ordersP1,
			copies:  map[string]Copy{},
			outcome: Wait, reason: ReasonWaitingForFiles, waitTasks: []string{"50-0", "50-1"}},
		{name: "insert overwrite a partition", ev: insertOverwrite(50, srcOrders, &srcP1, partFile(srcP1, "c")), state: ordersP1,
			outcome: Apply, actions: []string{"prune files under " + drRoot + "sales.db/orders/dt=2024-01-01 keeping 1",
				"alter partitions sales.orders [2024-01-01]", "alter database sales"},
			check: func(t *testing.T, d Decision) {
				if k := d.Actions[0].(PruneFiles).Keep; len(k) != 1 || k[0] != drRoot+"sales.db/orders/dt=2024-01-01/c" {
					t.Errorf("keep %v", k)
				}
			}},
		{name: "insert overwrite a table", ev: insertOverwrite(50, srcCustomers, nil, srcCustomers.Location+"/000000_0"),
			state:   drState(drDB("sales", 40), drTable(srcCustomers, 20)),
			outcome: Apply, actions: []string{"prune files under " + drRoot + "sales.db/customers keeping 1",
				"alter table sales.customers", "alter database sales"},
			check: func(t *testing.T, d Decision) {
				if pf := d.Actions[0].(PruneFiles); pf.Source != srcCustomers.Location {
					t.Errorf("prune's source directory %q, want the table's source location %q", pf.Source, srcCustomers.Location)
				}
			}},
		{name: "insert older than the partition", ev: insertInto(25, srcOrders, &srcP1, partFile(srcP1, "c")),
			state:   drState(drDB("sales", 20), drTable(srcOrders, 20), drPart(srcOrders, srcP1, 30)),
			outcome: NoOp, reason: ReasonAlreadyApplied, actions: []string{"alter database sales"}},
		{name: "insert: source gone, overwritten later", ev: insertInto(50, srcOrders, &srcP1, partFile(srcP1, "c")), state: ordersP1,
			copies: gone("50-0"), later: []*schemas.Event{insertOverwrite(53, srcOrders, &srcP1, partFile(srcP1, "d"))},
			outcome: NoOp, reason: ReasonSuperseded, actions: []string{"alter database sales"}},
		{name: "insert overwrite: source gone, partition dropped later: what it replaced is pruned",
			ev: insertOverwrite(50, srcOrders, &srcP1, partFile(srcP1, "c"), partFile(srcP1, "d")), state: ordersP1,
			copies:  map[string]Copy{"50-0": {Status: schemas.StatusCopied, TargetURI: drPath(partFile(srcP1, "c"))}, "50-1": {Status: schemas.StatusSourceGone}},
			later:   []*schemas.Event{dropParts(53, srcOrders, srcP1)},
			outcome: NoOp, reason: ReasonSuperseded,
			actions: []string{"prune files under " + drRoot + "sales.db/orders/dt=2024-01-01 keeping 1", "alter database sales"},
			check: func(t *testing.T, d Decision) {
				if k := d.Actions[0].(PruneFiles).Keep; len(k) != 1 || k[0] != drRoot+"sales.db/orders/dt=2024-01-01/c" {
					t.Errorf("keep %v, want the copied file only", k)
				}
			}},
		{name: "insert overwrite of a table: source gone, dropped later: what it replaced is pruned",
			ev:    insertOverwrite(50, srcCustomers, nil, srcCustomers.Location+"/000000_0"),
			state: drState(drDB("sales", 40), drTable(srcCustomers, 20)), copies: gone("50-0"),
			later:   []*schemas.Event{dropTable(53, srcCustomers)},
			outcome: NoOp, reason: ReasonSuperseded,
			actions: []string{"prune files under " + drRoot + "sales.db/customers keeping 0", "alter database sales"}},
		{name: "insert: source gone, overwritten later, prunes nothing", ev: insertInto(50, srcOrders, &srcP1, partFile(srcP1, "c")), state: ordersP1,
			copies: gone("50-0"), later: []*schemas.Event{dropParts(53, srcOrders, srcP1)},
			outcome: NoOp, reason: ReasonSuperseded, actions: []string{"alter database sales"}},
		{name: "insert: source gone, table renamed, then overwritten", ev: insertInto(50, srcOrders, &srcP1, partFile(srcP1, "c")), state: ordersP1,
			copies: gone("50-0"), later: []*schemas.Event{alterTable(51, srcOrders, renamedTo(srcOrders, "sales", "orders2")),
				insertOverwrite(53, renamedTo(srcOrders, "sales", "orders2"), &srcP1, partFile(srcP1, "d"))},
			outcome: NoOp, reason: ReasonSuperseded, actions: []string{"alter database sales"}},
		{name: "insert: source gone, table renamed away, a new one overwritten", ev: insertInto(50, srcOrders, &srcP1, partFile(srcP1, "c")), state: ordersP1,
			copies: gone("50-0"), later: []*schemas.Event{alterTable(51, srcOrders, renamedTo(srcOrders, "sales", "orders2")),
				insertOverwrite(53, srcOrders, &srcP1, partFile(srcP1, "d"))},
			outcome: Wait, reason: ReasonSourceGone, waitTasks: []string{"50-0"}},
		{name: "rename of a table left out, its new name overwritten later", ev: alterTable(51, srcCustomers, renamedTo(srcCustomers, "sales", "clients")),
			state: drState(drDB("sales", 40)), later: []*schemas.Event{insertOverwrite(53, renamedTo(srcCustomers, "sales", "clients"), nil, srcCustomers.Location+"/000000_0")},
			outcome: NoOp, reason: ReasonSuperseded, actions: []string{"alter database sales"}},
		{name: "rename of a missing table, nothing removes it, halts", ev: alterTable(51, srcCustomers, renamedTo(srcCustomers, "sales", "clients")),
			state: drState(drDB("sales", 40)), outcome: Halt, reason: ReasonMissingObject},
		{name: "insert: source gone, nothing removes it", ev: insertInto(50, srcOrders, &srcP1, partFile(srcP1, "c")), state: ordersP1,
			copies: gone("50-0"), outcome: Wait, reason: ReasonSourceGone, waitTasks: []string{"50-0"}},
		{name: "insert into a missing partition halts", ev: insertInto(50, srcOrders, &srcP2, partFile(srcP2, "c")), state: ordersP1,
			outcome: Halt, reason: ReasonMissingObject},
		{name: "insert overwrite a partition left out earlier", ev: insertOverwrite(50, srcOrders, &srcP2, partFile(srcP2, "c")), state: ordersP1,
			outcome: Apply, actions: []string{"prune files under " + drRoot + "sales.db/orders/dt=2024-01-02 keeping 1",
				"add partitions sales.orders [2024-01-02]", "alter database sales"}},
		{name: "insert overwrite a table left out earlier", ev: insertOverwrite(50, srcCustomers, nil, srcCustomers.Location+"/000000_0"),
			state:   drState(drDB("sales", 40)),
			outcome: Apply, actions: []string{"prune files under " + drRoot + "sales.db/customers keeping 1",
				"create table sales.customers", "alter database sales"}},

		// A table stamped after the event is a later incarnation (renamed in
		// from another database by that database's worker): the event's
		// partitions and inserts belong to the earlier one.
		{name: "add partitions to a later incarnation", ev: addP1P2,
			state:   drState(drDB("sales", 40), drTable(ordersV2, 60)),
			outcome: NoOp, reason: ReasonAlreadyApplied, actions: []string{"alter database sales"}},
		{name: "drop partitions of a later incarnation", ev: dropParts(50, srcOrders, srcP1),
			state:   drState(drDB("sales", 40), drTable(ordersV2, 60), drPart(ordersV2, srcPart(ordersV2, "2024-01-01"), 20)),
			outcome: NoOp, reason: ReasonAlreadyApplied, actions: []string{"alter database sales"}},
		{name: "insert overwrite into a later incarnation", ev: insertOverwrite(50, srcOrders, &srcP1, partFile(srcP1, "c")),
			state:   drState(drDB("sales", 40), drTable(ordersV2, 60), drPart(ordersV2, srcPart(ordersV2, "2024-01-01"), 20)),
			outcome: NoOp, reason: ReasonAlreadyApplied, actions: []string{"alter database sales"}},

		// An Iceberg commit: DR's pointer moves only once the files of the
		// new snapshot and the new metadata are copied, and then names
		// DR's metadata files.
		{name: "an Iceberg commit waits for its files", ev: iceCommit, copies: map[string]Copy{},
			state:   iceAtV1,
			outcome: Wait, reason: ReasonWaitingForFiles, waitTasks: []string{"50-0", "50-1"}},
		{name: "an Iceberg commit flips DR's pointer to DR's metadata", ev: iceCommit,
			state:   iceAtV1,
			outcome: Apply, actions: []string{"remove the files of expired Iceberg snapshots of sales.ice (" + drPath(iceV1.Parameters["metadata_location"]) +
				" -> " + drPath(iceV2.Parameters["metadata_location"]) + ")", "alter table sales.ice", "alter database sales"},
			check: func(t *testing.T, d Decision) {
				if x := d.Actions[0].(ExpireIceberg); x.Root != drPath(srcRoot+"sales.db/ice") || x.EventID != 50 {
					t.Errorf("the expiry's table location %q, event %d", x.Root, x.EventID)
				}
				p := d.Actions[1].(AlterTable).Table.Parameters
				if p["metadata_location"] != drPath(iceV2.Parameters["metadata_location"]) ||
					p["previous_metadata_location"] != drPath(iceV1.Parameters["metadata_location"]) {
					t.Errorf("DR's pointers %q, %q; want the DR paths of the source's", p["metadata_location"], p["previous_metadata_location"])
				}
			}},
		{name: "an Iceberg table's change that keeps its pointer removes nothing", ev: alterTable(50, iceV1, withParam(iceV1, "comment", "x")),
			state:   iceAtV1,
			outcome: Apply, actions: []string{"alter table sales.ice", "alter database sales"}},
		{name: "an Iceberg commit whose file could not be copied waits", ev: iceCommit,
			copies:  map[string]Copy{"50-0": {Status: schemas.StatusCopied}, "50-1": {Status: schemas.StatusFailed, Error: "rewrite: outside the mappings"}},
			state:   iceAtV1,
			outcome: Wait, reason: ReasonCopyFailed, waitTasks: []string{"50-1"}},
		{name: "an Iceberg commit on top of a pointer DR does not have halts", ev: iceCommit,
			state:   drIce(drPath(srcRoot + "sales.db/ice/metadata/00000-z.metadata.json")),
			outcome: Halt, reason: ReasonIcebergChain,
			check: func(t *testing.T, d Decision) {
				if !strings.Contains(d.Detail, "00000-z.metadata.json") || !strings.Contains(d.Detail, "00001-a.metadata.json") {
					t.Errorf("detail %q does not name both pointers", d.Detail)
				}
			}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			in := Input{DB: c.db, Source: "src", Event: c.ev, Replica: c.state, Copies: c.copies,
				Later: c.later, Skip: c.skip, Policy: c.policy}
			if in.DB == "" {
				in.DB = "sales"
			}
			if in.Copies == nil {
				in.Copies = copied(c.ev)
			}
			if in.Policy == nil {
				in.Policy = testPolicy{}
			}
			d := planChecked(t, in)
			if d.Outcome != c.outcome || (c.reason != "" && d.Reason != c.reason) {
				t.Fatalf("decision %s %s (%s), want %s %s", d.Outcome, d.Reason, d.Detail, c.outcome, c.reason)
			}
			if got := actionNames(d.Actions); !slices.Equal(got, c.actions) {
				t.Fatalf("actions\n  %q\nwant\n  %q", got, c.actions)
			}
			if !slices.Equal(d.WaitTasks, c.waitTasks) && c.waitTasks != nil {
				t.Errorf("wait tasks %v, want %v", d.WaitTasks, c.waitTasks)
			}
			if d.WaitDB != c.waitDB {
				t.Errorf("wait database %q, want %q", d.WaitDB, c.waitDB)
			}
			if c.check != nil {
				c.check(t, d)
			}
		})
	}
}

// TestPlanStampsTheWatermark checks the database's repl.last.id action
// itself, on an applied event and on a no-op: the DR database's other
// parameters survive, the halt note goes.
func TestPlanStampsTheWatermark(t *testing.T) {
	db := drDB("sales", 40)
	db.Parameters[drparam.Halted] = "event 49 ...: copy_failed"
	db.Parameters[drparam.SkippedPrefix+"12"] = "requested by ops"
	for _, ev := range []*schemas.Event{createTable(50, srcOrders), srcEvent(50, schemas.EventCreateFunction, "sales", "", nil)} {
		d := planChecked(t, Input{DB: "sales", Source: "src", Event: ev, Replica: drState(db), Policy: testPolicy{}})
		w, ok := d.Actions[len(d.Actions)-1].(AlterDatabase)
		if !ok {
			t.Fatalf("%s: last action %v", ev.EventType, actionNames(d.Actions))
		}
		p := w.DB.Parameters
		if p[drparam.LastID] != "50" || p[drparam.Target] != "hivedr:src" || p["owner.team"] != "sales" ||
			p[drparam.SkippedPrefix+"12"] == "" || p[drparam.Halted] != "" || w.DB.LocationUri != db.LocationUri {
			t.Errorf("%s: watermark %s", ev.EventType, js(w.DB))
		}
	}
	if db.Parameters[drparam.LastID] != "40" {
		t.Error("the watermark changed the input database")
	}
}

// ---- an in-memory DR metastore

// memMS applies actions as the DR metastore would, strictly: creating
// what exists or changing what does not is an error, so a plan that
// relies on the executor forgiving it fails here. It also keeps the DR
// data files (path → ID of the event whose copy wrote it).
type memMS struct {
	dbs    map[string]*hms.Database
	tables map[TableKey]*hms.Table
	parts  map[PartKey]*hms.Partition
	files  map[string]int64
	// writeIDs is each table's write ID state, as get_valid_write_ids
	// would tell it: "open", "committed" or "aborted".
	writeIDs map[string]string
	// open maps "policy/source txn" to the "db.table/writeID" keys of
	// writeIDs its DR transaction allocated.
	open map[string][]string
	// next is each table's NEXT_WRITE_ID by "db.table" (absent: no row),
	// and forgotten the writeIDs keys a reset of their table took away
	// (acid_bootstrap_test.go).
	next      map[string]int64
	forgotten map[string]bool
}

func newMemMS() *memMS {
	return &memMS{dbs: map[string]*hms.Database{}, tables: map[TableKey]*hms.Table{},
		parts: map[PartKey]*hms.Partition{}, files: map[string]int64{},
		writeIDs: map[string]string{}, open: map[string][]string{}, next: map[string]int64{}, forgotten: map[string]bool{}}
}

// clone copies the maps; the objects are shared, since neither Plan nor
// apply changes an object in place.
func (m *memMS) clone() *memMS {
	n := newMemMS()
	for k, v := range m.dbs {
		n.dbs[k] = v
	}
	for k, v := range m.tables {
		n.tables[k] = v
	}
	for k, v := range m.parts {
		n.parts[k] = v
	}
	for k, v := range m.files {
		n.files[k] = v
	}
	for k, v := range m.writeIDs {
		n.writeIDs[k] = v
	}
	for k, v := range m.open {
		n.open[k] = v
	}
	for k, v := range m.next {
		n.next[k] = v
	}
	for k, v := range m.forgotten {
		n.forgotten[k] = v
	}
	return n
}

func (m *memMS) dump() string {
	var lines []string
	for k, v := range m.dbs {
		lines = append(lines, "db "+k+" "+js(v))
	}
	for k, v := range m.tables {
		lines = append(lines, "table "+k.String()+" "+js(v))
	}
	for k, v := range m.parts {
		lines = append(lines, "part "+k.String()+" "+js(v))
	}
	for k, v := range m.files {
		lines = append(lines, fmt.Sprintf("file %s %d", k, v))
	}
	for k, v := range m.writeIDs {
		lines = append(lines, "writeid "+k+" "+v)
	}
	for k := range m.open {
		lines = append(lines, "open txn "+k)
	}
	for k, v := range m.next {
		lines = append(lines, fmt.Sprintf("next write id %s %d", k, v))
	}
	sort.Strings(lines)
	return strings.Join(lines, "\n")
}

// view is what the worker reads for evs: the objects Touches names.
func (m *memMS) view(db string, evs ...*schemas.Event) Replica {
	r := drState()
	tch := schemas.Touches(db, evs[0])
	for _, ev := range evs[1:] {
		tch.Merge(schemas.Touches(db, ev))
	}
	for _, d := range tch.Databases {
		if v := m.dbs[d]; v != nil {
			r.Databases[d] = v
		}
	}
	for _, k := range tch.Tables {
		if v := m.tables[k]; v != nil {
			r.Tables[k] = v
		}
	}
	for _, k := range tch.Partitions {
		if v := m.parts[k]; v != nil {
			r.Partitions[k] = v
		}
	}
	return r
}

func (m *memMS) apply(a Action) error {
	switch a := a.(type) {
	case CreateDatabase:
		k := strings.ToLower(a.DB.Name)
		if m.dbs[k] != nil {
			return fmt.Errorf("database %s exists", k)
		}
		m.dbs[k] = a.DB
	case AlterDatabase:
		if m.dbs[a.Name] == nil || a.DB.Name != a.Name {
			return fmt.Errorf("alter database %s (%s): no such database", a.Name, a.DB.Name)
		}
		m.dbs[a.Name] = a.DB
	case DropDatabase:
		if m.dbs[a.Name] == nil {
			return fmt.Errorf("drop database %s: no such database", a.Name)
		}
		delete(m.dbs, a.Name)
		for k := range m.tables {
			if k.DB == a.Name {
				m.dropTable(k)
			}
		}
	case CreateTable:
		k := tableKey(a.Table.DbName, a.Table.TableName)
		if m.dbs[k.DB] == nil {
			return fmt.Errorf("create table %s: no such database", k)
		}
		if m.tables[k] != nil {
			return fmt.Errorf("create table %s: exists", k)
		}
		m.tables[k] = a.Table
	case AlterTable:
		k, nk := tableKey(a.DB, a.Name), tableKey(a.Table.DbName, a.Table.TableName)
		if m.tables[k] == nil {
			return fmt.Errorf("alter table %s: no such table", k)
		}
		if nk != k {
			if m.dbs[nk.DB] == nil {
				return fmt.Errorf("rename %s to %s: no such database", k, nk)
			}
			if m.tables[nk] != nil {
				return fmt.Errorf("rename %s to %s: exists", k, nk)
			}
			delete(m.tables, k)
			for pk, p := range m.parts {
				if pk.TableKey == k {
					np := *p
					np.DbName, np.TableName = nk.DB, nk.Name
					delete(m.parts, pk)
					m.parts[PartKey{TableKey: nk, Values: pk.Values}] = &np
				}
			}
		}
		m.tables[nk] = a.Table
	case DropTable:
		k := tableKey(a.DB, a.Name)
		if m.tables[k] == nil {
			return fmt.Errorf("drop table %s: no such table", k)
		}
		if acid.Transactional(m.tables[k].Parameters) {
			m.forgetWriteIDs(k) // (the executor's dropTable)
		}
		m.dropTable(k)
	case SetWriteIDs, ResetWriteIDs:
		return m.applyWriteIDs(a)
	case AddPartitions:
		tk := tableKey(a.DB, a.Table)
		if m.tables[tk] == nil {
			return fmt.Errorf("add partitions: no table %s", tk)
		}
		for _, p := range a.Parts {
			pk := partKey(tk, p.Values)
			if m.parts[pk] != nil {
				return fmt.Errorf("add partition %s: exists", pk)
			}
			if len(p.Values) != len(m.tables[tk].PartitionKeys) {
				return fmt.Errorf("add partition %s: %d values for %d keys", pk, len(p.Values), len(m.tables[tk].PartitionKeys))
			}
			m.parts[pk] = p
		}
	case AlterPartitions:
		tk := tableKey(a.DB, a.Table)
		for _, p := range a.Parts {
			pk := partKey(tk, p.Values)
			if m.parts[pk] == nil {
				return fmt.Errorf("alter partition %s: no such partition", pk)
			}
			m.parts[pk] = p
		}
	case RenamePartition:
		tk := tableKey(a.DB, a.Table)
		old, nk := partKey(tk, a.Values), partKey(tk, a.Part.Values)
		if m.parts[old] == nil || m.parts[nk] != nil {
			return fmt.Errorf("rename partition %s to %s: missing or target exists", old, nk)
		}
		delete(m.parts, old)
		m.parts[nk] = a.Part
	case DropPartitions:
		tk := tableKey(a.DB, a.Table)
		for _, v := range a.Values {
			pk := partKey(tk, v)
			if m.parts[pk] == nil {
				return fmt.Errorf("drop partition %s: no such partition", pk)
			}
			delete(m.parts, pk)
		}
	case PruneFiles:
		// As the executor: files under Dir at any depth, not kept, and
		// not written by a later event's copy.
		for f, e := range m.files {
			if strings.HasPrefix(f, strings.TrimSuffix(a.Dir, "/")+"/") && !slices.Contains(a.Keep, f) && e <= a.EventID {
				delete(m.files, f)
			}
		}
	case ReplAllocate:
		// As the metastore: the source transaction's DR transaction is
		// opened once; a write ID is allocated once.
		if err := m.allocNext(a); err != nil {
			return err
		}
		for _, t := range a.Txns {
			key := fmt.Sprintf("%s/%d", a.Policy, t.TxnID)
			wk := fmt.Sprintf("%s.%s/%d", a.DB, a.Table, t.WriteID)
			if m.writeIDs[wk] != "" && !slices.Contains(m.open[key], wk) {
				return fmt.Errorf("%s: write id %s is taken (%s)", a, wk, m.writeIDs[wk])
			}
			if !slices.Contains(m.open[key], wk) {
				m.open[key] = append(m.open[key], wk)
			}
			m.writeIDs[wk] = "open"
		}
	case ReplCommit, ReplAbort:
		state, key := "committed", ""
		if c, ok := a.(ReplCommit); ok {
			key = fmt.Sprintf("%s/%d", c.Policy, c.SrcTxn)
			if _, open := m.open[key]; !open {
				return m.commitNoTxn(c) // acid_bootstrap_test.go
			}
			for _, w := range c.Writes {
				wk := fmt.Sprintf("%s.%s/%d", w.Database, w.Table, w.WriteId)
				if (m.writeIDs[wk] != "open" && !m.forgotten[wk]) || !slices.Contains(m.open[key], wk) {
					return fmt.Errorf("%s: write %s is not open in it (%q)", a, wk, m.writeIDs[wk])
				}
			}
		} else {
			r := a.(ReplAbort)
			state, key = "aborted", fmt.Sprintf("%s/%d", r.Policy, r.SrcTxn)
		}
		for _, wk := range m.open[key] { // a transaction no longer open: a no-op
			if m.writeIDs[wk] == "open" { // (not one its table's reset took away)
				m.writeIDs[wk] = state
			}
		}
		delete(m.open, key)
	case PruneObsolete:
		if m.baseUnread(a.Table, a.Base) {
			return nil // as the executor: the deltas stay
		}
		for f := range m.files {
			rel, ok := strings.CutPrefix(f, strings.TrimSuffix(a.Dir, "/")+"/")
			if top, _, nested := strings.Cut(rel, "/"); ok && nested && acid.Obsolete(top, a.Base) {
				delete(m.files, f)
			}
		}
	case PublishCompacted:
		// As the executor: a rename of the staged directory, unless the
		// final one is there (then the staged copy goes).
		final, staged := map[string]int64{}, map[string]int64{}
		for f, e := range m.files {
			if strings.HasPrefix(f, a.Final+"/") {
				final[f] = e
			}
			if strings.HasPrefix(f, a.Staging+"/") {
				staged[f] = e
			}
		}
		if len(final) == 0 && len(staged) == 0 {
			return fmt.Errorf("%s: nothing staged", a)
		}
		for f, e := range staged {
			delete(m.files, f)
			if len(final) == 0 {
				m.files[a.Final+strings.TrimPrefix(f, a.Staging)] = e
			}
		}
	case PruneCompacted:
		by, _ := acid.ParseDir(a.By)
		if by.Kind == acid.Base && m.baseUnread(a.Table, by.Max) {
			return nil // not read on DR yet: the deltas stay
		}
		for f := range m.files {
			rel, ok := strings.CutPrefix(f, strings.TrimSuffix(a.Dir, "/")+"/")
			if top, _, nested := strings.Cut(rel, "/"); ok && nested && acid.ObsoleteAfter(top, by) {
				delete(m.files, f)
			}
		}
	default:
		return fmt.Errorf("unknown action %T", a)
	}
	return nil
}

// baseUnread reports whether a DR reader of table cannot read a base of
// write ID max yet: a write ID up to it is open (executor.baseRead).
func (m *memMS) baseUnread(table string, max int64) bool {
	for wk, st := range m.writeIDs {
		t, id, _ := strings.Cut(wk, "/")
		if n, _ := strconv.ParseInt(id, 10, 64); t == table && st == "open" && n <= max {
			return true
		}
	}
	return false
}

func (m *memMS) dropTable(k TableKey) {
	delete(m.tables, k)
	for pk := range m.parts {
		if pk.TableKey == k {
			delete(m.parts, pk)
		}
	}
}

// ---- running event sequences

// copyOutcomes says how each file's copy ended (absent: copied).
type copyOutcomes map[string]schemas.CopyStatus

func (c copyOutcomes) of(ev *schemas.Event) map[string]Copy {
	m := map[string]Copy{}
	for _, f := range ev.Files {
		st := schemas.StatusCopied
		if s, ok := c[f.TaskID]; ok {
			st = s
		}
		m[f.TaskID] = Copy{Status: st, TargetURI: copyTarget(ev, f), Error: "test"}
	}
	return m
}

// copyTarget is where the tailer's copy task of f writes on DR: its
// mapped location, under its directory's staging name for a compaction.
func copyTarget(ev *schemas.Event, f schemas.FileRef) string {
	t := drPath(f.URI)
	if _, ok := ev.Payload.(*schemas.Compaction); ok && f.Subdir != "" {
		t = strings.Replace(t, "/"+f.Subdir+"/", "/"+acid.StagingName(f.Subdir)+"/", 1)
	}
	return t
}

// copyAhead puts on the DR cluster every file the events' successful
// copies wrote: copies run ahead of the metadata.
func (m *memMS) copyAhead(evs []*schemas.Event, c copyOutcomes) {
	for _, ev := range evs {
		for _, cp := range c.of(ev) {
			if cp.OK() {
				m.files[cp.TargetURI] = ev.EventID
			}
		}
	}
}

type planStep struct {
	d   Decision
	pre *memMS // the state the event was planned on
	pos int    // the worker's position before the step
}

// seqWorker is one database's ordered worker over its topic. Consecutive
// bootstrap partition records of one table are planned as one batch of up
// to batch records (default 1000), and consecutive events that may join a
// run (RunKey) as one run of up to batch partitions, as the runtime
// worker does; batch 1 plans every record alone.
type seqWorker struct {
	db     string
	events []*schemas.Event
	pos    int
	batch  int
}

// next returns the records the worker's next step plans: the event at
// pos, with the partition records of its batch or the events of its run.
func (w *seqWorker) next() []*schemas.Event {
	evs := w.events[w.pos : w.pos+1]
	max := w.batch
	if max == 0 {
		max = 1000
	}
	if key, ok := partitionBatchKey(evs[0]); ok {
		for len(evs) < max && w.pos+len(evs) < len(w.events) {
			if k, ok := partitionBatchKey(w.events[w.pos+len(evs)]); !ok || k != key {
				break
			}
			evs = w.events[w.pos : w.pos+len(evs)+1]
		}
		return evs
	}
	_, n, ok := RunKey(w.db, evs[0])
	for ok && max > 1 && w.pos+len(evs) < len(w.events) {
		_, m, ok := RunKey(w.db, w.events[w.pos+len(evs)])
		if !ok || n+m > max {
			break
		}
		n, evs = n+m, w.events[w.pos:w.pos+len(evs)+1]
	}
	return evs
}

// stepOnce plans the worker's next event and runs the decision's actions
// as the worker does (those of a wait too: the destination's mark of a
// cross-database rename); the worker moves on after an apply or a no-op.
func stepOnce(t *testing.T, ms *memMS, w *seqWorker, c copyOutcomes, pol Policy) planStep {
	t.Helper()
	evs := w.next()
	ev := evs[0]
	pre := ms.clone()
	copies := map[string]Copy{}
	for _, e := range evs {
		for k, v := range c.of(e) {
			copies[k] = v
		}
	}
	in := Input{DB: w.db, Source: "src", Event: ev, Batch: evs[1:], Replica: ms.view(w.db, evs...), Copies: copies,
		Later: w.events[w.pos+len(evs):], Policy: pol}
	in.WriteIDs = ms.writeIDsOf(WriteIDScope(w.db, ev, in.Replica))
	if tables, all, ok := InventoryScope(ev, in.Replica.Databases[strings.ToLower(w.db)]); ok {
		in.Inventory = ms.inventory(strings.ToLower(w.db), ev.Snapshot.BootstrapID, tables, all)
	}
	d := planChecked(t, in)
	if d.Outcome == Halt {
		t.Fatalf("%s event %d %s halts: %s: %s\nstate:\n%s", w.db, ev.EventID, ev.EventType, d.Reason, d.Detail, pre.dump())
	}
	for _, a := range d.Actions {
		if err := ms.apply(a); err != nil {
			t.Fatalf("%s event %d %s: %s: %v\nstate:\n%s", w.db, ev.EventID, ev.EventType, a, err, pre.dump())
		}
	}
	pos := w.pos
	if d.Outcome == Apply || d.Outcome == NoOp {
		w.pos += 1 + d.Covered
	}
	return planStep{d, pre, pos}
}

// runAll runs the workers to the end of their topics, each as far as it
// can before the next (a cross-database wait passes the turn). A wait
// that changed the replica (the destination's mark) counts as progress;
// a round in which nothing moves is a deadlock.
func runAll(t *testing.T, ms *memMS, ws []*seqWorker, c copyOutcomes, pol Policy) {
	t.Helper()
	for {
		progress, done := false, true
		for _, w := range ws {
			for w.pos < len(w.events) {
				s := stepOnce(t, ms, w, c, pol)
				if s.d.Outcome == Wait {
					if s.d.Reason != ReasonCrossDatabase {
						t.Fatalf("%s event %d waits: %s %s", w.db, w.events[w.pos].EventID, s.d.Reason, s.d.Detail)
					}
					if len(s.d.Actions) > 0 && ms.dump() != s.pre.dump() {
						progress = true
					}
					break
				}
				progress = true
			}
			done = done && w.pos == len(w.events)
		}
		if done {
			return
		}
		if !progress {
			t.Fatal("no worker can move")
		}
	}
}

func diffStates(want, got string) string {
	wl, gl := strings.Split(want, "\n"), strings.Split(got, "\n")
	var b strings.Builder
	for _, l := range wl {
		if !slices.Contains(gl, l) {
			b.WriteString("- " + l + "\n")
		}
	}
	for _, l := range gl {
		if !slices.Contains(wl, l) {
			b.WriteString("+ " + l + "\n")
		}
	}
	return b.String()
}

// checkConverges runs a single database's events from an empty replica,
// then checks that the same final state is reached by re-running every
// suffix against it, by running everything again from an empty replica,
// and by resuming at every event after a crash after any prefix of its
// actions. It returns the final state.
func checkConverges(t *testing.T, db string, evs []*schemas.Event, c copyOutcomes) *memMS {
	t.Helper()
	pol := testPolicy{}
	ms := newMemMS()
	ms.copyAhead(evs, c)
	w := &seqWorker{db: db, events: evs}
	var steps []planStep
	for w.pos < len(evs) {
		s := stepOnce(t, ms, w, c, pol)
		if s.d.Outcome != Apply && s.d.Outcome != NoOp {
			t.Fatalf("event %d: %s %s %s", evs[w.pos].EventID, s.d.Outcome, s.d.Reason, s.d.Detail)
		}
		steps = append(steps, s)
	}
	final := ms.dump()

	t.Run("suffix re-drive", func(t *testing.T) {
		for i := range evs {
			got := ms.clone()
			runAll(t, got, []*seqWorker{{db: db, events: evs, pos: i}}, c, pol)
			if d := diffStates(final, got.dump()); d != "" {
				t.Fatalf("re-drive from event %d changed the replica:\n%s", evs[i].EventID, d)
			}
		}
	})
	t.Run("from empty", func(t *testing.T) {
		got := newMemMS()
		got.copyAhead(evs, c)
		runAll(t, got, []*seqWorker{{db: db, events: evs}}, c, pol)
		if d := diffStates(final, got.dump()); d != "" {
			t.Fatalf("second run differs:\n%s", d)
		}
	})
	t.Run("one by one", func(t *testing.T) {
		// Runs and batches end where the events one at a time end.
		got := newMemMS()
		got.copyAhead(evs, c)
		runAll(t, got, []*seqWorker{{db: db, events: evs, batch: 1}}, c, pol)
		if d := diffStates(final, got.dump()); d != "" {
			t.Fatalf("planned one event at a time, the replica differs:\n%s", d)
		}
	})
	t.Run("crash and resume", func(t *testing.T) {
		// A crash after any prefix of a step's actions, then a restart at
		// the step's first event (where the committed offset is), or a
		// re-drive from any earlier event (an operator's reset): the
		// watermark may be stale over objects the step wrote.
		for _, s := range steps {
			for k := 0; k < len(s.d.Actions); k++ {
				crashed := s.pre.clone()
				for _, a := range s.d.Actions[:k] {
					if err := crashed.apply(a); err != nil {
						t.Fatal(err)
					}
				}
				for from := s.pos; from >= 0; from-- {
					got := crashed.clone()
					runAll(t, got, []*seqWorker{{db: db, events: evs, pos: from}}, c, pol)
					if d := diffStates(final, got.dump()); d != "" {
						t.Fatalf("crash in event %d (%s) after %d of %v, resumed at event %d: the replica differs:\n%s",
							evs[s.pos].EventID, evs[s.pos].EventType, k, actionNames(s.d.Actions), evs[from].EventID, d)
					}
				}
			}
		}
	})
	return ms
}

// TestPlanConverges runs a database's history through Plan with every copy
// done: the replica is what the source ended with, and re-drive from any
// event, a second run, or a crash anywhere all end in the same replica.
func TestPlanConverges(t *testing.T) {
	ordersV2 := srcTable("sales", "orders", []string{"region"}, "id bigint", "total double")
	old := srcTable("sales", "old", nil, "x int")
	clients := renamedTo(srcCustomers, "sales", "clients")
	archiveT := renamedTo(clients, "sales", "old")
	eu, emea := srcPart(ordersV2, "eu"), srcPart(ordersV2, "emea")
	evs := []*schemas.Event{
		createDB(10, "sales"),
		createTable(11, srcOrders),
		addParts(12, srcOrders, []schemas.Partition{srcP1, srcP2}, partFile(srcP1, "a"), partFile(srcP2, "b")),
		insertInto(13, srcOrders, &srcP1, partFile(srcP1, "c")),
		insertOverwrite(14, srcOrders, &srcP2, partFile(srcP2, "d")),
		alterTable(15, srcOrders, withParam(srcOrders, "comment", "v2")),
		createTable(16, srcCustomers),
		insertInto(17, srcCustomers, nil, srcCustomers.Location+"/x"),
		alterTable(18, srcCustomers, clients),
		alterPart(19, srcOrders, srcP1, partWithParam(srcP1, "k", "v")),
		srcEvent(20, schemas.EventUpdateTableColStat, "sales", "orders", &schemas.ColumnStats{Database: "sales", Table: "orders"}),
		truncateTable(21, clients),
		insertInto(22, clients, nil, srcCustomers.Location+"/y"),
		dropParts(23, srcOrders, srcP2),
		dropTable(24, srcOrders),
		createTable(25, ordersV2),
		addParts(26, ordersV2, []schemas.Partition{eu}, partFile(eu, "e")),
		alterPart(27, ordersV2, eu, emea),
		createTable(28, old),
		dropTable(29, old),
		alterTable(30, clients, archiveT),
		alterDB(31, "sales", map[string]string{"owner.team": "sales", "retention.days": "30"}),
		srcEvent(32, schemas.EventAbortTxn, "sales", "", &schemas.Transaction{TxnIDs: []int64{4}}),
	}
	ms := checkConverges(t, "sales", evs, nil)

	// What the source ended with.
	db := ms.dbs["sales"]
	if db == nil || db.Parameters[drparam.LastID] != "32" || db.Parameters["retention.days"] != "30" || db.Parameters[drparam.Target] == "" {
		t.Fatalf("database %s", js(db))
	}
	var tables []string
	for k := range ms.tables {
		tables = append(tables, k.String())
	}
	sort.Strings(tables)
	if !slices.Equal(tables, []string{"sales.old", "sales.orders"}) {
		t.Fatalf("tables %v", tables)
	}
	o := ms.tables[TableKey{DB: "sales", Name: "orders"}]
	if o.PartitionKeys[0].Name != "region" || o.Sd.Cols[1].Name != "total" || o.Parameters["comment"] != "" {
		t.Errorf("orders is not the new incarnation: %s", js(o))
	}
	if o := ms.tables[TableKey{DB: "sales", Name: "old"}]; len(o.Sd.Cols) != 2 || o.Sd.Location != drRoot+"sales.db/customers" {
		t.Errorf("sales.old is not the renamed srcCustomers: %s", js(o))
	}
	var parts []string
	for k := range ms.parts {
		parts = append(parts, k.String())
	}
	if !slices.Equal(parts, []string{"sales.orders partition [emea]"}) {
		t.Errorf("partitions %v", parts)
	}
	var files []string
	for f := range ms.files {
		files = append(files, strings.TrimPrefix(f, drRoot))
	}
	sort.Strings(files)
	// b was overwritten by d, x was truncated; orders made again at its
	// old location (event 25) starts from the files its event names, none
	// (a drop of an external table leaves its files, and the executor's
	// prune keeps those the source directory still holds: no source here).
	want := []string{"sales.db/customers/y", "sales.db/orders/region=eu/e"}
	if !slices.Equal(files, want) {
		t.Errorf("files\n  %v\nwant\n  %v", files, want)
	}
}

// TestPlanCompactionsConverge: transactional writes, then a major
// compaction, more writes and a minor one, through the crash and re-drive
// checks: DR ends with the compactions' output under their replica names
// and without what they made obsolete, and a re-drive never resurrects a
// delta or loses a base.
func TestPlanCompactionsConverge(t *testing.T) {
	loc := srcCustomers.Location
	write := func(id, txn, writeID int64) []*schemas.Event {
		dir := fmt.Sprintf("delta_%07d_%07d_0000", writeID, writeID)
		return []*schemas.Event{
			srcEvent(id, schemas.EventAllocWriteID, "sales", "customers", &schemas.WriteIDAllocation{Database: "sales", Table: "customers",
				Allocations: []schemas.TxnWriteID{{TxnID: txn, WriteID: writeID}}}),
			srcEvent(id+1, schemas.EventCommitTxn, "", "", &schemas.Transaction{TxnIDs: []int64{txn}, WriteIDs: []schemas.TableWriteID{
				{Database: "sales", Table: "customers", WriteID: writeID, Files: []string{loc + "/" + dir + "/bucket_00000"}}}},
				loc+"/"+dir+"/bucket_00000"),
		}
	}
	evs := []*schemas.Event{createDB(10, "sales"), createTable(11, srcCustomers)}
	evs = append(evs, write(12, 101, 1)...)
	evs = append(evs, write(14, 102, 2)...)
	evs = append(evs, write(16, 103, 3)...)
	evs = append(evs, compaction(18, nil, "base_0000003_v0000110"))
	evs = append(evs, write(19, 111, 4)...)
	evs = append(evs, write(21, 112, 5)...)
	evs = append(evs, compaction(23, nil, "delete_delta_0000004_0000005_v0000120", "delta_0000004_0000005_v0000120"))
	evs = append(evs, write(24, 121, 6)...)
	ms := checkConverges(t, "sales", evs, nil)

	var files []string
	for f := range ms.files {
		files = append(files, strings.TrimPrefix(f, drPath(loc)+"/"))
	}
	sort.Strings(files)
	want := []string{
		"base_0000003/" + acid.MetadataFile, "base_0000003/bucket_00000",
		"delete_delta_0000004_0000005/" + acid.MetadataFile, "delete_delta_0000004_0000005/bucket_00000",
		"delta_0000004_0000005/" + acid.MetadataFile, "delta_0000004_0000005/bucket_00000",
		"delta_0000006_0000006_0000/bucket_00000",
	}
	if !slices.Equal(files, want) {
		t.Errorf("DR files\n  %v\nwant\n  %v", files, want)
	}
}

// TestPlanConvergesWithLostFiles is the same with copies that never
// succeed, each superseded by a later event: the objects left out never
// appear without their files, and the replica still ends as the source.
func TestPlanConvergesWithLostFiles(t *testing.T) {
	p3, p4 := srcPart(srcOrders, "2024-01-03"), srcPart(srcOrders, "2024-01-04")
	p3v2 := partWithParam(p3, "k", "v")
	ctas := srcTable("sales", "ctas", nil, "id bigint")
	evs := []*schemas.Event{
		createDB(10, "sales"),
		createTable(11, srcOrders),
		// p2 (2024-01-02) is dropped before its file could be copied.
		addParts(12, srcOrders, []schemas.Partition{srcP1, srcP2}, partFile(srcP1, "a"), partFile(srcP2, "b")),
		dropParts(13, srcOrders, srcP2),
		// p3's file is gone; it is altered, then overwritten.
		addParts(14, srcOrders, []schemas.Partition{p3}, partFile(p3, "c")),
		alterPart(15, srcOrders, p3, p3v2),
		insertOverwrite(16, srcOrders, &p3v2, partFile(p3, "d")),
		// p4's copy failed; it is truncated.
		addParts(17, srcOrders, []schemas.Partition{p4}, partFile(p4, "e")),
		truncatePart(18, srcOrders, p4),
		// A CTAS whose file is gone, then overwritten.
		createTable(19, ctas, ctas.Location+"/f"),
		insertOverwrite(20, ctas, nil, ctas.Location+"/g"),
		// An insert whose file is gone, then the table is dropped.
		insertInto(21, srcOrders, &srcP1, partFile(srcP1, "h")),
		alterTable(22, srcOrders, withParam(srcOrders, "k", "v")),
		dropTable(23, srcOrders),
	}
	c := copyOutcomes{"12-1": schemas.StatusSourceGone, "14-0": schemas.StatusSourceGone,
		"17-0": schemas.StatusFailed, "19-0": schemas.StatusSourceGone, "21-0": schemas.StatusSourceGone}
	ms := checkConverges(t, "sales", evs, c)
	if _, ok := ms.tables[TableKey{DB: "sales", Name: "ctas"}]; !ok || len(ms.tables) != 1 || len(ms.parts) != 0 {
		t.Errorf("final state:\n%s", ms.dump())
	}

	// Up to event 20: p1, p3 as overwritten (with its alter), p4 empty;
	// the files of the overwrite and the CTAS's overwrite only.
	pre := newMemMS()
	pre.copyAhead(evs[:11], c)
	runAll(t, pre, []*seqWorker{{db: "sales", events: evs[:11]}}, c, testPolicy{})
	var parts []string
	for k, p := range pre.parts {
		parts = append(parts, k.Values+"@"+p.Parameters[drparam.LastID]+":"+p.Parameters["k"])
	}
	sort.Strings(parts)
	if want := []string{"2024-01-01@12:", "2024-01-03@16:v", "2024-01-04@18:"}; !slices.Equal(parts, want) {
		t.Errorf("partitions %v, want %v", parts, want)
	}
	var files []string
	for f := range pre.files {
		files = append(files, path.Base(f))
	}
	sort.Strings(files)
	if want := []string{"a", "d", "g"}; !slices.Equal(files, want) {
		t.Errorf("files %v, want %v", files, want)
	}
}

// TestPlanCrossDatabaseRename runs a rename from sales to archive through
// both databases' workers: in both orders of runAll, then in every
// interleaving of single steps and crashes. The destination worker marks
// its database at the event before the rename and waits for the source's;
// the source worker waits for that mark; the table moves once, with its
// partitions, and every schedule ends in the same replica.
func TestPlanCrossDatabaseRename(t *testing.T) {
	moved := renamedTo(srcOrders, "archive", "orders")
	rename := alterTable(14, srcOrders, moved)
	sales := []*schemas.Event{
		createDB(10, "sales"), createTable(12, srcOrders),
		addParts(13, srcOrders, []schemas.Partition{srcP1}, partFile(srcP1, "a")),
		rename,
	}
	archive := []*schemas.Event{
		createDB(11, "archive"),
		rename,
		addParts(15, moved, []schemas.Partition{srcPart(moved, "2024-01-05")}),
		alterTable(16, moved, withParam(moved, "k", "v")),
	}
	check := func(t *testing.T, what string, ms *memMS) {
		t.Helper()
		tb := ms.tables[TableKey{DB: "archive", Name: "orders"}]
		if tb == nil || len(ms.tables) != 1 || tb.Parameters["k"] != "v" || tb.Sd.Location != drRoot+"sales.db/orders" {
			t.Fatalf("%s:\n%s", what, ms.dump())
		}
		if len(ms.parts) != 2 || ms.parts[PartKey{TableKey: TableKey{DB: "archive", Name: "orders"}, Values: "2024-01-01"}] == nil {
			t.Errorf("%s: partitions did not move:\n%s", what, ms.dump())
		}
		if ms.dbs["sales"].Parameters[drparam.LastID] != "14" || ms.dbs["archive"].Parameters[drparam.LastID] != "16" {
			t.Errorf("%s: watermarks %s %s", what, ms.dbs["sales"].Parameters[drparam.LastID], ms.dbs["archive"].Parameters[drparam.LastID])
		}
	}
	var want string
	for _, order := range [][]string{{"sales", "archive"}, {"archive", "sales"}} {
		ms := newMemMS()
		ms.copyAhead(append(sales, archive...), nil)
		byName := map[string]*seqWorker{"sales": {db: "sales", events: sales}, "archive": {db: "archive", events: archive}}
		runAll(t, ms, []*seqWorker{byName[order[0]], byName[order[1]]}, nil, testPolicy{})
		if want == "" {
			want = ms.dump()
		} else if d := diffStates(want, ms.dump()); d != "" {
			t.Errorf("order %v differs:\n%s", order, d)
		}
		check(t, fmt.Sprintf("order %v", order), ms)
	}

	ms := newMemMS()
	ms.copyAhead(append(sales, archive...), nil)
	final := everyInterleaving(t, ms, []*seqWorker{{db: "sales", events: sales}, {db: "archive", events: archive}}, nil, testPolicy{})
	if d := diffStates(want, final.dump()); d != "" {
		t.Errorf("the interleavings end elsewhere than runAll:\n%s", d)
	}
	check(t, "every interleaving", final)

	// Step by step: the destination worker reaches the rename first,
	// marks archive at 13 and waits for sales; the source worker, at the
	// rename, renames (archive is at 13); then the destination moves on.
	ms = newMemMS()
	ms.copyAhead(append(sales, archive...), nil)
	ws, wa := &seqWorker{db: "sales", events: sales}, &seqWorker{db: "archive", events: archive}
	stepOnce(t, ms, wa, nil, testPolicy{})
	stepOnce(t, ms, ws, nil, testPolicy{})
	stepOnce(t, ms, ws, nil, testPolicy{})
	s := stepOnce(t, ms, wa, nil, testPolicy{})
	if s.d.Outcome != Wait || s.d.Reason != ReasonCrossDatabase || s.d.WaitDB != "sales" ||
		!slices.Equal(actionNames(s.d.Actions), []string{"alter database archive"}) || wa.pos != 1 {
		t.Fatalf("destination worker: %s %s (%s) %v", s.d.Outcome, s.d.Reason, s.d.WaitDB, actionNames(s.d.Actions))
	}
	if got := ms.dbs["archive"].Parameters[drparam.LastID]; got != "13" {
		t.Fatalf("archive marked at %s, want 13", got)
	}
	if s := stepOnce(t, ms, wa, nil, testPolicy{}); s.d.Outcome != Wait || s.d.WaitDB != "sales" || len(s.d.Actions) != 0 {
		t.Fatalf("destination worker again: %s %s (%s) %v", s.d.Outcome, s.d.Reason, s.d.WaitDB, actionNames(s.d.Actions))
	}
	stepOnce(t, ms, ws, nil, testPolicy{}) // 13: add partitions
	if s := stepOnce(t, ms, ws, nil, testPolicy{}); s.d.Outcome != Apply || ms.tables[TableKey{DB: "archive", Name: "orders"}] == nil {
		t.Fatalf("source worker: %s %s %s", s.d.Outcome, s.d.Reason, s.d.Detail)
	}
	if s := stepOnce(t, ms, wa, nil, testPolicy{}); s.d.Outcome != NoOp || wa.pos != 2 || ms.dbs["archive"].Parameters[drparam.LastID] != "14" {
		t.Fatalf("destination worker after the rename: %s %s", s.d.Outcome, s.d.Reason)
	}

	// The other way round: the source worker reaches the rename while
	// archive is not created yet, then below 13; it waits for archive.
	ms = newMemMS()
	ms.copyAhead(append(sales, archive...), nil)
	ws, wa = &seqWorker{db: "sales", events: sales}, &seqWorker{db: "archive", events: archive}
	for range 3 {
		stepOnce(t, ms, ws, nil, testPolicy{})
	}
	for range 2 {
		if s := stepOnce(t, ms, ws, nil, testPolicy{}); s.d.Outcome != Wait || s.d.WaitDB != "archive" || len(s.d.Actions) != 0 {
			t.Fatalf("source worker: %s %s (%s) %v", s.d.Outcome, s.d.Reason, s.d.WaitDB, actionNames(s.d.Actions))
		}
		if ms.dbs["archive"] == nil {
			stepOnce(t, ms, wa, nil, testPolicy{}) // 11: create archive, at 11 < 13
		}
	}
	if ms.tables[TableKey{DB: "sales", Name: "orders"}] == nil || ms.tables[TableKey{DB: "archive", Name: "orders"}] != nil {
		t.Fatalf("the source worker renamed before archive was marked:\n%s", ms.dump())
	}
}

// everyInterleaving runs the workers from ms in every interleaving of
// their steps, and of crashes part way through a step's actions (the
// worker then plans the same event again). A step that waits without
// changing the replica is no move; a state where a worker has events left
// and none can move is a deadlock. Every schedule must end in the same
// replica, which it returns.
func everyInterleaving(t *testing.T, ms *memMS, ws []*seqWorker, c copyOutcomes, pol Policy) *memMS {
	t.Helper()
	seen := map[string]bool{}
	var final *memMS
	var walk func(ms *memMS, pos []int, trace []string)
	walk = func(ms *memMS, pos []int, trace []string) {
		t.Helper()
		state := ms.dump()
		key := fmt.Sprint(pos) + "\n" + state
		if seen[key] || t.Failed() {
			return
		}
		seen[key] = true
		moved, done := false, true
		for i, w := range ws {
			if pos[i] == len(w.events) {
				continue
			}
			done = false
			ev := w.events[pos[i]]
			next := ms.clone()
			nw := &seqWorker{db: w.db, events: w.events, pos: pos[i]}
			s := stepOnce(t, next, nw, c, pol)
			if s.d.Outcome == Wait && s.d.Reason != ReasonCrossDatabase {
				t.Fatalf("after %v: %s event %d waits: %s %s", trace, w.db, ev.EventID, s.d.Reason, s.d.Detail)
			}
			step := fmt.Sprintf("%s@%d:%s", w.db, ev.EventID, s.d.Outcome)
			if nw.pos != pos[i] || next.dump() != state {
				moved = true
				np := slices.Clone(pos)
				np[i] = nw.pos
				walk(next, np, append(slices.Clone(trace), step))
			}
			for k := 1; k < len(s.d.Actions); k++ { // a crash after k actions
				part := ms.clone()
				for _, a := range s.d.Actions[:k] {
					if err := part.apply(a); err != nil {
						t.Fatalf("after %v: %s: %v", trace, a, err)
					}
				}
				walk(part, pos, append(slices.Clone(trace), fmt.Sprintf("%s(crash after %d)", step, k)))
			}
		}
		if done {
			if final == nil {
				final = ms
			} else if d := diffStates(final.dump(), state); d != "" {
				t.Fatalf("schedule %v ends elsewhere:\n%s", trace, d)
			}
			return
		}
		if !moved {
			t.Fatalf("deadlock after %v:\n%s", trace, state)
		}
	}
	walk(ms, make([]int, len(ws)), nil)
	if final == nil {
		t.Fatal("no schedule ends")
	}
	t.Logf("%d states", len(seen))
	return final
}

// TestPlanCrossDatabaseRenameOntoADroppedName: the destination database
// had a table of the same name, with partitions, dropped before the
// rename. Whichever worker runs ahead, the source worker renames only
// once the destination's worker has applied everything before the rename
// (the drop included), so the old table's events never land on the new
// one, in any interleaving.
func TestPlanCrossDatabaseRenameOntoADroppedName(t *testing.T) {
	oldT := srcTable("archive", "orders", []string{"dt"}, "legacy string")
	moved := renamedTo(srcOrders, "archive", "orders")
	rename := alterTable(21, srcOrders, moved)
	old0101 := srcPart(oldT, "2024-01-01")
	sales := []*schemas.Event{
		createDB(10, "sales"), createTable(12, srcOrders),
		addParts(14, srcOrders, []schemas.Partition{srcP1}, partFile(srcP1, "a")),
		rename,
	}
	archive := []*schemas.Event{
		createDB(11, "archive"), createTable(13, oldT),
		addParts(15, oldT, []schemas.Partition{old0101}),
		addParts(16, oldT, []schemas.Partition{srcPart(oldT, "2023-12-31")}),
		insertOverwrite(17, oldT, &old0101),
		dropParts(18, oldT, old0101),
		dropTable(19, oldT),
		rename,
	}
	check := func(t *testing.T, what string, ms *memMS) {
		t.Helper()
		var parts []string
		for k := range ms.parts {
			parts = append(parts, k.String())
		}
		if !slices.Equal(parts, []string{"archive.orders partition [2024-01-01]"}) || ms.parts[PartKey{TableKey: TableKey{DB: "archive", Name: "orders"}, Values: "2024-01-01"}].Parameters[drparam.LastID] != "14" {
			t.Errorf("%s: the renamed table got the old table's partitions: %v\n%s", what, parts, ms.dump())
		}
		if tb := ms.tables[TableKey{DB: "archive", Name: "orders"}]; tb == nil || len(ms.tables) != 1 || tb.Parameters[drparam.LastID] != "21" || tb.Sd.Cols[0].Name != "id" {
			t.Errorf("%s: archive.orders is not the renamed sales.orders:\n%s", what, ms.dump())
		}
		if _, ok := ms.files[drRoot+"sales.db/orders/dt=2024-01-01/a"]; !ok {
			t.Errorf("%s: the old table's overwrite pruned the renamed table's files", what)
		}
	}
	fresh := func() *memMS {
		ms := newMemMS()
		ms.copyAhead(append(sales, archive...), nil)
		ms.files[drRoot+"sales.db/orders/dt=2024-01-01/a"] = 14
		return ms
	}
	for _, first := range []string{"sales", "archive"} {
		ms := fresh()
		ws, wa := &seqWorker{db: "sales", events: sales}, &seqWorker{db: "archive", events: archive}
		for range 3 { // archive's worker lags after its event 15
			stepOnce(t, ms, wa, nil, testPolicy{})
		}
		order := []*seqWorker{ws, wa}
		if first == "archive" {
			order = []*seqWorker{wa, ws}
		}
		runAll(t, ms, order, nil, testPolicy{})
		check(t, first+" first", ms)
	}
	check(t, "every interleaving", everyInterleaving(t, fresh(), []*seqWorker{{db: "sales", events: sales}, {db: "archive", events: archive}}, nil, testPolicy{}))
}

// ---- the captured events

// fixtureEvents decodes the events captured from a real metastore (see
// internal/hmsevent/testdata), with copy task IDs set as the tailer sets them.
func fixtureEvents(t *testing.T) []*schemas.Event { return fixtureEventsIn(t, "events") }

// fixtureEventsIn decodes the fixtures capture wrote into
// internal/hmsevent/testdata/dir, each file's copy task named as the tailer names it.
func fixtureEventsIn(t *testing.T, dir string) []*schemas.Event {
	paths, err := filepath.Glob(filepath.Join("..", "internal", "hmsevent", "testdata", dir, "*.json"))
	if err != nil || len(paths) == 0 {
		t.Fatalf("no fixtures: %v", err)
	}
	sort.Strings(paths)
	var out []*schemas.Event
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
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
			t.Fatalf("%s: %v", p, err)
		}
		ev := hmsevent.Decode(hmslog.RawEvent{EventID: f.EventID, EventTime: f.EventTime, EventType: f.EventType,
			Catalog: f.CatName, Database: f.DBName, Table: f.TableName, MessageFormat: f.MessageFormat, Message: f.Message})
		if len(ev.Errors) > 0 {
			t.Fatalf("%s: %v", p, ev.Errors)
		}
		if ev.EventType == schemas.EventAllocWriteID && dir == "events" {
			// Captured when the metastore could not create the
			// transactional table it names (no hive-exec then): the
			// allocation is all the log holds of that table.
			// TestPlanAcidFixtures replays a real transactional history.
			continue
		}
		for i := range ev.Files {
			ev.Files[i].TaskID = fmt.Sprintf("%d-%d", ev.EventID, i)
		}
		out = append(out, &ev)
	}
	return out
}

// fixtureWorkers routes the events to their databases' topics.
func fixtureWorkers(evs []*schemas.Event, upTo int64) []*seqWorker {
	byDB := map[string]*seqWorker{}
	var ws []*seqWorker
	for _, ev := range evs {
		if ev.EventID > upTo {
			break
		}
		for _, db := range ev.Databases {
			if byDB[db] == nil {
				byDB[db] = &seqWorker{db: db}
				ws = append(ws, byDB[db])
			}
			byDB[db].events = append(byDB[db].events, ev)
		}
	}
	return ws
}

// runFixtures runs the captured events up to upTo through their databases'
// workers, taking turns in the order of the topics and in the reverse
// order; both must end in the same replica.
func runFixtures(t *testing.T, evs []*schemas.Event, upTo int64) *memMS {
	t.Helper()
	var first *memMS
	for _, reverse := range []bool{false, true} {
		ms := newMemMS()
		ms.copyAhead(evs, nil)
		ws := fixtureWorkers(evs, upTo)
		if len(ws) < 2 {
			t.Fatalf("%d topics up to event %d", len(ws), upTo)
		}
		if reverse {
			slices.Reverse(ws)
		}
		runAll(t, ms, ws, nil, testPolicy{})
		if first == nil {
			first = ms
		} else if d := diffStates(first.dump(), ms.dump()); d != "" {
			t.Errorf("up to event %d, the reverse order ends elsewhere:\n%s", upTo, d)
		}
	}
	return first
}

// TestPlanFixtures replays the captured metastore events (two databases,
// partitions, inserts, an overwrite, a truncate, a rename within and one
// across databases, transactions, stats, constraints, functions, drops)
// through Plan and checks the replica the real Thrift objects produce.
func TestPlanFixtures(t *testing.T) {
	evs := fixtureEvents(t)

	// Up to the last event before the drops, the workers taking turns in
	// both orders (the cross-database rename at 194 makes them wait for
	// each other).
	ms := runFixtures(t, evs, 204)
	sales, archive := ms.dbs["cap_sales"], ms.dbs["cap_archive"]
	if sales == nil || archive == nil {
		t.Fatalf("databases:\n%s", ms.dump())
	}
	if sales.LocationUri != "hdfs://dr:9000/external/cap_sales.db" || *sales.ManagedLocationUri != "hdfs://dr:9000/warehouse/cap_sales.db" ||
		sales.Parameters["retention.days"] != "30" || sales.Parameters[drparam.LastID] != "204" || sales.Parameters[drparam.Target] != "hivedr:src" {
		t.Errorf("cap_sales: %s", js(sales))
	}
	if archive.Parameters[drparam.LastID] != "194" { // its last event, an allocation (197), is left out above
		t.Errorf("cap_archive: %s", js(archive))
	}
	var tables []string
	for k := range ms.tables {
		tables = append(tables, k.String())
	}
	sort.Strings(tables)
	if !slices.Equal(tables, []string{"cap_archive.clients", "cap_sales.orders"}) {
		t.Fatalf("tables %v", tables)
	}
	o := ms.tables[TableKey{DB: "cap_sales", Name: "orders"}]
	if o.Sd.Location != "hdfs://dr:9000/external/cap_sales.db/orders" || len(o.Sd.Cols) != 4 || o.Sd.Cols[3].Name != "channel" ||
		len(o.PartitionKeys) != 2 || o.TableType != "EXTERNAL_TABLE" || o.Sd.SerdeInfo == nil ||
		o.Sd.SerdeInfo.SerializationLib != "org.apache.hadoop.hive.serde2.lazy.LazySimpleSerDe" ||
		o.ID != nil || o.WriteId != -1 || o.CatName == nil || *o.CatName != "hive" || o.Parameters[drparam.LastID] != "183" {
		t.Errorf("cap_sales.orders: %s", js(o))
	}
	c := ms.tables[TableKey{DB: "cap_archive", Name: "clients"}]
	if c.DbName != "cap_archive" || c.TableName != "clients" || c.Sd.Location != "hdfs://dr:9000/external/cap_sales.db/customers" ||
		c.Parameters[drparam.LastID] != "194" {
		t.Errorf("cap_archive.clients: %s", js(c))
	}
	eu := ms.parts[PartKey{TableKey: TableKey{DB: "cap_sales", Name: "orders"}, Values: "2024-01-01/eu"}]
	us := ms.parts[PartKey{TableKey: TableKey{DB: "cap_sales", Name: "orders"}, Values: "2024-01-02/us"}]
	if len(ms.parts) != 2 || eu == nil || us == nil {
		t.Fatalf("partitions:\n%s", ms.dump())
	}
	if eu.Parameters["hivedr.note"] != "altered" || eu.Parameters[drparam.LastID] != "184" ||
		eu.Sd.Location != "hdfs://dr:9000/external/cap_sales.db/orders/dt=2024-01-01/region=eu" {
		t.Errorf("partition eu: %s", js(eu))
	}
	if us.Parameters[drparam.LastID] != "192" {
		t.Errorf("partition us: %s", js(us))
	}
	var files []string
	for f := range ms.files {
		files = append(files, f)
	}
	sort.Strings(files)
	// The overwrite's file in region=us was truncated (event 191).
	if want := []string{"hdfs://dr:9000/external/cap_sales.db/customers/000000_0",
		"hdfs://dr:9000/external/cap_sales.db/customers/000001_0"}; !slices.Equal(files, want) {
		t.Errorf("files %v, want %v", files, want)
	}

	// To the end: everything dropped, the data left in place.
	ms = runFixtures(t, evs, 1<<62)
	if len(ms.dbs)+len(ms.tables)+len(ms.parts) != 0 || len(ms.files) != 2 {
		t.Errorf("after the drops:\n%s", ms.dump())
	}
}

// TestPlanCrossDatabaseRenameOntoARenamedName: as above, but the old
// table of the destination was renamed away, not dropped. Were the source
// worker to rename while the destination worker has not yet applied that
// rename away, it would drop the old table as if it were gone, and the
// rename away would then find nothing to move. The handshake prevents it:
// the destination worker marks its DR database at the event before the
// rename (repl.last.id = event-1) only once it reaches the rename, and the
// source worker waits for that mark.
func TestPlanCrossDatabaseRenameOntoARenamedName(t *testing.T) {
	oldT := srcTable("archive", "orders", nil, "legacy string")
	moved := renamedTo(srcOrders, "archive", "orders")
	rename := alterTable(20, srcOrders, moved)
	sales := []*schemas.Event{createDB(10, "sales"), createTable(12, srcOrders), rename}
	archive := []*schemas.Event{
		createDB(11, "archive"), createTable(13, oldT),
		alterTable(15, oldT, renamedTo(oldT, "archive", "orders_2023")),
		rename,
	}
	check := func(t *testing.T, what string, ms *memMS) {
		t.Helper()
		kept, renamed := ms.tables[TableKey{DB: "archive", Name: "orders_2023"}], ms.tables[TableKey{DB: "archive", Name: "orders"}]
		if kept == nil || renamed == nil || len(ms.tables) != 2 {
			t.Fatalf("%s: the destination's renamed table is lost:\n%s", what, ms.dump())
		}
		if kept.Sd.Cols[0].Name != "legacy" || kept.Parameters[drparam.LastID] != "15" ||
			renamed.Sd.Cols[0].Name != "id" || renamed.Parameters[drparam.LastID] != "20" || renamed.Sd.Location != drRoot+"sales.db/orders" {
			t.Errorf("%s: the tables are mixed up:\n%s", what, ms.dump())
		}
		if ms.dbs["sales"].Parameters[drparam.LastID] != "20" || ms.dbs["archive"].Parameters[drparam.LastID] != "20" {
			t.Errorf("%s: watermarks %s %s", what, ms.dbs["sales"].Parameters[drparam.LastID], ms.dbs["archive"].Parameters[drparam.LastID])
		}
	}
	for _, first := range []string{"sales", "archive"} {
		ms := newMemMS()
		ws, wa := &seqWorker{db: "sales", events: sales}, &seqWorker{db: "archive", events: archive}
		for range 2 { // archive's worker lags before its rename at 15
			stepOnce(t, ms, wa, nil, testPolicy{})
		}
		order := []*seqWorker{ws, wa}
		if first == "archive" {
			order = []*seqWorker{wa, ws}
		}
		runAll(t, ms, order, nil, testPolicy{})
		check(t, first+" first", ms)
	}
	check(t, "every interleaving", everyInterleaving(t, newMemMS(), []*seqWorker{{db: "sales", events: sales}, {db: "archive", events: archive}}, nil, testPolicy{}))

	// The lagging destination: the source worker waits at the rename
	// until archive's worker has renamed the old table away and marked 19.
	ms := newMemMS()
	ws, wa := &seqWorker{db: "sales", events: sales}, &seqWorker{db: "archive", events: archive}
	for range 2 {
		stepOnce(t, ms, wa, nil, testPolicy{})
		stepOnce(t, ms, ws, nil, testPolicy{})
	}
	if s := stepOnce(t, ms, ws, nil, testPolicy{}); s.d.Outcome != Wait || s.d.WaitDB != "archive" || ms.tables[TableKey{DB: "sales", Name: "orders"}] == nil {
		t.Fatalf("source worker with archive at 13: %s %s (%s)", s.d.Outcome, s.d.Reason, s.d.WaitDB)
	}
	stepOnce(t, ms, wa, nil, testPolicy{}) // 15: the rename away
	if s := stepOnce(t, ms, ws, nil, testPolicy{}); s.d.Outcome != Wait || s.d.WaitDB != "archive" {
		t.Fatalf("source worker with archive at 15: %s %s (%s)", s.d.Outcome, s.d.Reason, s.d.WaitDB)
	}
	if s := stepOnce(t, ms, wa, nil, testPolicy{}); s.d.Outcome != Wait || ms.dbs["archive"].Parameters[drparam.LastID] != "19" {
		t.Fatalf("destination worker at the rename: %s %s, archive at %s", s.d.Outcome, s.d.Reason, ms.dbs["archive"].Parameters[drparam.LastID])
	}
	if s := stepOnce(t, ms, ws, nil, testPolicy{}); s.d.Outcome != Apply {
		t.Fatalf("source worker with archive at 19: %s %s %s", s.d.Outcome, s.d.Reason, s.d.Detail)
	}
	runAll(t, ms, []*seqWorker{ws, wa}, nil, testPolicy{})
	check(t, "step by step", ms)
}

// TestPlanAcidFixtures replays the transactional history captured from the
// stack (capture -acid: a full-ACID table, an insert-only partitioned one
// and a full-ACID partitioned one in another database; a transaction
// writing all three that commits, one that aborts, a base that replaces
// deltas, one still open) through both databases' workers in both orders,
// and checks the DR write-ID state and files: committed writes valid with
// their files, the aborted write aborted with none, the open one open with
// none, and the deltas the base covers gone.
// completeCompaction does to a captured COMMIT_COMPACTION what the tailer
// does: the compacted partition's location (from its captured
// ADD_PARTITION) and the base the compactor's transaction wrote there
// (the capture writes no file; the compactor writes one data file and
// its metadata file), with their copy tasks.
func completeCompaction(t *testing.T, evs []*schemas.Event, ev *schemas.Event) {
	t.Helper()
	c := ev.Payload.(*schemas.Compaction)
	for _, o := range evs {
		pc, ok := o.Payload.(*schemas.PartitionChange)
		if !ok || o.EventType != schemas.EventAddPartition || !strings.EqualFold(pc.Table.Name, c.Table) || pc.Table.Database != c.Database {
			continue
		}
		for _, part := range pc.After {
			if "dt="+part.Values[0] == c.Partition {
				c.Location = part.Location
			}
		}
	}
	if c.Location == "" {
		t.Fatalf("no captured partition %s of %s.%s", c.Partition, c.Database, c.Table)
	}
	dir := fmt.Sprintf("base_%07d_v%07d", 1, c.TxnID)
	c.Dirs = []string{dir}
	for i, name := range []string{"000000_0", acid.MetadataFile} {
		ev.Files = append(ev.Files, schemas.FileRef{URI: c.Location + "/" + dir + "/" + name, Subdir: dir, TaskID: fmt.Sprintf("%d-%d", ev.EventID, i)})
	}
}

func TestPlanAcidFixtures(t *testing.T) {
	evs := fixtureEventsIn(t, "acid")
	var commits, opens, compactions int
	for _, ev := range evs {
		switch ev.EventType {
		case schemas.EventCommitTxn:
			commits++
		case schemas.EventOpenTxn:
			opens++
		case schemas.EventCommitCompaction:
			compactions++
			completeCompaction(t, evs, ev)
		}
	}
	// Three commits: two of writers, one of the compactor's transaction.
	if commits != 3 || opens != 5 || compactions != 1 {
		t.Fatalf("%d commits, %d opens and %d compactions captured, want 3, 5 and 1", commits, opens, compactions)
	}
	ms := runFixtures(t, evs, evs[len(evs)-1].EventID)
	want := map[string]string{
		"cap_acid.orders/1": "committed", "cap_acid.orders/2": "aborted", "cap_acid.orders/3": "committed",
		"cap_acid.events/1": "committed", "cap_acid_other.ledger/1": "committed", "cap_acid_other.ledger/2": "open",
	}
	if !reflect.DeepEqual(ms.writeIDs, want) {
		t.Errorf("write ids %v, want %v", ms.writeIDs, want)
	}
	if len(ms.open) != 1 {
		t.Errorf("open DR transactions %v, want the one still open at the source", ms.open)
	}
	var files []string
	for f := range ms.files {
		files = append(files, strings.TrimPrefix(f, drRoot))
	}
	sort.Strings(files)
	wantFiles := []string{
		"cap_acid.db/events/dt=2024-01-01/base_0000001/000000_0",
		"cap_acid.db/events/dt=2024-01-01/base_0000001/" + acid.MetadataFile,
		"cap_acid.db/orders/base_0000003/bucket_00000_0",
		"cap_acid_other.db/ledger/dt=2024-01-01/delta_0000001_0000001_0000/bucket_00000_0",
	}
	if !slices.Equal(files, wantFiles) {
		t.Errorf("DR files %v, want %v", files, wantFiles)
	}
	// Every table and partition exists on DR, and each database is at
	// its last event.
	for _, k := range []string{"cap_acid.orders", "cap_acid.events", "cap_acid_other.ledger"} {
		db, name, _ := strings.Cut(k, ".")
		if ms.tables[TableKey{DB: db, Name: name}] == nil {
			t.Errorf("table %s missing on DR", k)
		}
	}
}
