package e2e

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/hivedr/hivedr/internal/verify"
)

// TestTrustVerifyTailerLag: a source change the tailer has not published
// yet is lag, not divergence. With the tailer stopped, a partition added
// on the source is in_flight, naming the source event the tailer has not
// published, and verify exits 0; a DR file removed meanwhile from a table
// no unpublished event touches stays DIVERGED (exit 1). Once the tailer
// runs again and the applier applies the partition, the table is clean.
func TestTrustVerifyTailerLag(t *testing.T) {
	p, db := convergedForVerify(t)
	ctx, w := p.ctx, p.w
	p.tail.stop(t)
	before := currentEventID(t, ctx, p.src)
	if _, err := w.AddPartitions(ctx, db, "t_part", [][]string{{"2026-12-09"}}, 20); err != nil {
		t.Fatal(err)
	}
	head := currentEventID(t, ctx, p.src)
	if head <= before {
		t.Fatalf("the source log's head stayed at %d after adding a partition", head)
	}
	// A real divergence while the tailer is behind: no source event
	// touches t_missing, so nothing unpublished explains it.
	loc := p.drFiles(db, "t_missing", nil)[0]
	if err := p.drFS.Remove(ctx, loc); err != nil {
		t.Fatal(err)
	}
	missing := db + ".t_missing file " + loc[strings.LastIndex(loc, "/")+1:]
	added := db + ".t_part partition dt=2026-12-09"

	// inFlight checks that the added partition is in flight, with the
	// reason naming an event of the source's new events.
	inFlight := func(v verifyOut) {
		t.Helper()
		var found bool
		for _, f := range v.of(verify.InFlight) {
			if f.Object != added {
				t.Errorf("in_flight %s: %s (%s); only %s is", f.Object, f.Detail, f.Reason, added)
				continue
			}
			found = true
			var id int64
			if _, err := fmt.Sscanf(f.Reason, "source event %d", &id); err != nil || id <= before || id > head ||
				!strings.Contains(f.Reason, "not yet published by the tailer") {
				t.Errorf("in_flight %s gives the reason %q; want a source event in (%d, %d] not yet published by the tailer", f.Object, f.Reason, before, head)
			}
		}
		if !found {
			t.Errorf("no in_flight finding on %s\n%s", added, v.raw)
		}
		if v.summary.Unpublished < 1 {
			t.Errorf("summary counts %d unpublished events; want at least the ADD_PARTITION", v.summary.Unpublished)
		}
	}

	v := p.runVerify("-db", db, "-tables", "t_part")
	if v.code != 0 || !v.summary.Clean || len(v.of(verify.Diverged)) != 0 {
		t.Errorf("verify of t_part with the tailer behind: exit %d, %d diverged; want 0 and none\n%s", v.code, len(v.of(verify.Diverged)), v.raw)
	}
	inFlight(v)

	v = p.runVerify("-db", db)
	div := v.of(verify.Diverged)
	if v.code != 1 || len(div) != 1 || div[0].Object != missing || !strings.Contains(div[0].Detail, "missing on DR") {
		t.Errorf("verify of the database: exit %d, diverged %v; want 1 and only %s missing on DR\n%s", v.code, div, missing, v.raw)
	}
	inFlight(v)
	t.Logf("verify with the tailer stopped:\n%s", v.raw)

	p.startTail()
	s := serde(t, p.env)
	eventually(t, 2*time.Minute, fmt.Sprintf("the restarted tailer publishes event %d", head), func() bool {
		p.checkAlive()
		evs := events(readTopic(t, p.env, s, p.eventTopics()[0]))
		return len(evs) > 0 && evs[len(evs)-1].EventID >= head
	})
	eventually(t, 2*time.Minute, "the applier applies the partition", func() bool { p.checkAlive(); return p.caughtUp(ctx) })
	if v := p.runVerify("-db", db, "-tables", "t_part", "-sample", "1"); v.code != 0 || len(v.findings) != 0 || v.summary.Unpublished != 0 {
		t.Errorf("verify of t_part after the tailer caught up: exit %d, %d findings, %d unpublished; want 0, none, 0\n%s",
			v.code, len(v.findings), v.summary.Unpublished, v.raw)
	}
}
