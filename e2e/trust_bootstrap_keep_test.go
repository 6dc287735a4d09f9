package e2e

import (
	"fmt"
	"testing"
	"time"

	wl "github.com/hivedr/hivedr/e2e/workload"
	"github.com/hivedr/hivedr/internal/drparam"
	"github.com/hivedr/hivedr/internal/kafka"
	"github.com/hivedr/hivedr/internal/testenv"
)

// TestTrustBootstrapCompactedKeepsPartitions: a bootstrap lists the
// deltas of a partition of a transactional table (one of two added in
// one ADD_PARTITION), then, before copyd copies them, a major compaction
// of that partition commits and the source's cleaner removes the deltas
// (copyd is started only once the tailer has published the bootstrap and
// the compaction: the copies end SOURCE_GONE). The compaction, after the
// END on the topic, makes the deltas unneeded but keeps the partition: DR
// must hold both partitions after the bootstrap, the compaction's base in
// the compacted one, and apply the transactions that write it afterwards.
func TestTrustBootstrapCompactedKeepsPartitions(t *testing.T) {
	env := testenv.Require(t)
	r := newAcidSource(t, env, "trustbk")
	ctx := r.ctx
	const events = 1 // r.tables[1]: db1's insert-only table with two partitions
	for range 2 {
		r.txn(true, acidWrite{events, 0, false}, acidWrite{events, 1, false}, acidWrite{0, -1, false})
	}
	r.txn(true, acidWrite{2, 0, false}, acidWrite{3, -1, false})

	r.pipeline = newPipeline(t, env, []string{r.db1, r.db2}, currentEventID(t, ctx, r.src))
	r.startTail()
	r.startApply()
	r.requestBootstrap([]string{r.db1, r.db2}, nil)
	s := serde(t, env)
	eventually(t, 3*time.Minute, "both bootstraps published and caught up by the tailer", func() bool {
		r.checkAlive()
		cp := newestCheckpoint(t, r.pipeline, s, r.cfg.Source.Name)
		return cp != nil && cp.TopicLastEventIDs[r.db1] > 0 && bootstrapOf(cp, r.db1) == nil && bootstrapOf(cp, r.db2) == nil
	})
	if d := bootstrapDone(ctx, r.dr, r.db1); d != "" {
		t.Fatalf("%s's bootstrap %s was applied without copyd: it copied no file", r.db1, d)
	}

	// The partition's deltas go from the source before copyd reads them.
	c := r.compact(events, 0, true)
	head := currentEventID(t, ctx, r.src)
	topic := kafka.Topics{Prefix: r.prefix}.Checkpoints()
	eventually(t, 2*time.Minute, fmt.Sprintf("the tailer past the compaction (event %d)", head), func() bool {
		r.checkAlive()
		return lastCheckpoint(t, env, s, topic, r.prefix) >= head
	})
	r.startCopyd()
	// A write of the compacted partition after the compaction: its commit
	// needs the partition on DR.
	r.txn(true, acidWrite{events, 0, false})

	eventually(t, 5*time.Minute, "both bootstraps done on DR", func() bool {
		r.checkAlive()
		if h := drHalt(t, r.pipelineTest, r.db1); h != "" {
			t.Fatalf("DR database %s halted: %s", r.db1, h)
		}
		return bootstrapDone(ctx, r.dr, r.db1) != "" && bootstrapDone(ctx, r.dr, r.db2) != ""
	})
	poll(t, 5*time.Minute, time.Second, "DR caught up", func() bool {
		r.checkAlive()
		if h := drHalt(t, r.pipelineTest, r.db1); h != "" {
			t.Fatalf("DR database %s halted: %s", r.db1, h)
		}
		return r.caughtUp(ctx)
	})
	r.converge(3 * time.Minute)
	r.compactedOnDR()
	t.Logf("compaction %d of %s %v (%s) on DR with both partitions", c.ID, r.tables[events].full(), r.tables[events].partitions[0], c.Dir)
}

// drHalt is the halt the DR database db records ("" when none).
func drHalt(t *testing.T, pt *pipelineTest, db string) string {
	t.Helper()
	d := drDatabase(t, pt, db)
	if d == nil {
		return ""
	}
	return d.Parameters[drparam.Halted]
}

