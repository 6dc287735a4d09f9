package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/beltran/gohive/hive_metastore"

	wl "github.com/hivedr/hivedr/e2e/workload"
	"github.com/hivedr/hivedr/internal/verify"
)

// verifyOut is what one `hivedr verify -json` printed.
type verifyOut struct {
	code     int
	findings []verify.Finding
	summary  struct {
		verify.Summary
		Clean bool   `json:"clean"`
		Error string `json:"error"`
	}
	raw string
}

// of returns the findings of a class.
func (v verifyOut) of(c verify.Class) []verify.Finding {
	var out []verify.Finding
	for _, f := range v.findings {
		if f.Class == c {
			out = append(out, f)
		}
	}
	return out
}

// runVerify runs `hivedr verify -json` with the pipeline's config.
func (p *pipeline) runVerify(args ...string) verifyOut {
	p.t.Helper()
	cmd := exec.Command(hivedrBin(p.t), append([]string{"verify", "-config", p.conf, "-json"}, args...)...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	v := verifyOut{raw: stdout.String() + stderr.String()}
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		v.code = ee.ExitCode()
	case err != nil:
		p.t.Fatalf("hivedr verify: %v", err)
	}
	sc := bufio.NewScanner(&stdout)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var typ struct{ Type string }
		if err := json.Unmarshal(sc.Bytes(), &typ); err != nil {
			p.t.Fatalf("hivedr verify printed a line that is not JSON: %q (%v)", sc.Text(), err)
		}
		switch typ.Type {
		case "finding":
			var f verify.Finding
			if err := json.Unmarshal(sc.Bytes(), &f); err != nil {
				p.t.Fatal(err)
			}
			v.findings = append(v.findings, f)
		case "summary":
			if err := json.Unmarshal(sc.Bytes(), &v.summary); err != nil {
				p.t.Fatal(err)
			}
		}
	}
	return v
}

// verifyTables are the tables of the verify tests, one per fault.
var verifyTables = []string{"t_part", "t_cols", "t_missing", "t_corrupt"}

// convergedForVerify starts a pipeline on one database with a table per
// fault, each with data files, and waits until the DR equals the source.
func convergedForVerify(t *testing.T) (*pipelineTest, string) {
	t.Helper()
	db := "vf_" + uniq(t)
	p := startPipeline(t, 8*time.Minute, db)
	ctx, w := p.ctx, p.w
	part := wl.TableSpec{Columns: []string{"id bigint", "note string"}, PartitionKeys: []string{"dt"}}
	flat := wl.TableSpec{Columns: []string{"id bigint", "note string"}}
	if err := w.CreateDatabase(ctx, db); err != nil {
		t.Fatal(err)
	}
	for _, tb := range verifyTables {
		spec := flat
		if tb == "t_part" {
			spec = part
		}
		if err := w.CreateTable(ctx, db, tb, spec); err != nil {
			t.Fatal(err)
		}
		if tb == "t_part" {
			if _, err := w.AddPartitions(ctx, db, tb, [][]string{{"2026-12-01"}, {"2026-12-02"}, {"2026-12-03"}}, 40); err != nil {
				t.Fatal(err)
			}
			continue
		}
		for range 2 {
			if _, err := w.Insert(ctx, db, tb, nil, 40); err != nil {
				t.Fatal(err)
			}
		}
	}
	p.converge(ctx, p.src, p.dr, p.srcFS, p.drFS, 3*time.Minute)
	eventually(t, time.Minute, "the applier group commits every event", func() bool { return p.caughtUp(ctx) })
	return p, db
}

// wantOnly checks that a verify run found exactly one diverged object
// (possibly with several details), naming it and saying how.
func wantOnly(t *testing.T, v verifyOut, object, detail string) {
	t.Helper()
	if v.code != 1 || v.summary.Clean {
		t.Errorf("verify exit %d, clean %v: want 1 and false\n%s", v.code, v.summary.Clean, v.raw)
	}
	div := v.of(verify.Diverged)
	if len(div) == 0 {
		t.Fatalf("verify found nothing diverged; want %s: %s\n%s", object, detail, v.raw)
	}
	for _, f := range div {
		if f.Object != object || !strings.Contains(f.Detail, detail) {
			t.Errorf("finding %s: %s; want only %s: ...%s...", f.Object, f.Detail, object, detail)
		}
	}
	if n := len(v.of(verify.InFlight)); n != 0 {
		t.Errorf("%d findings in flight with the applier caught up:\n%s", n, v.raw)
	}
}

