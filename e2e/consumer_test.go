package e2e

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	wl "github.com/hivedr/hivedr/e2e/workload"
	"github.com/hivedr/hivedr/internal/kafka"
	"github.com/hivedr/hivedr/internal/testenv"
	"github.com/hivedr/hivedr/schemas"
)

// pythonConsumer installs (or finds, cached) the Python consumer's venv
// with deploy/pyconsumer.sh and returns its python. A failed install
// fails the test: the interoperability check is never skipped.
func pythonConsumer(t *testing.T) string {
	t.Helper()
	cmd := exec.Command("bash", filepath.Join("..", "deploy", "pyconsumer.sh"))
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("deploy/pyconsumer.sh: %v\n%s", err, stderr.String())
	}
	py := strings.TrimSpace(string(out))
	if v, err := os.ReadFile(filepath.Join(filepath.Dir(filepath.Dir(py)), "versions.txt")); err == nil {
		t.Logf("python consumer: %s", grepLines(string(v), "confluent"))
	}
	return py
}

// catLine is one record as `hivedr cat` prints it, and as consume.py
// prints it (timestamp_ms instead of timestamp).
type catLine struct {
	Topic       string            `json:"topic"`
	Partition   int32             `json:"partition"`
	Offset      int64             `json:"offset"`
	Timestamp   time.Time         `json:"timestamp"`
	TimestampMS int64             `json:"timestamp_ms"`
	Key         string            `json:"key"`
	Headers     map[string]string `json:"headers"`
	Type        string            `json:"type"`
	Value       map[string]any    `json:"value"`
}

func parseLines(t *testing.T, who, out string) map[string]catLine {
	t.Helper()
	recs := map[string]catLine{}
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		if l == "" {
			continue
		}
		var r catLine
		if err := json.Unmarshal([]byte(l), &r); err != nil {
			t.Fatalf("%s printed a line that is not JSON: %v\n%s", who, err, l)
		}
		recs[fmt.Sprintf("%s/%d@%d", r.Topic, r.Partition, r.Offset)] = r
	}
	return recs
}

// diffJSON lists the paths at which two decoded JSON values differ.
func diffJSON(path string, a, b any) []string {
	am, aok := a.(map[string]any)
	bm, bok := b.(map[string]any)
	if aok && bok {
		var keys []string
		for k := range am {
			keys = append(keys, k)
		}
		for k := range bm {
			if _, ok := am[k]; !ok {
				keys = append(keys, k)
			}
		}
		sort.Strings(keys)
		var d []string
		for _, k := range keys {
			d = append(d, diffJSON(path+"."+k, am[k], bm[k])...)
		}
		return d
	}
	aa, aok := a.([]any)
	ba, bok := b.([]any)
	if aok && bok && len(aa) == len(ba) {
		var d []string
		for i := range aa {
			d = append(d, diffJSON(fmt.Sprintf("%s[%d]", path, i), aa[i], ba[i])...)
		}
		return d
	}
	if !reflect.DeepEqual(a, b) {
		return []string{fmt.Sprintf("%s: %v != %v", path, a, b)}
	}
	return nil
}

// wantOp is the op a reader expects for the event types this test makes.
func wantOp(typ string, truncate bool) string {
	switch {
	case strings.HasPrefix(typ, "HIVEDR_SNAPSHOT_"):
		return "r"
	case typ == "HIVEDR_DISCONTINUITY":
		return "m"
	case truncate:
		return "t"
	case typ == "CREATE_DATABASE", typ == "CREATE_TABLE", typ == "ADD_PARTITION":
		return "c"
	case typ == "ALTER_TABLE", typ == "ALTER_PARTITION", typ == "ALTER_PARTITIONS", typ == "INSERT",
		strings.HasPrefix(typ, "UPDATE_"):
		return "u"
	case strings.HasPrefix(typ, "DROP_"), strings.HasPrefix(typ, "DELETE_"):
		return "d"
	}
	return "?"
}

