package applier

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/apache/thrift/lib/go/thrift"
	hms "github.com/beltran/gohive/hive_metastore"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/hivedr/hivedr/internal/drparam"
	hivehms "github.com/hivedr/hivedr/internal/hms"
	"github.com/hivedr/hivedr/internal/kafka"
	"github.com/hivedr/hivedr/internal/state"
	"github.com/hivedr/hivedr/schemas"
)

// The applier's runtime (consumer, workers, completions reader, executor)
// run against a fake Kafka cluster (kfake) and a fake DR metastore
// (fakeHMS). Records are written as the tailer and copyd write them:
// transactions, the Confluent wire format (schemas.Serde).

// ---- a fake DR metastore behind the Thrift API

// fakeHMS is a DR metastore in memory behind the Metastore interface. It
// is as strict as Hive: creating what exists, or changing or dropping
// what does not, fails with Hive's exceptions. Objects are copied in and
// out, as over the wire, so a caller changing an object it read changes
// nothing here. Every worker's Dial returns the same fakeHMS, so it is
// locked. A call on a cancelled context fails as a Thrift client's would.
type fakeHMS struct {
	mu     sync.Mutex
	dbs    map[string]*hms.Database
	tables map[TableKey]*hms.Table
	parts  map[PartKey]*hms.Partition
	// writes logs the successful writes of each database, in order.
	writes map[string][]msWrite
	// marks logs each database's repl.last.id each time it moves.
	marks map[string][]int64
	// calls counts the calls by method; hook runs before each (setHook).
	calls map[string]int
	hook  func(ctx context.Context, op string) error
	// addBatches logs the size of each successful AddPartitions call.
	addBatches []int
	// envs logs the environment context of each alter_table and
	// alter_partitions call.
	envs []*hms.EnvironmentContext
}

// msWrite is one write call: what it did and the repl.last.id of the
// object written (0 for drops).
type msWrite struct {
	op    string
	stamp int64
}

func newFakeHMS() *fakeHMS {
	return &fakeHMS{dbs: map[string]*hms.Database{}, tables: map[TableKey]*hms.Table{},
		parts: map[PartKey]*hms.Partition{}, writes: map[string][]msWrite{}, marks: map[string][]int64{}, calls: map[string]int{}}
}

func (f *fakeHMS) dial(context.Context) (Metastore, func() error, error) {
	return f, func() error { return nil }, nil
}

// clone deep-copies a Thrift object (nil stays nil).
func clone[T any](v *T) *T {
	if v == nil {
		return nil
	}
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	out := new(T)
	if err := json.Unmarshal(b, out); err != nil {
		panic(err)
	}
	return out
}

func noSuch(format string, args ...any) error {
	return &hms.NoSuchObjectException{Message: fmt.Sprintf(format, args...)}
}

func exists(format string, args ...any) error {
	return &hms.AlreadyExistsException{Message: fmt.Sprintf(format, args...)}
}

func invalidOp(format string, args ...any) error {
	return &hms.InvalidOperationException{Message: fmt.Sprintf(format, args...)}
}

// enter locks the store for one call named op (the Metastore method), or
// fails on a cancelled context or when the test's hook says so. Calls are
// counted by op.
func (f *fakeHMS) enter(ctx context.Context, op string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	f.mu.Lock()
	f.calls[op]++
	hook := f.hook
	f.mu.Unlock()
	if hook != nil {
		if err := hook(ctx, op); err != nil {
			return err
		}
	}
	f.mu.Lock()
	return nil
}

// callsOf returns how many times op was called.
func (f *fakeHMS) callsOf(op string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.calls[op]
}

// setHook makes every call run hook first (nil: none); an error from it
// fails the call as a broken connection would.
func (f *fakeHMS) setHook(hook func(ctx context.Context, op string) error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.hook = hook
}

// logWrite records a write (f.mu held).
func (f *fakeHMS) logWrite(db, op string, params map[string]string) {
	db = lower(db)
	f.writes[db] = append(f.writes[db], msWrite{op: op, stamp: stamp(params)})
}

// putDB stores a database and logs its watermark when it moved (f.mu held).
func (f *fakeHMS) putDB(name string, db *hms.Database, op string) {
	name = lower(name)
	if old := f.dbs[name]; old == nil || stamp(old.Parameters) != stamp(db.Parameters) {
		f.marks[name] = append(f.marks[name], stamp(db.Parameters))
	}
	f.dbs[name] = clone(db)
	f.logWrite(name, op, db.Parameters)
}

func (f *fakeHMS) GetDatabase(ctx context.Context, name string) (*hms.Database, error) {
	if err := f.enter(ctx, "GetDatabase"); err != nil {
		return nil, err
	}
	defer f.mu.Unlock()
	db := f.dbs[lower(name)]
	if db == nil {
		return nil, noSuch("database %s", name)
	}
	return clone(db), nil
}

func (f *fakeHMS) CreateDatabase(ctx context.Context, db *hms.Database) error {
	if err := f.enter(ctx, "CreateDatabase"); err != nil {
		return err
	}
	defer f.mu.Unlock()
	if f.dbs[lower(db.Name)] != nil {
		return exists("database %s", db.Name)
	}
	f.putDB(db.Name, db, "create database")
	return nil
}

func (f *fakeHMS) AlterDatabase(ctx context.Context, name string, db *hms.Database) error {
	if err := f.enter(ctx, "AlterDatabase"); err != nil {
		return err
	}
	defer f.mu.Unlock()
	if f.dbs[lower(name)] == nil {
		return noSuch("database %s", name)
	}
	f.putDB(name, db, "alter database")
	return nil
}

func (f *fakeHMS) DropDatabase(ctx context.Context, name string, _, cascade bool) error {
	if err := f.enter(ctx, "DropDatabase"); err != nil {
		return err
	}
	defer f.mu.Unlock()
	name = lower(name)
	if f.dbs[name] == nil {
		return noSuch("database %s", name)
	}
	for k := range f.tables {
		if k.DB == name {
			if !cascade {
				return invalidOp("database %s is not empty", name)
			}
			f.dropTable(k)
		}
	}
	delete(f.dbs, name)
	f.logWrite(name, "drop database", nil)
	return nil
}

func (f *fakeHMS) GetTableReq(ctx context.Context, req *hms.GetTableRequest) (*hms.GetTableResult_, error) {
	if err := f.enter(ctx, "GetTableReq"); err != nil {
		return nil, err
	}
	defer f.mu.Unlock()
	t := f.tables[tableKey(req.DbName, req.TblName)]
	if t == nil {
		return nil, noSuch("table %s.%s", req.DbName, req.TblName)
	}
	return &hms.GetTableResult_{Table: clone(t)}, nil
}

func (f *fakeHMS) CreateTable(ctx context.Context, t *hms.Table) error {
	if err := f.enter(ctx, "CreateTable"); err != nil {
		return err
	}
	defer f.mu.Unlock()
	k := tableKey(t.DbName, t.TableName)
	if f.dbs[k.DB] == nil {
		return &hms.InvalidObjectException{Message: "database " + k.DB + " does not exist"}
	}
	if f.tables[k] != nil {
		return exists("table %s", k)
	}
	f.tables[k] = clone(t)
	f.logWrite(k.DB, "create table "+k.String(), t.Parameters)
	return nil
}

