package applier

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	hms "github.com/beltran/gohive/hive_metastore"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/hivedr/hivedr/internal/drparam"
	"github.com/hivedr/hivedr/internal/fs"
	"github.com/hivedr/hivedr/internal/location"
	"github.com/hivedr/hivedr/schemas"
)

// The runtime of a bootstrap: records published as the tailer publishes
// them (keys snapshot/<id>/<seq>, in transactions) on a fake cluster,
// applied by the real workers onto the strict fake metastore.

// memFiles is the DR data files in memory (Files): copyd's completions
// put them there (kfix.complete), prunes remove them.
type memFiles struct {
	mu    sync.Mutex
	files map[string]bool // canonical location
	// lists counts the listings by directory asked (List, ListDirs and
	// Walk).
	lists map[string]int
	// sorted are the files' keys in order (nil: to be sorted again).
	sorted []string
}

func newMemFiles() *memFiles { return &memFiles{files: map[string]bool{}, lists: map[string]int{}} }

func (m *memFiles) put(loc string) {
	l, err := location.Parse(loc)
	if err != nil {
		panic(err)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.files[l.String()] = true
	m.sorted = nil
}

func (m *memFiles) List(_ context.Context, dir string) ([]string, error) {
	d, err := location.Parse(dir)
	if err != nil {
		return nil, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.lists["files "+d.String()]++
	var out []string
	for f := range m.files {
		if l, _ := location.Parse(f); l.Dir() == d {
			out = append(out, f)
		}
	}
	sort.Strings(out)
	return out, nil
}

// Walk is walker: the files under dir at any depth; a dir holding none
// does not exist.
func (m *memFiles) Walk(_ context.Context, dir string, fn func(loc string, size int64) error) error {
	d, err := location.Parse(dir)
	if err != nil {
		return err
	}
	m.mu.Lock()
	m.lists["walk "+d.String()]++
	if m.sorted == nil {
		m.sorted = slices.Sorted(maps.Keys(m.files))
	}
	prefix := strings.TrimSuffix(d.String(), "/") + "/" // the keys are canonical
	var under []string
	for i, _ := slices.BinarySearch(m.sorted, prefix); i < len(m.sorted) && strings.HasPrefix(m.sorted[i], prefix); i++ {
		under = append(under, m.sorted[i])
	}
	m.mu.Unlock()
	if len(under) == 0 {
		return fmt.Errorf("walk %s: %w", dir, fs.ErrNotExist)
	}
	for _, f := range under {
		if err := fn(f, 1); err != nil {
			return err
		}
	}
	return nil
}

// ListDirs is DirLister: the directories some file lies under, directly
// under dir.
func (m *memFiles) ListDirs(_ context.Context, dir string) ([]string, error) {
	d, err := location.Parse(dir)
	if err != nil {
		return nil, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.lists["dirs "+d.String()]++
	var out []string
	prefix := strings.TrimSuffix(d.String(), "/") + "/" // the keys are canonical
	for f := range m.files {
		if !strings.HasPrefix(f, prefix) {
			continue
		}
		l, _ := location.Parse(f)
		for a := l.Dir(); a != a.Dir(); a = a.Dir() {
			if a.Dir() == d && !slices.Contains(out, a.Base()) {
				out = append(out, a.Base())
			}
		}
	}
	sort.Strings(out)
	return out, nil
}

// listed returns the listings asked so far and forgets them.
func (m *memFiles) listed() map[string]int {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := m.lists
	m.lists = map[string]int{}
	return out
}

func (m *memFiles) Remove(_ context.Context, loc string) error {
	l, err := location.Parse(loc)
	if err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.files, l.String())
	m.sorted = nil
	return nil
}

func (m *memFiles) has(loc string) bool {
	l, _ := location.Parse(loc)
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.files[l.String()]
}

// bigBootstrap is a bootstrap of a new database a at cut 50: one
// partitioned table t with n partitions, a file each.
func bigBootstrap(n int) (all, parts []*schemas.Event, t *schemas.Table) {
	t = srcTable("a", "t", []string{"ds"}, "x int")
	b := newBootstrap("b1", "a", 50)
	all = []*schemas.Event{b.begin(), b.table(t, 50)}
	for i := 1; i <= n; i++ {
		p := srcPart(t, fmt.Sprintf("%03d", i))
		parts = append(parts, b.part(t, p, 50+int64(i%3), partFile(p, "f")))
	}
	all = append(all, parts...)
	return at(append(all, b.end())...), parts, t
}

// publishRecs publishes records in transactions of n, as the tailer's
// slices, and returns them with their offsets.
func (f *kfix) publishRecs(n int, evs []*schemas.Event) []*kgo.Record {
	f.t.Helper()
	var out []*kgo.Record
	for len(evs) > 0 {
		k := min(n, len(evs))
		items := make([]any, k)
		for i := range k {
			items[i] = evs[i]
		}
		out = append(out, f.publish(items...)...)
		evs = evs[k:]
	}
	return out
}

func (f *kfix) committedAt(db string) int64 {
	c, _ := f.committed("g", db)
	return c[db]
}

func (f *kfix) addBatches() []int {
	f.ms.mu.Lock()
	defer f.ms.mu.Unlock()
	return slices.Clone(f.ms.addBatches)
}

// TestApplierBootstrapBatches: 25 partition records of one table are
// applied in batches of 10 (one add_partitions each), and a batch's
// offsets are committed only once the whole batch is applied: with a file
// of the second batch not copied, the first batch is on DR and committed,
// nothing of the second is, and the DR database's progress says 10
// partitions. Then everything is applied, the END moves the position to
// the cut, and the metrics count what was applied.
func TestApplierBootstrapBatches(t *testing.T) {
	f := newKFix(t, "a")
	all, parts, tb := bigBootstrap(25)
	after := at(prevID(alterTable(60, tb, withParam(tb, "k", "v")), 0))
	recs := f.publishRecs(7, append(all, after...))
	offsetOf := map[*schemas.Event]int64{}
	for i, ev := range append(all, after...) {
		offsetOf[ev] = recs[i].Offset
	}
	r := f.start("g", t.TempDir(), func(c *Config) { c.BatchPartitions = 10; c.LookAhead = 100 })

	// No partition file copied yet: the first batch waits, whole (ten
	// files) once the queue holds it.
	waitFor(t, "the first batch waiting for its 10 files", func() (bool, string) {
		v, _ := r.metric(t, "hivedr_applier_waiting_files", map[string]string{"db": "a"})
		return v == 10, fmt.Sprintf("waiting for %v files", v)
	})
	if n := len(f.addBatches()); n != 0 {
		t.Fatalf("%d add_partitions before any partition file was copied", n)
	}
	// Files of partitions 1..14: the first batch applies, the second
	// (11..20) waits for six.
	f.complete(schemas.StatusCopied, nil, parts[:14]...)
	waitFor(t, "the second batch waiting for 6 files", func() (bool, string) {
		v, _ := r.metric(t, "hivedr_applier_waiting_files", map[string]string{"db": "a"})
		return v == 6 && len(f.addBatches()) == 1, fmt.Sprintf("waiting for %v files, add_partitions %v", v, f.addBatches())
	})
	if got := f.addBatches(); !slices.Equal(got, []int{10}) {
		t.Errorf("add_partitions of %v partitions, want one of 10", got)
	}
	want := offsetOf[parts[9]] + 1
	waitFor(t, "the first batch committed", func() (bool, string) {
		c := f.committedAt("a")
		return c == want, fmt.Sprintf("committed %d, want %d", c, want)
	})
	for i, p := range parts {
		got := f.ms.part("a", "t", fmt.Sprintf("%03d", i+1))
		if (got != nil) != (i < 10) {
			t.Errorf("partition %d on DR: %v, want %v", i+1, got != nil, i < 10)
		}
		if got != nil && (stamp(got.Parameters) != p.Snapshot.StampEventID || got.Parameters[drparam.BootstrapID] != "b1") {
			t.Errorf("partition %d: %v", i+1, got.Parameters)
		}
	}
	if prog := f.ms.db("a").Parameters[drparam.BootstrapApplied]; prog != "seq=12 tables=1 partitions=10 files=10" {
		t.Errorf("%s = %q after the first batch", drparam.BootstrapApplied, prog)
	}
	if c := f.committedAt("a"); c != want {
		t.Errorf("committed %d while the second batch waits, want %d", c, want)
	}

	f.complete(schemas.StatusCopied, nil, parts[14:]...)
	f.waitMark("a", 60)
	if got := f.addBatches(); !slices.Equal(got, []int{10, 10, 5}) {
		t.Errorf("add_partitions of %v partitions, want 10, 10, 5", got)
	}
	if n := f.ms.callsOf("GetAllTables") + f.ms.callsOf("EachPartitionName"); n != 0 {
		t.Errorf("the END of a bootstrap that created its database read %d listings; nothing on it predates the bootstrap", n)
	}
	p := f.ms.db("a").Parameters
	if p[drparam.BootstrapDone] != "b1" || p[drparam.BootstrapID] != "" || p[drparam.BootstrapApplied] != "" {
		t.Errorf("DR database after the END: %v", p)
	}
	if got := f.ms.marksOf("a"); !slices.Equal(got, []int64{0, 50, 60}) {
		t.Errorf("DR repl.last.id moved through %v, want 0 (the BEGIN made it), 50 (the END) and 60", got)
	}
	for kind, want := range map[string]float64{"tables": 1, "partitions": 25, "files": 25} {
		if v, _ := r.metric(t, "hivedr_applier_bootstrap_applied_total", map[string]string{"db": "a", "kind": kind}); v != want {
			t.Errorf("hivedr_applier_bootstrap_applied_total{kind=%s} = %v, want %v", kind, v, want)
		}
	}
	if v, _ := r.metric(t, "hivedr_applier_events_total", map[string]string{"db": "a", "type": string(schemas.EventSnapshotPartition), "result": "applied"}); v != 25 {
		t.Errorf("%v partition records counted applied, want 25", v)
	}
	waitFor(t, "the group's offset at the topic's end", func() (bool, string) {
		c, e := f.committed("g", "a")
		return c["a"] == e["a"], fmt.Sprintf("committed %v, end %v", c, e)
	})
}

// TestApplierBootstrapKilledMidBatch: the applier dies after a batch's
// add_partitions succeeded and before its offsets were marked (its next
// metastore call never returns): the next applier starts at the batch
// again, finds every partition of it written (a strict metastore would
// refuse adding one twice), and goes on to the END.
func TestApplierBootstrapKilledMidBatch(t *testing.T) {
	f := newKFix(t, "a")
	all, parts, _ := bigBootstrap(25)
	recs := f.publishRecs(7, all)
	f.complete(schemas.StatusCopied, nil, all...)
	stuck := make(chan struct{})
	var once sync.Once
	f.ms.setHook(func(ctx context.Context, op string) error {
		if op == "AlterDatabase" && len(f.addBatches()) == 2 {
			once.Do(func() { close(stuck) })
			<-ctx.Done() // the process dies here
			return ctx.Err()
		}
		return nil
	})
	r1 := f.start("g", t.TempDir(), func(c *Config) { c.BatchPartitions = 10; c.LookAhead = 100 })
	<-stuck
	r1.stop(t)
	f.ms.setHook(nil)
	// (The second batch is on DR, its offsets not marked.)
	if got := f.addBatches(); !slices.Equal(got, []int{10, 10}) || f.ms.part("a", "t", "020") == nil {
		t.Fatalf("add_partitions %v at the kill", got)
	}
	var firstBatchEnd int64
	for i, ev := range all {
		if ev == parts[9] {
			firstBatchEnd = recs[i].Offset + 1
		}
	}
	if c := f.committedAt("a"); c > firstBatchEnd {
		t.Fatalf("committed offset %d past the first batch (%d): the second batch's offsets were marked before it was done", c, firstBatchEnd)
	}

	r2 := f.start("g", t.TempDir(), func(c *Config) { c.BatchPartitions = 10; c.LookAhead = 100 })
	f.waitMark("a", 50)
	if got := f.addBatches(); !slices.Equal(got, []int{10, 10, 5}) {
		t.Errorf("add_partitions of %v partitions over both runs, want 10, 10, 5", got)
	}
	if v, _ := r2.metric(t, "hivedr_applier_events_total", map[string]string{"db": "a", "type": string(schemas.EventSnapshotPartition), "result": string(ReasonAlreadyApplied)}); v != 10 {
		t.Errorf("the second applier found %v partition records applied, want the 10 of the killed batch", v)
	}
	for i := range parts {
		if f.ms.part("a", "t", fmt.Sprintf("%03d", i+1)) == nil {
			t.Errorf("partition %d missing", i+1)
		}
	}
	if p := f.ms.db("a").Parameters; p[drparam.BootstrapDone] != "b1" {
		t.Errorf("DR database %v", p)
	}
}

// TestApplierBootstrapReleasesHalts: a database halted chain_broken (its
// topic lost events) and one halted needs_bootstrap (a tailer started
// without its checkpoint) go on reading their topics; a bootstrap of each
// published later releases it: the records before its BEGIN are skipped
// as superseded_by_bootstrap (with more of them than the look-ahead holds:
// they are dropped from memory meanwhile), the bootstrap is applied, and
// the events after its END, chained to the events before it, apply.
func TestApplierBootstrapReleasesHalts(t *testing.T) {
	f := newKFix(t, "a", "b")
	ta := srcTable("a", "t", []string{"ds"}, "x int")
	tb := srcTable("b", "u", nil, "y int")
	p1 := srcPart(ta, "1")
	old := srcTable("a", "old", nil, "x int")
	f.publishAll(3, chainedTopic(at(createDB(1, "a"), createTable(2, ta), addParts(3, ta, []schemas.Partition{p1}), createTable(4, old))))
	f.publishAll(3, chainedTopic(at(createDB(11, "b"), createTable(12, tb))))
	r1 := f.start("g", t.TempDir(), nil)
	f.waitMark("a", 4)
	f.waitMark("b", 12)
	r1.stop(t)

	// a: event 5 is lost (and table old dropped at the source then); b: a
	// new tailer starts at event 20.
	f.publish(at(prevID(alterTable(6, ta, withParam(ta, "k", "v6")), 5))[0])
	f.publish(at(discontinuity(20, "b"))[0])
	r2 := f.start("g", t.TempDir(), nil) // LookAhead 3
	f.waitHalted(r2, "a", ReasonChainBroken)
	f.waitHalted(r2, "b", ReasonNeedsBootstrap)

	// More of a's events (six: past the look-ahead), then the bootstraps.
	var more []*schemas.Event
	for id := int64(7); id <= 12; id++ {
		more = append(more, alterTable(id, ta, withParam(ta, "k", fmt.Sprintf("v%d", id))))
	}
	f.publishAll(2, chainedFrom(6, at(more...)))
	waitFor(t, "a still halted, reading on", func() (bool, string) {
		v, _ := r2.metric(t, "hivedr_applier_halted", map[string]string{"db": "a", "reason": string(ReasonChainBroken)})
		return v == 1 && f.ms.mark("a") == 4, fmt.Sprintf("halted %v, DR at %d", v, f.ms.mark("a"))
	})
	p2 := srcPart(ta, "2")
	ba := newBootstrap("ba", "a", 12)
	// (Partition 1 was dropped at the source meanwhile: not in it.)
	aRecs := at(ba.begin(), ba.table(withParam(ta, "k", "v12"), 12), ba.part(ta, p2, 12, partFile(p2, "f")), ba.end())
	f.publishRecs(3, aRecs)
	f.publish(at(prevID(alterTable(13, ta, withParam(ta, "k", "v13")), 12))[0])
	bb := newBootstrap("bb", "b", 20)
	bRecs := at(bb.begin(), bb.table(tb, 20, tb.Location+"/g"), bb.end())
	f.publishRecs(5, bRecs)
	f.publish(at(prevID(alterTable(21, tb, withParam(tb, "k", "v21")), 12))[0]) // the chain: the last event on b's topic is 12
	f.complete(schemas.StatusCopied, nil, append(aRecs, bRecs...)...)

	f.waitMark("a", 13)
	f.waitMark("b", 21)
	for db, want := range map[string]float64{"a": 7, "b": 1} {
		if got := r2.sum(t, "hivedr_applier_events_total", map[string]string{"db": db, "result": string(ReasonSupersededByBootstrap)}); got != want {
			t.Errorf("%s: %v events skipped as superseded_by_bootstrap, want %v", db, got, want)
		}
		if p := f.ms.db(db).Parameters; p[drparam.Halted] != "" {
			t.Errorf("%s: %s=%q after the release", db, drparam.Halted, p[drparam.Halted])
		}
		if v := r2.sum(t, "hivedr_applier_halted", map[string]string{"db": db}); v != 0 {
			t.Errorf("%s still reported halted", db)
		}
	}
	if got := f.ms.marksOf("a"); !slices.Equal(got, []int64{1, 2, 3, 4, 12, 13}) {
		t.Errorf("a's DR repl.last.id moved through %v, want 1..4, then 12 (the END) and 13", got)
	}
	if f.ms.table("a", "old") != nil {
		t.Error("a.old, which the bootstrap does not have, is still on DR")
	}
	if p := f.ms.part("a", "t", "2"); p == nil || p.Parameters[drparam.BootstrapID] != "ba" {
		t.Errorf("a.t partition 2 from the bootstrap: %v", p)
	}
	if p := f.ms.part("a", "t", "1"); p != nil {
		t.Errorf("a.t partition 1, which the bootstrap does not have, is still on DR: %v", p.Parameters)
	}
	// a's END read the tables of a and the partitions of t, and dropped in
	// one call; b's read its one table.
	for op, want := range map[string]int{"GetAllTables": 2, "EachPartitionName": 1, "DropPartitionsReq": 1, "DropPartition": 0} {
		if got := f.ms.callsOf(op); got != want {
			t.Errorf("%d %s calls, want %d", got, op, want)
		}
	}
	if tbl := f.ms.table("a", "t"); tbl.Parameters["k"] != "v13" {
		t.Errorf("a.t after event 13: %v", tbl.Parameters)
	}
	waitFor(t, "the group's offsets at the topics' ends", func() (bool, string) {
		c, e := f.committed("g", "a", "b")
		return c["a"] == e["a"] && c["b"] == e["b"], fmt.Sprintf("committed %v, ends %v", c, e)
	})
}

// chainedFrom chains evs after event prev on one topic.
func chainedFrom(prev int64, evs []*schemas.Event) []*schemas.Event {
	for _, ev := range evs {
		prevID(ev, prev)
		prev = ev.EventID
	}
	return evs
}

// TestApplierBootstrapReleasesEntersScope: a table renamed into the scope
// halts enters_scope; the bootstrap of that table the tailer publishes
// after it releases the halt (the rename is planned again with it in the
// look-ahead) and brings the table with its files.
func TestApplierBootstrapReleasesEntersScope(t *testing.T) {
	f := newKFix(t, "a")
	ta := srcTable("a", "t", nil, "x int")
	tmp := renamedTo(ta, "a", "tmp_t")
	pol := func(c *Config) { c.Policy = testPolicy{excluded: []string{"a.tmp_t"}} }
	f.publishAll(2, chainedTopic(at(createDB(1, "a"), alterTable(2, tmp, ta))))
	r := f.start("g", t.TempDir(), pol)
	f.waitHalted(r, "a", ReasonEntersScope)

	b := newBootstrap("bt", "a", 2, "t")
	recs := at(b.begin(), b.table(ta, 2, ta.Location+"/000000_0"), b.end())
	f.publishRecs(3, recs)
	f.publish(at(prevID(alterTable(3, ta, withParam(ta, "k", "v3")), 2))[0])
	f.complete(schemas.StatusCopied, nil, recs...)
	f.waitMark("a", 3)
	tbl := f.ms.table("a", "t")
	if tbl == nil || tbl.Parameters["k"] != "v3" {
		t.Fatalf("a.t not brought by its bootstrap: %v", tbl)
	}
	if !f.files.has(drPath(ta.Location + "/000000_0")) {
		t.Error("the bootstrap's file was pruned")
	}
	if got := r.sum(t, "hivedr_applier_events_total", map[string]string{"db": "a", "type": string(schemas.EventAlterTable), "result": string(ReasonSupersededByBootstrap)}); got != 1 {
		t.Errorf("%v renames counted superseded_by_bootstrap, want 1", got)
	}
	if strings.Contains(f.ms.db("a").Parameters[drparam.Halted], "enters_scope") {
		t.Error("the halt note stayed")
	}
}

// TestApplierBootstrapEndInRounds: a re-bootstrap of a database whose DR
// table holds more partitions the snapshot lacks than one inventory holds
// (inventoryMaxStale) drops them in rounds: the END waits
// (bootstrap_converging) after each, and moves the database to its cut
// only once none is left.
func TestApplierBootstrapEndInRounds(t *testing.T) {
	f := newKFix(t, "a")
	tb := srcTable("a", "t", []string{"ds"}, "x int")
	stale := inventoryMaxStale + 50
	f.ms.mu.Lock()
	f.ms.putDB("a", drDB("a", 40), "seed")
	tk := tableKey("a", "t")
	dt := drTable(tb, 40)
	dt.OwnerType = hms.PrincipalType_USER // (the fake's JSON copies need a valid one)
	f.ms.tables[tk] = dt
	for i := range stale {
		p := srcPart(tb, fmt.Sprintf("%06d", i))
		f.ms.parts[partKey(tk, p.Values)] = drPart(tb, p, 40)
	}
	f.ms.mu.Unlock()
	b := newBootstrap("b1", "a", 50)
	recs := []*schemas.Event{b.begin(), b.table(tb, 50)}
	for _, v := range []string{"000001", "000002", "999999"} {
		p := srcPart(tb, v)
		recs = append(recs, b.part(tb, p, 50, partFile(p, "f")))
	}
	recs = at(append(recs, b.end())...)
	f.publishRecs(3, recs)
	f.complete(schemas.StatusCopied, nil, recs...)
	r := f.start("g", t.TempDir(), nil)

	// (The fake copies every partition it hands out through JSON: 20,000
	// of them take seconds on a loaded machine, so the wait is long.)
	for deadline := time.Now().Add(2 * time.Minute); f.ms.mark("a") != 50; time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("DR database a at event %d, want the END's 50", f.ms.mark("a"))
		}
	}
	f.ms.mu.Lock()
	left := 0
	for pk := range f.ms.parts {
		if pk.TableKey == tk {
			left++
		}
	}
	f.ms.mu.Unlock()
	if left != 3 {
		t.Errorf("a.t holds %d partitions after the END, want the bootstrap's 3", left)
	}
	if p := f.ms.part("a", "t", "000001"); p == nil || p.Parameters[drparam.BootstrapID] != "b1" {
		t.Errorf("a.t partition 000001 after the END: %v", p)
	}
	if v := r.sum(t, "hivedr_applier_wait_seconds_total", map[string]string{"db": "a", "reason": string(ReasonConverging)}); v <= 0 {
		t.Errorf("the END did not wait between rounds (wait seconds %v)", v)
	}
	// Round one lists two windows (10,000 names, then the rest), round
	// two one.
	if got := f.ms.callsOf("EachPartitionName"); got < 3 {
		t.Errorf("%d listings of a.t's partitions, want 3 at least (two rounds)", got)
	}
	if p := f.ms.db("a").Parameters; p[drparam.BootstrapDone] != "b1" || p[drparam.BootstrapID] != "" {
		t.Errorf("DR database after the END: %v", p)
	}
}
