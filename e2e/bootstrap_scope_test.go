package e2e

import (
	"fmt"
	"strings"
	"testing"
	"time"

	wl "github.com/hivedr/hivedr/e2e/workload"
	"github.com/hivedr/hivedr/internal/testenv"
)

// TestBootstrapScopeAdded: a database that exists on the source with
// tables, partitions and files is added to replication.databases (with
// bootstrap: auto) in the configuration file while the pipeline runs.
// Neither daemon is restarted: the tailer and the applier each read the
// file again and log the new scope; the tailer bootstraps the database at
// once; a partition added and a table renamed in it after the change
// replicate after the bootstrap; DR equals the source for both databases.
func TestBootstrapScopeAdded(t *testing.T) {
	u := uniq(t)
	first, added := "bsa_one_"+u, "bsa_two_"+u
	env := testenv.Require(t)
	pt := &pipelineTest{ctx: ctxFor(t, 10*time.Minute), src: env.HMS(t, testenv.Source), dr: env.HMS(t, testenv.DR)}
	pt.srcFS, pt.drFS = pipelineFS(t, env)
	pt.w = wl.NewSource(pt.src, pt.srcFS, env.Get(t, "HIVEDR_HMS_SRC_EXTERNAL"))
	bootstrapSource(t, env, pt, added, 10)
	pt.pipeline = newPipeline(t, env, []string{first}, currentEventID(t, pt.ctx, pt.src))
	pt.startAll()
	if err := pt.w.CreateDatabase(pt.ctx, first); err != nil {
		t.Fatal(err)
	}
	if err := pt.w.CreateTable(pt.ctx, first, "t", wl.TableSpec{Columns: []string{"id bigint"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := pt.w.Insert(pt.ctx, first, "t", nil, 3); err != nil {
		t.Fatal(err)
	}
	pt.converge(pt.ctx, pt.src, pt.dr, pt.srcFS, pt.drFS, 2*time.Minute)

	// The operator adds the database to the file the daemons run with.
	pt.editConfig(fmt.Sprintf(`    - {name: %s, exclude_tables: ["tmp_.*"]}`, first),
		fmt.Sprintf(`    - {name: %s, exclude_tables: ["tmp_.*"]}`+"\n"+`    - {name: %s, bootstrap: auto}`, first, added))
	changed := time.Now()
	eventually(t, time.Minute, "both daemons taking the new scope", func() bool {
		pt.checkAlive()
		return strings.Contains(pt.tail.out.String(), "replication scope changed") &&
			strings.Contains(pt.apply.out.String(), "new replication scope")
	})
	t.Logf("both daemons took the new scope %s after the file changed", time.Since(changed).Round(time.Millisecond))
	eventually(t, time.Minute, "the tailer starting a bootstrap of "+added, func() bool {
		pt.checkAlive()
		out := pt.tail.out.String()
		return strings.Contains(out, "bootstrap started") && strings.Contains(out, "reason=new_database")
	})
	// Changes after the new scope: a partition and a rename.
	if _, err := pt.w.AddPartitions(pt.ctx, added, "orders", [][]string{{"2027-01-01"}}, 4); err != nil {
		t.Fatal(err)
	}
	if err := pt.w.RenameTable(pt.ctx, added, "accounts", "accounts_v2"); err != nil {
		t.Fatal(err)
	}
	eventually(t, 5*time.Minute, added+"'s bootstrap done on DR", func() bool {
		pt.checkAlive()
		return bootstrapDone(pt.ctx, pt.dr, added) != ""
	})
	pt.dbs = []string{first, added}
	pt.converge(pt.ctx, pt.src, pt.dr, pt.srcFS, pt.drFS, 3*time.Minute)
	if hasTable(t, pt.ctx, pt.dr, added, "accounts") || !hasTable(t, pt.ctx, pt.dr, added, "accounts_v2") {
		t.Errorf("the rename in %s did not replicate", added)
	}
	t.Logf("%s bootstrapped and caught up %s after the file changed, no daemon restarted", added, time.Since(changed).Round(time.Millisecond))
}
