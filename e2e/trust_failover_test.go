package e2e

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	wl "github.com/hivedr/hivedr/e2e/workload"
	"github.com/hivedr/hivedr/internal/drparam"
	"github.com/hivedr/hivedr/internal/hms"
	"github.com/hivedr/hivedr/internal/testenv"
	"github.com/hivedr/hivedr/schemas"
)

// partitionWriter adds one metadata-only partition at a time to db.table
// on the source until stopped, recording how many it added.
type partitionWriter struct {
	mu    sync.Mutex
	added int
	err   error
	stop  chan struct{}
	once  sync.Once
	done  chan struct{}
}

func startPartitionWriter(ctx context.Context, w *wl.Source, db, table string, pace time.Duration) *partitionWriter {
	pw := &partitionWriter{stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(pw.done)
		for i := 0; ; i++ {
			select {
			case <-pw.stop:
				return
			case <-ctx.Done():
				return
			case <-time.After(pace): // pacing the workload, not waiting for a condition
			}
			if _, err := w.AddPartitions(ctx, db, table, [][]string{{fmt.Sprintf("p%06d", i)}}, 0); err != nil {
				pw.mu.Lock()
				pw.err = err
				pw.mu.Unlock()
				return
			}
			pw.mu.Lock()
			pw.added++
			pw.mu.Unlock()
		}
	}()
	return pw
}

func (pw *partitionWriter) count() (int, error) {
	pw.mu.Lock()
	defer pw.mu.Unlock()
	return pw.added, pw.err
}

func (pw *partitionWriter) halt() (int, error) {
	pw.once.Do(func() { close(pw.stop) })
	<-pw.done
	return pw.count()
}

// partitionCount is how many partitions db.table has on c.
func partitionCount(t *testing.T, ctx context.Context, c *hms.Client, db, table string) int {
	t.Helper()
	n := 0
	if err := c.EachPartitionName(ctx, db, table, func(string) { n++ }); err != nil {
		t.Fatalf("partitions of %s.%s on %s: %v", db, table, c.Addr(), err)
	}
	return n
}

