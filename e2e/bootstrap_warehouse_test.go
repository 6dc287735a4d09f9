package e2e

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/beltran/gohive/hive_metastore"
	"github.com/twmb/franz-go/pkg/kadm"

	wl "github.com/hivedr/hivedr/e2e/workload"
	"github.com/hivedr/hivedr/internal/drparam"
	"github.com/hivedr/hivedr/internal/kafka"
	"github.com/hivedr/hivedr/internal/testenv"
	"github.com/hivedr/hivedr/schemas"
)

// warehouseWriter keeps changing a populated warehouse while it is
// bootstrapped: it adds partitions with files, inserts, overwrites,
// renames external tables and drops partitions and tables, one step after
// the other, its choices from the test's seeded random source. It keeps a
// model of what is live so that every step names an object that exists.
type warehouseWriter struct {
	w      *wl.Source
	db     string
	rng    *rand.Rand
	tables map[string]*liveTable // by current name
	added  int
	steps  map[string]int // done, by kind
}

type liveTable struct {
	spec    wl.WarehouseTable
	name    string
	renamed bool
	parts   [][]string
}

func newWarehouseWriter(w *wl.Source, spec wl.WarehouseSpec, rng *rand.Rand) *warehouseWriter {
	ww := &warehouseWriter{w: w, db: spec.Database, rng: rng, tables: map[string]*liveTable{}, steps: map[string]int{}}
	for _, t := range spec.Layout() {
		lt := &liveTable{spec: t, name: t.Name}
		for i := 0; i < t.Partitions; i++ {
			lt.parts = append(lt.parts, t.PartitionValues(i))
		}
		ww.tables[t.Name] = lt
	}
	return ww
}

// pick returns a random live table that satisfies ok (nil if none).
func (ww *warehouseWriter) pick(ok func(*liveTable) bool) *liveTable {
	var names []string
	for n, t := range ww.tables {
		if ok(t) {
			names = append(names, n)
		}
	}
	if len(names) == 0 {
		return nil
	}
	sort.Strings(names)
	return ww.tables[names[ww.rng.IntN(len(names))]]
}

func partitioned(t *liveTable) bool { return len(t.spec.Keys) > 0 && len(t.parts) > 0 }

// step does one random change and returns its kind.
func (ww *warehouseWriter) step(ctx context.Context) (string, error) {
	kind := []string{"add", "add", "insert", "insert", "overwrite", "drop_partition", "rename", "drop_table"}[ww.rng.IntN(8)]
	var err error
	switch kind {
	case "add":
		t := ww.pick(func(t *liveTable) bool { return len(t.spec.Keys) > 0 })
		ww.added++
		vals := []string{fmt.Sprintf("w%06d", ww.added)}
		if len(t.spec.Keys) == 2 {
			vals = []string{time.Date(2031, 1, 1, 0, 0, 0, 0, time.UTC).AddDate(0, 0, ww.added).Format("2006-01-02"), "eu"}
		}
		if _, err = ww.w.AddPartitions(ctx, ww.db, t.name, [][]string{vals}, 3); err == nil {
			t.parts = append(t.parts, vals)
		}
	case "insert", "overwrite":
		t := ww.pick(func(*liveTable) bool { return true })
		var vals []string
		if len(t.spec.Keys) > 0 {
			if len(t.parts) == 0 {
				return kind, nil
			}
			vals = t.parts[ww.rng.IntN(len(t.parts))]
		}
		if kind == "insert" {
			_, err = ww.w.Insert(ctx, ww.db, t.name, vals, 4)
		} else {
			_, err = ww.w.InsertOverwrite(ctx, ww.db, t.name, vals, 2)
		}
	case "drop_partition":
		t := ww.pick(partitioned)
		i := ww.rng.IntN(len(t.parts))
		if err = ww.w.DropPartitions(ctx, ww.db, t.name, [][]string{t.parts[i]}, true); err == nil {
			t.parts = append(t.parts[:i], t.parts[i+1:]...)
		}
	case "rename":
		// External tables keep their location when renamed.
		t := ww.pick(func(t *liveTable) bool { return !t.spec.Managed && !t.renamed })
		if t == nil {
			return kind, nil
		}
		to := t.name + "_r"
		if err = ww.w.RenameTable(ctx, ww.db, t.name, to); err == nil {
			delete(ww.tables, t.name)
			t.name, t.renamed = to, true
			ww.tables[to] = t
		}
	case "drop_table":
		if ww.steps[kind] >= 3 {
			return kind, nil
		}
		t := ww.pick(func(t *liveTable) bool { return !t.spec.Managed && len(t.spec.Keys) == 0 })
		if t == nil {
			return kind, nil
		}
		if err = ww.w.DropTable(ctx, ww.db, t.name, true); err == nil {
			delete(ww.tables, t.name)
		}
	}
	if err == nil {
		ww.steps[kind]++
	}
	return kind, err
}