// TestVerify: clean on a converged replica; then, each on its own table
// and each found alone, a deleted DR partition, a changed column, a
// missing file and a corrupted file (same length, one byte flipped: only a
// checksum sees it, so only with -sample 1).
func TestVerify(t *testing.T) {
	p, db := convergedForVerify(t)
	ctx, dr := p.ctx, p.dr

	v := p.runVerify("-db", db, "-sample", "1")
	if v.code != 0 || !v.summary.Clean || len(v.findings) != 0 {
		t.Fatalf("verify of a converged replica: exit %d, %d findings, want 0 and none:\n%s", v.code, len(v.findings), v.raw)
	}
	s := v.summary
	// 4 tables; t_part's 3 partitions; 3 files there and 2 in each other table.
	if s.Databases != 1 || s.Tables != 4 || s.Partitions != 3 || s.Files != 9 || s.Sampled != 9 || s.Bytes == 0 {
		t.Errorf("summary %+v: want 1 database, 4 tables, 3 partitions, 9 files all sampled", s)
	}
	// t_part's key is a string: its partitions were read in pages, by the
	// real metastores' filters, not from full lists of names.
	if s.ListedInFull != 0 {
		t.Errorf("summary %+v: %d tables listed in full, want t_part paged", s, s.ListedInFull)
	}
	// Pages of one partition: the keyset filters take the real metastores
	// from page to page.
	if v1 := p.runVerify("-db", db, "-page-size", "1"); v1.code != 0 || v1.summary.Partitions != 3 || v1.summary.ListedInFull != 0 {
		t.Errorf("verify -page-size 1: exit %d, %+v:\n%s", v1.code, v1.summary, v1.raw)
	}
	t.Logf("clean verify: %+v", s)

	t.Run("DeletedPartition", func(t *testing.T) {
		if _, err := dr.DropPartition(ctx, db, "t_part", []string{"2026-12-02"}, false); err != nil {
			t.Fatal(err)
		}
		wantOnly(t, p.runVerify("-db", db, "-tables", "t_part"), db+".t_part partition dt=2026-12-02", "missing on DR")
	})
	t.Run("ChangedColumn", func(t *testing.T) {
		res, err := dr.GetTableReq(ctx, &hive_metastore.GetTableRequest{DbName: db, TblName: "t_cols"})
		if err != nil {
			t.Fatal(err)
		}
		tb := res.Table
		// The metastore refuses incompatible type changes; a rename it takes.
		tb.Sd.Cols[1].Name = "memo"
		if err := dr.AlterTableWithEnvironmentContext(ctx, db, "t_cols", tb, hive_metastore.NewEnvironmentContext()); err != nil {
			t.Fatal(err)
		}
		wantOnly(t, p.runVerify("-db", db, "-tables", "t_cols"), db+".t_cols", "columns (id bigint, note string) on source, (id bigint, memo string) on DR")
	})
	t.Run("MissingFile", func(t *testing.T) {
		loc := p.drFiles(db, "t_missing", nil)[0]
		if err := p.drFS.Remove(ctx, loc); err != nil {
			t.Fatal(err)
		}
		name := loc[strings.LastIndex(loc, "/")+1:]
		wantOnly(t, p.runVerify("-db", db, "-tables", "t_missing"), db+".t_missing file "+name, "missing on DR")
	})
	t.Run("CorruptedFile", func(t *testing.T) {
		loc := p.drFiles(db, "t_corrupt", nil)[0]
		flipByte(t, ctx, p, loc, testRand(t).IntN(64))
		// Same name, same length: without checksums it looks right.
		if v := p.runVerify("-db", db, "-tables", "t_corrupt", "-sample", "0"); v.code != 0 || len(v.findings) != 0 {
			t.Errorf("verify -sample 0: exit %d, %d findings; want 0 and none (lengths agree)\n%s", v.code, len(v.findings), v.raw)
		}
		name := loc[strings.LastIndex(loc, "/")+1:]
		wantOnly(t, p.runVerify("-db", db, "-tables", "t_corrupt", "-sample", "1"), db+".t_corrupt file "+name, "CRC32C")
	})
	// Every fault at once, and nothing else.
	v = p.runVerify("-db", db, "-sample", "1")
	objects := map[string]bool{}
	for _, f := range v.findings {
		objects[f.Object[:strings.Index(f.Object+" ", " ")]] = true
	}
	if v.code != 1 || v.summary.Diverged != len(v.findings) || len(objects) != 4 {
		t.Errorf("verify of the whole database: exit %d, %d diverged of %d findings on %v; want 1, all diverged, on the 4 tables\n%s",
			v.code, v.summary.Diverged, len(v.findings), objects, v.raw)
	}
	// The text form: a line per difference, then the verdict.
	out, _ := exec.Command(hivedrBin(t), "verify", "-config", p.conf, "-db", db, "-sample", "1").Output()
	if lines := strings.Split(strings.TrimSpace(string(out)), "\n"); len(lines) != len(v.findings)+1 ||
		!strings.HasPrefix(lines[0], "DIVERGED  "+db+".") || !strings.HasPrefix(lines[len(lines)-1], "DIVERGED: 1 databases, 4 tables") {
		t.Errorf("verify's text output:\n%s\nwant %d DIVERGED lines and the summary", out, len(v.findings))
	}
	t.Logf("hivedr verify -sample 1:\n%s", out)
}