// TestTrustFailoverFenced (issue finding: a failover mark silently undone
// by the applier). While a writer adds partitions on the source and the
// applier applies them, an unplanned failover with a short wait marks the
// database. Before the fence, the applier's next whole-database write
// (the watermark of its next plan, made from a copy up to a second old)
// put repl.target.for back and removed the mark, and it went on applying.
// Now: from the failover's exit on, every sample of the DR database (every
// 200 ms, until the tailer has published everything the writer did after
// the exit and the applier has refused it) carries the mark and its
// confirmed fence, no partition is added on DR, and its repl.last.id is
// the one the report gives.
func TestTrustFailoverFenced(t *testing.T) {
	u := uniq(t)
	db := "tf_fence_" + u
	p := startPipeline(t, 12*time.Minute, db)
	if err := p.w.CreateDatabase(p.ctx, db); err != nil {
		t.Fatal(err)
	}
	if err := p.w.CreateTable(p.ctx, db, "events", wl.TableSpec{Columns: []string{"id bigint"}, PartitionKeys: []string{"part"}}); err != nil {
		t.Fatal(err)
	}
	pw := startPartitionWriter(p.ctx, p.w, db, "events", 50*time.Millisecond)
	defer pw.halt()
	eventually(t, 3*time.Minute, "the applier applying the writer's partitions", func() bool {
		return p.drTableExists(db, "events") && partitionCount(t, p.ctx, p.dr, db, "events") >= 20
	})

	rep, errOut, code := runFailover(t, p.conf, "-db", db, "-unplanned", "-timeout", "3s")
	if code != 0 {
		t.Fatalf("failover exited %d:\n%s", code, errOut)
	}
	atExit := partitionCount(t, p.ctx, p.dr, db, "events")
	addedAtExit, _ := pw.count()
	t.Logf("failover reflects event %d; DR has %d partitions at its exit, the writer had added %d", rep.Databases[0].Reached, atExit, addedAtExit)

	type sample struct {
		params map[string]string
		parts  int
	}
	var samples []sample
	take := func() {
		d, err := p.dr.GetDatabase(p.ctx, db)
		if err != nil {
			t.Fatal(err)
		}
		samples = append(samples, sample{params: d.Parameters, parts: partitionCount(t, p.ctx, p.dr, db, "events")})
	}
	// Until the writer added 20 more partitions and the tailer published
	// them, and the applier refused the database: the applier had every
	// chance to write.
	var head int64
	// (Not poll: on a failure the samples say more than the time-out.)
	refused := func() bool {
		take()
		n, err := pw.count()
		if err != nil {
			t.Fatalf("writer: %v", err)
		}
		if n < addedAtExit+20 {
			return false
		}
		if head == 0 {
			// (A connection of its own each time: under load a read may
			// time out, and the next poll asks again.)
			c, err := hms.Dial(p.ctx, p.env.Get(t, "HIVEDR_HMS_SRC"), hms.Options{})
			if err != nil {
				t.Logf("source metastore: %v; asking again", err)
				return false
			}
			id, err := c.GetCurrentNotificationEventId(p.ctx)
			c.Close()
			if err != nil {
				t.Logf("source log head: %v; asking again", err)
				return false
			}
			head = id.EventId
		}
		return tailerCheckpoint(t, p.pipeline) >= head &&
			strings.Contains(grepLines(p.apply.out.String(), "db="+db), "reason=failed_over")
	}
	deadline := time.Now().Add(5 * time.Minute)
	tick := time.NewTicker(200 * time.Millisecond) // the sampling interval
	defer tick.Stop()
	ok := false
	for !ok && time.Now().Before(deadline) {
		if ok = refused(); !ok {
			<-tick.C
		}
	}
	if !ok {
		t.Errorf("the applier did not refuse %s within 5 minutes of the failover (the writer went on, the tailer published it)", db)
	}
	added, err := pw.halt()
	if err != nil {
		t.Fatalf("writer: %v", err)
	}
	take()
	t.Logf("%d samples of the DR database after the failover; the writer added %d partitions in all", len(samples), added)
	var bad []string
	for i, s := range samples {
		switch {
		case s.params[drparam.FailedOverAt] == "":
			bad = append(bad, fmt.Sprintf("sample %d: the failover mark is gone: %v", i, s.params))
		case s.params[drparam.Target] != "":
			bad = append(bad, fmt.Sprintf("sample %d: %s=%q is back: the database is a replica again", i, drparam.Target, s.params[drparam.Target]))
		case s.params[drparam.FailoverFenced] == "" || s.params[drparam.FailoverFenced] != s.params[drparam.FailoverFence]:
			bad = append(bad, fmt.Sprintf("sample %d: fence %q not confirmed (%s=%q)", i, s.params[drparam.FailoverFence], drparam.FailoverFenced, s.params[drparam.FailoverFenced]))
		case s.parts != atExit:
			bad = append(bad, fmt.Sprintf("sample %d: DR has %d partitions, %d at the failover's exit: the applier wrote after the failover", i, s.parts, atExit))
		}
	}
	if len(bad) > 0 {
		t.Errorf("%d of %d samples wrong; the first: %s", len(bad), len(samples), strings.Join(bad[:min(5, len(bad))], "; "))
	}
	last := samples[len(samples)-1].params
	if got := last[drparam.LastID]; got != fmt.Sprint(rep.Databases[0].LastID) {
		t.Errorf("DR repl.last.id %s after the failover, the report says %d", got, rep.Databases[0].LastID)
	}
	if last[drparam.FailoverEventID] != fmt.Sprint(rep.Databases[0].Reached) {
		t.Errorf("DR records the failover at event %s, the report %d", last[drparam.FailoverEventID], rep.Databases[0].Reached)
	}
}

// checkpointHolding reads the pipeline's checkpoints topic and reports
// whether its newest checkpoint has a bootstrap of db in progress or
// queued.
func checkpointHolding(t *testing.T, p *pipeline, db string) bool {
	t.Helper()
	var cp *schemas.TailerCheckpoint
	for _, d := range readTopic(t, p.env, serde(t, p.env), p.prefix+".tailer.checkpoints") {
		if c, ok := d.value.(*schemas.TailerCheckpoint); ok {
			cp = c
		}
	}
	if cp == nil {
		return false
	}
	for _, b := range cp.Bootstraps {
		if strings.EqualFold(b.Database, db) {
			return true
		}
	}
	return false
}