func (f *fakeHMS) AlterTableWithEnvironmentContext(ctx context.Context, db, name string, t *hms.Table, env *hms.EnvironmentContext) error {
	if err := f.enter(ctx, "AlterTableWithEnvironmentContext"); err != nil {
		return err
	}
	defer f.mu.Unlock()
	f.envs = append(f.envs, env)
	k, nk := tableKey(db, name), tableKey(t.DbName, t.TableName)
	if f.tables[k] == nil {
		return invalidOp("table %s does not exist", k)
	}
	if nk != k {
		if f.dbs[nk.DB] == nil {
			return invalidOp("rename %s to %s: no database %s", k, nk, nk.DB)
		}
		if f.tables[nk] != nil {
			return invalidOp("rename %s to %s: it exists", k, nk)
		}
		delete(f.tables, k)
		for pk, p := range f.parts {
			if pk.TableKey == k {
				delete(f.parts, pk)
				p.DbName, p.TableName = nk.DB, nk.Name
				f.parts[PartKey{TableKey: nk, Values: pk.Values}] = p
			}
		}
	}
	f.tables[nk] = clone(t)
	f.logWrite(k.DB, "alter table "+k.String(), t.Parameters)
	return nil
}

func (f *fakeHMS) DropTable(ctx context.Context, db, name string, _ bool) error {
	if err := f.enter(ctx, "DropTable"); err != nil {
		return err
	}
	defer f.mu.Unlock()
	k := tableKey(db, name)
	if f.tables[k] == nil {
		return noSuch("table %s", k)
	}
	f.dropTable(k)
	f.logWrite(k.DB, "drop table "+k.String(), nil)
	return nil
}

func (f *fakeHMS) dropTable(k TableKey) {
	delete(f.tables, k)
	for pk := range f.parts {
		if pk.TableKey == k {
			delete(f.parts, pk)
		}
	}
}

func (f *fakeHMS) GetPartitionsByNamesReq(ctx context.Context, req *hms.GetPartitionsByNamesRequest) (*hms.GetPartitionsByNamesResult_, error) {
	if err := f.enter(ctx, "GetPartitionsByNamesReq"); err != nil {
		return nil, err
	}
	defer f.mu.Unlock()
	tk := tableKey(req.DbName, req.TblName)
	t := f.tables[tk]
	if t == nil {
		return nil, noSuch("table %s", tk)
	}
	res := &hms.GetPartitionsByNamesResult_{}
	want := map[string]bool{}
	for _, n := range req.Names {
		want[n] = true
	}
	for pk, p := range f.parts {
		if pk.TableKey == tk && want[hivehms.PartitionName(t.PartitionKeys, p.Values)] {
			res.Partitions = append(res.Partitions, clone(p))
		}
	}
	return res, nil
}

func (f *fakeHMS) GetAllTables(ctx context.Context, db string) ([]string, error) {
	if err := f.enter(ctx, "GetAllTables"); err != nil {
		return nil, err
	}
	defer f.mu.Unlock()
	if f.dbs[lower(db)] == nil {
		return nil, noSuch("database %s", db)
	}
	var out []string
	for k := range f.tables {
		if k.DB == lower(db) {
			out = append(out, k.Name)
		}
	}
	sort.Strings(out)
	return out, nil
}

// GetTables answers the patterns the applier asks: a prefix and *.
func (f *fakeHMS) GetTables(ctx context.Context, db, pattern string) ([]string, error) {
	if err := f.enter(ctx, "GetTables"); err != nil {
		return nil, err
	}
	defer f.mu.Unlock()
	if f.dbs[lower(db)] == nil {
		return nil, noSuch("database %s", db)
	}
	prefix, _ := strings.CutSuffix(lower(pattern), "*")
	var out []string
	for k := range f.tables {
		if k.DB == lower(db) && strings.HasPrefix(k.Name, prefix) {
			out = append(out, k.Name)
		}
	}
	sort.Strings(out)
	return out, nil
}

func (f *fakeHMS) EachPartitionName(ctx context.Context, db, table string, fn func(string)) error {
	if err := f.enter(ctx, "EachPartitionName"); err != nil {
		return err
	}
	defer f.mu.Unlock()
	tk := tableKey(db, table)
	t := f.tables[tk]
	if t == nil {
		return nil // (the metastore lists none for a missing table)
	}
	for pk, p := range f.parts {
		if pk.TableKey == tk {
			fn(hivehms.PartitionName(t.PartitionKeys, p.Values))
		}
	}
	return nil
}

func (f *fakeHMS) AddPartitions(ctx context.Context, parts []*hms.Partition) (int32, error) {
	if err := f.enter(ctx, "AddPartitions"); err != nil {
		return 0, err
	}
	defer f.mu.Unlock()
	// All or nothing, as Hive's add_partitions.
	for _, p := range parts {
		tk := tableKey(p.DbName, p.TableName)
		t := f.tables[tk]
		if t == nil {
			return 0, &hms.InvalidObjectException{Message: "table " + tk.String() + " does not exist"}
		}
		if len(p.Values) != len(t.PartitionKeys) {
			return 0, &hms.MetaException{Message: fmt.Sprintf("%d values for %d partition keys", len(p.Values), len(t.PartitionKeys))}
		}
		if f.parts[partKey(tk, p.Values)] != nil {
			return 0, exists("partition %s", partKey(tk, p.Values))
		}
	}
	for _, p := range parts {
		tk := tableKey(p.DbName, p.TableName)
		f.parts[partKey(tk, p.Values)] = clone(p)
		f.logWrite(tk.DB, "add partition "+partKey(tk, p.Values).String(), p.Parameters)
	}
	f.addBatches = append(f.addBatches, len(parts))
	return int32(len(parts)), nil
}

func (f *fakeHMS) AlterPartitionsWithEnvironmentContext(ctx context.Context, db, table string, parts []*hms.Partition, env *hms.EnvironmentContext) error {
	if err := f.enter(ctx, "AlterPartitions"); err != nil {
		return err
	}
	defer f.mu.Unlock()
	f.envs = append(f.envs, env)
	tk := tableKey(db, table)
	for _, p := range parts {
		if f.parts[partKey(tk, p.Values)] == nil {
			return invalidOp("alter partition %s: it does not exist", partKey(tk, p.Values))
		}
	}
	for _, p := range parts {
		f.parts[partKey(tk, p.Values)] = clone(p)
		f.logWrite(tk.DB, "alter partition "+partKey(tk, p.Values).String(), p.Parameters)
	}
	return nil
}

func (f *fakeHMS) RenamePartition(ctx context.Context, db, table string, vals []string, p *hms.Partition) error {
	if err := f.enter(ctx, "RenamePartition"); err != nil {
		return err
	}
	defer f.mu.Unlock()
	tk := tableKey(db, table)
	old, nk := partKey(tk, vals), partKey(tk, p.Values)
	if f.parts[old] == nil {
		return invalidOp("rename partition %s: it does not exist", old)
	}
	if f.parts[nk] != nil {
		return invalidOp("rename partition %s to %s: it exists", old, nk)
	}
	delete(f.parts, old)
	f.parts[nk] = clone(p)
	f.logWrite(tk.DB, "rename partition "+old.String(), p.Parameters)
	return nil
}

