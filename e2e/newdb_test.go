package e2e

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hivedr/hivedr/internal/kafka"
)

// newDatabaseBound is a generous functional bound on how long after its
// first event is published a new database may take to be applied: it
// catches a database left for minutes (or never found), not a slow
// machine. The figure (issue 15's target: p99 < 1 s) is `make
// bench-newdb`'s; this test checks the mechanism instead (below).
const newDatabaseBound = 30 * time.Second

// TestNewDatabaseAtOnce creates databases one after another under a
// running pipeline and logs, for each, the time from its first event
// published (its Kafka timestamp) to the database being on DR. The
// applier learns of a new database's topic from the tailer's checkpoint
// in the same transaction, not from its periodic (30 s) metadata refresh:
// the test checks that the applier found every new database that way (its
// "the tailer published to new databases" line names it), and that each
// was applied within newDatabaseBound.
func TestNewDatabaseAtOnce(t *testing.T) {
	u := uniq(t)
	const n = 8
	dbs := []string{"nd_warm_" + u}
	for i := range n {
		dbs = append(dbs, fmt.Sprintf("nd_%d_%s", i, u))
	}
	pt := startPipeline(t, 6*time.Minute, dbs...)
	if err := pt.w.CreateDatabase(pt.ctx, dbs[0]); err != nil {
		t.Fatal(err)
	}
	onDR := func(db string) bool {
		_, err := pt.dr.GetDatabase(pt.ctx, db)
		return err == nil
	}
	eventually(t, 2*time.Minute, dbs[0]+" on DR", func() bool { pt.checkAlive(); return onDR(dbs[0]) })
	s := serde(t, pt.env)
	var lags []time.Duration
	for _, db := range dbs[1:] {
		if err := pt.w.CreateDatabase(pt.ctx, db); err != nil {
			t.Fatal(err)
		}
		poll(t, time.Minute, 10*time.Millisecond, db+" on DR", func() bool { pt.checkAlive(); return onDR(db) })
		applied := time.Now()
		recs := readTopic(t, pt.env, s, kafka.Topics{Prefix: pt.prefix}.Events(db))
		if len(recs) == 0 {
			t.Fatalf("%s is on DR but its topic holds no record", db)
		}
		lag := applied.Sub(recs[0].rec.Timestamp)
		t.Logf("%s: first event published %s, applied %.3fs later", db, recs[0].rec.Timestamp.Format(time.TimeOnly), lag.Seconds())
		lags = append(lags, lag)
		if lag > time.Second {
			for _, l := range strings.Split(pt.apply.out.String(), "\n") {
				if strings.Contains(l, db) {
					t.Logf("  applier: %s", l)
				}
			}
			for _, l := range strings.Split(pt.tail.out.String(), "\n") {
				if strings.Contains(l, db) {
					t.Logf("  tailer: %s", l)
				}
			}
		}
	}
	var noticed []string
	for _, l := range strings.Split(pt.apply.out.String(), "\n") {
		if strings.Contains(l, "the tailer published to new databases") {
			noticed = append(noticed, l)
		}
	}
	for _, db := range dbs[1:] {
		if !slices.ContainsFunc(noticed, func(l string) bool { return strings.Contains(l, db) }) {
			t.Errorf("the applier did not learn of %s from the tailer's checkpoints (it waited for a metadata refresh); its notices: %v", db, noticed)
		}
	}
	slices.Sort(lags)
	t.Logf("new database, first event published -> applied: min %.3fs, median %.3fs, max %.3fs over %d databases",
		lags[0].Seconds(), lags[len(lags)/2].Seconds(), lags[len(lags)-1].Seconds(), len(lags))
	if lags[len(lags)-1] > newDatabaseBound {
		t.Errorf("a new database took %.2fs from its first event published to applied, want < %s", lags[len(lags)-1].Seconds(), newDatabaseBound)
	}
}
