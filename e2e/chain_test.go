package e2e

import (
	"context"
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/beltran/gohive/hive_metastore"
	"github.com/twmb/franz-go/pkg/kadm"

	wl "github.com/hivedr/hivedr/e2e/workload"
	"github.com/hivedr/hivedr/schemas"
)

// The per-topic chain end to end: records lost from a database's topic
// while the applier is stopped (Kafka's retention, a recreated topic)
// halt that database with CHAIN_BROKEN on restart, instead of the applier
// silently going on from the first surviving record.

// chainSetup starts a pipeline on one database with one table applied on
// DR, then stops the applier cleanly, and returns the pipeline, the
// database, and the applier group's committed offset on its topic.
func chainSetup(t *testing.T, name string) (*pipelineTest, string, int64) {
	t.Helper()
	db := name + "_" + uniq(t)
	p := startPipeline(t, 8*time.Minute, db)
	spec := wl.TableSpec{Columns: []string{"id bigint"}}
	if err := p.w.CreateDatabase(p.ctx, db); err != nil {
		t.Fatal(err)
	}
	if err := p.w.CreateTable(p.ctx, db, "t1", spec); err != nil {
		t.Fatal(err)
	}
	eventually(t, 2*time.Minute, db+".t1 on DR", func() bool { p.checkAlive(); return p.drTableExists(db, "t1") })
	eventually(t, time.Minute, "the applier group committed its topic's end", func() bool { return p.caughtUp(p.ctx) })
	p.apply.stop(t)
	p.apply = nil // stopped on purpose: checkAlive must not mind
	committed := p.committedOffset(t, db)
	t.Logf("applier stopped with %s committed at offset %d", p.eventTopics()[0], committed)
	return p, db, committed
}

func (p *pipelineTest) drTableExists(db, name string) bool {
	_, err := p.dr.GetTableReq(p.ctx, &hive_metastore.GetTableRequest{DbName: db, TblName: name})
	return err == nil
}

// committedOffset is the applier group's committed offset on db's topic.
func (p *pipelineTest) committedOffset(t *testing.T, db string) int64 {
	t.Helper()
	topic := p.eventTopics()[0]
	offs, err := p.env.KafkaAdmin(t).FetchOffsets(p.ctx, p.prefix+"-applier")
	if err != nil {
		t.Fatal(err)
	}
	o, ok := offs.Lookup(topic, 0)
	if !ok || o.Err != nil {
		t.Fatalf("no committed offset of the applier group on %s: %v", topic, o.Err)
	}
	return o.At
}

