package e2e

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/beltran/gohive/hive_metastore"

	wl "github.com/hivedr/hivedr/e2e/workload"
	"github.com/hivedr/hivedr/schemas"
)

// runReplay runs `hivedr replay` with the pipeline's config and returns
// its output and exit code.
func (p *pipeline) runReplay(args ...string) (string, int) {
	p.t.Helper()
	out, err := exec.Command(hivedrBin(p.t), append([]string{"replay", "-config", p.conf}, args...)...).CombinedOutput()
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return string(out), ee.ExitCode()
	}
	if err != nil {
		p.t.Fatalf("hivedr replay: %v", err)
	}
	return string(out), 0
}

// committed is the applier group's committed offset of a topic (-1: none).
func (p *pipeline) committed(topic string) int64 {
	p.t.Helper()
	offs, err := p.env.KafkaAdmin(p.t).FetchOffsets(ctxFor(p.t, 30*time.Second), p.prefix+"-applier")
	if err != nil {
		p.t.Fatal(err)
	}
	if o, ok := offs.Lookup(topic, 0); ok && o.Err == nil {
		return o.At
	}
	return -1
}

// appliedEvents is the applier's count of events handled (applied or
// found to need nothing) of a database, from its metrics.
func (p *pipeline) appliedEvents(db string) float64 {
	m, ok := scrape("http://" + p.metrics + "/metrics")
	if !ok {
		return -1
	}
	var n float64
	for k, v := range m {
		if strings.HasPrefix(k, "hivedr_applier_events_total{") && strings.Contains(k, `db="`+db+`"`) {
			n += v
		}
	}
	return n
}

// TestReplayFromEarlyEvent: replay moves the stopped applier group to the
// first record at or after an early event (checked against the topic read
// whole); the restarted applier re-drives from there, every event again,
// and verify is clean. Then, with the applier running, replay refuses
// without -coordinate and, with it, the running applier seeks and
// re-drives again, converging to the same state. Last, with the applier
// stopped and the group moved back, -to-latest moves it to the end.
func TestReplayFromEarlyEvent(t *testing.T) {
	db := "rp_" + uniq(t)
	p := startPipeline(t, 8*time.Minute, db)
	ctx := p.ctx
	steps := []workloadStep{
		{"create database", func(c context.Context, s *wl.Source) error { return s.CreateDatabase(c, db) }},
		{"create table", func(c context.Context, s *wl.Source) error {
			return s.CreateTable(c, db, "orders", wl.TableSpec{Columns: []string{"id bigint", "note string"}, PartitionKeys: []string{"dt"}})
		}},
		{"add partitions", func(c context.Context, s *wl.Source) error {
			_, err := s.AddPartitions(c, db, "orders", [][]string{{"2026-12-01"}, {"2026-12-02"}}, 30)
			return err
		}},
		{"insert", func(c context.Context, s *wl.Source) error {
			_, err := s.Insert(c, db, "orders", []string{"2026-12-01"}, 30)
			return err
		}},
		{"add column", func(c context.Context, s *wl.Source) error {
			return s.AlterTableAddColumn(c, db, "orders", "extra string")
		}},
		{"drop partition", func(c context.Context, s *wl.Source) error {
			return s.DropPartitions(c, db, "orders", [][]string{{"2026-12-02"}}, true)
		}},
	}
	p.runSteps(steps, nil)
	p.converge(ctx, p.src, p.dr, p.srcFS, p.drFS, 3*time.Minute)
	eventually(t, time.Minute, "the applier group commits every event", func() bool { return p.caughtUp(ctx) })
	topic := p.eventTopics()[0]
	recs := readTopic(t, p.env, serde(t, p.env), topic)
	var evs []decoded
	for _, d := range recs {
		if _, ok := d.value.(*schemas.Event); ok {
			evs = append(evs, d)
		}
	}
	if len(evs) < 5 {
		t.Fatalf("%d events on %s, want the workload's", len(evs), topic)
	}
	// The second event: the target is its offset, the first record with
	// an ID >= its ID (heartbeats before it are not).
	early := evs[1].value.(*schemas.Event).EventID
	want := evs[1].rec.Offset
	redriven := float64(len(evs) - 1)
	end := p.committed(topic)

	p.apply.stop(t)
	out, code := p.runReplay("-db", db, "-from-event", fmt.Sprint(early))
	if code != 0 {
		t.Fatalf("replay exit %d:\n%s", code, out)
	}
	if got := p.committed(topic); got != want {
		t.Fatalf("committed offset %d after replay -from-event %d, want %d (was %d)\n%s", got, early, want, end, out)
	}
	t.Logf("replay: %s", strings.TrimSpace(out))

	p.startApply()
	eventually(t, 2*time.Minute, "the applier re-drives from the early event", func() bool {
		p.checkAlive()
		return p.appliedEvents(db) >= redriven && p.caughtUp(ctx)
	})
	if v := p.runVerify("-db", db, "-sample", "1"); v.code != 0 || len(v.findings) != 0 {
		t.Errorf("verify after the re-drive: exit %d, %d findings; want 0 and none\n%s", v.code, len(v.findings), v.raw)
	}

	// An applier owns the topic: refused without -coordinate.
	eventually(t, time.Minute, "the applier owns the topic in its group", func() bool {
		out, code = p.runReplay("-db", db, "-from-event", fmt.Sprint(early))
		return code == 1 && strings.Contains(out, "-coordinate")
	})
	if got := p.committed(topic); got < end {
		t.Errorf("a refused replay moved the committed offset to %d (was at least %d)", got, end)
	}
	before := p.appliedEvents(db)
	out, code = p.runReplay("-db", db, "-from-event", fmt.Sprint(early), "-coordinate")
	if code != 0 || !strings.Contains(out, "asked the running applier") {
		t.Fatalf("replay -coordinate exit %d:\n%s", code, out)
	}
	eventually(t, 2*time.Minute, "the running applier seeks and re-drives", func() bool {
		p.checkAlive()
		return p.appliedEvents(db) >= before+redriven && p.caughtUp(ctx)
	})
	if !strings.Contains(p.apply.out.String(), "seeking a database's topic as an operator asked") {
		t.Errorf("the applier's log does not show the seek:\n%s", tail(p.apply.out.String(), 20))
	}
	if v := p.runVerify("-db", db, "-sample", "1"); v.code != 0 || len(v.findings) != 0 {
		t.Errorf("verify after the coordinated re-drive: exit %d, %d findings; want 0 and none\n%s", v.code, len(v.findings), v.raw)
	}

	// -to-latest, with the applier stopped and the group moved back to
	// the early event: it must move the committed offset forward to the
	// topic's end, and say so. The tailer's heartbeats may still land
	// meanwhile, so the end is bracketed by reads before and after.
	p.apply.stop(t)
	if out, code := p.runReplay("-db", db, "-from-event", fmt.Sprint(early)); code != 0 {
		t.Fatalf("replay -from-event exit %d:\n%s", code, out)
	}
	endOf := func() int64 {
		t.Helper()
		ends, err := p.env.KafkaAdmin(t).ListCommittedOffsets(ctx, topic)
		if err != nil {
			t.Fatal(err)
		}
		e, _ := ends.Lookup(topic, 0)
		return e.Offset
	}
	back, endBefore := p.committed(topic), endOf()
	if back != want || back >= endBefore {
		t.Fatalf("committed offset %d before -to-latest, want %d, below the end %d", back, want, endBefore)
	}
	out, code = p.runReplay("-db", db, "-to-latest")
	if code != 0 {
		t.Fatalf("replay -to-latest exit %d:\n%s", code, out)
	}
	t.Logf("replay -to-latest: %s", strings.TrimSpace(out))
	moved, endAfter := p.committed(topic), endOf()
	if moved < endBefore || moved > endAfter {
		t.Errorf("committed offset %d after -to-latest (was %d), want the end (%d..%d)", moved, back, endBefore, endAfter)
	}
	for _, say := range []string{
		fmt.Sprintf("committed offset %d, moving to %d: the end of the topic", back, moved),
		fmt.Sprintf("moving forward past %d records not applied yet", moved-back),
		fmt.Sprintf("committed offset %d for group %s", moved, p.prefix+"-applier"),
	} {
		if !strings.Contains(out, say) {
			t.Errorf("replay -to-latest does not say %q:\n%s", say, out)
		}
	}
}

