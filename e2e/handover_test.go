package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/beltran/gohive/hive_metastore"
	"github.com/twmb/franz-go/pkg/kadm"

	wl "github.com/hivedr/hivedr/e2e/workload"
	"github.com/hivedr/hivedr/internal/kafka"
	"github.com/hivedr/hivedr/internal/testenv"
)

// handoverBound is the most a lost member's work may wait for the
// survivors: issue 15's p99 target, against the 6 s default session.
const handoverBound = 10 * time.Second

// withConf writes a copy of the pipeline's configuration with old
// replaced by new, for a second instance of a daemon.
func (p *pipeline) withConf(name, old, repl string) string {
	p.t.Helper()
	b, err := os.ReadFile(p.conf)
	if err != nil {
		p.t.Fatal(err)
	}
	if !strings.Contains(string(b), old) {
		p.t.Fatalf("%q not in the pipeline configuration", old)
	}
	return writeFile(p.t, name, strings.Replace(string(b), old, repl, 1))
}

// groupOwners returns, for a consumer group, each member's instance ID
// with the topic partitions assigned to it, as "topic/partition".
func groupOwners(ctx context.Context, adm *kadm.Client, group string) (map[string][]string, error) {
	ds, err := adm.DescribeGroups(ctx, group)
	if err != nil {
		return nil, err
	}
	g, ok := ds[group]
	if !ok || g.Err != nil {
		return nil, fmt.Errorf("describe %s: %v", group, g.Err)
	}
	owners := map[string][]string{}
	for _, m := range g.Members {
		id := m.MemberID
		if m.InstanceID != nil {
			id = *m.InstanceID
		}
		a, ok := m.Assigned.AsConsumer()
		if !ok {
			continue
		}
		for _, tp := range a.Topics {
			for _, p := range tp.Partitions {
				owners[id] = append(owners[id], fmt.Sprintf("%s/%d", tp.Topic, p))
			}
		}
		sort.Strings(owners[id])
	}
	return owners, nil
}

