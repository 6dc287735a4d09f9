package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/beltran/gohive/hive_metastore"
	"github.com/jackc/pgx/v5"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sr"

	wl "github.com/hivedr/hivedr/e2e/workload"
	"github.com/hivedr/hivedr/internal/hms"
	"github.com/hivedr/hivedr/internal/kafka"
	"github.com/hivedr/hivedr/internal/testenv"
	"github.com/hivedr/hivedr/producer/cdc"
	"github.com/hivedr/hivedr/schemas"
)

// viewRecord is one record of a change view topic, decoded.
type viewRecord struct {
	offset int64
	cdc.Record
}

func (r viewRecord) String() string {
	op := string(r.Op)
	if r.Tombstone {
		op = "tombstone"
	}
	return fmt.Sprintf("@%d %s %s event %d", r.offset, op, viewKey(r.Key), r.EventID)
}

func viewKey(k cdc.Key) string {
	s := k.Database
	if k.Table != "" {
		s += "." + k.Table
	}
	if k.Partition != "" {
		s += "/" + k.Partition
	}
	return s
}

// viewReader reads change view topics from the stack.
type viewReader struct {
	t     *testing.T
	env   *testenv.Env
	codec *cdc.Codec
	opts  []kgo.Opt
}

// viewCodec is the change view's codec over the stack's schema registry.
func viewCodec(t testing.TB, env *testenv.Env) *cdc.Codec {
	t.Helper()
	cl, err := sr.NewClient(sr.URLs(env.Get(t, "HIVEDR_SCHEMA_REGISTRY")))
	if err != nil {
		t.Fatal(err)
	}
	codec, err := cdc.NewCodec(schemas.NewSRRegistry(cl))
	if err != nil {
		t.Fatal(err)
	}
	return codec
}

func newViewReader(t *testing.T, env *testenv.Env) *viewReader {
	t.Helper()
	return &viewReader{t: t, env: env, codec: viewCodec(t, env), opts: []kgo.Opt{kgo.SeedBrokers(env.KafkaBrokers(t)...)}}
}

// read returns topic's committed records (none if it does not exist yet).
func (v *viewReader) read(ctx context.Context, topic string) []viewRecord {
	v.t.Helper()
	adm := v.env.KafkaAdmin(v.t)
	ends, err := adm.ListEndOffsets(ctx, topic)
	if err != nil {
		v.t.Fatal(err)
	}
	if o, ok := ends.Lookup(topic, 0); !ok || o.Err != nil {
		return nil
	}
	cl, err := kgo.NewClient(v.opts...)
	if err != nil {
		v.t.Fatal(err)
	}
	defer cl.Close()
	end, err := kafka.CommittedEnd(ctx, cl, topic, 0)
	if err != nil {
		v.t.Fatal(err)
	}
	starts, err := adm.ListStartOffsets(ctx, topic)
	if err != nil {
		v.t.Fatal(err)
	}
	from := int64(0)
	if o, ok := starts.Lookup(topic, 0); ok && o.Err == nil {
		from = o.Offset
	}
	var out []viewRecord
	err = kafka.EachCommitted(ctx, v.opts, topic, 0, from, end, func(r *kgo.Record) error {
		d, err := v.codec.Decode(ctx, r.Key, r.Value)
		if err != nil {
			return fmt.Errorf("%s at %d: %w", topic, r.Offset, err)
		}
		out = append(out, viewRecord{offset: r.Offset, Record: d})
		return nil
	})
	if err != nil {
		v.t.Fatal(err)
	}
	return out
}

// live is what a reader of recs holds at the end: each key's last
// record, deletes and tombstones removing it.
func live(recs []viewRecord) map[string]bool {
	m := map[string]bool{}
	for _, r := range recs {
		k := viewKey(r.Key)
		if r.Tombstone || r.Op == cdc.OpDelete {
			delete(m, k)
		} else {
			m[k] = true
		}
	}
	return m
}

