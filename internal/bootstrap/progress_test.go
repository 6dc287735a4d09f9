package bootstrap

import (
	"fmt"
	"runtime"
	"strings"
	"testing"

	"github.com/hivedr/hivedr/internal/drparam"
	"github.com/hivedr/hivedr/schemas"
)

const (
	req = "r1"
	bid = "finance-40-1764765000000"
)

func state(phase string, tablesDone, parts, files, bytes, seq int64) schemas.BootstrapState {
	return schemas.BootstrapState{Database: "finance", BootstrapID: bid, RequestID: req, CutEventID: 40, Phase: phase,
		TablesTotal: 3, TablesDone: tablesDone, PartitionsDone: parts, Files: files, Bytes: bytes, Seq: seq}
}

func cp(reqOffset int64, bs ...schemas.BootstrapState) *schemas.TailerCheckpoint {
	return &schemas.TailerCheckpoint{Source: "primary", State: schemas.StateRunning, RequestsOffset: reqOffset, Bootstraps: bs}
}

func applying(id string, p drparam.Progress) map[string]string {
	return map[string]string{drparam.Target: "hivedr:primary", drparam.BootstrapID: id,
		drparam.BootstrapState: drparam.SnapshotState(40), drparam.BootstrapApplied: drparam.FormatProgress(p)}
}

func done(id string) map[string]string {
	return map[string]string{drparam.Target: "hivedr:primary", drparam.BootstrapDone: id, drparam.LastID: "40"}
}

// step is one thing the command reads.
type step struct {
	cp    *schemas.TailerCheckpoint
	comp  *schemas.CopyCompletion
	dr    map[string]string
	noDR  bool              // the DR has no such database
	halts map[string]string // the applier's halted gauges
}

func completion(task string, st schemas.CopyStatus, n int64) *schemas.CopyCompletion {
	return &schemas.CopyCompletion{TaskID: task, Status: st, Length: n}
}

