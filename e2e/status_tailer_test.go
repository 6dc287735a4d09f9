package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sr"

	wl "github.com/hivedr/hivedr/e2e/workload"
	"github.com/hivedr/hivedr/internal/kafka"
	"github.com/hivedr/hivedr/schemas"
)

// statusOf runs `hivedr status -json -config conf -db db` and returns the
// report, the database's row and the exit code.
func statusOf(t *testing.T, conf, db string) (statusJSON, statusDB, int) {
	t.Helper()
	out, code := runStatus(t, "-config", conf, "-db", db, "-json")
	if code == 2 {
		t.Fatalf("hivedr status exited 2:\n%s", out)
	}
	var st statusJSON
	if err := json.Unmarshal([]byte(out), &st); err != nil {
		t.Fatalf("status -json: %v\n%s", err, out)
	}
	for _, d := range st.Databases {
		if d.Database == db {
			return st, d, code
		}
	}
	t.Fatalf("status -json has no database %s:\n%s", db, out)
	return st, statusDB{}, code
}

// age is a database's age in seconds, -1 when status has none.
func age(d statusDB) float64 {
	if d.Age == nil {
		return -1
	}
	return *d.Age
}

// withRPO is the pipeline's configuration with rpo set on every database.
func withRPO(t *testing.T, p *pipeline, rpo string) string {
	t.Helper()
	y, err := os.ReadFile(p.conf)
	if err != nil {
		t.Fatal(err)
	}
	const entry = `exclude_tables: ["tmp_.*"]}`
	if !strings.Contains(string(y), entry) {
		t.Fatalf("pipeline configuration has no %s:\n%s", entry, y)
	}
	return writeFile(t, "rpo.yaml", strings.ReplaceAll(string(y), entry, `exclude_tables: ["tmp_.*"], rpo: `+rpo+`}`))
}

