package e2e

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sr"

	wl "github.com/hivedr/hivedr/e2e/workload"
	"github.com/hivedr/hivedr/internal/kafka"
	"github.com/hivedr/hivedr/internal/testenv"
	"github.com/hivedr/hivedr/schemas"
)

var (
	buildOnce sync.Once
	binPath   string
	buildErr  error
)

// hivedrBin builds the hivedr binary once per test run: e2e tests run the
// real binary as separate processes, the way operators run it.
func hivedrBin(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "hivedr-e2e-bin")
		if err != nil {
			buildErr = err
			return
		}
		binPath = filepath.Join(dir, "hivedr")
		out, err := exec.Command("go", "build", "-o", binPath, "../cmd/hivedr").CombinedOutput()
		if err != nil {
			buildErr = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return binPath
}

// syncBuffer is a bytes.Buffer safe for a process writing while a test reads.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) Len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Len()
}

// From returns what was written from offset off on.
func (s *syncBuffer) From(off int) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return string(s.b.Bytes()[min(off, s.b.Len()):])
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// proc is a hivedr process started by a test.
type proc struct {
	name string
	cmd  *exec.Cmd
	out  *syncBuffer
	done chan struct{}
	err  error
}

// startHivedr runs `hivedr args...`; the process is killed when the test ends.
func startHivedr(t *testing.T, name string, args ...string) *proc {
	t.Helper()
	return startHivedrEnv(t, name, nil, args...)
}

// startHivedrEnv is startHivedr with env (KEY=VALUE) added to the test's
// environment.
func startHivedrEnv(t *testing.T, name string, env []string, args ...string) *proc {
	t.Helper()
	cmd := exec.Command(hivedrBin(t), args...)
	if len(env) > 0 {
		cmd.Env = append(os.Environ(), env...)
	}
	return startProc(t, name, cmd)
}

// startProc starts cmd, its output kept; the process is killed when the
// test ends, and its output's end logged if the test failed.
func startProc(t *testing.T, name string, cmd *exec.Cmd) *proc {
	t.Helper()
	p := &proc{name: name, cmd: cmd, out: &syncBuffer{}, done: make(chan struct{})}
	p.cmd.Stdout, p.cmd.Stderr = p.out, p.out
	if err := p.cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", name, err)
	}
	go func() { p.err = p.cmd.Wait(); close(p.done) }()
	t.Cleanup(func() {
		p.kill9()
		if t.Failed() {
			t.Logf("output of %s:\n%s", name, tail(p.out.String(), 60))
		}
	})
	return p
}

func tail(s string, lines int) string {
	ls := strings.Split(s, "\n")
	if len(ls) > lines {
		ls = ls[len(ls)-lines:]
	}
	return strings.Join(ls, "\n")
}

// kill9 kills the process the way a crash would: no cleanup, no flush.
func (p *proc) kill9() {
	select {
	case <-p.done:
		return
	default:
	}
	p.cmd.Process.Signal(syscall.SIGKILL)
	<-p.done
}

// stop sends SIGTERM and waits for a clean exit. It signals only once the
// process has written output: hivedr installs its signal handler before
// its first line, and a SIGTERM before that would kill it as a crash.
func (p *proc) stop(t *testing.T) {
	t.Helper()
	eventually(t, 2*time.Minute, p.name+"'s first output (its signal handler installed)", func() bool {
		return p.exited() || p.out.Len() > 0
	})
	p.cmd.Process.Signal(syscall.SIGTERM)
	if code := p.wait(t, 60*time.Second); code != 0 {
		t.Fatalf("%s exited %d on SIGTERM:\n%s", p.name, code, tail(p.out.String(), 40))
	}
}

// wait returns the exit code, failing the test if the process outlives d.
func (p *proc) wait(t *testing.T, d time.Duration) int {
	t.Helper()
	select {
	case <-p.done:
	case <-time.After(d):
		t.Fatalf("%s still running after %s:\n%s", p.name, d, tail(p.out.String(), 40))
	}
	var ee *exec.ExitError
	if errors.As(p.err, &ee) {
		return ee.ExitCode()
	}
	if p.err != nil {
		t.Fatalf("%s: %v", p.name, p.err)
	}
	return 0
}