// checkChainBroken waits for the restarted applier to halt db on a broken
// chain and checks every place the halt must show: the DR database's
// hivedr.halted, the metric, the log and hivedr status. It returns the
// --skip-event argument the halt suggests.
func (p *pipelineTest) checkChainBroken(t *testing.T, db, applied string) string {
	t.Helper()
	var halted string
	eventually(t, 2*time.Minute, "DR database "+db+" halted on a broken chain", func() bool {
		p.checkAlive()
		d, err := p.dr.GetDatabase(p.ctx, db)
		if err != nil {
			return false
		}
		halted = d.Parameters["hivedr.halted"]
		return halted != ""
	})
	for _, want := range []string{"chain_broken", "CHAIN_BROKEN", "no longer holds the records of events", "--skip-event " + db + ":"} {
		if !strings.Contains(halted, want) {
			t.Errorf("hivedr.halted = %q: want it to say %q", halted, want)
		}
	}
	d, err := p.dr.GetDatabase(p.ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	if got := d.Parameters["repl.last.id"]; got != applied {
		t.Errorf("DR database %s moved to event %s over the gap; it was at %s", db, got, applied)
	}
	metrics := httpGet(t, "http://"+p.metrics+"/metrics")
	if want := `hivedr_applier_halted{db="` + db + `",pipeline="` + p.prefix + `",reason="chain_broken"} 1`; !strings.Contains(metrics, want) {
		t.Errorf("metrics lack %s:\n%s", want, grepLines(metrics, "hivedr_applier_halted"))
	}
	if log := p.apply.out.String(); !strings.Contains(log, "database halted") || !strings.Contains(log, "CHAIN_BROKEN") {
		t.Errorf("the applier log does not report the halt:\n%s", tail(log, 20))
	}
	out, code := runStatus(t, "-config", p.conf, "-db", db, "-timeout", "30s")
	if code != 1 || !strings.Contains(out, "chain_broken") {
		t.Errorf("hivedr status exited %d, want 1 naming chain_broken:\n%s", code, out)
	}
	m := regexp.MustCompile(`--skip-event (\S+:\d+)`).FindStringSubmatch(halted)
	if m == nil {
		t.Fatalf("no --skip-event in %q", halted)
	}
	return m[1]
}

// acceptLoss restarts the applier with the suggested --skip-event and
// checks that the database goes on (a table created then reaches DR),
// recording who accepted what.
func (p *pipelineTest) acceptLoss(t *testing.T, db, skip string) {
	t.Helper()
	p.apply.stop(t)
	p.startApply("-skip-event", skip)
	table := "after_skip"
	if err := p.w.CreateTable(p.ctx, db, table, wl.TableSpec{Columns: []string{"id bigint"}}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 2*time.Minute, db+"."+table+" on DR after accepting the loss", func() bool {
		p.checkAlive()
		return p.drTableExists(db, table)
	})
	d, err := p.dr.GetDatabase(p.ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	id := strings.TrimPrefix(skip, db+":")
	if rec := d.Parameters["hivedr.skipped."+id]; !strings.Contains(rec, "requested by ") || !strings.Contains(rec, "accepted the loss of events") {
		t.Errorf("hivedr.skipped.%s = %q: want who asked and what loss was accepted", id, rec)
	}
	if h := d.Parameters["hivedr.halted"]; h != "" {
		t.Errorf("hivedr.halted still set: %q", h)
	}
}

// TestApplierChainBrokenRetention: while the applier is stopped, a small
// retention on the database's topic deletes the segments holding events
// it has not applied. On restart its committed offset is out of range;
// instead of starting over at the first surviving record it halts the
// database with CHAIN_BROKEN.
func TestApplierChainBrokenRetention(t *testing.T) {
	p, db, committed := chainSetup(t, "cb_ret")
	adm := p.env.KafkaAdmin(t)
	topic := p.eventTopics()[0]
	alter := func(ops ...kadm.AlterConfig) {
		t.Helper()
		res, err := adm.AlterTopicConfigs(p.ctx, ops, topic)
		if err == nil {
			_, err = res.On(topic, nil)
		}
		if err != nil {
			t.Fatalf("alter the configs of %s: %v", topic, err)
		}
	}
	// Every append rolls a new segment and every closed segment is past
	// retention: the broker deletes them at its next retention check.
	alter(kadm.AlterConfig{Name: "segment.ms", Value: kadm.StringPtr("50")},
		kadm.AlterConfig{Name: "retention.ms", Value: kadm.StringPtr("50")})
	spec := wl.TableSpec{Columns: []string{"id bigint"}}
	n := 0
	eventually(t, 3*time.Minute, "retention to delete the records after the applier's committed offset "+
		"(the stack's broker checks retention every second: log.retention.check.interval.ms in e2e/stack/services/kafka.sh)", func() bool {
		p.checkAlive()
		n++
		if err := p.w.CreateTable(p.ctx, db, fmt.Sprintf("lost_%d", n), spec); err != nil {
			t.Fatal(err)
		}
		starts, err := adm.ListStartOffsets(p.ctx, topic)
		if err != nil {
			return false
		}
		s, ok := starts.Lookup(topic, 0)
		return ok && s.Err == nil && s.Offset > committed
	})
	// Back to the normal retention, so what survived stays; one more event.
	alter(kadm.AlterConfig{Name: "segment.ms", Op: kadm.DeleteConfig},
		kadm.AlterConfig{Name: "retention.ms", Value: kadm.StringPtr(fmt.Sprint((7 * 24 * time.Hour).Milliseconds()))})
	if err := p.w.CreateTable(p.ctx, db, "after", spec); err != nil {
		t.Fatal(err)
	}
	applied := p.drParam(t, db, "repl.last.id")
	p.startApply()
	skip := p.checkChainBroken(t, db, applied)
	if p.drTableExists(db, "lost_1") {
		t.Error("a table whose event retention deleted reached DR")
	}
	p.acceptLoss(t, db, skip)
}

// TestApplierChainBrokenRecreatedTopic: the database's topic is deleted
// (with an event the applier has not applied) and the tailer creates it
// again; the restarted applier halts the database with CHAIN_BROKEN.
func TestApplierChainBrokenRecreatedTopic(t *testing.T) {
	p, db, _ := chainSetup(t, "cb_new")
	adm := p.env.KafkaAdmin(t)
	topic := p.eventTopics()[0]
	spec := wl.TableSpec{Columns: []string{"id bigint"}}
	if err := p.w.CreateTable(p.ctx, db, "lost", spec); err != nil {
		t.Fatal(err)
	}
	// Committed, not just appended: a topic deleted while the tailer's
	// transaction is open fails that transaction, and the retry then
	// publishes the lost table's event to the new topic with an unbroken
	// chain (nothing was lost).
	s := serde(t, p.env)
	eventually(t, time.Minute, "the tailer to commit the lost table's event", func() bool {
		for _, e := range events(readTopic(t, p.env, s, topic)) {
			if e.EventType == schemas.EventCreateTable && e.Table == "lost" {
				return true
			}
		}
		return false
	})
	res, err := adm.DeleteTopics(p.ctx, topic)
	if err == nil {
		err = res.Error()
	}
	if err != nil {
		t.Fatalf("delete %s: %v", topic, err)
	}
	if err := p.w.CreateTable(p.ctx, db, "after", spec); err != nil {
		t.Fatal(err)
	}
	// A committed record, not just an offset: an aborted attempt of the
	// tailer's leaves a transaction marker behind.
	eventually(t, 2*time.Minute, "the tailer to create "+topic+" again and publish to it", func() bool {
		p.checkAlive()
		ends, err := adm.ListEndOffsets(p.ctx, topic)
		if err != nil {
			return false
		}
		if e, ok := ends.Lookup(topic, 0); !ok || e.Err != nil || e.Offset == 0 {
			return false
		}
		return len(readTopic(t, p.env, s, topic)) > 0
	})
	applied := p.drParam(t, db, "repl.last.id")
	p.startApply()
	skip := p.checkChainBroken(t, db, applied)
	if p.drTableExists(db, "lost") {
		t.Error("the table whose event went with the deleted topic reached DR")
	}
	p.acceptLoss(t, db, skip)
}

func (p *pipelineTest) drParam(t *testing.T, db, key string) string {
	t.Helper()
	d, err := p.dr.GetDatabase(context.Background(), db)
	if err != nil {
		t.Fatal(err)
	}
	return d.Parameters[key]
}