// TestStatusTailerDown kills the tailer and checks that status tells the
// truth about it: with a source change the tailer never published, the
// database is tailer_down (exit 1) although the applier group has nothing
// uncommitted; with a short rpo it is rpo_breached once the replica's age
// (which stops moving with the heartbeats) passes it. With the tailer
// back it is ok again, and a status run right after a heartbeat is ok:
// heartbeats not committed yet are not lag.
func TestStatusTailerDown(t *testing.T) {
	u := uniq(t)
	db := "st_down_" + u
	p := startPipeline(t, 8*time.Minute, db)
	ctx := p.ctx
	spec := wl.TableSpec{Columns: []string{"id bigint", "note string"}}
	if err := p.w.CreateDatabase(ctx, db); err != nil {
		t.Fatal(err)
	}
	if err := p.w.CreateTable(ctx, db, "before", spec); err != nil {
		t.Fatal(err)
	}
	waitStatus(t, p.pipeline, 3*time.Minute, 0, "-config", p.conf, "-db", db)
	const rpo = 20 // seconds; over the test pipeline's down threshold of 15 s
	short := withRPO(t, p.pipeline, fmt.Sprint(rpo, "s"))
	st, d, code := statusOf(t, short, db)
	if code != 0 || d.State != "ok" || d.RPO != rpo || d.Age == nil || *d.Age >= rpo {
		t.Fatalf("healthy pipeline, rpo %ds: exit %d, %+v, tailer %+v; want ok within the RPO", rpo, code, d, st.Tailer)
	}

	p.tail.kill9()
	p.tail = nil // killed on purpose: checkAlive skips it
	if err := p.w.CreateTable(ctx, db, "while_down", spec); err != nil {
		t.Fatal(err)
	}
	head := currentEventID(t, ctx, p.src)
	// Never ok from now on; tailer_down once no checkpoint came for 15 s
	// (max(3 x (2s + 0.2s), 15s)), with nothing left for the applier.
	eventually(t, 2*time.Minute, "status to say tailer_down", func() bool {
		p.checkAlive()
		st, d, code := statusOf(t, p.conf, db)
		if code == 0 || d.State == "ok" || st.CaughtUp {
			t.Fatalf("status with the tailer killed and event %d unpublished: exit %d, %+v, tailer %+v", head, code, d, st.Tailer)
		}
		if d.State != "tailer_down" {
			t.Logf("not down yet: %s, tailer %s (checkpoint %.1fs old)", d.State, st.Tailer.State, st.Tailer.CheckpointAge)
			return false
		}
		if code != 1 || st.Tailer.State != "down" || st.Tailer.LagEvents < 1 || st.Tailer.SourceHead < head ||
			d.LagEvents != 0 || d.UncommittedRecords != 0 {
			t.Fatalf("tailer down: exit %d, %+v, tailer %+v; want exit 1, tailer down and behind the source, nothing left for the applier", code, d, st.Tailer)
		}
		return true
	})
	out, code := runStatus(t, "-config", p.conf, "-db", db)
	t.Logf("hivedr status, tailer killed:\n%s", out)
	if f := strings.Fields(lineWith(out, db+" ")); code != 1 || !strings.Contains(out, "tailer (source "+p.prefix+"): DOWN: ") ||
		len(f) < 2 || f[len(f)-1] != "tailer_down" {
		t.Errorf("status table with the tailer killed (exit %d):\n%s", code, out)
	}

	// The replica's age grows without heartbeats, past the short RPO.
	eventually(t, 2*time.Minute, fmt.Sprintf("status to say rpo_breached with rpo %ds", rpo), func() bool {
		p.checkAlive()
		st, d, code := statusOf(t, short, db)
		if d.State != "rpo_breached" {
			if d.State != "tailer_down" && d.State != "tailer_behind" {
				t.Fatalf("rpo %ds, tailer killed: %+v, tailer %+v", rpo, d, st.Tailer)
			}
			return false
		}
		if code != 1 || age(d) <= rpo {
			t.Fatalf("rpo_breached: exit %d, %+v; want exit 1, age over %ds", code, d, rpo)
		}
		return true
	})
	if _, d, code := statusOf(t, p.conf, db); code != 1 || d.State != "tailer_down" || age(d) <= rpo || d.RPO != 300 {
		t.Errorf("default rpo 5m, tailer killed: exit %d, %+v; want tailer_down, the same growing age", code, d)
	}

	// The tailer back: ok again, with the event published and applied.
	p.startTail()
	waitStatus(t, p.pipeline, 2*time.Minute, 0, "-config", p.conf, "-db", db)
	if st, d, code := statusOf(t, short, db); code != 0 || d.State != "ok" || d.ReplLastID < head || st.Tailer.State != "running" {
		t.Errorf("tailer restarted: exit %d, %+v, tailer %+v; want ok at event %d or later", code, d, st.Tailer, head)
	}

	// Right after a heartbeat lands (the topic's end moves with no source
	// change of ours), status is ok: the applier commits it within a
	// second, and it is not lag meanwhile.
	adm := p.env.KafkaAdmin(t)
	topic := kafka.Topics{Prefix: p.prefix}.Events(db)
	end := func() int64 {
		ends, err := adm.ListCommittedOffsets(ctx, topic)
		if err != nil {
			t.Fatal(err)
		}
		o, _ := ends.Lookup(topic, 0)
		return o.Offset
	}
	for i := 0; i < 3; i++ {
		was := end()
		eventually(t, time.Minute, "a heartbeat on "+topic, func() bool { return end() > was })
		if st, d, code := statusOf(t, p.conf, db); code != 0 || d.State != "ok" || d.LagEvents != 0 {
			t.Errorf("status right after a heartbeat: exit %d, %+v, tailer %+v", code, d, st.Tailer)
		}
	}
	// Deterministically: with the applier stopped cleanly (it committed
	// everything it applied), heartbeats pile up uncommitted, yet nothing
	// is unapplied and the replica stays current: ok, exit 0.
	p.apply.stop(t)
	p.apply = nil
	was := end()
	eventually(t, time.Minute, "heartbeats after the applier stopped", func() bool { return end() >= was+4 })
	st, d, code = statusOf(t, p.conf, db)
	if code != 0 || d.State != "ok" || d.LagEvents != 0 || d.UncommittedRecords < 4 || age(d) < 0 || age(d) > 10 {
		t.Errorf("heartbeat-only lag: exit %d, %+v, tailer %+v; want ok, 0 events, 4+ records uncommitted, a current age", code, d, st.Tailer)
	}
}

// recordingProxy is a reverse proxy to the schema registry that records
// the method and path of every request.
type recordingProxy struct {
	*httptest.Server
	mu   sync.Mutex
	reqs []string
}

func newRecordingProxy(t *testing.T, target string) *recordingProxy {
	t.Helper()
	u, err := url.Parse(target)
	if err != nil {
		t.Fatal(err)
	}
	rp := httputil.NewSingleHostReverseProxy(u)
	p := &recordingProxy{}
	p.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p.mu.Lock()
		p.reqs = append(p.reqs, r.Method+" "+r.URL.Path)
		p.mu.Unlock()
		rp.ServeHTTP(w, r)
	}))
	t.Cleanup(p.Close)
	return p
}

func (p *recordingProxy) requests() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.reqs)
}

// subjectVersions lists the versions of every io.hivedr subject.
func subjectVersions(t *testing.T, ctx context.Context, cl *sr.Client) map[string][]int {
	t.Helper()
	subjects, err := cl.Subjects(ctx)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][]int{}
	for _, s := range subjects {
		if !strings.HasPrefix(s, "io.hivedr.") {
			continue
		}
		v, err := cl.SubjectVersions(ctx, s)
		if err != nil {
			t.Fatal(err)
		}
		out[s] = v
	}
	return out
}