func TestTrackerFold(t *testing.T) {
	other := schemas.BootstrapState{Database: "sales", BootstrapID: "sales-39-1", RequestID: "r0", Phase: schemas.PhaseSnapshot}
	for _, c := range []struct {
		name    string
		repair  bool
		adopt   []string
		steps   []step
		outcome Outcome
		why     string // substring of the verdict's reasons
		check   func(t *testing.T, d []Database)
	}{
		{name: "not taken yet", steps: []step{{cp: cp(5, other)}}, outcome: Waiting,
			check: func(t *testing.T, d []Database) {
				if len(d) != 0 {
					t.Errorf("another request's bootstrap is followed: %+v", d)
				}
			}},
		{name: "through to done", steps: []step{
			{cp: cp(6, other, state(schemas.PhaseSnapshot, 0, 0, 0, 0, 1))},
			{noDR: true},
			{cp: cp(6, state(schemas.PhaseSnapshot, 2, 10, 12, 1200, 13))},
			{comp: completion(bid+"-s3-0", schemas.StatusCopied, 100)},
			{comp: completion(bid+"-s3-1", schemas.StatusSkippedIdentical, 50)},
			{comp: completion(bid+"-s4-0", schemas.StatusSourceGone, 0)},
			{comp: completion("sales-39-1-s2-0", schemas.StatusCopied, 7)}, // another bootstrap's
			{comp: completion("55-0", schemas.StatusCopied, 9)},            // an event's
			{dr: applying(bid, drparam.Progress{Seq: 5, Tables: 1, Partitions: 3, Files: 3})},
			{cp: cp(6, state(schemas.PhaseCatchup, 3, 20, 24, 2400, 25))},
		}, outcome: Waiting, check: func(t *testing.T, ds []Database) {
			d := ds[0]
			if len(ds) != 1 || d.Phase != schemas.PhaseCatchup || d.TablesTotal != 3 || d.PartitionsPublished != 20 ||
				d.FilesCopied != 2 || d.BytesCopied != 150 || d.FilesFailed != 1 || d.Applied.Partitions != 3 || d.Done || !d.FinalTotals() {
				t.Errorf("figures %+v", ds)
			}
			if p := d.AppliedPercent(); p != 20 {
				t.Errorf("applied %v%%, want 20", p)
			}
		}},
		{name: "done on DR", steps: []step{
			{cp: cp(6, state(schemas.PhaseSnapshot, 0, 0, 0, 0, 1))},
			{cp: cp(6, state(schemas.PhaseCatchup, 3, 20, 24, 2400, 25))},
			{cp: cp(6)},
			{dr: applying(bid, drparam.Progress{Seq: 20, Tables: 3, Partitions: 15})},
			{dr: done(bid)},
		}, outcome: Done, check: func(t *testing.T, ds []Database) {
			d := ds[0]
			if d.Phase != PhasePublished || !d.Done || d.Applied.Partitions != 20 || d.Applied.Tables != 3 || d.AppliedPercent() != 100 {
				t.Errorf("figures %+v", d)
			}
		}},
		{name: "superseded by a later bootstrap", steps: []step{
			{cp: cp(6, state(schemas.PhaseSnapshot, 0, 0, 0, 0, 1))},
			{dr: done("finance-55-1764765999999")},
		}, outcome: Done, check: func(t *testing.T, ds []Database) {
			if ds[0].SupersededBy != "finance-55-1764765999999" {
				t.Errorf("figures %+v", ds[0])
			}
		}},
		{name: "same cut, started later", steps: []step{
			{cp: cp(6, state(schemas.PhaseSnapshot, 0, 0, 0, 0, 1))},
			{dr: done("finance-40-1764765000001")},
		}, outcome: Done},
		{name: "an older bootstrap done is not ours", steps: []step{
			{cp: cp(6, state(schemas.PhaseSnapshot, 0, 0, 0, 0, 1))},
			{dr: done("finance-12-1764700000000")},
		}, outcome: Waiting},
		{name: "halted on our bootstrap", steps: []step{
			{cp: cp(6, state(schemas.PhaseSnapshot, 0, 0, 0, 0, 1))},
			{dr: func() map[string]string {
				p := applying(bid, drparam.Progress{Seq: 2})
				p[drparam.Halted] = drparam.FormatHalt(40, "HIVEDR_SNAPSHOT_TABLE", "copy_failed", "file x")
				return p
			}()},
		}, outcome: Failed, why: "database finance halted on DR"},
		{name: "a halt the bootstrap releases is waited out", steps: []step{
			{cp: cp(6, state(schemas.PhaseSnapshot, 0, 0, 0, 0, 1))},
			{dr: map[string]string{drparam.Target: "hivedr:primary", drparam.LastID: "30",
				drparam.Halted: drparam.FormatHalt(31, "ADD_PARTITION", "chain_broken", "previous 29")}},
		}, outcome: Waiting},
		{name: "a halt no bootstrap releases", steps: []step{
			{cp: cp(6, state(schemas.PhaseSnapshot, 0, 0, 0, 0, 1))},
			{dr: map[string]string{drparam.Halted: drparam.FormatHalt(31, "ALTER_TABLE", "not_a_replica", "")}},
		}, outcome: Failed, why: "not_a_replica"},
		{name: "halted where the applier cannot record it (its metric)", steps: []step{
			{cp: cp(6, state(schemas.PhaseSnapshot, 0, 0, 0, 0, 1))},
			{dr: map[string]string{drparam.LastID: "3"}}, // a user's database: no target mark
			{halts: map[string]string{"finance": "not_a_replica", "sales": "metastore_refused"}},
		}, outcome: Failed, why: `hivedr_applier_halted{reason="not_a_replica"}`},
		{name: "a halted gauge a bootstrap releases, then none", steps: []step{
			{cp: cp(6, state(schemas.PhaseSnapshot, 0, 0, 0, 0, 1))},
			{halts: map[string]string{"finance": "needs_bootstrap"}},
			{halts: map[string]string{"finance": "not_a_replica"}},
			{halts: map[string]string{}},
		}, outcome: Waiting},
		{name: "taken, nothing matched", steps: []step{{cp: cp(6, other)}}, outcome: Failed, why: "started no bootstrap"},
		{name: "tailer stops on a broken chain", steps: []step{
			{cp: cp(6, state(schemas.PhaseSnapshot, 0, 0, 0, 0, 1))},
			{cp: func() *schemas.TailerCheckpoint {
				c := cp(6, state(schemas.PhaseSnapshot, 0, 0, 0, 0, 1))
				c.State = schemas.StateChainBroken
				return c
			}()},
		}, outcome: Failed, why: RepairCommand},
		{name: "a repair waits out the broken chain it repairs", repair: true, steps: []step{
			{cp: func() *schemas.TailerCheckpoint { c := cp(5); c.State = schemas.StateChainBroken; return c }()},
		}, outcome: Waiting},
		{name: "restarted bootstrap of the same request", steps: []step{
			{cp: cp(6, state(schemas.PhaseSnapshot, 2, 10, 12, 1200, 13))},
			{cp: cp(6, func() schemas.BootstrapState {
				b := state(schemas.PhaseSnapshot, 0, 0, 0, 0, 1)
				b.BootstrapID, b.CutEventID = "finance-41-1764765000500", 41
				return b
			}())},
			{dr: done(bid)},
		}, outcome: Waiting, check: func(t *testing.T, ds []Database) {
			if len(ds) != 1 || ds[0].BootstrapID != "finance-41-1764765000500" || ds[0].TablesPublished != 0 {
				t.Errorf("figures %+v", ds)
			}
		}},
		{name: "adopts the bootstrap in progress of a database it names", adopt: []string{"fin*"}, steps: []step{
			{cp: cp(6, other, func() schemas.BootstrapState {
				b := state(schemas.PhaseSnapshot, 1, 2, 3, 4, 5)
				b.RequestID = "r0"
				return b
			}())},
			{cp: cp(6, func() schemas.BootstrapState {
				b := state(schemas.PhaseCatchup, 3, 2, 3, 4, 9)
				b.RequestID = "r0"
				return b
			}())},
			{dr: done(bid)},
		}, outcome: Done, check: func(t *testing.T, ds []Database) {
			if len(ds) != 1 || ds[0].Database != "finance" || !ds[0].Adopted || !strings.Contains(DatabaseLine(ds[0]), "an earlier request's") {
				t.Errorf("figures %+v (sales is not named: not adopted)", ds)
			}
		}},
		{name: "adopts only at the taking", adopt: []string{"finance"}, steps: []step{
			{cp: cp(6)},
			{cp: cp(6, func() schemas.BootstrapState {
				b := state(schemas.PhaseSnapshot, 1, 2, 3, 4, 5)
				b.RequestID = "r0"
				return b
			}())},
		}, outcome: Failed, why: "started no bootstrap"},
	} {
		t.Run(c.name, func(t *testing.T) {
			tr := NewTracker(req, 5, c.repair)
			if c.adopt != nil {
				tr.Adopt(c.adopt)
			}
			for _, s := range c.steps {
				switch {
				case s.cp != nil:
					tr.ObserveCheckpoint(s.cp)
				case s.comp != nil:
					tr.ObserveCompletion(s.comp)
				case s.halts != nil:
					tr.ObserveHalts(s.halts)
				default:
					tr.ObserveDR("finance", s.dr)
				}
			}
			o, why := tr.Verdict()
			if o != c.outcome || c.why != "" && !strings.Contains(strings.Join(why, "\n"), c.why) {
				t.Fatalf("verdict %v %q; want %v with %q", o, why, c.outcome, c.why)
			}
			if c.check != nil {
				c.check(t, tr.Databases())
			}
		})
	}
}