// TestTrustFailoverDuringBootstrap (issue finding: failover ignores
// bootstraps the tailer still runs). With tailer.bootstrap_concurrency 1,
// a bootstrap of a large database A and of a replicated database C is
// requested; while C's waits its turn, 10 partitions are added to C on
// the source: the tailer holds them back, though C's topic is consumed to
// its end. Before, `failover -db C` (planned) reported "RPO 0 events"
// with 1 of the source's 11 partitions on DR. Now a planned failover
// waits for the bootstrap and, timing out, changes nothing, naming it (or,
// on a machine fast enough to finish the bootstrap in the wait, succeeds
// with every partition on DR); an unplanned one counts what is held back
// as lost, exactly the source's events after what DR reflects.
func TestTrustFailoverDuringBootstrap(t *testing.T) {
	u := uniq(t)
	big, c := "tfb_big_"+u, "tfb_c_"+u
	env := testenv.Require(t)
	ctx := ctxFor(t, 15*time.Minute)
	src, dr := env.HMS(t, testenv.Source), env.HMS(t, testenv.DR)
	srcFS, _ := pipelineFS(t, env)
	w := wl.NewSource(src, srcFS, env.Get(t, "HIVEDR_HMS_SRC_EXTERNAL"))
	p := newPipeline(t, env, []string{big, c}, currentEventID(t, ctx, src))
	p.withTailer("bootstrap_concurrency: 1")
	p.withTailer("bootstrap_page: 10")
	p.startAll()

	spec := wl.TableSpec{Columns: []string{"id bigint"}, PartitionKeys: []string{"part"}}
	for _, db := range []string{big, c} {
		if err := w.CreateDatabase(ctx, db); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.CreateTable(ctx, c, "t", spec); err != nil {
		t.Fatal(err)
	}
	if _, err := w.AddPartitions(ctx, c, "t", [][]string{{"p0"}}, 0); err != nil {
		t.Fatal(err)
	}
	// The large database: its bootstrap takes 600 pages of 10 partitions.
	var vals [][]string
	for i := range 600 {
		vals = append(vals, []string{fmt.Sprintf("p%04d", i)})
	}
	for i := range 10 {
		table := fmt.Sprintf("t%d", i)
		if err := w.CreateTable(ctx, big, table, spec); err != nil {
			t.Fatal(err)
		}
		for j := 0; j < len(vals); j += 100 {
			if _, err := w.AddPartitions(ctx, big, table, vals[j:j+100], 0); err != nil {
				t.Fatal(err)
			}
		}
	}
	pt := &pipelineTest{pipeline: p, ctx: ctx, src: src, dr: dr, w: w}
	eventually(t, 5*time.Minute, "C's first partition on DR", func() bool {
		return pt.drTableExists(c, "t") && partitionCount(t, ctx, dr, c, "t") == 1
	})

	p.requestBootstrap([]string{big}, nil)
	p.requestBootstrap([]string{c}, nil)
	eventually(t, 3*time.Minute, "the tailer's checkpoint holding C's bootstrap", func() bool { return checkpointHolding(t, p, c) })
	var more [][]string
	for i := 1; i <= 10; i++ {
		more = append(more, []string{fmt.Sprintf("p%d", i)})
	}
	if _, err := w.AddPartitions(ctx, c, "t", more, 0); err != nil {
		t.Fatal(err)
	}
	head := currentEventID(t, ctx, src)
	holding := checkpointHolding(t, p, c)

	_, errOut, code := runFailover(t, p.conf, "-db", c, "-planned", "-timeout", "5s")
	drParts := partitionCount(t, ctx, dr, c, "t")
	d, err := dr.GetDatabase(ctx, c)
	if err != nil {
		t.Fatal(err)
	}
	switch code {
	case 0:
		// The bootstrap and its catch-up ended within the wait: RPO 0 is
		// honest only with every partition on DR.
		t.Logf("the planned failover succeeded (the bootstrap ended within its wait; held before it: %v)", holding)
		if drParts != 11 {
			t.Fatalf("planned failover reported success with %d of the source's 11 partitions of %s on DR", drParts, c)
		}
		return
	default:
		if !strings.Contains(errOut, "bootstrap") || !strings.Contains(errOut, "nothing changed") {
			t.Errorf("planned failover exited %d without naming the bootstrap that holds %s back:\n%s", code, c, errOut)
		}
		if d.Parameters[drparam.FailedOverAt] != "" {
			t.Errorf("a planned failover that timed out marked %s: %v", c, d.Parameters)
		}
		t.Logf("planned failover refused: %s", strings.TrimSpace(errOut))
	}

	rep, errOut, code := runFailover(t, p.conf, "-db", c, "-unplanned", "-timeout", "5s")
	if code != 0 && strings.Contains(errOut, "is being applied to it") {
		// C's turn came meanwhile and its BEGIN reached DR: refusing a
		// database in the middle of its bootstrap is right too.
		t.Logf("unplanned failover refused: C's bootstrap reached DR meanwhile: %s", strings.TrimSpace(errOut))
		return
	}
	if code != 0 {
		t.Fatalf("unplanned failover exited %d:\n%s", code, errOut)
	}
	got := rep.Databases[0]
	drParts = partitionCount(t, ctx, dr, c, "t")
	lost := sourceEventsAfter(t, ctx, src, got.Reached, c)
	t.Logf("unplanned failover: %s reflects event %d (source head %d), %d partitions on DR, %d events lost; notes %v", c, got.Reached, head, drParts, got.LostEvents, rep.Notes)
	if got.LostEvents != int64(lost) {
		t.Errorf("unplanned failover counts %d events lost; the source has %d events of %s after event %d", got.LostEvents, lost, c, got.Reached)
	}
	if drParts < 11 && (got.LostEvents == 0 || got.RPOSeconds == 0) {
		t.Errorf("%s has %d of 11 partitions on DR, yet the failover reports RPO %d events %.1fs", c, drParts, got.LostEvents, got.RPOSeconds)
	}
}