// TestStatusTailerDownChainBroken: after a tailer stopped on a broken
// chain, writing a CHAIN_BROKEN checkpoint at its last position, status
// says so for every database in scope (exit 1) although the tailer is
// gone. Status and cat only read the schema registry: through a proxy
// that records requests, they send GETs only, and no subject gets a
// version.
func TestStatusTailerDownChainBroken(t *testing.T) {
	u := uniq(t)
	db := "st_chain_" + u
	p := startPipeline(t, 6*time.Minute, db)
	if err := p.w.CreateDatabase(p.ctx, db); err != nil {
		t.Fatal(err)
	}
	waitStatus(t, p.pipeline, 3*time.Minute, 0, "-config", p.conf, "-db", db)
	p.tail.stop(t)
	p.tail = nil

	// What the tailer writes on CHAIN_BROKEN before it exits 3: its last
	// checkpoint again, with the state.
	env := p.env
	s := serde(t, env)
	cpTopic := kafka.Topics{Prefix: p.prefix}.Checkpoints()
	var last *schemas.TailerCheckpoint
	for _, d := range readTopic(t, env, s, cpTopic) {
		if cp, ok := d.value.(*schemas.TailerCheckpoint); ok && cp.Source == p.prefix {
			last = cp
		}
	}
	if last == nil || last.State != schemas.StateRunning {
		t.Fatalf("the tailer's last checkpoint: %+v", last)
	}
	broken := *last
	broken.State, broken.Written = schemas.StateChainBroken, time.Now()
	v, err := s.Encode(&broken)
	if err != nil {
		t.Fatal(err)
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(env.KafkaBrokers(t)...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	rec := &kgo.Record{Topic: cpTopic, Key: []byte(p.prefix), Value: v,
		Headers: []kgo.RecordHeader{{Key: kafka.HeaderType, Value: []byte(schemas.NameTailerCheckpoint)}}}
	if err := cl.ProduceSync(p.ctx, rec).FirstErr(); err != nil {
		t.Fatal(err)
	}

	src, err := sr.NewClient(sr.URLs(env.Get(t, "HIVEDR_SCHEMA_REGISTRY")))
	if err != nil {
		t.Fatal(err)
	}
	versions := subjectVersions(t, p.ctx, src)
	proxy := newRecordingProxy(t, env.Get(t, "HIVEDR_SCHEMA_REGISTRY"))
	y, err := os.ReadFile(p.conf)
	if err != nil {
		t.Fatal(err)
	}
	conf := writeFile(t, "proxied.yaml", strings.Replace(string(y),
		"schema_registry: "+env.Get(t, "HIVEDR_SCHEMA_REGISTRY"), "schema_registry: "+proxy.URL, 1))

	out, code := runStatus(t, "-config", conf, "-db", db)
	t.Logf("hivedr status after CHAIN_BROKEN:\n%s", out)
	if f := strings.Fields(lineWith(out, db+" ")); code != 1 || len(f) < 2 || f[len(f)-1] != "chain_broken" ||
		!strings.Contains(out, fmt.Sprintf("CHAIN_BROKEN: stopped after event %d", last.LastEventID)) {
		t.Errorf("status after CHAIN_BROKEN exited %d; want exit 1, the tailer's CHAIN_BROKEN after event %d, %s chain_broken:\n%s",
			code, last.LastEventID, db, out)
	}
	st, d, code := statusOf(t, conf, db)
	if code != 1 || st.Tailer.State != "chain_broken" || st.Tailer.CheckpointState != "CHAIN_BROKEN" ||
		st.Tailer.CheckpointEventID != last.LastEventID || d.State != "chain_broken" || st.CaughtUp {
		t.Errorf("status -json after CHAIN_BROKEN: exit %d, tailer %+v, %+v", code, st.Tailer, d)
	}

	catOut, err := exec.Command(hivedrBin(t), "cat", "-config", conf, cpTopic).CombinedOutput()
	if err != nil || !strings.Contains(lineWith(string(catOut), `"CHAIN_BROKEN"`), `"last_event_id":`+fmt.Sprint(last.LastEventID)) {
		t.Errorf("hivedr cat %s: %v\n%s", cpTopic, err, tail(string(catOut), 5))
	}

	reqs := proxy.requests()
	decoded := false
	for _, r := range reqs {
		if !strings.HasPrefix(r, "GET ") {
			t.Errorf("status or cat wrote to the schema registry: %s", r)
		}
		decoded = decoded || strings.HasPrefix(r, "GET /schemas/ids/")
	}
	if !decoded {
		t.Errorf("no schema fetched by ID through the proxy (requests %q): the test proves nothing", reqs)
	}
	if after := subjectVersions(t, p.ctx, src); fmt.Sprint(after) != fmt.Sprint(versions) {
		t.Errorf("subject versions changed across status and cat:\n before %v\n after  %v", versions, after)
	}
}