// TestConsumerPython publishes real events and a bootstrap with `hivedr
// tail` and reads the database's topic twice: with `hivedr cat` and with
// Confluent's Python client and its schema-registry Avro deserializer
// (read_committed), a consumer hivedr did not write. Both must see the same
// records, field by field, with the change-data-capture envelope (op,
// source_info, the payload's before and after) filled.
func TestConsumerPython(t *testing.T) {
	env := testenv.Require(t)
	py := pythonConsumer(t)
	ctx := ctxFor(t, 8*time.Minute)
	s := serde(t, env)
	src := env.HMS(t, testenv.Source)
	srcFS, _ := pipelineFS(t, env)
	w := wl.NewSource(src, srcFS, env.Get(t, "HIVEDR_HMS_SRC_EXTERNAL"))
	u := uniq(t)
	db := "cons_" + u

	// Before the tailer: a database for it to bootstrap (policy auto).
	if err := w.CreateDatabase(ctx, db); err != nil {
		t.Fatal(err)
	}
	if err := w.CreateTable(ctx, db, "orders", wl.TableSpec{Columns: []string{"id bigint", "amount double"}, PartitionKeys: []string{"dt"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := w.AddPartitions(ctx, db, "orders", [][]string{{"2026-12-01"}}, 3); err != nil {
		t.Fatal(err)
	}
	conf := tailerConf{prefix: "cons" + u, source: "site-" + u, kind: "thrift", start: itoa(currentEventID(t, ctx, src)),
		databases: "    - {name: " + db + ", bootstrap: auto}"}
	confFile := conf.write(t, env)
	topics := kafka.Topics{Prefix: conf.prefix}
	topic := topics.Events(db)
	p := startHivedr(t, "tailer", "tail", "-config", confFile)
	eventually(t, 3*time.Minute, "the bootstrap's END on "+topic, func() bool {
		if p.exited() {
			t.Fatalf("tailer exited:\n%s", tail(p.out.String(), 40))
		}
		td, err := env.KafkaAdmin(t).ListTopics(ctxFor(t, 10*time.Second), topic)
		if err != nil || td.Error() != nil {
			return false
		}
		for _, e := range events(readTopic(t, env, s, topic)) {
			if e.EventType == schemas.EventSnapshotEnd {
				return true
			}
		}
		return false
	})

	// Then changes of every kind.
	steps := []struct {
		what string
		do   func() error
	}{
		{"create table", func() error {
			return w.CreateTable(ctx, db, "clients", wl.TableSpec{Columns: []string{"id bigint", "name string"}})
		}},
		{"insert", func() error { _, err := w.Insert(ctx, db, "clients", nil, 4); return err }},
		{"add column", func() error { return w.AlterTableAddColumn(ctx, db, "clients", "email string") }},
		{"add partition", func() error {
			_, err := w.AddPartitions(ctx, db, "orders", [][]string{{"2026-12-02"}}, 2)
			return err
		}},
		{"truncate", func() error { return w.Truncate(ctx, db, "clients", nil) }},
		{"drop partition", func() error { return w.DropPartitions(ctx, db, "orders", [][]string{{"2026-12-01"}}, false) }},
		{"drop table", func() error { return w.DropTable(ctx, db, "clients", false) }},
	}
	for _, st := range steps {
		if err := st.do(); err != nil {
			t.Fatalf("%s: %v", st.what, err)
		}
	}
	waitCheckpoint(t, env, s, conf, currentEventID(t, ctx, src), p, 2*time.Minute)
	p.stop(t) // no more heartbeats: both readers see the same topic

	catOut := runCmd(t, hivedrBin(t), "cat", "-config", confFile, topic)
	cat := parseLines(t, "hivedr cat", catOut)
	if len(cat) < 10 {
		t.Fatalf("hivedr cat printed %d records of %s, want the bootstrap and the changes:\n%s", len(cat), topic, catOut)
	}
	cmd := exec.Command(py, filepath.Join("consumer", "consume.py"), "--brokers", strings.Join(env.KafkaBrokers(t), ","),
		"--registry", env.Get(t, "HIVEDR_SCHEMA_REGISTRY"), "--expect", fmt.Sprint(len(cat)), "--timeout", "120", topic)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	pyOut, err := cmd.Output()
	if err != nil {
		t.Fatalf("consume.py: %v\n%s\n%s", err, stderr.String(), pyOut)
	}
	pyRecs := parseLines(t, "consume.py", string(pyOut))
	if len(pyRecs) != len(cat) {
		t.Fatalf("python consumer read %d records, hivedr cat %d", len(pyRecs), len(cat))
	}

	ops := map[string]int{}
	var types []string
	positions := make([]string, 0, len(cat))
	for pos := range cat {
		positions = append(positions, pos)
	}
	slices.SortFunc(positions, func(a, b string) int {
		return int(cat[a].Offset - cat[b].Offset)
	})
	for _, pos := range positions {
		c := cat[pos]
		r, ok := pyRecs[pos]
		if !ok {
			t.Errorf("python consumer did not read %s", pos)
			continue
		}
		if r.Key != c.Key || !reflect.DeepEqual(r.Headers, c.Headers) || r.TimestampMS != c.Timestamp.UnixMilli() {
			t.Errorf("%s: python key %q headers %v ts %d; cat key %q headers %v ts %s", pos, r.Key, r.Headers, r.TimestampMS, c.Key, c.Headers, c.Timestamp)
		}
		if d := diffJSON("value", c.Value, r.Value); len(d) > 0 {
			t.Errorf("%s (%s): cat and python differ:\n  %s", pos, c.Type, strings.Join(d, "\n  "))
		}
		if c.Type != schemas.NameMetastoreEvent {
			continue
		}
		// The envelope, as the Python reader got it.
		v := r.Value
		typ, _ := v["event_type"].(string)
		types = append(types, typ)
		truncate := false
		if pl, ok := v["payload"].(map[string]any); ok {
			truncate, _ = pl["is_truncate"].(bool)
		}
		op, _ := v["op"].(string)
		ops[op]++
		if want := wantOp(typ, truncate); op != want {
			t.Errorf("%s %s: op %q, want %q", pos, typ, op, want)
		}
		si, ok := v["source_info"].(map[string]any)
		if !ok {
			t.Errorf("%s %s: no source_info: %v", pos, typ, v["source_info"])
			continue
		}
		want := map[string]any{"name": conf.source, "metastore": env.Get(t, "HIVEDR_HMS_SRC"), "reader": "thrift", "catalog": "hive",
			"event_id": v["event_id"], "event_time": v["event_time"], "database": db, "table": v["table"], "snapshot": op == "r"}
		for k, wv := range want {
			if !reflect.DeepEqual(si[k], wv) {
				t.Errorf("%s %s: source_info.%s = %v, want %v", pos, typ, k, si[k], wv)
			}
		}
		if ver, _ := si["version"].(string); ver == "" {
			t.Errorf("%s %s: source_info.version empty", pos, typ)
		}
		// Images: a create has an after and no before, a drop the reverse.
		if pl, ok := v["payload"].(map[string]any); ok && (typ == "CREATE_TABLE" || typ == "DROP_TABLE") {
			if (pl["before"] == nil) != (typ == "CREATE_TABLE") || (pl["after"] == nil) != (typ == "DROP_TABLE") {
				t.Errorf("%s %s: payload before %v after %v", pos, typ, pl["before"] != nil, pl["after"] != nil)
			}
		}
	}
	t.Logf("%d records; ops %v; event types %v", len(cat), ops, types)
	for _, op := range []string{"r", "c", "u", "t", "d"} {
		if ops[op] == 0 {
			t.Errorf("no record with op %q among %v", op, types)
		}
	}
	if !slices.Contains(types, "HIVEDR_SNAPSHOT_PARTITION") {
		t.Errorf("no bootstrap partition record among %v", types)
	}
}