// TestTrackerEveryBootstrap is status's use: no request, the newest
// checkpoint and the DR parameters, including a database whose tailer
// side is over.
func TestTrackerEveryBootstrap(t *testing.T) {
	tr := NewTracker("", -1, false)
	tr.ObserveCheckpoint(cp(9, state(schemas.PhaseSnapshot, 1, 5, 5, 500, 7)))
	tr.ObserveDRAny("finance", applying(bid, drparam.Progress{Seq: 3, Tables: 1}))
	tr.ObserveDRAny("sales", applying("sales-39-1764765000000", drparam.Progress{Seq: 9, Tables: 2, Partitions: 6}))
	tr.ObserveDRAny("hr", done("hr-3-1"))
	ds := tr.Databases()
	if len(ds) != 2 || ds[0].Database != "finance" || ds[1].Database != "sales" {
		t.Fatalf("databases %+v", ds)
	}
	if ds[0].Applied.Seq != 3 || ds[0].RecordsPublished != 7 || ds[1].Phase != PhasePublished || ds[1].CutEventID != 39 || ds[1].Applied.Partitions != 6 {
		t.Errorf("figures %+v", ds)
	}
}

func TestParseHalts(t *testing.T) {
	text := `# HELP hivedr_applier_halted 1 while a database's worker is halted, by reason
# TYPE hivedr_applier_halted gauge
hivedr_applier_halted{db="finance",reason="not_a_replica"} 1
hivedr_applier_halted{db="Sales",reason="chain_broken"} 1
hivedr_applier_halted{db="hr",reason="copy_failed"} 0
hivedr_applier_events_total{db="x",result="applied",type="CREATE_TABLE"} 4
`
	got := ParseHalts(text)
	if len(got) != 2 || got["finance"] != "not_a_replica" || got["sales"] != "chain_broken" {
		t.Errorf("ParseHalts = %v", got)
	}
}