// sourceObjects lists the source metastore's databases, tables (the
// pipeline's exclusions, tmp_*, left out) and partitions as view keys.
func sourceObjects(t *testing.T, ctx context.Context, src *hms.Client, dbs ...string) map[string]bool {
	t.Helper()
	m := map[string]bool{}
	for _, db := range dbs {
		if _, err := src.GetDatabase(ctx, db); err != nil {
			continue
		}
		m[db] = true
		tables, err := src.GetAllTables(ctx, db)
		if err != nil {
			t.Fatal(err)
		}
		for _, tb := range tables {
			if strings.HasPrefix(tb, "tmp_") {
				continue
			}
			m[db+"."+tb] = true
			parts, err := src.GetPartitionNames(ctx, db, tb, -1)
			if err != nil {
				t.Fatal(err)
			}
			for _, p := range parts {
				m[db+"."+tb+"/"+p] = true
			}
		}
	}
	return m
}

func diffKeys(got, want map[string]bool) string {
	var extra, missing []string
	for k := range got {
		if !want[k] {
			extra = append(extra, k)
		}
	}
	for k := range want {
		if !got[k] {
			missing = append(missing, k)
		}
	}
	if len(extra)+len(missing) == 0 {
		return ""
	}
	sort.Strings(extra)
	sort.Strings(missing)
	return fmt.Sprintf("not on the source: %v; missing from the view: %v", extra, missing)
}

// waitView waits until each database's view topic holds a record of
// table marker (the workload's last step made it in each): every event
// of the database before it is then in the view.
func (v *viewReader) waitView(ctx context.Context, prefix, marker string, p *pipeline, dbs ...string) {
	v.t.Helper()
	poll(v.t, 3*time.Minute, 200*time.Millisecond, "the change view reached the marker table "+marker, func() bool {
		p.checkAlive()
		for _, db := range dbs {
			if !live(v.read(ctx, kafka.Topics{Prefix: prefix}.CDC(db)))[db+"."+marker] {
				return false
			}
		}
		return true
	})
}

// startStream starts a tailer with the change view (tailer line cdc)
// over two new databases, named from prefix, and returns what the stream
// tests use.
func startStream(t *testing.T, prefix, cdc string) (ctx context.Context, src *hms.Client, p *pipeline, w *wl.Source, v *viewReader, db1, db2 string) {
	t.Helper()
	env := testenv.Require(t)
	u := uniq(t)
	db1, db2 = prefix+"_sales_"+u, prefix+"_archive_"+u
	ctx = ctxFor(t, 10*time.Minute)
	src = env.HMS(t, testenv.Source)
	srcFS, _ := pipelineFS(t, env)
	p = newPipeline(t, env, []string{db1, db2}, currentEventID(t, ctx, src))
	p.withTailer(cdc)
	p.startTail()
	w = wl.NewSource(src, srcFS, env.Get(t, "HIVEDR_HMS_SRC_EXTERNAL"))
	return ctx, src, p, w, newViewReader(t, env), db1, db2
}