// flipByte rewrites the DR file at loc with one byte changed, same length.
func flipByte(t *testing.T, ctx context.Context, p *pipelineTest, loc string, at int) {
	t.Helper()
	r, err := p.drFS.Open(ctx, loc, 0, -1)
	if err != nil {
		t.Fatal(err)
	}
	b, err := io.ReadAll(r)
	r.Close()
	if err != nil {
		t.Fatal(err)
	}
	at %= len(b)
	b[at] ^= 0x20
	w, err := p.drFS.Create(ctx, loc, int64(len(b)))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Write(b); err != nil {
		t.Fatal(err)
	}
	if err := w.Commit(ctx, crc32.Checksum(b, crc32.MakeTable(crc32.Castagnoli))); err != nil {
		t.Fatal(err)
	}
	t.Logf("flipped byte %d of %s (%d bytes)", at, loc, len(b))
}

// TestVerifyInFlight: with the applier stopped, source changes the
// tailer has published are in_flight, not diverged, and verify exits 0;
// once the applier applies them, verify is clean with nothing in flight.
func TestVerifyInFlight(t *testing.T) {
	p, db := convergedForVerify(t)
	ctx, w := p.ctx, p.w
	p.apply.stop(t)
	if _, err := w.AddPartitions(ctx, db, "t_part", [][]string{{"2026-12-09"}}, 20); err != nil {
		t.Fatal(err)
	}
	if err := w.AlterTableAddColumn(ctx, db, "t_cols", "extra string"); err != nil {
		t.Fatal(err)
	}
	head := currentEventID(t, ctx, p.src)
	// Wait for the tailer to publish up to the source's head (so both
	// changes are in the topic), observed on the topic itself.
	s := serde(t, p.env)
	eventually(t, time.Minute, fmt.Sprintf("event %d published", head), func() bool {
		evs := events(readTopic(t, p.env, s, p.eventTopics()[0]))
		return len(evs) > 0 && evs[len(evs)-1].EventID >= head
	})
	v := p.runVerify("-db", db)
	if v.code != 0 || !v.summary.Clean || len(v.of(verify.Diverged)) != 0 {
		t.Errorf("verify with changes in flight: exit %d, %d diverged; want 0 and none\n%s", v.code, len(v.of(verify.Diverged)), v.raw)
	}
	got := map[string]bool{}
	for _, f := range v.of(verify.InFlight) {
		got[f.Object] = true
	}
	for _, want := range []string{db + ".t_part partition dt=2026-12-09", db + ".t_cols"} {
		if !got[want] {
			t.Errorf("no in_flight finding on %s; got %v\n%s", want, got, v.raw)
		}
	}
	if v.summary.PendingEvents < 2 {
		t.Errorf("pending events %d, want at least the 2 not applied", v.summary.PendingEvents)
	}
	p.startApply()
	eventually(t, 2*time.Minute, "the applier applies what was in flight", func() bool { p.checkAlive(); return p.caughtUp(ctx) })
	if v := p.runVerify("-db", db, "-sample", "1"); v.code != 0 || len(v.findings) != 0 {
		t.Errorf("verify after the applier caught up: exit %d, %d findings; want 0 and none\n%s", v.code, len(v.findings), v.raw)
	}
}