// TestTrackerCountsCompletions: the tracker counts completions instead of
// keeping their task IDs, so following 200,000 copies costs no more
// memory than following 20,000; a task completed twice (copyd's offsets
// moved back) counts twice, capped at the files published once the
// snapshot is all published.
func TestTrackerCountsCompletions(t *testing.T) {
	heapAfter := func(n int) (uint64, *Tracker) {
		tr := NewTracker(req, 5, false)
		tr.ObserveCheckpoint(cp(6, state(schemas.PhaseSnapshot, 1, int64(n), int64(n), int64(n), int64(n))))
		for i := range n {
			tr.ObserveCompletion(completion(fmt.Sprintf("%s-s%d-0", bid, i+2), schemas.StatusCopied, 1))
		}
		runtime.GC()
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		return ms.HeapInuse, tr
	}
	small, trs := heapAfter(20_000)
	big, trb := heapAfter(200_000)
	if d := trb.Databases()[0]; d.FilesCopied != 200_000 {
		t.Fatalf("files copied %d, want 200000", d.FilesCopied)
	}
	runtime.KeepAlive(trs)
	// 180,000 task IDs kept as map keys would take over 10 MiB.
	if growth := int64(big) - int64(small); growth > 2<<20 {
		t.Errorf("the heap grew by %d bytes following 180,000 more copies", growth)
	}

	tr := NewTracker(req, 5, false)
	tr.ObserveCheckpoint(cp(6, state(schemas.PhaseSnapshot, 1, 2, 2, 200, 3)))
	for _, task := range []string{"-s2-0", "-s3-0", "-s3-0"} {
		tr.ObserveCompletion(completion(bid+task, schemas.StatusCopied, 100))
	}
	if d := tr.Databases()[0]; d.FilesCopied != 3 {
		t.Errorf("while the tailer publishes: files copied %d, want 3 (a completion counts each time)", d.FilesCopied)
	}
	tr.ObserveCheckpoint(cp(6, state(schemas.PhaseCatchup, 3, 2, 2, 200, 4)))
	if d := tr.Databases()[0]; d.FilesCopied != 2 {
		t.Errorf("once all published: files copied %d, want 2 (capped at the files published)", d.FilesCopied)
	}
}