func (p *proc) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// writeFile writes a test file and returns its path.
func writeFile(t testing.TB, name, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// eventually polls cond every 200 ms until it holds, failing the test if
// it does not within d.
func eventually(t testing.TB, d time.Duration, what string, cond func() bool) {
	t.Helper()
	poll(t, d, 200*time.Millisecond, what, cond)
}

// poll calls cond every interval until it holds, failing the test if it
// does not within d. Fault tests poll often (a few milliseconds) for the
// progress that fires a fault, so the fault lands close to it.
func poll(t testing.TB, d, interval time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.NewTimer(d)
	defer deadline.Stop()
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for !cond() {
		select {
		case <-deadline.C:
			t.Fatalf("timed out after %s waiting for %s", d, what)
		case <-tick.C:
		}
	}
}

// seedEnv names the environment variable that replays a fault test's
// random choices.
const seedEnv = "HIVEDR_TEST_SEED"

// testRand returns the random source of a test's fault schedule: seeded
// from HIVEDR_TEST_SEED when it is set, from the clock otherwise, and the
// seed is logged, so that any run's choices can be made again.
func testRand(t testing.TB) *rand.Rand {
	t.Helper()
	seed := uint64(time.Now().UnixNano())
	if v := os.Getenv(seedEnv); v != "" {
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			t.Fatalf("%s=%q: want an unsigned decimal integer (a seed a test logged): %v", seedEnv, v, err)
		}
		seed = n
	}
	t.Logf("random seed %d (%s=%d makes the same choices)", seed, seedEnv, seed)
	return rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
}

// scrape reads the Prometheus text exposition at url into series ->
// value, each series named as exposed (name or name{labels}) less the
// pipeline label every daemon's series carries (withoutPipeline). ok is
// false while the endpoint does not answer, as when its process is
// starting or has just been killed.
func scrape(url string) (m map[string]float64, ok bool) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, false
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, false
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		return nil, false
	}
	m = map[string]float64{}
	for _, l := range strings.Split(string(b), "\n") {
		i := strings.LastIndexByte(l, ' ')
		if l == "" || strings.HasPrefix(l, "#") || i < 0 {
			continue
		}
		if v, err := strconv.ParseFloat(l[i+1:], 64); err == nil {
			m[withoutPipeline(l[:i])] = v
		}
	}
	return m, true
}

// pipelineLabel is the pipeline label of an exposed series (a daemon's
// kafka.topic_prefix), with the comma joining it to the next label.
var pipelineLabel = regexp.MustCompile(`pipeline="[^"]*",?`)

// withoutPipeline is an exposed series (name{labels}) without its pipeline
// label: each test runs one pipeline, so the label tells its series
// nothing, and names stay as they were before every series had it.
// name{pipeline="p"} becomes name, name{db="a",pipeline="p"} name{db="a"}.
func withoutPipeline(series string) string {
	s := pipelineLabel.ReplaceAllString(series, "")
	s = strings.Replace(s, ",}", "}", 1)
	return strings.TrimSuffix(s, "{}")
}

// metricSum adds up the series of the metric name over all their labels.
func metricSum(m map[string]float64, name string) float64 {
	var sum float64
	for series, v := range m {
		if series == name || strings.HasPrefix(series, name+"{") {
			sum += v
		}
	}
	return sum
}