// TestTrustBootstrapResumeKeepsPartitions: the bootstrap of a
// transactional table of 60 partitions (added by one ADD_PARTITION,
// written by one transaction), published two partitions a page, is
// interrupted twice: the tailer is killed (-9) once its checkpoint shows
// the table in progress, and the applier once the DR database shows some
// of its partitions applied; both are started again. DR then holds every
// partition, a reader of each sees what a source reader sees, and a
// transaction writing them all after the bootstrap commits on DR.
func TestTrustBootstrapResumeKeepsPartitions(t *testing.T) {
	env := testenv.Require(t)
	r := newAcidSource(t, env, "trustbr")
	ctx := r.ctx
	var days [][]string
	for i := range 60 {
		days = append(days, []string{fmt.Sprintf("2025-%04d", i)})
	}
	big := acidTable{db: r.db1, name: "big", partitions: days}
	mustDo(t, "create "+big.full(), r.w.CreateACIDTable(ctx, big.db, big.name, wl.ACIDTableSpec{Columns: []string{"id bigint", "note string"}, PartitionKeys: []string{"dt"}}))
	mustDo(t, "add its partitions", r.w.AddACIDPartitions(ctx, big.db, big.name, days))
	r.tables = append(r.tables, big)
	bi := len(r.tables) - 1
	var all []acidWrite
	for p := range days {
		all = append(all, acidWrite{bi, p, false})
	}
	tx, err := r.w.OpenTxn(ctx)
	mustDo(t, "open a transaction", err)
	r.write(tx, all...)
	r.end(tx, true, all...)

	r.pipeline = newPipeline(t, env, []string{r.db1, r.db2}, currentEventID(t, ctx, r.src))
	r.withTailer("bootstrap_page: 2")
	r.withBatch(t, 2)
	metrics := r.withTailerMetrics()
	r.startAll()
	r.requestBootstrap([]string{r.db1, r.db2}, nil)
	// big is db1's first table by name: its records follow the BEGIN.
	records := `hivedr_tailer_bootstrap_records_total{db="` + r.db1 + `"}`
	var published float64
	poll(t, 5*time.Minute, 5*time.Millisecond, "the tailer inside "+big.full()+"'s partitions", func() bool {
		r.checkAlive()
		m, ok := scrape(metrics)
		published = m[records]
		return ok && published >= 8
	})
	r.tail.kill9()
	if published >= float64(len(days)) {
		t.Fatalf("the tailer had published %v records of %s when killed: past %s", published, r.db1, big.full())
	}
	t.Logf("tailer killed with %v records of %s published", published, r.db1)
	r.startTail()
	poll(t, 5*time.Minute, 5*time.Millisecond, "some of "+big.full()+"'s partitions applied on DR", func() bool {
		r.checkAlive()
		d := drDatabase(t, r.pipelineTest, r.db1)
		if d == nil {
			return false
		}
		if d.Parameters[drparam.BootstrapDone] != "" {
			t.Fatalf("%s's bootstrap was done before the applier was killed: the kill tests nothing", r.db1)
		}
		prog, _ := drparam.ParseProgress(d.Parameters[drparam.BootstrapApplied])
		return prog.Partitions >= 3
	})
	r.apply.kill9()
	r.startApply()

	eventually(t, 5*time.Minute, "both bootstraps done on DR", func() bool {
		r.checkAlive()
		if h := drHalt(t, r.pipelineTest, r.db1); h != "" {
			t.Fatalf("DR database %s halted: %s", r.db1, h)
		}
		return bootstrapDone(ctx, r.dr, r.db1) != "" && bootstrapDone(ctx, r.dr, r.db2) != ""
	})
	if n := partitionCount(t, ctx, r.dr, big.db, big.name); n != len(days) {
		t.Errorf("DR holds %d partitions of %s after the bootstrap, want %d", n, big.full(), len(days))
	}
	tx, err = r.w.OpenTxn(ctx)
	mustDo(t, "open a transaction", err)
	r.write(tx, all...)
	r.end(tx, true, all...)
	r.converge(5 * time.Minute)
}