// TestStreamExactlyOnce runs the pipeline scenario and a bootstrap of one
// database with the change view on, killing the tailer (-9) right after
// the view has written some of a step's records, three times: every view
// record is on its topic exactly once, each object's records in the
// order of their events, and the view's live objects at the end are the
// source's.
func TestStreamExactlyOnce(t *testing.T) {
	rng := testRand(t)
	ctx, src, p, w, v, db1, db2 := startStream(t, "st", "cdc: {enabled: true}")
	topics := kafka.Topics{Prefix: p.prefix}

	steps := scenario(db1, db2)
	kills := map[int]bool{}
	for len(kills) < 3 {
		// A kill waits for the view's records of its step: not after the
		// step whose tables are all out of the scope (it has none).
		if i := 2 + rng.IntN(len(steps)-2); steps[i].name != "excluded table churns" {
			kills[i] = true
		}
	}
	viewed := func() int { return len(v.read(ctx, topics.CDC(db1))) + len(v.read(ctx, topics.CDC(db2))) }
	for i, st := range steps {
		before := viewed()
		if err := st.run(ctx, w); err != nil {
			t.Fatalf("workload step %q: %v", st.name, err)
		}
		if i == 6 {
			p.requestBootstrap([]string{db1}, nil)
		}
		if !kills[i] {
			continue
		}
		// The kill lands once the view has written some of this step's
		// records: in the middle of the work, not between steps.
		poll(t, 2*time.Minute, 5*time.Millisecond, "view records of step "+st.name, func() bool {
			p.checkAlive()
			return viewed() > before
		})
		p.tail.kill9()
		t.Logf("tailer killed after step %q with %d view records", st.name, viewed())
		p.startTail()
	}
	const marker = "zz_marker"
	for _, db := range []string{db1, db2} {
		if err := w.CreateTable(ctx, db, marker, wl.TableSpec{Columns: []string{"id int"}}); err != nil {
			t.Fatal(err)
		}
	}
	v.waitView(ctx, p.prefix, marker, p, db1, db2)

	boot := 0
	for _, db := range []string{db1, db2} {
		recs := v.read(ctx, topics.CDC(db))
		seen := map[string]int64{} // (key, event, op) -> offset
		last := map[string]int64{} // key -> its last record's event
		for i, r := range recs {
			if r.Tombstone {
				if i == 0 || recs[i-1].Op != cdc.OpDelete || recs[i-1].Key != r.Key {
					t.Errorf("%s: %s does not follow its delete", topics.CDC(db), r)
				}
				continue
			}
			if r.Op == cdc.OpRead {
				boot++
			}
			id := fmt.Sprintf("%s %d %s", viewKey(r.Key), r.EventID, r.Op)
			if o, ok := seen[id]; ok {
				t.Errorf("%s: %s twice (also at offset %d)", topics.CDC(db), r, o)
			}
			seen[id] = r.offset
			k := viewKey(r.Key)
			if prev, ok := last[k]; ok && r.EventID < prev {
				t.Errorf("%s: %s after a record of event %d of the same object", topics.CDC(db), r, prev)
			}
			last[k] = r.EventID
		}
		t.Logf("%s: %d records", topics.CDC(db), len(recs))
		if d := diffKeys(live(recs), sourceObjects(t, ctx, src, db)); d != "" {
			t.Errorf("%s: %s", topics.CDC(db), d)
		}
	}
	if boot == 0 {
		t.Error("no snapshot record (op r) in the view after the bootstrap of " + db1)
	}
}

// TestStreamCompaction gives the view's topics settings that let Kafka
// compact them at once, runs the pipeline scenario with drops, renames
// and re-creations, and waits until the compacted topics hold exactly
// one record per live source object: no deleted object, no tombstone,
// no older state.
func TestStreamCompaction(t *testing.T) {
	ctx, src, p, w, v, db1, db2 := startStream(t, "sc",
		`cdc: {enabled: true, topic_configs: {segment.ms: "500", min.cleanable.dirty.ratio: "0.01", delete.retention.ms: "0", min.compaction.lag.ms: "0"}}`)
	topics := kafka.Topics{Prefix: p.prefix}
	for _, st := range scenario(db1, db2) {
		if err := st.run(ctx, w); err != nil {
			t.Fatalf("workload step %q: %v", st.name, err)
		}
	}
	const marker = "zz_marker"
	for _, db := range []string{db1, db2} {
		if err := w.CreateTable(ctx, db, marker, wl.TableSpec{Columns: []string{"id int"}}); err != nil {
			t.Fatal(err)
		}
	}
	v.waitView(ctx, p.prefix, marker, p, db1, db2)
	written := map[string]int{}
	for _, db := range []string{db1, db2} {
		written[db] = len(v.read(ctx, topics.CDC(db)))
	}

	// Kafka compacts only closed segments: each round adds a column to
	// the marker table (a record in a new segment), so the records before
	// it can be cleaned, then looks.
	// Rounds are 2 s apart, past segment.ms (500 ms): each round's
	// record rolls the segment the round before wrote to.
	var last string
	defer func() {
		if t.Failed() && last != "" {
			t.Logf("last difference: %s", last)
		}
	}()
	round := 0
	poll(t, 4*time.Minute, 2*time.Second, "the compacted view to hold exactly the live objects", func() bool {
		p.checkAlive()
		round++
		for _, db := range []string{db1, db2} {
			if err := w.AlterTableAddColumn(ctx, db, marker, fmt.Sprintf("c%d int", round)); err != nil {
				t.Fatal(err)
			}
		}
		last = ""
		for _, db := range []string{db1, db2} {
			recs := v.read(ctx, topics.CDC(db))
			want := sourceObjects(t, ctx, src, db)
			keys := map[string]int{}
			for _, r := range recs {
				if r.Tombstone || r.Op == cdc.OpDelete {
					last += fmt.Sprintf("%s: %s left; ", db, r)
					continue
				}
				keys[viewKey(r.Key)]++
			}
			for k, n := range keys {
				if n > 1 && !strings.HasSuffix(k, "."+marker) {
					last += fmt.Sprintf("%s: %d records of %s; ", db, n, k)
				}
			}
			got := map[string]bool{}
			for k := range keys {
				got[k] = true
			}
			if d := diffKeys(got, want); d != "" {
				last += db + ": " + d + "; "
			}
		}
		return last == ""
	})
	for _, db := range []string{db1, db2} {
		t.Logf("%s: %d records written, %d after compaction", topics.CDC(db), written[db], len(v.read(ctx, topics.CDC(db))))
	}
}

