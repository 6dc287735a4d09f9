package e2e

import (
	"strings"
	"testing"
	"time"

	wl "github.com/hivedr/hivedr/e2e/workload"
	"github.com/hivedr/hivedr/internal/kafka"
	"github.com/hivedr/hivedr/internal/testenv"
	"github.com/twmb/franz-go/pkg/kadm"
)

// TestPrecreatedTopics: with kafka.precreated_topics the daemons create
// no topic. The platform's topics are made first, all but the new
// database's events topic: the tailer then reports that topic missing,
// naming it and the layout to create it with, and creates nothing; once
// the platform creates it the database is replicated.
func TestPrecreatedTopics(t *testing.T) {
	env := testenv.Require(t)
	db := "pre_" + uniq(t)
	pt := &pipelineTest{ctx: ctxFor(t, 5*time.Minute), src: env.HMS(t, testenv.Source), dr: env.HMS(t, testenv.DR)}
	pt.srcFS, pt.drFS = pipelineFS(t, env)
	pt.pipeline = newPipeline(t, env, []string{db}, currentEventID(t, pt.ctx, pt.src))
	pt.editConfig("  replication_factor: 1\n", "  replication_factor: 1\n  precreated_topics: true\n")
	pt.w = wl.NewSource(pt.src, pt.srcFS, env.Get(t, "HIVEDR_HMS_SRC_EXTERNAL"))
	topics := kafka.Topics{Prefix: pt.prefix}
	adm := env.KafkaAdmin(t)
	create := func(name string, partitions int32, cfg map[string]*string) {
		t.Helper()
		res, err := adm.CreateTopics(pt.ctx, partitions, 1, cfg, name)
		if err == nil {
			err = res[name].Err
		}
		if err != nil {
			t.Fatalf("the platform's topic %s: %v", name, err)
		}
	}
	exists := func(name string) bool {
		td, err := adm.ListTopics(pt.ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		d, ok := td[name]
		return ok && d.Err == nil
	}
	create(topics.Manifests(), 3, nil)
	create(topics.Completions(), 3, nil)
	create(topics.Checkpoints(), 1, map[string]*string{"cleanup.policy": kadm.StringPtr("compact")})
	create(topics.Control(), 1, nil)
	create(topics.ApplierControl(), 1, nil)
	pt.startAll()

	if err := pt.w.CreateDatabase(pt.ctx, db); err != nil {
		t.Fatal(err)
	}
	if err := pt.w.CreateTable(pt.ctx, db, "t", wl.TableSpec{Columns: []string{"id bigint"}}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 2*time.Minute, "the tailer naming the missing topic", func() bool {
		pt.checkAlive()
		out := pt.tail.out.String()
		return strings.Contains(out, "kafka.precreated_topics") && strings.Contains(out, topics.Events(db)+": 1 partitions")
	})
	if exists(topics.Events(db)) {
		t.Fatalf("%s was created, with kafka.precreated_topics", topics.Events(db))
	}
	create(topics.Events(db), 1, nil)
	pt.converge(pt.ctx, pt.src, pt.dr, pt.srcFS, pt.drFS, 3*time.Minute)
	if !pt.drTableExists(db, "t") {
		t.Fatalf("%s.t not on DR after the topic was created", db)
	}
}
