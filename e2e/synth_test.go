package e2e

import (
	"bufio"
	"context"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	wl "github.com/hivedr/hivedr/e2e/workload"
	"github.com/hivedr/hivedr/internal/location"
	"github.com/hivedr/hivedr/internal/testenv"
)

// synthSource is a synthetic warehouse (workload.Synth) written into a
// notification log of its own (workload.SynthLog), with its data files on
// the source HDFS, and a pipeline whose tailer reads that log with its
// Postgres source: a source as fast as a benchmark asks, whose events the
// daemons process as they process a metastore's.
type synthSource struct {
	mu   sync.Mutex // one append at a time (the log has one connection)
	t    *testing.T
	env  *testenv.Env
	log  *synthLog
	s    *wl.Synth
	put  wl.PutFunc
	sums wl.Checksummer
	p    *pipeline
}

// synthEvent is one appended event: its ID, type, database and when it
// became visible in the log (between committing and committed).
type synthEvent struct {
	id                    int64
	typ, db               string
	committing, committed time.Time
}

// newSynthSource lays out the synthetic warehouse of spec (its roots and
// CM root from the stack) and a pipeline over its databases reading its
// log from the start. Nothing runs yet.
func newSynthSource(t *testing.T, spec wl.SynthSpec) *synthSource {
	t.Helper()
	env := testenv.Require(t)
	tpl, err := wl.LoadMessageTemplates("../internal/hmsevent/testdata/events")
	if err != nil {
		t.Fatal(err)
	}
	spec.External = env.Get(t, "HIVEDR_HMS_SRC_EXTERNAL")
	spec.Warehouse = env.Get(t, "HIVEDR_HMS_SRC_WAREHOUSE")
	spec.CMRoot = env.Get(t, "HIVEDR_HMS_SRC_CMROOT")
	s, err := wl.NewSynth(spec, tpl)
	if err != nil {
		t.Fatal(err)
	}
	srcFS, _ := pipelineFS(t, env)
	ss := &synthSource{t: t, env: env, log: newSynthLog(t, env), s: s, put: pooledPut(t, env, stageWriters), sums: srcFS}
	ss.p = newPipeline(t, env, spec.Databases, 0)
	usePostgresSource(t, ss.p, ss.log.DSN)
	return ss
}

// stageWriters is how many files stage writes at once, each writer with a
// client of its own (an HDFS client runs one NameNode call at a time: one
// client shared by all writers wrote about 20 files/s on the local stack,
// one each 80-100).
const stageWriters = 32

// pooledPut writes files through n native HDFS clients of the source
// cluster, one call per client at a time.
func pooledPut(t *testing.T, env *testenv.Env, n int) wl.PutFunc {
	pool := make(chan wl.PutFunc, n)
	for range n {
		pool <- wl.NativePut(env.HDFS(t, testenv.Source))
	}
	return func(ctx context.Context, loc string, data []byte) error {
		put := <-pool
		defer func() { pool <- put }()
		return put(ctx, loc, data)
	}
}

// stage writes the steps' data files and returns how long it took.
func (ss *synthSource) stage(ctx context.Context, steps []*wl.SynthStep) time.Duration {
	ss.t.Helper()
	start := time.Now()
	if err := ss.s.Stage(ctx, steps, ss.put, ss.sums, stageWriters); err != nil {
		ss.t.Fatal(err)
	}
	return time.Since(start)
}

// synthRows are the rows of steps in order, their messages stamped from
// ts on at rate rows/s, with the database of each.
func synthRows(steps []*wl.SynthStep, ts time.Time, rate float64) []wl.LogRow {
	var rows []wl.LogRow
	for _, st := range steps {
		at := ts.Add(time.Duration(float64(len(rows)) / rate * float64(time.Second)))
		rows = append(rows, st.Rows(at.Unix())...)
	}
	return rows
}

// appendAll appends rows in transactions of at most n and returns the
// events.
func (ss *synthSource) appendAll(ctx context.Context, rows []wl.LogRow, n int) []synthEvent {
	ss.t.Helper()
	var evs []synthEvent
	for len(rows) > 0 {
		k := min(n, len(rows))
		evs = append(evs, ss.appendRows(ctx, rows[:k])...)
		rows = rows[k:]
	}
	return evs
}

func (ss *synthSource) appendRows(ctx context.Context, rows []wl.LogRow) []synthEvent {
	ss.t.Helper()
	evs, err := ss.tryAppend(ctx, rows)
	if err != nil {
		ss.t.Fatal(err)
	}
	return evs
}