// TestHandover loses a machine: of two appliers in one group over four
// databases and two copy daemons in one group over the manifests, one of
// each is killed with SIGKILL at the same moment and not restarted. Each
// database the dead applier owned must apply an event published after the
// kill, and each manifest partition the dead daemon owned must complete a
// task added after it, within handoverBound of the kill. Then the killed
// instances start again under the same instance IDs: they rejoin, the
// groups settle with both members working, and every database applies
// again.
func TestHandover(t *testing.T) {
	u := uniq(t)
	dbs := []string{"ho_a_" + u, "ho_b_" + u, "ho_c_" + u, "ho_d_" + u}
	env := testenv.Require(t)
	ctx := ctxFor(t, 10*time.Minute)
	src, dr := env.HMS(t, testenv.Source), env.HMS(t, testenv.DR)
	srcFS, _ := pipelineFS(t, env)
	p := newPipeline(t, env, dbs, currentEventID(t, ctx, src))
	adm := env.KafkaAdmin(t)
	w := wl.NewSource(src, srcFS, env.Get(t, "HIVEDR_HMS_SRC_EXTERNAL"))

	applyConf := func(inst string) string {
		return p.withConf("apply-"+inst+".yaml", "applier:\n  group:", "applier:\n  instance: "+inst+"\n  group:")
	}
	copydConf := func(inst string) string {
		return p.withConf("copyd-"+inst+".yaml", "instance: "+p.prefix+"\n  workers:", "instance: "+inst+"\n  workers:")
	}
	startApply := func(inst string) *proc {
		return startHivedr(t, "apply-"+inst, "apply", "-config", applyConf(inst), "-state-dir", filepath.Join(p.state, "apply-"+inst),
			"-metrics-addr", fmt.Sprintf("127.0.0.1:%d", freePort(t)))
	}
	startCopyd := func(inst string) *proc {
		return startHivedr(t, "copyd-"+inst, "copyd", "-config", copydConf(inst), "-state-dir", filepath.Join(p.state, "copyd-"+inst))
	}
	applyGroup, copydGroup := p.prefix+"-applier", p.prefix+"-copyd"
	ia, ib, ca, cb := p.prefix+"-apply-a", p.prefix+"-apply-b", p.prefix+"-copyd-a", p.prefix+"-copyd-b"

	p.startTail()
	copyA, copyB := startCopyd(ca), startCopyd(cb)
	applyA, applyB := startApply(ia), startApply(ib)
	alive := func(ps ...*proc) {
		for _, pr := range append(ps, p.tail) {
			if pr.exited() {
				t.Fatalf("%s exited:\n%s", pr.name, tail(pr.out.String(), 60))
			}
		}
	}

	spec := wl.TableSpec{Columns: []string{"id bigint", "note string"}}
	for _, db := range dbs {
		if err := w.CreateDatabase(ctx, db); err != nil {
			t.Fatal(err)
		}
		if err := w.CreateTable(ctx, db, "t0", spec); err != nil {
			t.Fatal(err)
		}
		if _, err := w.Insert(ctx, db, "t0", nil, 10); err != nil {
			t.Fatal(err)
		}
	}
	onDR := func(db, table string) bool {
		_, err := dr.GetTableReq(ctx, &hive_metastore.GetTableRequest{DbName: db, TblName: table})
		return err == nil
	}
	eventually(t, 3*time.Minute, "the four databases on DR", func() bool {
		alive(applyA, applyB, copyA, copyB)
		for _, db := range dbs {
			if !onDR(db, "t0") {
				return false
			}
		}
		return p.caughtUp(ctx)
	})
	// Both members of each group own work: the applier group two databases
	// each, the copyd group at least one manifest partition each.
	var apOwners, cpOwners map[string][]string
	eventually(t, time.Minute, "both appliers and both copy daemons owning work", func() bool {
		var err error
		if apOwners, err = groupOwners(ctx, adm, applyGroup); err != nil {
			return false
		}
		if cpOwners, err = groupOwners(ctx, adm, copydGroup); err != nil {
			return false
		}
		return len(apOwners[ia]) == 2 && len(apOwners[ib]) == 2 && len(cpOwners[ca]) >= 1 && len(cpOwners[cb]) >= 1
	})
	t.Logf("applier group: %v; copyd group: %v", apOwners, cpOwners)
	manifests := kafka.Topics{Prefix: p.prefix}.Manifests()
	ends := func() map[int32]int64 {
		o, err := adm.ListEndOffsets(ctx, manifests)
		if err != nil {
			t.Fatal(err)
		}
		m := map[int32]int64{}
		o.Each(func(l kadm.ListedOffset) { m[l.Partition] = l.Offset })
		return m
	}

	// The lost machine: applier a and copyd a at once.
	killed := time.Now()
	survivorLog := applyB.out.Len()
	applyA.kill9()
	copyA.kill9()
	endAtKill := ends()

	// An event for every database (no files: the applier's hand-over
	// alone), then copy tasks until every manifest partition has one
	// published after the kill.
	for _, db := range dbs {
		if err := w.CreateTable(ctx, db, "t1", spec); err != nil {
			t.Fatal(err)
		}
	}
	for i := 0; ; i++ {
		grown := true
		now := ends()
		for part, e := range endAtKill {
			grown = grown && now[part] > e
		}
		if grown {
			break
		}
		if i == 60 {
			t.Fatalf("60 inserts did not reach every manifest partition: at kill %v, now %v", endAtKill, now)
		}
		if _, err := w.Insert(ctx, dbs[i%len(dbs)], "t0", nil, 5); err != nil {
			t.Fatal(err)
		}
	}

	topicOf := map[string]string{}
	for _, db := range dbs {
		topicOf[kafka.Topics{Prefix: p.prefix}.Events(db)+"/0"] = db
	}
	applied := map[string]time.Duration{}
	completed := map[string]time.Duration{}
	poll(t, 2*time.Minute, 50*time.Millisecond, "every database applying t1 and every manifest partition completing a task", func() bool {
		alive(applyB, copyB)
		for _, db := range dbs {
			if _, ok := applied[db]; !ok && onDR(db, "t1") {
				applied[db] = time.Since(killed)
			}
		}
		lag, err := adm.FetchOffsets(ctx, copydGroup)
		if err == nil {
			for part, e := range endAtKill {
				tp := fmt.Sprintf("%s/%d", manifests, part)
				if c, ok := lag.Lookup(manifests, part); ok && c.At > e {
					if _, done := completed[tp]; !done {
						completed[tp] = time.Since(killed)
					}
				}
			}
		}
		return len(applied) == len(dbs) && len(completed) == len(endAtKill)
	})
	for tp, db := range topicOf {
		orphan := slices.Contains(apOwners[ia], tp)
		t.Logf("database %s (orphaned %v): new event applied %.2fs after the kill", db, orphan, applied[db].Seconds())
		if orphan && applied[db] > handoverBound {
			t.Errorf("orphaned database %s applied its event %.1fs after the kill, want < %s", db, applied[db].Seconds(), handoverBound)
		}
	}
	for tp, d := range completed {
		orphan := slices.Contains(cpOwners[ca], tp)
		t.Logf("manifest partition %s (orphaned %v): new task completed %.2fs after the kill", tp, orphan, d.Seconds())
		if orphan && d > handoverBound {
			t.Errorf("orphaned manifest partition %s completed a task %.1fs after the kill, want < %s", tp, d.Seconds(), handoverBound)
		}
	}

	// The machine comes back: the same instances rejoin, and the groups
	// settle with both members owning work again.
	applyA, copyA = startApply(ia), startCopyd(ca)
	eventually(t, time.Minute, "the restarted instances owning work again", func() bool {
		alive(applyA, applyB, copyA, copyB)
		a, err := groupOwners(ctx, adm, applyGroup)
		if err != nil {
			return false
		}
		c, err := groupOwners(ctx, adm, copydGroup)
		if err != nil {
			return false
		}
		return len(a[ia]) == 2 && len(a[ib]) == 2 && len(c[ca]) >= 1 && len(c[cb]) >= 1
	})
	for _, db := range dbs {
		if err := w.CreateTable(ctx, db, "t2", spec); err != nil {
			t.Fatal(err)
		}
	}
	eventually(t, time.Minute, "every database applying t2 after the restart", func() bool {
		alive(applyA, applyB, copyA, copyB)
		for _, db := range dbs {
			if !onDR(db, "t2") {
				return false
			}
		}
		return true
	})
	// No rebalance storm: since the kill the survivor started the two
	// orphans' workers, and at most once more the workers of what it kept
	// when the restarted member rejoined (about half the runs on this
	// machine see that one extra round: 4 starts; why the group takes it
	// is not yet known, see docs/applier.md's hand-over notes). More than one
	// start per database is churn.
	if n := strings.Count(applyB.out.String()[survivorLog:], "database worker started"); n < 2 || n > len(dbs) {
		t.Errorf("the surviving applier started %d database workers after the kill, want 2 (the orphans) to %d (one more round)", n, len(dbs))
	}
}