func (f *fakeHMS) DropPartition(ctx context.Context, db, table string, vals []string, _ bool) (bool, error) {
	if err := f.enter(ctx, "DropPartition"); err != nil {
		return false, err
	}
	defer f.mu.Unlock()
	pk := partKey(tableKey(db, table), vals)
	if f.parts[pk] == nil {
		return false, noSuch("partition %s", pk)
	}
	delete(f.parts, pk)
	f.logWrite(pk.DB, "drop partition "+pk.String(), nil)
	return true, nil
}

func (f *fakeHMS) DropPartitionsReq(ctx context.Context, req *hms.DropPartitionsRequest) (*hms.DropPartitionsResult_, error) {
	if err := f.enter(ctx, "DropPartitionsReq"); err != nil {
		return nil, err
	}
	defer f.mu.Unlock()
	tk := tableKey(req.DbName, req.TblName)
	t := f.tables[tk]
	if t == nil {
		return nil, noSuch("table %s", tk)
	}
	if req.DeleteData == nil || *req.DeleteData {
		return nil, &hms.MetaException{Message: "the applier must never delete DR data with a partition"}
	}
	var drop []PartKey
	want := map[string]bool{}
	for _, n := range req.Parts.Names {
		want[n] = true
	}
	for pk, p := range f.parts {
		if pk.TableKey == tk && want[hivehms.PartitionName(t.PartitionKeys, p.Values)] {
			drop = append(drop, pk)
		}
	}
	if !req.IfExists && len(drop) != len(req.Parts.Names) {
		return nil, noSuch("some partitions of %s", tk)
	}
	for _, pk := range drop {
		delete(f.parts, pk)
		f.logWrite(pk.DB, "drop partition "+pk.String(), nil)
	}
	return &hms.DropPartitionsResult_{}, nil
}

// db returns a copy of a DR database, or nil.
func (f *fakeHMS) db(name string) *hms.Database {
	f.mu.Lock()
	defer f.mu.Unlock()
	return clone(f.dbs[name])
}

// table returns a copy of a DR table, or nil.
func (f *fakeHMS) table(db, name string) *hms.Table {
	f.mu.Lock()
	defer f.mu.Unlock()
	return clone(f.tables[tableKey(db, name)])
}

// part returns a copy of a DR partition, or nil.
func (f *fakeHMS) part(db, table string, values ...string) *hms.Partition {
	f.mu.Lock()
	defer f.mu.Unlock()
	return clone(f.parts[partKey(tableKey(db, table), values)])
}

// mark is a DR database's repl.last.id (0: no database).
func (f *fakeHMS) mark(db string) int64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	if d := f.dbs[db]; d != nil {
		return stamp(d.Parameters)
	}
	return 0
}

func (f *fakeHMS) marksOf(db string) []int64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.marks[db])
}

func (f *fakeHMS) writesOf(db string) []msWrite {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.writes[db])
}

// dump is the whole replica in a canonical text form.
func (f *fakeHMS) dump() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var lines []string
	for k, v := range f.dbs {
		lines = append(lines, "db "+k+" "+js(v))
	}
	for k, v := range f.tables {
		lines = append(lines, "table "+k.String()+" "+js(v))
	}
	for k, v := range f.parts {
		lines = append(lines, "part "+k.String()+" "+js(v))
	}
	sort.Strings(lines)
	return strings.Join(lines, "\n")
}

// ---- a fake Kafka cluster with the tailer's and copyd's records

// memRegistry is an in-memory schemas.Registry.
type memRegistry struct {
	mu   sync.Mutex
	byID []string
}

func (r *memRegistry) Register(_ context.Context, _, schema string) (int, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if i := slices.Index(r.byID, schema); i >= 0 {
		return i + 1, nil
	}
	r.byID = append(r.byID, schema)
	return len(r.byID), nil
}

func (r *memRegistry) SchemaByID(_ context.Context, id int) (string, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if id < 1 || id > len(r.byID) {
		return "", fmt.Errorf("schema %d: %w", id, schemas.ErrUnknownSchemaID)
	}
	return r.byID[id-1], nil
}

// kfix is a fake cluster holding the event topics of some databases and
// the completions topic, the DR metastore, and producers writing as the
// tailer and copyd do.
type kfix struct {
	t       *testing.T
	cluster *kfake.Cluster
	topics  kafka.Topics
	addrs   []string
	serde   *schemas.Serde
	tailer  *kgo.Client // transactional
	copyd   *kgo.Client // transactional
	adm     *kadm.Client
	ms      *fakeHMS
	files   *memFiles // the DR data files: copyd's completions put them, prunes remove them
}

func newKFix(t *testing.T, dbs ...string) *kfix {
	t.Helper()
	topics := kafka.Topics{Prefix: "hivedr"}
	var evTopics []string
	for _, db := range dbs {
		evTopics = append(evTopics, topics.Events(db))
	}
	cluster, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, evTopics...),
		kfake.SeedTopics(2, topics.Completions()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cluster.Close)
	f := &kfix{t: t, cluster: cluster, topics: topics, addrs: cluster.ListenAddrs(), ms: newFakeHMS(), files: newMemFiles()}
	if f.serde, err = schemas.NewSerde(context.Background(), &memRegistry{}); err != nil {
		t.Fatal(err)
	}
	f.tailer = f.client(kgo.TransactionalID("tailer"))
	f.copyd = f.client(kgo.TransactionalID("copyd"))
	f.adm = kadm.NewClient(f.client())
	return f
}

func (f *kfix) client(opts ...kgo.Opt) *kgo.Client {
	f.t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(f.addrs...)}, opts...)...)
	if err != nil {
		f.t.Fatal(err)
	}
	f.t.Cleanup(cl.Close)
	return cl
}

// rawRecord is a value the tailer would never write, on a database's topic.
type rawRecord struct {
	db    string
	value []byte
}

// txn produces recs in one committed transaction of cl and returns them
// with their offsets.
func (f *kfix) txn(cl *kgo.Client, recs []*kgo.Record) []*kgo.Record {
	f.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := cl.BeginTransaction(); err != nil {
		f.t.Fatal(err)
	}
	res := cl.ProduceSync(ctx, recs...)
	commit := kgo.TryCommit
	if res.FirstErr() != nil {
		commit = kgo.TryAbort
	}
	if err := cl.EndTransaction(ctx, commit); err != nil || res.FirstErr() != nil {
		f.t.Fatalf("transaction: %v, %v", res.FirstErr(), err)
	}
	return recs
}

// publish writes events, heartbeats and raw records to their databases'
// topics in one transaction, as the tailer does (key: event ID; headers:
// type and event ID), and returns the records.
func (f *kfix) publish(items ...any) []*kgo.Record {
	f.t.Helper()
	var recs []*kgo.Record
	for _, it := range items {
		var db, key, eventID string
		var v []byte
		var err error
		switch it := it.(type) {
		case *schemas.Event:
			db, key, eventID = it.Database, itoa(it.EventID), itoa(it.EventID)
			if isSnapshot(it.EventType) {
				key = fmt.Sprintf("snapshot/%s/%d", it.Snapshot.BootstrapID, it.Snapshot.Seq)
			}
			v, err = f.serde.Encode(it)
		case *schemas.Heartbeat:
			db, key = it.Database, "heartbeat"
			v, err = f.serde.Encode(it)
		case rawRecord:
			db, key, v = it.db, "raw", it.value
		default:
			f.t.Fatalf("publish %T", it)
		}
		if err != nil {
			f.t.Fatal(err)
		}
		r := &kgo.Record{Topic: f.topics.Events(db), Key: []byte(key), Value: v,
			Headers: []kgo.RecordHeader{{Key: kafka.HeaderType, Value: []byte(schemas.RecordName(it))}}}
		if eventID != "" {
			r.Headers = append(r.Headers, kgo.RecordHeader{Key: kafka.HeaderEventID, Value: []byte(eventID)})
		}
		recs = append(recs, r)
	}
	return f.txn(f.tailer, recs)
}