// TestReplaySkipRunningApplier: a database halts on an event (a table
// outside the source roots); `hivedr replay -skip-event` reaches the
// running applier, which goes on past the event without a restart.
func TestReplaySkipRunningApplier(t *testing.T) {
	db := "rs_" + uniq(t)
	p := startPipeline(t, 6*time.Minute, db)
	ctx, env, dr, w := p.ctx, p.env, p.dr, p.w
	spec := wl.TableSpec{Columns: []string{"id bigint"}}
	outside := "hdfs://" + env.Get(t, "HIVEDR_HDFS_SRC_NAMENODE") + "/elsewhere/" + uniq(t) + "/t_out"
	for _, err := range []error{
		w.CreateDatabase(ctx, db),
		w.CreateTable(ctx, db, "t1", spec),
		w.CreateTable(ctx, db, "t_out", wl.TableSpec{Columns: spec.Columns, Location: outside}),
		w.CreateTable(ctx, db, "t2", spec),
	} {
		if err != nil {
			t.Fatal(err)
		}
	}
	var halted string
	eventually(t, 2*time.Minute, "the DR database records the halt", func() bool {
		p.checkAlive()
		d, err := dr.GetDatabase(ctx, db)
		if err != nil {
			return false
		}
		halted = d.Parameters["hivedr.halted"]
		return halted != ""
	})
	var id int64
	if _, err := fmt.Sscanf(halted, "event %d", &id); err != nil {
		t.Fatalf("no event ID in hivedr.halted %q", halted)
	}
	tableExists := func(name string) bool {
		_, err := dr.GetTableReq(ctx, &hive_metastore.GetTableRequest{DbName: db, TblName: name})
		return err == nil
	}
	if tableExists("t2") {
		t.Fatal("t2 on DR before the skip: the database did not halt at t_out")
	}
	out, code := p.runReplay("-skip-event", fmt.Sprintf("%s:%d", db, id))
	if code != 0 {
		t.Fatalf("replay -skip-event exit %d:\n%s", code, out)
	}
	eventually(t, time.Minute, "t2 on DR after the skip, same applier process", func() bool {
		p.checkAlive()
		return tableExists("t2")
	})
	if tableExists("t_out") {
		t.Error("the skipped table was created on DR")
	}
	if n := strings.Count(p.apply.out.String(), "applier started"); n != 1 {
		t.Errorf("the applier started %d times, want once (no restart)", n)
	}
	d, err := dr.GetDatabase(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	if rec := d.Parameters[fmt.Sprintf("hivedr.skipped.%d", id)]; !strings.Contains(rec, "requested by ") || !strings.Contains(rec, "skipped CREATE_TABLE") {
		t.Errorf("skip record %q: want who asked and what was skipped", rec)
	}
	if d.Parameters["hivedr.halted"] != "" {
		t.Errorf("hivedr.halted still set after the skip: %q", d.Parameters["hivedr.halted"])
	}
}
