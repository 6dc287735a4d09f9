package e2e

import (
	"encoding/base64"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/beltran/gohive/hive_metastore"

	wl "github.com/hivedr/hivedr/e2e/workload"
	"github.com/hivedr/hivedr/internal/testenv"
)

// TestTrustOversizedRecord: one record larger than the topics take stops
// only its database. The pipeline's topics take records up to 1 MiB
// (kafka.max_message_bytes, the broker's default too); a table created
// with a 1.5 MiB parameter makes its CREATE_TABLE's record about twice
// that (the raw message and the decoded table). The other database goes
// on replicating, its changes made after the big one included; the big
// one halts at that event, the halt naming the record's event, type and
// size, and its tables created before it are on DR.
func TestTrustOversizedRecord(t *testing.T) {
	env := testenv.Require(t)
	ctx := ctxFor(t, 8*time.Minute)
	src, dr := env.HMS(t, testenv.Source), env.HMS(t, testenv.DR)
	u := uniq(t)
	big, other := "ob_big_"+u, "ob_ok_"+u
	p := newPipeline(t, env, []string{big, other}, currentEventID(t, ctx, src), func(c *pipelineConf) {
		c.kafkaSecurity = "  max_message_bytes: 1048576"
	})
	p.startAll()
	srcFS, drFS := pipelineFS(t, env)
	w := wl.NewSource(src, srcFS, env.Get(t, "HIVEDR_HMS_SRC_EXTERNAL"))
	must := func(what string, err error) {
		t.Helper()
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}
	spec := wl.TableSpec{Columns: []string{"id bigint", "note string"}}
	must("create databases", errors.Join(w.CreateDatabase(ctx, big), w.CreateDatabase(ctx, other)))
	must("create big.before", w.CreateTable(ctx, big, "before", spec))
	// Random bytes, so that no compression brings the record under the limit.
	blob := make([]byte, 1536<<10*3/4)
	r := testRand(t)
	for i := range blob {
		blob[i] = byte(r.Uint32())
	}
	wide := spec
	wide.Parameters = map[string]string{"blob": base64.StdEncoding.EncodeToString(blob)}
	must("create big.wide", w.CreateTable(ctx, big, "wide", wide))
	wideEvent := currentEventID(t, ctx, src)
	must("create big.after", w.CreateTable(ctx, big, "after", spec))
	// The other database's changes come after the big record in the log.
	must("create other.t", w.CreateTable(ctx, other, "t", wl.TableSpec{Columns: spec.Columns, PartitionKeys: []string{"dt"}}))
	if _, err := w.AddPartitions(ctx, other, "t", [][]string{{"2026-12-01"}, {"2026-12-02"}}, 30); err != nil {
		t.Fatal(err)
	}
	must("create other.flat", w.CreateTable(ctx, other, "flat", spec))
	if _, err := w.Insert(ctx, other, "flat", nil, 30); err != nil {
		t.Fatal(err)
	}

	// The other database converges: its changes after the big record
	// were published and applied.
	poll(t, 3*time.Minute, time.Second, other+" converges on DR", func() bool {
		p.checkAlive()
		diffs, err := wl.Compare(ctx, src, dr, srcFS, drFS, []string{other}, p.mapLocation)
		return err == nil && len(diffs) == 0
	})

	// The big database halts at its oversized record, naming it.
	var halted string
	eventually(t, 2*time.Minute, "DR database "+big+" records the halt", func() bool {
		p.checkAlive()
		d, err := dr.GetDatabase(ctx, big)
		if err != nil {
			return false
		}
		halted = d.Parameters["hivedr.halted"]
		return halted != ""
	})
	if !strings.Contains(halted, fmt.Sprintf("event %d", wideEvent)) || !strings.Contains(halted, "CREATE_TABLE") ||
		!strings.Contains(halted, "record_too_large") || !strings.Contains(halted, "bytes") {
		t.Errorf("hivedr.halted = %q: want event %d, CREATE_TABLE, record_too_large and the record's size", halted, wideEvent)
	}
	tableExists := func(db, name string) bool {
		_, err := dr.GetTableReq(ctx, &hive_metastore.GetTableRequest{DbName: db, TblName: name})
		return err == nil
	}
	if !tableExists(big, "before") || tableExists(big, "wide") || tableExists(big, "after") {
		t.Errorf("on DR: %s.before %v (want true), wide %v (want false), after %v (want false)", big,
			tableExists(big, "before"), tableExists(big, "wide"), tableExists(big, "after"))
	}
	if log := p.tail.out.String(); !strings.Contains(log, "record too large") || !strings.Contains(log, big) {
		t.Errorf("the tailer's log does not name the oversized record:\n%s", grepLines(log, "large"))
	}
	t.Logf("hivedr.halted of %s: %s", big, halted)
}