// run steps until stop is closed, then returns the first error.
func (ww *warehouseWriter) run(ctx context.Context, stop <-chan struct{}) error {
	for {
		select {
		case <-stop:
			return nil
		default:
		}
		if kind, err := ww.step(ctx); err != nil {
			return fmt.Errorf("writer step %s: %w", kind, err)
		}
	}
}

// committedEnd sums the ends of a topic's partitions (0 while it does not
// exist): how many records (and transaction markers) it holds.
func committedEnd(ctx context.Context, adm *kadm.Client, topic string) int64 {
	ends, err := adm.ListEndOffsets(ctx, topic)
	if err != nil {
		return 0
	}
	var n int64
	ends.Each(func(o kadm.ListedOffset) {
		if o.Err == nil {
			n += o.Offset
		}
	})
	return n
}

// snapshotObjects counts, in the committed records of a database's topic,
// the snapshot records of each bootstrap by object: "table t" or
// "partition t/v1/v2"; and returns the BEGIN records.
func snapshotObjects(evs []*schemas.Event) (counts map[string]map[string]int, begins []*schemas.Event) {
	counts = map[string]map[string]int{}
	for _, e := range evs {
		if e.Snapshot == nil || e.EventType == schemas.EventDiscontinuity {
			continue
		}
		id := e.Snapshot.BootstrapID
		if counts[id] == nil {
			counts[id] = map[string]int{}
		}
		switch e.EventType {
		case schemas.EventSnapshotBegin:
			begins = append(begins, e)
		case schemas.EventSnapshotTable:
			counts[id]["table "+e.Table]++
		case schemas.EventSnapshotPartition:
			if pc, ok := e.Payload.(*schemas.PartitionChange); ok {
				for _, p := range pc.After {
					counts[id]["partition "+e.Table+"/"+strings.Join(p.Values, "/")]++
				}
			}
		}
	}
	return counts, begins
}