// flinkJVMFlags are the flags Flink 2.0 needs on Java 17 (its own
// scripts pass the same): Kryo and Pekko reach into the JDK's internals.
var flinkJVMFlags = []string{
	"--add-exports=java.base/sun.net.util=ALL-UNNAMED",
	"--add-opens=java.base/java.lang=ALL-UNNAMED",
	"--add-opens=java.base/java.lang.reflect=ALL-UNNAMED",
	"--add-opens=java.base/java.io=ALL-UNNAMED",
	"--add-opens=java.base/java.net=ALL-UNNAMED",
	"--add-opens=java.base/java.nio=ALL-UNNAMED",
	"--add-opens=java.base/sun.nio.ch=ALL-UNNAMED",
	"--add-opens=java.base/java.text=ALL-UNNAMED",
	"--add-opens=java.base/java.time=ALL-UNNAMED",
	"--add-opens=java.base/java.util=ALL-UNNAMED",
	"--add-opens=java.base/java.util.concurrent=ALL-UNNAMED",
	"--add-opens=java.base/java.util.concurrent.atomic=ALL-UNNAMED",
	"--add-opens=java.base/java.util.concurrent.locks=ALL-UNNAMED",
	"-Xmx768m",
}

// TestStreamFlinkSQL runs a Flink SQL job (Flink's own jars from Maven
// Central, a local mini-cluster: e2e/stack/flink/FlinkView.java) that
// reads the change view topics with Flink's debezium-avro-confluent
// format against the stack's registry and keeps a Postgres table of the
// objects up to date with Flink's JDBC connector (an upsert by key, a
// delete on a d record). After the pipeline scenario (creates,
// partitions, inserts, renames within and across databases, drops, a
// table made again with other partition keys) and a bootstrap of one
// database, the table holds exactly the source metastore's databases,
// tables and partitions, each with its kind and location. Kafka
// Connect's JDBC sink would need a Confluent-compatible Avro converter,
// and none on Maven Central reads this registry (docs/change-topics.md),
// so Flink's JDBC connector is the sink here.
func TestStreamFlinkSQL(t *testing.T) {
	env := testenv.Require(t)
	cpFile, java := env.Get(t, "HIVEDR_FLINK_CLASSPATH"), env.Get(t, "HIVEDR_JAVA17")
	cp, err := os.ReadFile(cpFile)
	if err != nil {
		t.Fatalf("the Flink job's classpath (make stack-up resolves it): %v", err)
	}
	ctx, src, p, w, v, db1, db2 := startStream(t, "sf", "cdc: {enabled: true}")

	// The sink table, in the stack's test database.
	pc, err := pgx.ParseConfig(env.Get(t, "HIVEDR_POSTGRES_TEST_DSN"))
	if err != nil {
		t.Fatal(err)
	}
	conn, err := pgx.ConnectConfig(ctx, pc)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	table := "flink_view_" + uniq(t)
	if _, err := conn.Exec(ctx, `CREATE TABLE `+table+` (kind TEXT, db TEXT, tbl TEXT, part TEXT,
		location TEXT, owner TEXT, table_type TEXT, columns TEXT, partition_keys TEXT, input_format TEXT,
		serde_lib TEXT, parameters TEXT, create_time BIGINT, write_id BIGINT, PRIMARY KEY (db, tbl, part))`); err != nil {
		t.Fatal(err)
	}
	defer conn.Exec(context.Background(), "DROP TABLE "+table)

	jdbc := fmt.Sprintf("jdbc:postgresql://%s:%d/%s", pc.Host, pc.Port, pc.Database)
	pattern := strings.ReplaceAll(p.prefix+".cdc.", ".", `\.`) + ".*"
	args := append(append([]string{}, flinkJVMFlags...), "-cp", strings.TrimSpace(string(cp)), "stack/flink/FlinkView.java",
		strings.Join(env.KafkaBrokers(t), ","), env.Get(t, "HIVEDR_SCHEMA_REGISTRY"), pattern, jdbc, table, pc.User, pc.Password, "flink-"+p.prefix)
	flink := startProc(t, "flink", exec.Command(java, args...))

	for i, st := range scenario(db1, db2) {
		if err := st.run(ctx, w); err != nil {
			t.Fatalf("workload step %q: %v", st.name, err)
		}
		if i == 6 {
			p.requestBootstrap([]string{db1}, nil)
		}
	}
	const marker = "zz_marker"
	for _, db := range []string{db1, db2} {
		if err := w.CreateTable(ctx, db, marker, wl.TableSpec{Columns: []string{"id int"}}); err != nil {
			t.Fatal(err)
		}
	}
	v.waitView(ctx, p.prefix, marker, p, db1, db2)

	want := sourceObjects(t, ctx, src, db1, db2)
	var last string
	defer func() {
		if t.Failed() && last != "" {
			t.Logf("last difference: %s", last)
		}
	}()
	poll(t, 5*time.Minute, time.Second, "the Flink job's table equal to the source's objects", func() bool {
		if flink.exited() {
			t.Fatalf("the Flink job exited:\n%s", tail(flink.out.String(), 80))
		}
		rows, err := conn.Query(ctx, `SELECT kind, db, tbl, part, location FROM `+table)
		if err != nil {
			t.Fatal(err)
		}
		got := map[string]bool{}
		kinds := ""
		for rows.Next() {
			var kind, db, tb, part, loc string
			if err := rows.Scan(&kind, &db, &tb, &part, &loc); err != nil {
				t.Fatal(err)
			}
			k := viewKey(cdc.Key{Database: db, Table: tb, Partition: part})
			got[k] = true
			if want := (cdc.Key{Database: db, Table: tb, Partition: part}).Kind(); kind != want {
				kinds += fmt.Sprintf("%s is a %s in the table, want %s; ", k, kind, want)
			}
		}
		if err := rows.Err(); err != nil {
			t.Fatal(err)
		}
		last = diffKeys(got, want) + kinds
		return last == ""
	})
	// The images are the source's: each table's location, say.
	rows, err := conn.Query(ctx, `SELECT db, tbl, location FROM `+table+` WHERE kind = 'table'`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	n := 0
	for rows.Next() {
		var db, tb, loc string
		if err := rows.Scan(&db, &tb, &loc); err != nil {
			t.Fatal(err)
		}
		st, err := src.GetTableReq(ctx, &hive_metastore.GetTableRequest{DbName: db, TblName: tb})
		if err != nil {
			t.Fatal(err)
		}
		if l := st.Table.Sd.Location; l != loc {
			t.Errorf("%s.%s: location %s in the Flink job's table, %s on the source", db, tb, loc, l)
		}
		n++
	}
	t.Logf("the Flink job's table holds the %d objects of the source (%d tables, their locations the source's)", len(want), n)
}