// serde returns a codec over the stack's schema registry.
func serde(t testing.TB, env *testenv.Env) *schemas.Serde {
	t.Helper()
	cl, err := sr.NewClient(sr.URLs(env.Get(t, "HIVEDR_SCHEMA_REGISTRY")))
	if err != nil {
		t.Fatal(err)
	}
	s, err := schemas.NewSerde(ctxFor(t, time.Minute), schemas.NewSRRegistry(cl))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// decoded is one record of a topic, decoded.
type decoded struct {
	rec   *kgo.Record
	value any
}

// readTopic returns every committed record of every partition of topic,
// partition by partition, decoded through the registry. Writers may be
// running: only records below each partition's last stable offset are read.
func readTopic(t *testing.T, env *testenv.Env, s *schemas.Serde, topic string) []decoded {
	t.Helper()
	ctx := ctxFor(t, 2*time.Minute)
	ends, err := env.KafkaAdmin(t).ListCommittedOffsets(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	var parts []kadm.ListedOffset
	ends.Each(func(o kadm.ListedOffset) { parts = append(parts, o) })
	sort.Slice(parts, func(i, j int) bool { return parts[i].Partition < parts[j].Partition })
	var out []decoded
	for _, end := range parts {
		if end.Err != nil {
			t.Fatalf("%s/%d: %v", topic, end.Partition, end.Err)
		}
		recs, err := kafka.ReadCommitted(ctx, []kgo.Opt{kgo.SeedBrokers(env.KafkaBrokers(t)...)}, topic, end.Partition, 0, end.Offset)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range recs {
			v, err := s.Decode(ctx, r.Value)
			if err != nil {
				t.Fatalf("%s/%d@%d: %v", topic, r.Partition, r.Offset, err)
			}
			out = append(out, decoded{rec: r, value: v})
		}
	}
	return out
}

// events picks the metastore events out of decoded records.
func events(ds []decoded) []*schemas.Event {
	var out []*schemas.Event
	for _, d := range ds {
		if e, ok := d.value.(*schemas.Event); ok {
			out = append(out, e)
		}
	}
	return out
}

// synthLog is a notification log of our own in Postgres, with the
// metastore's table layout (workload.SynthLog), for tests that must do to a
// log what one must not do to the real metastore's (purge it, write
// malformed rows) and for the benchmarks. Each has its own schema in the
// hivedr_test database, dropped when the test ends.
type synthLog struct {
	*wl.SynthLog
	t testing.TB
}

func newSynthLog(t testing.TB, env *testenv.Env) *synthLog {
	t.Helper()
	l, err := wl.CreateSynthLog(ctxFor(t, time.Minute), env.Get(t, "HIVEDR_POSTGRES_TEST_DSN"), "synth_"+uniq(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Drop(context.Background()) })
	return &synthLog{SynthLog: l, t: t}
}

// synthRow is a row to append to a synthetic log.
type synthRow = wl.LogRow

// append adds rows with the next event IDs, as the metastore would.
func (s *synthLog) append(t testing.TB, rows []synthRow) (first, last int64) {
	t.Helper()
	a, err := s.Append(ctxFor(t, 5*time.Minute), rows)
	if err != nil {
		t.Fatal(err)
	}
	return a.First, a.Last
}

// purge deletes events [from, to], as the metastore's cleaner does past
// its time to live.
func (s *synthLog) purge(t testing.TB, from, to int64) {
	t.Helper()
	if err := s.Purge(ctxFor(t, time.Minute), from, to); err != nil {
		t.Fatal(err)
	}
}

// addDatabases lists databases in DBS (for heartbeats).
func (s *synthLog) addDatabases(t testing.TB, names ...string) {
	t.Helper()
	if err := s.AddDatabases(ctxFor(t, time.Minute), names...); err != nil {
		t.Fatal(err)
	}
}

// TestWithoutPipeline: the scrapes' series names lose the pipeline label
// wherever it sorts among the others, and keep everything else.
func TestWithoutPipeline(t *testing.T) {
	for in, want := range map[string]string{
		`go_goroutines{pipeline="p1"}`:                                        `go_goroutines`,
		`hivedr_tailer_state{pipeline="p1",state="RUNNING"}`:                  `hivedr_tailer_state{state="RUNNING"}`,
		`hivedr_applier_halted{db="a",pipeline="p1",reason="chain_broken"}`:   `hivedr_applier_halted{db="a",reason="chain_broken"}`,
		`hivedr_applier_bootstrap_applied_total{db="a",kind="x",pipeline=""}`: `hivedr_applier_bootstrap_applied_total{db="a",kind="x"}`,
		`hivedr_replica_age_seconds{db="a"}`:                                  `hivedr_replica_age_seconds{db="a"}`,
		`process_open_fds`:                                                    `process_open_fds`,
	} {
		if got := withoutPipeline(in); got != want {
			t.Errorf("withoutPipeline(%s) = %s, want %s", in, got, want)
		}
	}
}