// tryAppend appends rows in one transaction; safe from any goroutine.
func (ss *synthSource) tryAppend(ctx context.Context, rows []wl.LogRow) ([]synthEvent, error) {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	a, err := ss.log.Append(ctx, rows)
	if err != nil {
		return nil, err
	}
	// The metastore lists a new database in DBS (where the tailer finds
	// the databases to send heartbeats for) as it logs its creation.
	for _, r := range rows {
		if r.Type == "CREATE_DATABASE" {
			if err := ss.log.AddDatabases(ctx, r.DB); err != nil {
				return nil, err
			}
		}
	}
	evs := make([]synthEvent, len(rows))
	for i, r := range rows {
		evs[i] = synthEvent{id: a.First + int64(i), typ: r.Type, db: r.DB, committing: a.Committing, committed: a.Committed}
	}
	return evs, nil
}

// diffDR captures the DR side of the synthetic databases (a goroutine and
// a metastore connection per database) and returns its differences from
// what the events describe.
func (ss *synthSource) diffDR(ctx context.Context) []wl.Diff {
	ss.t.Helper()
	want := ss.s.Snapshot()
	_, drFS := pipelineFS(ss.t, ss.env)
	got := &wl.Snapshot{Databases: map[string]*wl.Database{}}
	var (
		mu   sync.Mutex
		wg   sync.WaitGroup
		errs []error
	)
	sem := make(chan struct{}, 4)
	for db := range want.Databases {
		dr := ss.env.HMS(ss.t, testenv.DR)
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			snap, err := wl.Capture(ctx, dr, drFS, []string{db})
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				errs = append(errs, err)
				return
			}
			for k, v := range snap.Databases {
				got.Databases[k] = v
			}
		}()
	}
	wg.Wait()
	if len(errs) > 0 {
		ss.t.Fatalf("capture DR: %v", errs)
	}
	return wl.DiffSnapshots(want, got, ss.p.mapLocation)
}

// converge waits until DR equals what the events describe, failing with
// the differences left after d.
func (ss *synthSource) converge(ctx context.Context, d time.Duration, what string) {
	ss.t.Helper()
	var last []wl.Diff
	deadline := time.Now().Add(d)
	start := time.Now()
	for time.Now().Before(deadline) {
		ss.p.checkAlive()
		if last = ss.diffDR(ctx); len(last) == 0 {
			ss.t.Logf("%s: DR equal to what the events describe after %s", what, time.Since(start).Round(time.Millisecond))
			return
		}
		select {
		case <-ctx.Done():
			ss.t.Fatal(ctx.Err())
		case <-time.After(time.Second):
		}
	}
	var b strings.Builder
	for i, df := range last {
		if i == 20 {
			fmt.Fprintf(&b, "\n  ... %d more", len(last)-i)
			break
		}
		b.WriteString("\n  " + df.String())
	}
	ss.t.Fatalf("%s: DR differs from what the synthetic events describe after %s (%d differences):%s\napplier:\n%s",
		what, d, len(last), b.String(), tail(ss.p.apply.out.String(), 30))
}

// removeData deletes the synthetic databases' directories on the source
// and DR HDFS (their metastore objects stay on DR).
func (ss *synthSource) removeData(ctx context.Context) {
	for _, db := range ss.s.Databases() {
		src := ss.s.DatabaseLocation(db)
		dr, err := ss.p.mapLocation(src)
		if err != nil {
			ss.t.Logf("remove data of %s: %v", db, err)
			continue
		}
		for _, c := range []struct {
			site testenv.Site
			loc  string
		}{{testenv.Source, src}, {testenv.DR, dr}} {
			l, err := location.Parse(c.loc)
			if err == nil {
				err = ss.env.HDFS(ss.t, c.site).RemoveAll(l.Path)
			}
			if err != nil {
				ss.t.Logf("remove %s: %v", c.loc, err)
			}
		}
	}
}