// publishAll publishes events in transactions of up to n.
func (f *kfix) publishAll(n int, evs []*schemas.Event) {
	f.t.Helper()
	for len(evs) > 0 {
		k := min(n, len(evs))
		items := make([]any, k)
		for i := range k {
			items[i] = evs[i]
		}
		f.publish(items...)
		evs = evs[k:]
	}
}

// complete publishes, as copyd does, a completion with status for each
// file of the events (all files when which is nil, else those whose
// task ID it accepts), in one transaction.
func (f *kfix) complete(status schemas.CopyStatus, which func(taskID string) bool, evs ...*schemas.Event) {
	f.t.Helper()
	var recs []*kgo.Record
	for _, ev := range evs {
		for _, file := range ev.Files {
			if which != nil && !which(file.TaskID) {
				continue
			}
			c := &schemas.CopyCompletion{TaskID: file.TaskID, EventID: ev.EventID, Database: ev.Database,
				SourceURI: file.URI, TargetURI: drPath(file.URI), Status: status, Attempts: 1}
			if status != schemas.StatusCopied {
				c.Error = "the test says so"
			} else {
				f.files.put(c.TargetURI)
			}
			v, err := f.serde.Encode(c)
			if err != nil {
				f.t.Fatal(err)
			}
			recs = append(recs, &kgo.Record{Topic: f.topics.Completions(), Key: []byte(c.TaskID), Value: v,
				Headers: []kgo.RecordHeader{{Key: kafka.HeaderType, Value: []byte(schemas.NameCopyCompletion)}}})
		}
	}
	if len(recs) > 0 {
		f.txn(f.copyd, recs)
	}
}

// committed returns the group's committed offset (-1: none) and the end
// offset of each database's topic.
func (f *kfix) committed(group string, dbs ...string) (committed, end map[string]int64) {
	f.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var topics []string
	for _, db := range dbs {
		topics = append(topics, f.topics.Events(db))
	}
	offs, err := f.adm.FetchOffsets(ctx, group)
	if err != nil {
		f.t.Fatal(err)
	}
	ends, err := f.adm.ListEndOffsets(ctx, topics...)
	if err != nil {
		f.t.Fatal(err)
	}
	committed, end = map[string]int64{}, map[string]int64{}
	for i, db := range dbs {
		committed[db] = -1
		if o, ok := offs.Lookup(topics[i], 0); ok && o.Err == nil {
			committed[db] = o.At
		}
		e, ok := ends.Lookup(topics[i], 0)
		if !ok || e.Err != nil {
			f.t.Fatalf("end offset of %s: %v", topics[i], e.Err)
		}
		end[db] = e.Offset
	}
	return committed, end
}

// ---- running appliers

// running is an Applier at work.
type running struct {
	a      *Applier
	reg    *prometheus.Registry
	store  *state.Completions
	cancel context.CancelFunc
	done   chan error
	once   sync.Once
}

// start runs an applier of group on the fixture's cluster and metastore,
// with its completion store in dir (a new directory: a lost store).
func (f *kfix) start(group, dir string, mod func(*Config)) *running {
	f.t.Helper()
	store, err := state.OpenCompletions(dir)
	if err != nil {
		f.t.Fatal(err)
	}
	cfg := Config{
		Brokers:     f.addrs,
		Topics:      f.topics,
		Group:       group,
		Source:      "src",
		Dial:        f.ms.dial,
		Policy:      testPolicy{},
		Completions: store,
		Codec:       f.serde,
		Files:       f.files,
		HaltAfter:   time.Minute,
		// The fixture's cluster has one broker.
		ReplicationFactor: 1,
		// Small, so topics are paused and resumed.
		LookAhead: 3,
		Logger:    testLogger(),
		Metrics:   NewMetrics(),
		// Faster than production, so the tests are quick: a long-poll
		// fetch returns soon after a transaction commits, and marked
		// offsets are committed soon after.
		KafkaOpts: []kgo.Opt{kgo.FetchMaxWait(100 * time.Millisecond), kgo.AutoCommitInterval(100 * time.Millisecond)},
	}
	if mod != nil {
		mod(&cfg)
	}
	a, err := New(cfg)
	if err != nil {
		f.t.Fatal(err)
	}
	r := &running{a: a, reg: prometheus.NewRegistry(), store: store, done: make(chan error, 1)}
	if err := cfg.Metrics.Register(r.reg); err != nil {
		f.t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	r.cancel = cancel
	go func() { r.done <- a.Run(ctx) }()
	f.t.Cleanup(func() { r.stop(f.t) })
	return r
}

// stop stops the applier, checks it returned nil, and closes its store.
func (r *running) stop(t *testing.T) {
	t.Helper()
	r.once.Do(func() {
		r.cancel()
		select {
		case err := <-r.done:
			if err != nil {
				t.Errorf("applier: %v", err)
			}
		case <-time.After(15 * time.Second):
			t.Fatal("the applier did not stop within 15s")
		}
		if err := r.store.Close(); err != nil {
			t.Error(err)
		}
	})
}

// metric returns the value of a gauge or counter with exactly labels, and
// whether it exists.
func (r *running) metric(t *testing.T, name string, labels map[string]string) (float64, bool) {
	t.Helper()
	m := r.series(t, name, labels)
	switch {
	case m.GetGauge() != nil:
		return m.GetGauge().GetValue(), true
	case m.GetCounter() != nil:
		return m.GetCounter().GetValue(), true
	}
	return 0, false
}

// series returns the series of metric name with exactly labels (nil: none).
func (r *running) series(t *testing.T, name string, labels map[string]string) *dto.Metric {
	t.Helper()
	mfs, err := r.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	next:
		for _, m := range mf.GetMetric() {
			if len(m.GetLabel()) != len(labels) {
				continue
			}
			for _, l := range m.GetLabel() {
				if v, ok := labels[l.GetName()]; !ok || v != l.GetValue() {
					continue next
				}
			}
			return m
		}
	}
	return nil
}

// sum adds up the series of a counter or gauge whose labels include match.
func (r *running) sum(t *testing.T, name string, match map[string]string) float64 {
	t.Helper()
	mfs, err := r.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var total float64
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	next:
		for _, m := range mf.GetMetric() {
			have := map[string]string{}
			for _, l := range m.GetLabel() {
				have[l.GetName()] = l.GetValue()
			}
			for k, v := range match {
				if have[k] != v {
					continue next
				}
			}
			total += m.GetGauge().GetValue() + m.GetCounter().GetValue()
		}
	}
	return total
}