// TestBootstrapWarehouse bootstraps a warehouse of 52 tables (managed and
// external, partitioned and not) and 1,000 partitions with files while a
// writer keeps adding partitions, inserting, overwriting, renaming and
// dropping on the source. The tailer is killed (-9) once the snapshot's
// records are a third published, copyd once a third of the files are
// copied; both restart. After catch-up the DR equals the source (metadata
// and file checksums); no table or partition was published twice by a
// bootstrap, and the restarted tailer read from the source metastore only
// what it published after its last committed page plus the table in
// progress at the kill (checkResumeReads); every copy task has exactly
// one completion, the kill of copyd landed inside the bootstrap's copies,
// the files it had finished without committing were not copied again
// after the restart, and the new daemon discarded at most the killed
// one's workers' copies in progress (checkCopydResume).
func TestBootstrapWarehouse(t *testing.T) {
	env := testenv.Require(t)
	rng := testRand(t)
	db := "bw_" + uniq(t)
	spec := wl.WarehouseSpec{Database: db, Tables: 52, Partitions: 1000}
	// The warehouse is the fixture: its population (minutes on a loaded
	// machine) has a deadline of its own, the pipeline's starts after it.
	pop := populate(t, ctxFor(t, 30*time.Minute), env, spec)
	// Deadlines, not pacing: on the shared 2-core machine under load the
	// copies alone took over 10 minutes (about 6 files a second).
	ctx := ctxFor(t, 45*time.Minute)
	spec.External, spec.Warehouse = env.Get(t, "HIVEDR_HMS_SRC_EXTERNAL"), env.Get(t, "HIVEDR_HMS_SRC_WAREHOUSE")
	src, dr := env.HMS(t, testenv.Source), env.HMS(t, testenv.DR)
	srcFS, drFS := pipelineFS(t, env)
	p := newPipeline(t, env, []string{db}, currentEventID(t, ctx, src))
	tailMetrics, copydMetrics := p.withTailerMetrics(), p.withCopydMetrics()
	// Pages of 40 partitions: the snapshot takes some 26 transactions,
	// so the kill lands inside it.
	const page = 40
	p.withTailer(fmt.Sprintf("bootstrap_page: %d", page))
	p.startAll()
	adm := env.KafkaAdmin(t)
	topics := kafka.Topics{Prefix: p.prefix}

	// The writer, on a connection of its own.
	ww := newWarehouseWriter(wl.NewSource(env.HMS(t, testenv.Source), srcFS, spec.External), spec, rng)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var writerErr error
	wg.Add(1)
	go func() { defer wg.Done(); writerErr = ww.run(ctx, stop) }()
	stopWriter := func() {
		select {
		case <-stop:
		default:
			close(stop)
		}
		wg.Wait()
		if writerErr != nil {
			t.Fatal(writerErr)
		}
	}
	defer stopWriter()

	start := time.Now()
	p.requestBootstrap([]string{db}, nil)
	records := int64(pop.Tables + pop.Partitions)
	poll(t, 5*time.Minute, 5*time.Millisecond, "a third of the snapshot's records published", func() bool {
		p.checkAlive()
		return committedEnd(ctx, adm, topics.Events(db)) >= records/3
	})
	p.tail.kill9()
	t.Logf("tailer killed at %d records in %s after the request", committedEnd(ctx, adm, topics.Events(db)), time.Since(start).Round(time.Millisecond))
	for _, e := range events(readTopic(t, env, serde(t, env), topics.Events(db))) {
		if e.EventType == schemas.EventSnapshotEnd {
			t.Error("the snapshot's END was already committed when the tailer was killed: the kill tested no resume")
		}
	}
	tailRestart := time.Now()
	p.startTail()
	poll(t, 15*time.Minute, 5*time.Millisecond, "a third of the files copied", func() bool {
		p.checkAlive()
		return committedEnd(ctx, adm, topics.Completions()) >= int64(pop.Files)/3
	})
	// Then the kill, right when a copy has finished since copyd's last
	// commit (its files_total grew and its committed transactions did
	// not): the restart has finished work to redo. ck.killed is what it
	// had finished, read just before the kill.
	var ck copydKill
	const committedTxns = `hivedr_copyd_transactions_total{outcome="committed"}`
	poll(t, 5*time.Minute, 20*time.Millisecond, "a copy finished since copyd's last commit", func() bool {
		p.checkAlive()
		m, ok := scrape(copydMetrics)
		if !ok {
			return false
		}
		prev := ck.killed
		ck.killed = m
		return prev != nil && metricSum(m, "hivedr_copyd_files_total") > metricSum(prev, "hivedr_copyd_files_total") &&
			m[committedTxns] == prev[committedTxns]
	})
	p.copyd.kill9()
	t.Logf("copyd killed at %d completion offsets in %s after the request", committedEnd(ctx, adm, topics.Completions()), time.Since(start).Round(time.Millisecond))
	ck.restarted = time.Now()
	p.startCopyd()

	eventually(t, 30*time.Minute, db+"'s bootstrap done on DR", func() bool {
		p.checkAlive()
		failIfHalted(t, ctx, dr, db)
		return bootstrapDone(ctx, dr, db) != ""
	})
	t.Logf("bootstrap done on DR %s after the request", time.Since(start).Round(time.Millisecond))
	// What the restarted tailer read from the source metastore (its
	// snapshot is published: END is applied), checked below.
	var m map[string]float64
	eventually(t, time.Minute, "the tailer's metrics", func() bool { var ok bool; m, ok = scrape(tailMetrics); return ok })
	stopWriter()
	t.Logf("writer: %v", ww.steps)
	p.converge(ctx, src, dr, srcFS, drFS, 10*time.Minute)
	eventually(t, 5*time.Minute, "the applier group at the topic's end", func() bool { return p.caughtUp(ctx) })

	// Nothing published twice by the bootstrap, though the tailer was killed.
	evs := events(readTopic(t, env, serde(t, env), topics.Events(db)))
	counts, begins := snapshotObjects(evs)
	if len(begins) != 1 {
		t.Fatalf("%d bootstrap BEGIN records in %s, want 1 (the request's)", len(begins), topics.Events(db))
	}
	// Nor read twice: the restarted tailer read no table the killed one had
	// finished, and listed again at most the table in progress at the kill.
	killedAt := bootstrapOf(checkpointBefore(t, p, serde(t, env), p.cfg.Source.Name, tailRestart), db)
	checkResumeReads(t, m, killedAt, evs, db, page)
	for id, objs := range counts {
		var twice []string
		tables := 0
		for obj, n := range objs {
			if n != 1 {
				twice = append(twice, fmt.Sprintf("%s x%d", obj, n))
			}
			if strings.HasPrefix(obj, "table ") {
				tables++
			}
		}
		sort.Strings(twice)
		if len(twice) > 0 {
			t.Errorf("bootstrap %s published %d objects more than once: %s", id, len(twice), strings.Join(twice[:min(len(twice), 20)], ", "))
		}
		// Every table but those the writer dropped (it had stopped: its
		// record is final).
		if least := pop.Tables - ww.steps["drop_table"]; tables < least {
			t.Errorf("bootstrap %s published %d tables; want at least %d (the source had %d, the writer dropped %d)",
				id, tables, least, pop.Tables, ww.steps["drop_table"])
		}
	}
	// Exactly one completion per copy task.
	perTask := map[string]int{}
	var comps []*schemas.CopyCompletion
	for _, d := range readTopic(t, env, serde(t, env), topics.Completions()) {
		if c, ok := d.value.(*schemas.CopyCompletion); ok {
			perTask[c.TaskID]++
			comps = append(comps, c)
		}
	}
	// And no finished file copied again after copyd's kill.
	ck.newLog = p.copyd.out.String()
	eventually(t, time.Minute, "the restarted copyd's metrics", func() bool { var ok bool; ck.newM, ok = scrape(copydMetrics); return ok })
	checkCopydResume(t, p.cfg, comps, readTopic(t, env, serde(t, env), topics.Manifests()), begins[0].Snapshot.BootstrapID, ck)
	var again []string
	for id, n := range perTask {
		if n != 1 {
			again = append(again, fmt.Sprintf("%s x%d", id, n))
		}
	}
	sort.Strings(again)
	if len(again) > 0 {
		t.Errorf("%d copy tasks completed more than once: %s", len(again), strings.Join(again[:min(len(again), 20)], ", "))
	}
	// A task per file: the warehouse's (each partition and unpartitioned
	// table has one) but one per partition or table the writer dropped
	// or overwrote before the snapshot read it, and one per file the
	// writer added (each of its adds and inserts is an event with one).
	removed := ww.steps["drop_partition"] + ww.steps["drop_table"] + ww.steps["overwrite"]
	if least := pop.Files - removed; len(perTask) < least {
		t.Errorf("%d copy tasks completed; want at least %d (the warehouse had %d files, the writer dropped or overwrote %d)",
			len(perTask), least, pop.Files, removed)
	}
	d, err := dr.GetDatabase(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	if d.Parameters[drparam.BootstrapID] != "" || d.Parameters[drparam.Halted] != "" {
		t.Errorf("DR database %s after the bootstrap: %v", db, d.Parameters)
	}
}

// TestBootstrapRenameIntoScope: a table renamed from an excluded name
// (tmp_.*) into the replication scope converges on DR: the tailer starts
// a bootstrap of that table by itself, and a partition added after the
// rename follows it.
func TestBootstrapRenameIntoScope(t *testing.T) {
	env := testenv.Require(t)
	ctx := ctxFor(t, 8*time.Minute)
	db := "bri_" + uniq(t)
	src, dr := env.HMS(t, testenv.Source), env.HMS(t, testenv.DR)
	srcFS, drFS := pipelineFS(t, env)
	w := wl.NewSource(src, srcFS, env.Get(t, "HIVEDR_HMS_SRC_EXTERNAL"))
	spec := wl.TableSpec{Columns: []string{"id bigint", "note string"}, PartitionKeys: []string{"ds"}}
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(w.CreateDatabase(ctx, db))
	must(w.CreateTable(ctx, db, "keep", spec))
	must(w.CreateTable(ctx, db, "tmp_stage", spec))
	for _, tb := range []string{"keep", "tmp_stage"} {
		_, err := w.AddPartitions(ctx, db, tb, [][]string{{"a"}, {"b"}, {"c"}}, 5)
		must(err)
	}
	p := newPipeline(t, env, []string{db}, currentEventID(t, ctx, src))
	p.startAll()
	p.requestBootstrap([]string{db}, nil)
	eventually(t, 4*time.Minute, db+"'s bootstrap done on DR", func() bool {
		p.checkAlive()
		return bootstrapDone(ctx, dr, db) != ""
	})
	if _, err := dr.GetTableReq(ctx, &hive_metastore.GetTableRequest{DbName: db, TblName: "tmp_stage"}); err == nil {
		t.Fatal("the excluded table tmp_stage is on DR")
	}

	must(w.RenameTable(ctx, db, "tmp_stage", "stage"))
	_, err := w.AddPartitions(ctx, db, "stage", [][]string{{"d"}}, 5)
	must(err)
	_, err = w.Insert(ctx, db, "stage", []string{"a"}, 3)
	must(err)
	p.converge(ctx, src, dr, srcFS, drFS, 4*time.Minute)
	eventually(t, time.Minute, "the applier group at the topic's end", func() bool { return p.caughtUp(ctx) })

	topic := kafka.Topics{Prefix: p.prefix}.Events(db)
	_, begins := snapshotObjects(events(readTopic(t, env, serde(t, env), topic)))
	var scoped []string
	for _, b := range begins {
		if strings.Join(b.Snapshot.Tables, ",") == "stage" {
			scoped = append(scoped, b.Snapshot.BootstrapID+" ("+b.Snapshot.Reason+")")
		}
	}
	if len(begins) != 2 || len(scoped) != 1 {
		var all []string
		for _, b := range begins {
			all = append(all, fmt.Sprintf("%s tables=%v reason=%s", b.Snapshot.BootstrapID, b.Snapshot.Tables, b.Snapshot.Reason))
		}
		t.Errorf("bootstraps in %s: %v; want the request's and one of table stage the tailer started", topic, all)
	}
}