// TestSynthWorkload shows the synthetic source honest: a synthetic
// warehouse's set-up and a run of partition adds and loads, written
// straight into a notification log, go through the tailer (Postgres
// source), copyd and the applier, and the DR metastore and HDFS end up
// exactly as the events describe (every database, table, partition,
// parameter, location and file with its CRC32C).
func TestSynthWorkload(t *testing.T) {
	u := uniq(t)
	dbs := []string{"sy_a_" + u, "sy_b_" + u}
	ss := newSynthSource(t, wl.SynthSpec{Databases: dbs, TablesPerDB: 2, InitialPartitions: 2, Rows: 10})
	ctx := ctxFor(t, 8*time.Minute)
	ss.p.startTail()
	ss.p.startCopyd()
	ss.p.startApply("-log-level", "debug")

	setup := ss.s.Setup(int32(time.Now().Unix()))
	ss.stage(ctx, setup)
	ss.appendAll(ctx, synthRows(setup, time.Now(), 100), 50)
	t.Cleanup(func() { ss.removeData(context.Background()) })
	ss.converge(ctx, 3*time.Minute, "the set-up")

	rng := testRand(t)
	var run []*wl.SynthStep
	for i := 0; i < 120; i++ {
		tb := ss.s.Tables()[rng.IntN(len(ss.s.Tables()))]
		run = append(run, ss.s.PlanStep(tb, rng, 0.4, 0.8, int32(time.Now().Unix())))
	}
	ss.stage(ctx, run)
	rows := synthRows(run, time.Now(), 100)
	evs := ss.appendAll(ctx, rows, 10)
	types, want := map[string]int{}, map[string]int{}
	for _, e := range evs {
		types[e.typ]++
	}
	for _, st := range run {
		for _, typ := range st.Types {
			want[typ]++
		}
	}
	// Loads log an ALTER_PARTITION and an INSERT; steps without files
	// (the file share) an ALTER_PARTITION alone, as ANALYZE does.
	if types["ADD_PARTITION"] == 0 || types["INSERT"] == 0 || fmt.Sprint(types) != fmt.Sprint(want) {
		t.Fatalf("run events %v, the steps planned %v: want partition adds and loads, one event per planned type", types, want)
	}
	ss.converge(ctx, 4*time.Minute, "the run")
	done := appliedEvents(ss.p.apply.out.String())
	var lastDone time.Time
	for _, e := range evs {
		d, ok := done[e.id]
		if !ok {
			t.Errorf("event %d %s: no \"event done\" in the applier's log", e.id, e.typ)
			continue
		}
		if d.at.After(lastDone) {
			lastDone = d.at
		}
	}
	t.Logf("the last run event was applied %s after the last was appended", lastDone.Sub(evs[len(evs)-1].committed).Round(time.Millisecond))
	if n := strings.Count(ss.p.apply.out.String(), "level=ERROR"); n > 0 {
		t.Errorf("the applier logged %d errors", n)
	}
	t.Logf("%d run events (%v) replicated; DR equals the events' description", len(evs), types)
}

type doneRec struct {
	at     time.Time
	result string
}

var eventDoneLine = regexp.MustCompile(`^time=(\S+) level=DEBUG msg="event done" .*?\bevent_id=(\d+) .*?\bresult=(\S+)`)

// doneTracker reads an applier's debug log as it grows: when each event
// was done, and the databases it halted, parsing each line once.
type doneTracker struct {
	out    *syncBuffer
	off    int
	done   map[int64]doneRec
	halted []string // the applier's "database halted" lines
}

func newDoneTracker(p *proc) *doneTracker { return &doneTracker{out: p.out, done: map[int64]doneRec{}} }

// update parses the complete lines written since the last call.
func (d *doneTracker) update() map[int64]doneRec {
	s := d.out.From(d.off)
	i := strings.LastIndexByte(s, '\n')
	if i < 0 {
		return d.done
	}
	d.off += i + 1
	for _, l := range strings.Split(s[:i], "\n") {
		if strings.Contains(l, `msg="database halted`) {
			d.halted = append(d.halted, l)
		}
	}
	for id, r := range appliedEvents(s[:i+1]) {
		if _, seen := d.done[id]; !seen {
			d.done[id] = r
		}
	}
	return d.done
}

// appliedEvents reads the applier's debug log: when each event was done
// (applied, or found to need nothing), to the millisecond.
func appliedEvents(log string) map[int64]doneRec {
	out := map[int64]doneRec{}
	sc := bufio.NewScanner(strings.NewReader(log))
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for sc.Scan() {
		m := eventDoneLine.FindStringSubmatch(sc.Text())
		if m == nil {
			continue
		}
		at, err := time.Parse(time.RFC3339Nano, m[1])
		if err != nil {
			continue
		}
		id, _ := strconv.ParseInt(m[2], 10, 64)
		if _, seen := out[id]; !seen {
			out[id] = doneRec{at: at, result: m[3]}
		}
	}
	return out
}

// waitApplied polls the applier's log until every event of evs is done or
// d passed, and returns when each was done and how many were not.
func waitApplied(p *pipeline, evs []synthEvent, d time.Duration) (map[int64]doneRec, int) {
	p.t.Helper()
	deadline := time.Now().Add(d)
	tr := newDoneTracker(p.apply)
	tick := time.NewTicker(250 * time.Millisecond)
	defer tick.Stop()
	for ; ; <-tick.C {
		p.checkAlive()
		done := tr.update()
		if len(tr.halted) > 0 {
			p.t.Fatalf("the applier halted a database, the figures would not mean anything: %s", tr.halted[0])
		}
		missing := 0
		for _, e := range evs {
			if _, ok := done[e.id]; !ok {
				missing++
			}
		}
		if missing == 0 || time.Now().After(deadline) {
			return done, missing
		}
	}
}