// waitFor polls cond until it holds, failing the test after 10s with what
// cond last said.
func waitFor(t *testing.T, what string, cond func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		ok, state := cond()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s; %s", what, state)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// waitMark waits until db's DR repl.last.id is id.
func (f *kfix) waitMark(db string, id int64) {
	f.t.Helper()
	waitFor(f.t, fmt.Sprintf("DR database %s at event %d", db, id), func() (bool, string) {
		m := f.ms.mark(db)
		return m == id, fmt.Sprintf("it is at %d", m)
	})
}

// waitHalted waits until db's worker has halted for reason: the metric
// says so and the DR database carries the note.
func (f *kfix) waitHalted(r *running, db string, reason Reason) {
	f.t.Helper()
	waitFor(f.t, db+" halted ("+string(reason)+")", func() (bool, string) {
		v, _ := r.metric(f.t, "hivedr_applier_halted", map[string]string{"db": db, "reason": string(reason)})
		d := f.ms.db(db)
		note := ""
		if d != nil {
			note = d.Parameters[drparam.Halted]
		}
		return v == 1 && strings.Contains(note, string(reason)), fmt.Sprintf("metric %v, %s=%q", v, drparam.Halted, note)
	})
}

// waitWaiting waits until db's worker waits for files with its DR
// database at event mark. (An event may wait a moment for a completion
// already published, until the completions reader has stored it: the
// mark tells which event waits.)
func (f *kfix) waitWaiting(r *running, db string, mark int64) {
	f.t.Helper()
	waitFor(f.t, fmt.Sprintf("%s waiting for files after event %d", db, mark), func() (bool, string) {
		_, ok := r.metric(f.t, "hivedr_applier_waiting", map[string]string{"db": db, "reason": string(ReasonWaitingForFiles)})
		m := f.ms.mark(db)
		return ok && m == mark, fmt.Sprintf("waiting %v, DR database at %d", ok, m)
	})
}

// ---- histories

// at gives events their source times.
func at(evs ...*schemas.Event) []*schemas.Event {
	base := time.Now().Add(-time.Hour).Truncate(time.Second)
	for _, ev := range evs {
		ev.EventTime = base.Add(time.Duration(ev.EventID) * time.Second)
	}
	return evs
}

// twoDBs is the history of databases a (odd event IDs) and b (even), in
// source order, with data files for copyd. It ends at event 16.
func twoDBs() []*schemas.Event {
	ta := srcTable("a", "t", []string{"ds"}, "x int")
	tb := srcTable("b", "u", []string{"ds"}, "y string")
	pa1, pa2 := srcPart(ta, "1"), srcPart(ta, "2")
	pb1, pb2 := srcPart(tb, "1"), srcPart(tb, "2")
	return at(
		createDB(1, "a"),
		createDB(2, "b"),
		createTable(3, ta),
		createTable(4, tb),
		addParts(5, ta, []schemas.Partition{pa1}, partFile(pa1, "f5")),
		addParts(6, tb, []schemas.Partition{pb1}, partFile(pb1, "f6")),
		insertInto(7, ta, &pa1, partFile(pa1, "f7")),
		alterDB(8, "b", map[string]string{"k": "v8"}),
		alterTable(9, ta, withParam(ta, "k", "v9")),
		addParts(10, tb, []schemas.Partition{pb2}, partFile(pb2, "f10a"), partFile(pb2, "f10b")),
		addParts(11, ta, []schemas.Partition{pa2}, partFile(pa2, "f11")),
		insertInto(12, tb, &pb1, partFile(pb1, "f12")),
		alterPart(13, ta, pa1, partWithParam(pa1, "k", "v13")),
		dropParts(14, tb, pb1),
		insertInto(15, ta, &pa2, partFile(pa2, "f15a"), partFile(pa2, "f15b")),
		alterTable(16, tb, withParam(tb, "k", "v16")),
	)
}

// checkMarks checks the values a DR database's repl.last.id took: every
// event of want once, in order (each), or a strictly increasing
// subsequence of them ending at the last (runs write one watermark each).
func checkMarks(t *testing.T, db string, got, want []int64, each bool) {
	t.Helper()
	if each {
		if !slices.Equal(got, want) {
			t.Errorf("%s: DR repl.last.id moved through %v, want %v (each event once, in order)", db, got, want)
		}
		return
	}
	ok := len(got) > 0 && got[len(got)-1] == want[len(want)-1]
	for i, m := range got {
		ok = ok && slices.Contains(want, m) && (i == 0 || m > got[i-1])
	}
	if !ok {
		t.Errorf("%s: DR repl.last.id moved through %v, want an increasing subsequence of %v ending at its last", db, got, want)
	}
}

func idsOf(db string, evs []*schemas.Event) []int64 {
	var ids []int64
	for _, ev := range evs {
		if ev.Database == db {
			ids = append(ids, ev.EventID)
		}
	}
	return ids
}

// ---- the tests

// TestApplierOrderAndCheckpoint runs two databases' histories through one
// applier: each database's events are applied one after the other in
// event-ID order, and once stopped the group's committed offsets are the
// topics' ends, transaction markers included (lag 0).
//
// With applier.batch_partitions 1 every event is a plan of its own: the
// DR database's watermark moves through every event and no write is
// stamped before an earlier one. With runs (the default), the watermark
// moves once per run, through a subsequence of the events, and within a
// run the partitions are written before the table (batch.go).
func TestApplierOrderAndCheckpoint(t *testing.T) {
	for _, batch := range []int{1, 0} {
		t.Run(fmt.Sprintf("batch_partitions=%d", batch), func(t *testing.T) { testApplierOrderAndCheckpoint(t, batch) })
	}
}

func testApplierOrderAndCheckpoint(t *testing.T, batch int) {
	f := newKFix(t, "a", "b")
	evs := twoDBs()
	f.complete(schemas.StatusCopied, nil, evs...) // copies run ahead of metadata
	f.publishAll(3, evs)
	f.publish(&schemas.Heartbeat{Database: "b", ScannedEventID: 17, ScannedEventTime: time.Now(), Sent: time.Now(), Source: "src"})
	r := f.start("g", t.TempDir(), func(c *Config) { c.BatchPartitions = batch })
	f.waitMark("a", 15)
	f.waitMark("b", 16)
	// The last offsets are marked just after the last apply, then
	// committed within AutoCommitInterval.
	waitFor(t, "the group's offsets at the topics' ends", func() (bool, string) {
		c, e := f.committed("g", "a", "b")
		return c["a"] == e["a"] && c["b"] == e["b"], fmt.Sprintf("committed %v, ends %v", c, e)
	})
	r.stop(t)
	c, e := f.committed("g", "a", "b")
	for _, db := range []string{"a", "b"} {
		if c[db] != e[db] {
			t.Errorf("%s: committed offset %d after the stop, end offset %d: lag %d", db, c[db], e[db], e[db]-c[db])
		}
		checkMarks(t, db, f.ms.marksOf(db), idsOf(db, evs), batch == 1)
		if batch != 1 {
			continue
		}
		var last int64
		for i, w := range f.ms.writesOf(db) {
			if w.stamp != 0 && w.stamp < last {
				t.Errorf("%s: write %d (%s) stamped %d after a write of event %d", db, i, w.op, w.stamp, last)
			}
			last = max(last, w.stamp)
		}
	}
	for _, p := range []struct {
		db, table, values string
		stamp             int64 // 0: absent
	}{{"a", "t", "1", 13}, {"a", "t", "2", 15}, {"b", "u", "1", 0}, {"b", "u", "2", 10}} {
		got := f.ms.part(p.db, p.table, p.values)
		switch {
		case p.stamp == 0 && got != nil:
			t.Errorf("partition %s.%s [%s] exists; it was dropped", p.db, p.table, p.values)
		case p.stamp != 0 && (got == nil || stamp(got.Parameters) != p.stamp):
			t.Errorf("partition %s.%s [%s]: %s, want it at event %d", p.db, p.table, p.values, js(got), p.stamp)
		}
	}
	if got := f.ms.db("a").Parameters[drparam.Target]; got != drparam.TargetMark("src") {
		t.Errorf("DR database a: %s=%q", drparam.Target, got)
	}
}

// TestApplierWaitsForData checks data before metadata: an event whose
// files are not all copied is not applied, nor is any event after it,
// until the completions are published.
func TestApplierWaitsForData(t *testing.T) {
	f := newKFix(t, "a")
	ta := srcTable("a", "t", []string{"ds"}, "x int")
	p1 := srcPart(ta, "1")
	evs := at(
		createDB(1, "a"),
		createTable(2, ta),
		addParts(3, ta, []schemas.Partition{p1}, partFile(p1, "f3")),
		insertInto(4, ta, &p1, partFile(p1, "f4a"), partFile(p1, "f4b"), partFile(p1, "f4c")),
		alterDB(5, "a", map[string]string{"k": "v5"}),
	)
	f.publishAll(5, evs)
	r := f.start("g", t.TempDir(), nil)

	f.waitWaiting(r, "a", 2)
	if got := f.ms.part("a", "t", "1"); got != nil {
		t.Fatalf("the partition of event 3 was added before its file was copied: %s", js(got))
	}

	f.complete(schemas.StatusCopied, nil, evs[2])
	f.complete(schemas.StatusCopied, func(id string) bool { return id == "4-0" }, evs[3])
	f.waitMark("a", 3)
	if p := f.ms.part("a", "t", "1"); p == nil || stamp(p.Parameters) != 3 {
		t.Fatalf("partition after its file was copied: %s", js(p))
	}
	// Event 4 has one file of three: it waits (for 2 files: event 3
	// waited for 1), and so does event 5.
	waitFor(t, "event 4 waiting for two files", func() (bool, string) {
		v, _ := r.metric(t, "hivedr_applier_waiting_files", map[string]string{"db": "a"})
		return v == 2, fmt.Sprintf("waiting for %v files, DR database at %d", v, f.ms.mark("a"))
	})
	if v, _ := r.metric(t, "hivedr_applier_waiting", map[string]string{"db": "a", "reason": string(ReasonWaitingForFiles)}); v != 1 {
		t.Errorf("hivedr_applier_waiting{reason=waiting_for_files} = %v while waiting for two files, want the flag 1", v)
	}
	if m, p := f.ms.mark("a"), f.ms.part("a", "t", "1"); m != 3 || stamp(p.Parameters) != 3 {
		t.Fatalf("with a file of event 4 not copied: DR database at %d, partition at %d", m, stamp(p.Parameters))
	}

	f.complete(schemas.StatusCopied, func(id string) bool { return id != "4-0" }, evs[3])
	f.waitMark("a", 5)
	if p := f.ms.part("a", "t", "1"); stamp(p.Parameters) != 4 {
		t.Errorf("partition after event 4's files were copied: %s", js(p))
	}
	if _, ok := r.metric(t, "hivedr_applier_waiting", map[string]string{"db": "a", "reason": string(ReasonWaitingForFiles)}); ok {
		t.Error("hivedr_applier_waiting still set once nothing waits")
	}
	if _, ok := r.metric(t, "hivedr_applier_waiting_files", map[string]string{"db": "a"}); ok {
		t.Error("hivedr_applier_waiting_files still set once nothing waits")
	}
}

// TestApplierWaitsForTheControlTopic: Kafka refusing the applier control
// topic's creation at start (a broker restarting: REQUEST_TIMED_OUT) is
// waited out, not a stop of the applier; it then applies as usual.
func TestApplierWaitsForTheControlTopic(t *testing.T) {
	f := newKFix(t, "a")
	var mu sync.Mutex
	refused := 0
	f.cluster.ControlKey(int16(kmsg.CreateTopics), func(req kmsg.Request) (kmsg.Response, error, bool) {
		mu.Lock()
		defer mu.Unlock()
		r := req.(*kmsg.CreateTopicsRequest)
		if refused == 2 || len(r.Topics) != 1 || r.Topics[0].Topic != f.topics.ApplierControl() {
			if refused < 2 {
				f.cluster.KeepControl()
			}
			return nil, nil, false
		}
		f.cluster.KeepControl()
		refused++
		resp := r.ResponseKind().(*kmsg.CreateTopicsResponse)
		rt := kmsg.NewCreateTopicsResponseTopic()
		rt.Topic, rt.ErrorCode = r.Topics[0].Topic, kerr.RequestTimedOut.Code
		resp.Topics = append(resp.Topics, rt)
		return resp, nil, true
	})
	evs := at(createDB(1, "a"), alterDB(2, "a", map[string]string{"k": "v"}))
	f.publishAll(2, evs)
	r := f.start("g", t.TempDir(), nil)
	f.waitMark("a", 2)
	mu.Lock()
	defer mu.Unlock()
	if refused != 2 {
		t.Errorf("the control topic's creation was refused %d times, want 2", refused)
	}
	select {
	case err := <-r.done:
		t.Fatalf("the applier stopped: %v", err)
	default:
	}
}

// TestApplierHaltIsPerDatabase halts one database on an event the tailer
// could not decode: the other goes on, the halted one applies nothing
// after it, says why on its DR database and in the halted metric, and its
// offset stays before the event.
func TestApplierHaltIsPerDatabase(t *testing.T) {
	f := newKFix(t, "a", "b")
	ta := srcTable("a", "t", nil, "x int")
	tb := srcTable("b", "u", nil, "y int")
	evs := at(
		createDB(1, "a"), createDB(2, "b"),
		createTable(3, ta), createTable(4, tb),
		withErrors(alterTable(5, ta, withParam(ta, "k", "v5")), schemas.EventError{Kind: schemas.ErrDecode, Message: "bad JSON"}),
		alterTable(6, tb, withParam(tb, "k", "v6")),
		alterDB(7, "a", map[string]string{"k": "v7"}),
		alterDB(8, "b", map[string]string{"k": "v8"}),
	)
	f.publishAll(2, evs[:4])
	recs := f.publish(evs[4], evs[5])
	f.publishAll(2, evs[6:])
	r := f.start("g", t.TempDir(), nil)

	f.waitMark("b", 8)
	f.waitHalted(r, "a", "decode")
	if m := f.ms.mark("a"); m != 3 {
		t.Errorf("DR database a at event %d; it halted at event 5", m)
	}
	if note := f.ms.db("a").Parameters[drparam.Halted]; !strings.Contains(note, "event 5") || !strings.Contains(note, "bad JSON") {
		t.Errorf("%s=%q does not name event 5 and its error", drparam.Halted, note)
	}
	if _, ok := r.metric(t, "hivedr_applier_halted", map[string]string{"db": "b", "reason": "decode"}); ok {
		t.Error("database b is reported halted")
	}
	r.stop(t)
	c, e := f.committed("g", "a", "b")
	if halting := recs[0].Offset; c["a"] != halting {
		t.Errorf("a: committed offset %d, want %d (the halting event's)", c["a"], halting)
	}
	if c["b"] != e["b"] {
		t.Errorf("b: committed offset %d, want the end %d", c["b"], e["b"])
	}
}

// TestApplierHaltsOnUndecodableRecord halts a database at a record of its
// topic that does not decode.
func TestApplierHaltsOnUndecodableRecord(t *testing.T) {
	f := newKFix(t, "a", "b")
	evs := at(createDB(1, "a"), createDB(2, "b"), alterDB(3, "a", map[string]string{"k": "v3"}),
		alterDB(4, "b", map[string]string{"k": "v4"}))
	f.publish(evs[0], evs[1])
	f.publish(rawRecord{db: "a", value: []byte("not avro")})
	f.publish(evs[2], evs[3])
	r := f.start("g", t.TempDir(), nil)

	f.waitMark("b", 4)
	f.waitHalted(r, "a", ReasonUndecodableRecord)
	if m := f.ms.mark("a"); m != 1 {
		t.Errorf("DR database a at event %d, past the undecodable record", m)
	}
}

// TestApplierResumes stops an applier mid-stream and starts another with
// the same group and an empty completion store (a lost Pebble directory):
// it goes on from the committed offsets, reads the completions again from
// the start of the topic, and ends with the replica an uninterrupted run
// makes, each event applied once.
func TestApplierResumes(t *testing.T) {
	evs := twoDBs()
	var ref string
	t.Run("uninterrupted", func(t *testing.T) {
		f := newKFix(t, "a", "b")
		f.publishAll(4, evs)
		f.complete(schemas.StatusCopied, nil, evs...)
		r := f.start("g", t.TempDir(), nil)
		f.waitMark("a", 15)
		f.waitMark("b", 16)
		r.stop(t)
		ref = f.ms.dump()
	})
	if ref == "" {
		t.FailNow()
	}

	f := newKFix(t, "a", "b")
	f.publishAll(4, evs)
	// Copied before the stop: every file of events 1..9, and one of
	// event 10's two. So a stops at event 11, b at event 10.
	before := func(id string) bool {
		ev, _ := strconv.ParseInt(id[:strings.IndexByte(id, '-')], 10, 64)
		return ev < 10 || id == "10-0"
	}
	after := func(id string) bool { return !before(id) }
	f.complete(schemas.StatusCopied, before, evs...)
	r1 := f.start("g", t.TempDir(), nil)
	f.waitWaiting(r1, "a", 9)
	f.waitWaiting(r1, "b", 8)
	r1.stop(t)
	c, e := f.committed("g", "a", "b")
	if c["a"] <= 0 || c["a"] >= e["a"] || c["b"] <= 0 || c["b"] >= e["b"] {
		t.Fatalf("committed offsets %v at the stop, ends %v: not mid-stream", c, e)
	}

	f.complete(schemas.StatusCopied, after, evs...)
	r2 := f.start("g", t.TempDir(), nil)
	f.waitMark("a", 15)
	f.waitMark("b", 16)
	waitFor(t, "the group's offsets at the topics' ends", func() (bool, string) {
		c, e := f.committed("g", "a", "b")
		return c["a"] == e["a"] && c["b"] == e["b"], fmt.Sprintf("committed %v, ends %v", c, e)
	})
	// The second applier started at the committed offsets: it saw only
	// the events after them, none found already applied.
	if n := r2.sum(t, "hivedr_applier_events_total", nil); n != 7 {
		t.Errorf("the second applier handled %v events, want 7 (a's 11, 13, 15 and b's 10, 12, 14, 16)", n)
	}
	if n := r2.sum(t, "hivedr_applier_events_total", map[string]string{"result": string(ReasonAlreadyApplied)}); n != 0 {
		t.Errorf("the second applier found %v events already applied: it did not resume from the committed offsets", n)
	}
	// It read back the completion published before the stop.
	if _, ok, err := r2.store.Get("10-0"); !ok || err != nil {
		t.Errorf("the new completion store lacks task 10-0 (%v)", err)
	}
	r2.stop(t)

	for _, db := range []string{"a", "b"} {
		checkMarks(t, db, f.ms.marksOf(db), idsOf(db, evs), false)
	}
	if got := f.ms.dump(); got != ref {
		t.Errorf("replica after a restart differs from an uninterrupted run's:\n%s", diffStates(ref, got))
	}
}

// TestApplierSkipsEvent: an operator skips the event a database halted
// at; the skip is recorded on the DR database, the halt note goes, and
// the events after it are applied.
func TestApplierSkipsEvent(t *testing.T) {
	f := newKFix(t, "a")
	ta := srcTable("a", "t", nil, "x int")
	evs := at(
		createDB(1, "a"),
		createTable(2, ta),
		withErrors(alterTable(3, ta, withParam(ta, "k", "v3")), schemas.EventError{Kind: schemas.ErrUnknownEventType, Message: "what is this"}),
		alterTable(4, ta, withParam(ta, "k", "v4")),
	)
	f.publishAll(4, evs)
	r1 := f.start("g", t.TempDir(), nil)
	f.waitHalted(r1, "a", ReasonUnknownEventType)
	r1.stop(t)

	r2 := f.start("g", t.TempDir(), func(c *Config) {
		c.Skips = []Skip{{DB: "a", EventID: 3}}
		c.Operator = "op@host"
	})
	f.waitMark("a", 4)
	params := f.ms.db("a").Parameters
	note := params[drparam.SkippedPrefix+"3"]
	if !strings.Contains(note, "requested by op@host") || !strings.Contains(note, "skipped ALTER_TABLE event 3") {
		t.Errorf("%s3=%q does not say who skipped what", drparam.SkippedPrefix, note)
	}
	if h, ok := params[drparam.Halted]; ok {
		t.Errorf("%s=%q still set after the database went on", drparam.Halted, h)
	}
	if got := r2.sum(t, "hivedr_applier_events_total", map[string]string{"db": "a", "result": string(ReasonSkippedByOperator)}); got != 1 {
		t.Errorf("%v events counted skipped_by_operator, want 1", got)
	}
	// Event 3 changed nothing but the watermark; event 4 was applied.
	var tableWrites []msWrite
	for _, w := range f.ms.writesOf("a") {
		if strings.HasPrefix(w.op, "alter table") {
			tableWrites = append(tableWrites, w)
		}
	}
	if want := []msWrite{{"alter table a.t", 4}}; !slices.Equal(tableWrites, want) {
		t.Errorf("table writes %v, want %v", tableWrites, want)
	}
	if got, want := f.ms.marksOf("a"), []int64{1, 2, 3, 4}; !slices.Equal(got, want) {
		t.Errorf("DR repl.last.id moved through %v, want %v", got, want)
	}
	if _, ok := r2.metric(t, "hivedr_applier_halted", map[string]string{"db": "a", "reason": string(ReasonUnknownEventType)}); ok {
		t.Error("the second applier reports a halted")
	}
}

// TestApplierRebalanceResumesPausedTopic moves a paused topic (its worker
// waits for files with more than LookAhead events queued) to a second
// applier and back: the first applier must fetch it again.
func TestApplierRebalanceResumesPausedTopic(t *testing.T) {
	f := newKFix(t, "a", "b")
	var evs []*schemas.Event
	for i, db := range []string{"a", "b"} {
		tb := srcTable(db, "t", []string{"ds"}, "x int")
		p := srcPart(tb, "1")
		base := int64(100 * (i + 1))
		evs = append(evs, createDB(base+1, db), createTable(base+2, tb),
			addParts(base+3, tb, []schemas.Partition{p}, partFile(p, "f")))
		for j := int64(4); j <= 9; j++ {
			evs = append(evs, alterDB(base+j, db, map[string]string{"k": itoa(j)}))
		}
	}
	at(evs...)
	f.publishAll(3, evs)
	fast := func(c *Config) {
		c.KafkaOpts = append(c.KafkaOpts, kgo.HeartbeatInterval(100*time.Millisecond))
	}
	r1 := f.start("g", t.TempDir(), fast)
	paused := func(r *running) []string {
		r.a.mu.Lock()
		cl := r.a.cl
		r.a.mu.Unlock()
		if cl == nil {
			return nil
		}
		return cl.PauseFetchTopics()
	}
	owned := func(r *running) int {
		r.a.mu.Lock()
		defer r.a.mu.Unlock()
		return len(r.a.workers)
	}
	f.waitWaiting(r1, "a", 102)
	f.waitWaiting(r1, "b", 202)
	waitFor(t, "both topics paused", func() (bool, string) {
		p := paused(r1)
		return len(p) == 2, fmt.Sprintf("paused %v", p)
	})

	r2 := f.start("g", t.TempDir(), fast)
	waitFor(t, "a topic moved to the second applier", func() (bool, string) {
		n1, n2 := owned(r1), owned(r2)
		return n1 == 1 && n2 == 1, fmt.Sprintf("workers: %d and %d", n1, n2)
	})
	r2.stop(t)
	waitFor(t, "the topic back at the first applier", func() (bool, string) {
		n := owned(r1)
		return n == 2, fmt.Sprintf("workers %d, paused %v", n, paused(r1))
	})
	f.complete(schemas.StatusCopied, nil, evs...)
	f.waitMark("a", 109)
	f.waitMark("b", 209)
}

// TestApplierLookAheadOne pauses a topic at its second queued event and
// must resume it once the queue is drained.
func TestApplierLookAheadOne(t *testing.T) {
	f := newKFix(t, "a")
	evs := []*schemas.Event{createDB(1, "a")}
	for i := int64(2); i <= 6; i++ {
		evs = append(evs, alterDB(i, "a", map[string]string{"k": itoa(i)}))
	}
	at(evs...)
	f.publishAll(3, evs[:3])
	f.start("g", t.TempDir(), func(c *Config) { c.LookAhead = 1 })
	f.waitMark("a", 3)
	f.publishAll(3, evs[3:])
	f.waitMark("a", 6)
}

func testLogger() *slog.Logger {
	if os.Getenv("APPLIER_TEST_LOG") != "" {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	return slog.New(slog.NewTextHandler(io.Discard, nil))
}

// racyHMS is a fakeHMS whose first CreateTable creates the table and then
// fails AlreadyExists, as when a killed applier's create_table finishes
// on the metastore after its successor read the table as missing.
type racyHMS struct {
	*fakeHMS
	raced atomic.Bool
}

func (r *racyHMS) CreateTable(ctx context.Context, t *hms.Table) error {
	if err := r.fakeHMS.CreateTable(ctx, t); err != nil || r.raced.Swap(true) {
		return err
	}
	return exists("table %s.%s", t.DbName, t.TableName)
}

// lateHMS is a fakeHMS whose first CreateDatabase is lost in transit
// (the client times out) and still runs on the metastore: the retry finds
// it running and is refused with a MetaException, as the real metastore
// refused "Unable to create database managed directory" under load, and
// the lost call then completes.
type lateHMS struct {
	*fakeHMS
	calls atomic.Int32
}

func (l *lateHMS) CreateDatabase(ctx context.Context, db *hms.Database) error {
	switch l.calls.Add(1) {
	case 1:
		return thrift.NewTTransportException(thrift.TIMED_OUT, "read tcp 127.0.0.1:1->127.0.0.1:2: i/o timeout")
	case 2:
		if err := l.fakeHMS.CreateDatabase(ctx, db); err != nil { // the first call, ending late
			return err
		}
		return &hms.MetaException{Message: "Unable to create database managed directory, failed to create database " + db.Name}
	}
	return l.fakeHMS.CreateDatabase(ctx, db)
}

// TestApplierReplansAfterLossInTransit: a refusal that follows a call of
// the same plan lost in transit makes the worker read the DR state again
// and plan again, instead of halting the database.
func TestApplierReplansAfterLossInTransit(t *testing.T) {
	f := newKFix(t, "a")
	ta := srcTable("a", "t", nil, "x int")
	f.publishAll(2, at(createDB(1, "a"), createTable(2, ta)))
	late := &lateHMS{fakeHMS: f.ms}
	r := f.start("g", t.TempDir(), func(c *Config) {
		c.Dial = func(context.Context) (Metastore, func() error, error) { return late, func() error { return nil }, nil }
	})
	f.waitMark("a", 2)
	r.stop(t)
	if n := late.calls.Load(); n != 2 {
		t.Errorf("%d create_database calls, want 2 (lost, refused; then the plan made again finds the database)", n)
	}
	if f.ms.table("a", "t") == nil {
		t.Error("DR table a.t missing: the database halted at its create")
	}
}

// TestApplierReplansOnConflict: an object that exists (or is gone) against
// what the plan read makes the worker read the DR state again and plan
// again, instead of halting the database (the soak found the race).
func TestApplierReplansOnConflict(t *testing.T) {
	f := newKFix(t, "a")
	ta := srcTable("a", "t", nil, "x int")
	evs := at(createDB(1, "a"), createTable(2, ta), alterTable(3, ta, withParam(ta, "k", "v3")))
	f.publishAll(3, evs)
	racy := &racyHMS{fakeHMS: f.ms}
	r := f.start("g", t.TempDir(), func(c *Config) {
		c.Dial = func(context.Context) (Metastore, func() error, error) { return racy, func() error { return nil }, nil }
	})
	f.waitMark("a", 3)
	r.stop(t)
	if !racy.raced.Load() {
		t.Fatal("the racing create_table was never called")
	}
	if got := f.ms.table("a", "t"); got == nil || got.Parameters["k"] != "v3" {
		t.Errorf("DR table a.t: %s, want it altered by event 3", js(got))
	}
	if n := f.ms.callsOf("CreateTable"); n != 1 {
		t.Errorf("%d create_table calls, want 1 (the plan made again finds the table)", n)
	}
}

// TestApplierLoopGauge: the consume loop marks
// hivedr_applier_loop_timestamp_seconds on every round, idle ones too (no
// events: a poll returns after pollWait), so /healthz sees it alive.
func TestApplierLoopGauge(t *testing.T) {
	f := newKFix(t, "a")
	r := f.start("g", t.TempDir(), nil)
	loop := func() float64 { v, _ := r.metric(t, "hivedr_applier_loop_timestamp_seconds", nil); return v }
	waitFor(t, "a first round", func() (bool, string) { return loop() > 0, fmt.Sprintf("gauge %f", loop()) })
	first := loop()
	if now := float64(time.Now().UnixNano()) / 1e9; now-first > 60 || first > now {
		t.Errorf("loop gauge %f, want about now (%f)", first, now)
	}
	deadline := time.Now().Add(4 * pollWait)
	for loop() <= first {
		if time.Now().After(deadline) {
			t.Fatalf("the idle loop did not go round again within %s of its first round", 4*pollWait)
		}
		time.Sleep(50 * time.Millisecond)
	}
	r.stop(t)
}
