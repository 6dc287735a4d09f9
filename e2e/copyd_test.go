package e2e

import (
	"bytes"
	"encoding/hex"
	"fmt"
	"hash/crc32"
	"io"
	iofs "io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/hivedr/hivedr/internal/kafka"
	"github.com/hivedr/hivedr/internal/testenv"
	"github.com/hivedr/hivedr/schemas"
)

// copydConf is the YAML of a copy daemon working on a test's own topics.
type copydConf struct {
	prefix, instance string
	workers          int
	bytesPerSecond   int64
	bucket           string // the S3 bucket targets may use
	metricsAddr      string // host:port of /metrics; none when empty
	// anyTarget sets copyd.any_target: the test's tasks copy one source
	// to targets of several stores (HDFS and S3), which no one path
	// mapping gives.
	anyTarget bool
}

func (c copydConf) write(t *testing.T, env *testenv.Env) string {
	t.Helper()
	if c.workers == 0 {
		c.workers = 4
	}
	if c.bucket == "" {
		c.bucket = "unused-" + c.prefix // no task names it; the roots need a bucket (s3:/// is no location)
	}
	src := "hdfs://" + env.Get(t, "HIVEDR_HDFS_SRC_NAMENODE")
	dr := "hdfs://" + env.Get(t, "HIVEDR_HDFS_DR_NAMENODE")
	y := strings.NewReplacer(
		"$BROKERS", strings.Join(env.KafkaBrokers(t), ","), "$PREFIX", c.prefix,
		"$REGISTRY", env.Get(t, "HIVEDR_SCHEMA_REGISTRY"), "$INSTANCE", c.instance,
		"$WORKERS", fmt.Sprint(c.workers), "$BPS", fmt.Sprint(c.bytesPerSecond),
		"$SRCNN", env.Get(t, "HIVEDR_HDFS_SRC_NAMENODE"), "$SRCWEB", env.Get(t, "HIVEDR_HDFS_SRC_HTTP"),
		"$DRNN", env.Get(t, "HIVEDR_HDFS_DR_NAMENODE"), "$DRWEB", env.Get(t, "HIVEDR_HDFS_DR_HTTP"),
		"$S3", env.Get(t, "HIVEDR_S3_ENDPOINT"), "$AK", env.Get(t, "HIVEDR_S3_ACCESS_KEY"), "$SK", env.Get(t, "HIVEDR_S3_SECRET_KEY"),
		"$SRC", src, "$DR", dr, "$BUCKET", c.bucket, "$METRICS", c.metricsAddr, "$ANYTARGET", fmt.Sprint(c.anyTarget),
	).Replace(`
kafka:
  brokers: [$BROKERS]
  topic_prefix: $PREFIX
  replication_factor: 1
  manifest_partitions: 3
schema_registry: $REGISTRY
copyd:
  group: $PREFIX-copyd
  instance: $INSTANCE
  workers: $WORKERS
  bytes_per_second: $BPS
  retries: 2
  metrics_addr: "$METRICS"
  target_roots: ["$DR/copytest", "s3://$BUCKET/copytest"]
  any_target: $ANYTARGET
filesystems:
  hdfs:
    - {namenodes: [$SRCNN], webhdfs: $SRCWEB, user: hivedr}
    - {namenodes: [$DRNN], webhdfs: $DRWEB, user: hivedr}
  s3:
    - {endpoint: $S3, region: us-east-1, access_key: $AK, secret_key: $SK, path_style: true}
replication:
  source_roots: ["$SRC/copytest", "s3://$BUCKET/copytest"]
  path_mappings:
    - {source: "$SRC/", target: "$DR/"}
`)
	return writeFile(t, "copyd.yaml", y)
}

// copyFixture is a test's source files and the tasks that copy them.
type copyFixture struct {
	t      *testing.T
	env    *testenv.Env
	s      *schemas.Serde
	prefix string
	dir    string // /copytest/<random>
	data   map[string][]byte
	tasks  []schemas.CopyTask
}

func newCopyFixture(t *testing.T, env *testenv.Env, s *schemas.Serde) *copyFixture {
	u := uniq(t)
	f := &copyFixture{t: t, env: env, s: s, prefix: "c" + u, dir: "/copytest/" + u, data: map[string][]byte{}}
	// The manifests topic, as the tailer would create it.
	if _, err := kafka.Ensure(ctxFor(t, time.Minute), env.KafkaAdmin(t),
		kafka.Spec{Name: kafka.Topics{Prefix: f.prefix}.Manifests(), Partitions: 3, ReplicationFactor: 1}); err != nil {
		t.Fatal(err)
	}
	return f
}

func (f *copyFixture) srcURI(name string) string {
	return "hdfs://" + f.env.Get(f.t, "HIVEDR_HDFS_SRC_NAMENODE") + f.dir + "/" + name
}

// file writes a source file of n random bytes.
func (f *copyFixture) file(name string, n int) []byte {
	b := randomBytes(f.t, n)
	testenv.WriteHDFS(f.t, f.env.HDFS(f.t, testenv.Source), f.dir+"/"+name, b)
	f.data[name] = b
	return b
}

// task adds a copy task of a source file to target.
func (f *copyFixture) task(name, source, target, checksum string) schemas.CopyTask {
	task := schemas.CopyTask{
		EventID: 1, EventTime: time.Now(), Database: "copytest", Table: name,
		SourceURI: source, TargetURI: target, Checksum: checksum,
	}
	task.TaskID = fmt.Sprintf("%d-%s", len(f.tasks), name)
	f.tasks = append(f.tasks, task)
	return task
}

// publish sends every task to the manifests topic.
func (f *copyFixture) publish() {
	f.t.Helper()
	cl := f.env.Kafka(f.t)
	for i := range f.tasks {
		v, err := f.s.Encode(&f.tasks[i])
		if err != nil {
			f.t.Fatal(err)
		}
		rec := &kgo.Record{Topic: kafka.Topics{Prefix: f.prefix}.Manifests(), Key: []byte(f.tasks[i].TaskID), Value: v}
		if err := cl.ProduceSync(ctxFor(f.t, time.Minute), rec).FirstErr(); err != nil {
			f.t.Fatal(err)
		}
	}
}

// completions reads the committed completions, by task ID (all of them, to
// count duplicates).
func (f *copyFixture) completions() map[string][]*schemas.CopyCompletion {
	f.t.Helper()
	topic := kafka.Topics{Prefix: f.prefix}.Completions()
	out := map[string][]*schemas.CopyCompletion{}
	td, err := f.env.KafkaAdmin(f.t).ListTopics(ctxFor(f.t, 30*time.Second), topic)
	if err != nil || td.Error() != nil {
		return out
	}
	for _, d := range readTopic(f.t, f.env, f.s, topic) {
		if c, ok := d.value.(*schemas.CopyCompletion); ok {
			out[c.TaskID] = append(out[c.TaskID], c)
		}
	}
	return out
}

// waitCompletions waits until every task has a completion.
func (f *copyFixture) waitCompletions(p *proc, d time.Duration) map[string][]*schemas.CopyCompletion {
	f.t.Helper()
	var got map[string][]*schemas.CopyCompletion
	eventually(f.t, d, fmt.Sprintf("%d completions", len(f.tasks)), func() bool {
		if p != nil && p.exited() {
			f.t.Fatalf("copyd exited:\n%s", tail(p.out.String(), 40))
		}
		got = f.completions()
		for _, task := range f.tasks {
			if len(got[task.TaskID]) == 0 {
				return false
			}
		}
		return true
	})
	return got
}

func crcOf(b []byte) uint32 { return crc32.Checksum(b, castagnoli) }

// hdfsChecksumHex is the file checksum as the metastore logs it for a file
// when change management is on: the hex of HDFS's file checksum bytes.
func hdfsChecksumHex(t *testing.T, env *testenv.Env, path string) string {
	t.Helper()
	sum, err := env.WebHDFS(t, testenv.Source).GetFileChecksum(ctxFor(t, time.Minute), path)
	if err != nil {
		t.Fatal(err)
	}
	n := min(int(sum.Length), len(sum.Bytes))
	return hex.EncodeToString(sum.Bytes[:n])
}

// TestCopydCopiesAndVerifies runs `hivedr copyd` on tasks from the source
// HDFS (1 MiB blocks) to the DR HDFS (4 MiB blocks) and to S3, with files
// of 0 bytes, 1 byte, several blocks and more than one S3 part; checks the
// bytes end to end; and checks that a byte flipped at the source after its
// checksum was taken, and paths outside the roots, are caught.
func TestCopydCopiesAndVerifies(t *testing.T) {
	env := testenv.Require(t)
	s := serde(t, env)
	f := newCopyFixture(t, env, s)
	bucket := "copytest-" + uniq(t)
	if _, err := env.S3(t).CreateBucket(ctxFor(t, time.Minute), &s3.CreateBucketInput{Bucket: aws.String(bucket)}); err != nil {
		t.Fatal(err)
	}
	drNN := "hdfs://" + env.Get(t, "HIVEDR_HDFS_DR_NAMENODE")
	sizes := map[string]int{"empty": 0, "one": 1, "blocks": 3<<20 + 17, "large": 20 << 20}
	for name, n := range sizes {
		f.file(name, n)
		f.task(name+"-hdfs", f.srcURI(name), drNN+f.dir+"/"+name, "")
		f.task(name+"-s3", f.srcURI(name), "s3://"+bucket+f.dir+"/"+name, "")
	}
	// Flipped after its checksum was taken (as the metastore logged it).
	f.file("flipped", 2<<20)
	sum := hdfsChecksumHex(t, env, f.dir+"/flipped")
	flipped := append([]byte(nil), f.data["flipped"]...)
	flipped[12345] ^= 0x01
	if err := env.HDFS(t, testenv.Source).Remove(f.dir + "/flipped"); err != nil {
		t.Fatal(err)
	}
	testenv.WriteHDFS(t, env.HDFS(t, testenv.Source), f.dir+"/flipped", flipped)
	f.task("flipped", f.srcURI("flipped"), drNN+f.dir+"/flipped", sum)
	// Outside the roots.
	f.task("src-outside", "hdfs://"+env.Get(t, "HIVEDR_HDFS_SRC_NAMENODE")+"/etc/passwd", drNN+f.dir+"/passwd", "")
	f.task("src-dotdot", f.srcURI("../../etc/x"), drNN+f.dir+"/x", "")
	f.task("dst-outside", f.srcURI("one"), drNN+"/elsewhere"+f.dir+"/one", "")
	f.publish()

	cfg := copydConf{prefix: f.prefix, instance: "t" + uniq(t), bucket: bucket, anyTarget: true}.write(t, env)
	p := startHivedr(t, "copyd", "copyd", "-config", cfg)
	got := f.waitCompletions(p, 3*time.Minute)
	p.stop(t)

	for _, task := range f.tasks {
		cs := got[task.TaskID]
		if len(cs) != 1 {
			t.Errorf("task %s has %d completions", task.TaskID, len(cs))
			continue
		}
		c := cs[0]
		name, kind, _ := strings.Cut(task.TaskID[strings.IndexByte(task.TaskID, '-')+1:], "-")
		switch {
		case strings.HasPrefix(name, "src") || strings.HasPrefix(name, "dst"):
			if c.Status != schemas.StatusFailed || !(strings.Contains(c.Error, task.SourceURI) || strings.Contains(c.Error, task.TargetURI)) {
				t.Errorf("%s: status %s error %q; want FAILED naming the path", task.TaskID, c.Status, c.Error)
			}
		case name == "flipped":
			if c.Status == schemas.StatusCopied || c.Status == schemas.StatusSkippedIdentical {
				t.Errorf("flipped source was copied: %+v", c)
			}
			if _, err := env.HDFS(t, testenv.DR).Stat(f.dir + "/flipped"); err == nil {
				t.Errorf("flipped source reached the DR cluster")
			}
			t.Logf("flipped byte caught: %s: %s%s", c.Status, c.Error, c.Evidence)
		default:
			want := f.data[name]
			if c.Status != schemas.StatusCopied || c.Length != int64(len(want)) || c.CRC32C == nil || *c.CRC32C != crcOf(want) {
				t.Errorf("%s: %+v; want COPIED %d bytes crc %08x", task.TaskID, c, len(want), crcOf(want))
			}
			var gotCRC uint32
			var err error
			if kind == "hdfs" {
				gotCRC, _, err = env.HDFSCRC(t, testenv.DR).FileCRC32C(ctxFor(t, time.Minute), f.dir+"/"+name)
			} else {
				gotCRC, err = s3CRC(t, env, bucket, strings.TrimPrefix(f.dir, "/")+"/"+name)
			}
			if err != nil || gotCRC != crcOf(want) {
				t.Errorf("%s: target CRC32C %08x (%v), want %08x", task.TaskID, gotCRC, err, crcOf(want))
			}
		}
	}
	for _, name := range []string{"passwd", "x"} {
		if _, err := env.HDFS(t, testenv.DR).Stat(f.dir + "/" + name); err == nil {
			t.Errorf("%s was written although its task was refused", name)
		}
	}

	// Delivered again (as after a crash before the offset commit): the
	// files are in place, so nothing is moved. And S3 to S3.
	f2 := *f
	f2.tasks = nil
	for _, task := range f.tasks {
		if strings.Contains(task.TaskID, "-large-") || strings.Contains(task.TaskID, "-blocks-") {
			task.TaskID = "again-" + task.TaskID
			f2.tasks = append(f2.tasks, task)
		}
	}
	s3s3 := schemas.CopyTask{TaskID: "s3-to-s3", SourceURI: "s3://" + bucket + f.dir + "/large",
		TargetURI: "s3://" + bucket + f.dir + "/s3copy/large", Database: "copytest", Table: "large"}
	f2.tasks = append(f2.tasks, s3s3)
	f2.publish()
	p = startHivedr(t, "copyd again", "copyd", "-config", cfg)
	got = f2.waitCompletions(p, 2*time.Minute)
	p.stop(t)
	for _, task := range f2.tasks {
		cs := got[task.TaskID]
		if task.TaskID == s3s3.TaskID {
			if len(cs) != 1 || cs[0].Status != schemas.StatusCopied || cs[0].CRC32C == nil || *cs[0].CRC32C != crcOf(f.data["large"]) {
				t.Errorf("S3 to S3: %+v; want one COPIED with the source's CRC32C", cs)
			}
			if crc, err := s3CRC(t, env, bucket, strings.TrimPrefix(f.dir, "/")+"/s3copy/large"); err != nil || crc != crcOf(f.data["large"]) {
				t.Errorf("S3 to S3 target: crc %08x (%v)", crc, err)
			}
			continue
		}
		if len(cs) != 1 || cs[0].Status != schemas.StatusSkippedIdentical {
			t.Errorf("redelivered %s: %+v; want one SKIPPED_IDENTICAL", task.TaskID, cs)
		}
	}
}

// TestCopydRefusesUnmappedTarget: with the default configuration a copy
// task whose target is not its source's DR path (here another file under
// the target roots, as a forged manifest record would name) completes
// FAILED naming both, and the file there is left as it was; a task with
// the mapped target beside it is copied.
func TestCopydRefusesUnmappedTarget(t *testing.T) {
	env := testenv.Require(t)
	s := serde(t, env)
	f := newCopyFixture(t, env, s)
	drNN := "hdfs://" + env.Get(t, "HIVEDR_HDFS_DR_NAMENODE")
	victim := []byte("a DR file no task of this source may touch")
	testenv.WriteHDFS(t, env.HDFS(t, testenv.DR), f.dir+"/victim", victim)
	data := f.file("one", 4096)
	f.task("mapped", f.srcURI("one"), drNN+f.dir+"/one", "")
	forged := f.task("forged", f.srcURI("one"), drNN+f.dir+"/victim", "")
	f.publish()

	cfg := copydConf{prefix: f.prefix, instance: "m" + uniq(t)}.write(t, env)
	p := startHivedr(t, "copyd", "copyd", "-config", cfg)
	got := f.waitCompletions(p, 3*time.Minute)
	p.stop(t)

	if cs := got[forged.TaskID]; len(cs) != 1 || cs[0].Status != schemas.StatusFailed ||
		!strings.Contains(cs[0].Error, forged.TargetURI) || !strings.Contains(cs[0].Error, "not the DR path of source "+forged.SourceURI) {
		t.Errorf("forged task: completions %+v; want one FAILED naming its target and source", cs)
	}
	if crc, _, err := env.HDFSCRC(t, testenv.DR).FileCRC32C(ctxFor(t, time.Minute), f.dir+"/victim"); err != nil || crc != crcOf(victim) {
		t.Errorf("the forged task's target changed: crc %08x (%v), want %08x", crc, err, crcOf(victim))
	}
	for _, task := range f.tasks {
		if task.TaskID == forged.TaskID {
			continue
		}
		if cs := got[task.TaskID]; len(cs) != 1 || cs[0].Status != schemas.StatusCopied || cs[0].CRC32C == nil || *cs[0].CRC32C != crcOf(data) {
			t.Errorf("mapped task: completions %+v; want one COPIED", cs)
		}
	}
}

func s3CRC(t *testing.T, env *testenv.Env, bucket, key string) (uint32, error) {
	t.Helper()
	out, err := env.S3(t).GetObject(ctxFor(t, time.Minute), &s3.GetObjectInput{Bucket: aws.String(bucket), Key: aws.String(key)})
	if err != nil {
		return 0, err
	}
	defer out.Body.Close()
	h := crc32.New(castagnoli)
	if _, err := io.Copy(h, out.Body); err != nil {
		return 0, err
	}
	return h.Sum32(), nil
}

// TestCopydKill9 kills copy daemons with SIGKILL while they are writing
// files (throttled so that the work outlasts the runs), restarts them,
// and checks that every task ends with exactly one completion, every
// target file is whole and correct, and no staging file is left behind.
// Each run is killed on observed progress (its metrics): once it has
// finished a random number of tasks (none or some), then streamed a random
// number of bytes more with copies in flight; the kill must leave staging
// files and unfinished tasks behind.
func TestCopydKill9(t *testing.T) {
	env := testenv.Require(t)
	s := serde(t, env)
	f := newCopyFixture(t, env, s)
	drNN := "hdfs://" + env.Get(t, "HIVEDR_HDFS_DR_NAMENODE")
	for i := 0; i < 8; i++ {
		name := fmt.Sprintf("f%d", i)
		f.file(name, 12<<20)
		f.task(name, f.srcURI(name), drNN+f.dir+"/"+name, "")
	}
	f.publish()
	// 96 MiB at 12 MiB/s with 3 workers: the first copies of a run finish
	// together, after 36 MiB. A run that waits for one finishes three and
	// only the first two runs may, so the runs below finish six at most.
	addr := "127.0.0.1:" + itoa(int64(freePort(t)))
	metrics := "http://" + addr + "/metrics"
	cfg := copydConf{prefix: f.prefix, instance: "k" + uniq(t), workers: 3, bytesPerSecond: 12 << 20, metricsAddr: addr}.write(t, env)
	rng := testRand(t)
	for i := 0; i < 3; i++ {
		p := startHivedr(t, fmt.Sprintf("copyd run %d", i), "copyd", "-config", cfg)
		finish := 0
		if i < 2 {
			finish = rng.IntN(2)
		}
		more := 1<<20 + rng.IntN(8<<20)
		var from, inFlight float64
		wait := func(what string, cond func(m map[string]float64) bool) {
			t.Helper()
			poll(t, 3*time.Minute, 5*time.Millisecond, fmt.Sprintf("copyd run %d to %s", i, what), func() bool {
				if p.exited() {
					t.Fatalf("copyd run %d exited on its own:\n%s", i, tail(p.out.String(), 40))
				}
				m, ok := scrape(metrics)
				return ok && cond(m)
			})
		}
		wait(fmt.Sprintf("finish %d tasks", finish), func(m map[string]float64) bool {
			from = m["hivedr_copyd_transferred_bytes_total"]
			return metricSum(m, "hivedr_copyd_files_total") >= float64(finish)
		})
		wait(fmt.Sprintf("stream %d bytes more with copies in flight", more), func(m map[string]float64) bool {
			inFlight = m["hivedr_copyd_tasks_in_flight"]
			return m["hivedr_copyd_transferred_bytes_total"] >= from+float64(more) && inFlight >= 1
		})
		p.kill9()
		done, staging := len(f.completions()), stagingNames(t, env, f.dir)
		if done >= len(f.tasks) || len(staging) == 0 {
			t.Fatalf("copyd run %d was killed streaming with %.0f copies in flight, yet %d of %d tasks have completions and the DR holds staging files %v: want unfinished tasks and staging files, the kill mid-copy",
				i, inFlight, done, len(f.tasks), staging)
		}
		t.Logf("copyd run %d: killed %d bytes after finishing %d tasks, %.0f copies in flight; %d of %d tasks completed, staging files %v",
			i, more, finish, inFlight, done, len(f.tasks), staging)
	}
	before := len(f.completions())
	if before >= len(f.tasks) {
		t.Fatalf("all %d tasks completed before the last kill: the kills did not land mid-copy", before)
	}
	t.Logf("%d of %d tasks completed before the last restart", before, len(f.tasks))
	p := startHivedr(t, "copyd after kills", "copyd", "-config", cfg)
	got := f.waitCompletions(p, 3*time.Minute)
	p.stop(t)
	for _, task := range f.tasks {
		cs := got[task.TaskID]
		if len(cs) != 1 {
			t.Errorf("task %s has %d completions: %+v", task.TaskID, len(cs), cs)
			continue
		}
		if st := cs[0].Status; st != schemas.StatusCopied && st != schemas.StatusSkippedIdentical {
			t.Errorf("task %s: %s %s", task.TaskID, st, cs[0].Error)
		}
		want := f.data[task.Table]
		crc, n, err := env.HDFSCRC(t, testenv.DR).FileCRC32C(ctxFor(t, time.Minute), f.dir+"/"+task.Table)
		if err != nil || n != int64(len(want)) || crc != crcOf(want) {
			t.Errorf("%s on DR: %d bytes crc %08x (%v); want %d bytes crc %08x", task.Table, n, crc, err, len(want), crcOf(want))
		}
	}
	entries, err := env.HDFS(t, testenv.DR).ReadDir(f.dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if _, ok := f.data[e.Name()]; !ok {
			t.Errorf("left behind on DR: %s/%s", f.dir, e.Name())
		}
	}
}

// TestCopydThrottle copies one 24 MiB file with a limit of 8 MiB/s; the
// copy must take 3 s, within 10%.
func TestCopydThrottle(t *testing.T) {
	env := testenv.Require(t)
	s := serde(t, env)
	f := newCopyFixture(t, env, s)
	f.file("big", 24<<20)
	f.task("big", f.srcURI("big"), "hdfs://"+env.Get(t, "HIVEDR_HDFS_DR_NAMENODE")+f.dir+"/big", "")
	f.publish()
	const limit = 8 << 20
	cfg := copydConf{prefix: f.prefix, instance: "r" + uniq(t), workers: 1, bytesPerSecond: limit}.write(t, env)
	p := startHivedr(t, "copyd", "copyd", "-config", cfg)
	got := f.waitCompletions(p, 2*time.Minute)
	p.stop(t)
	c := got[f.tasks[0].TaskID][0]
	if c.Status != schemas.StatusCopied {
		t.Fatalf("copy: %+v", c)
	}
	secs := c.Finished.Sub(c.Started).Seconds()
	rate := float64(24<<20) / secs
	t.Logf("24 MiB in %.2f s: %.2f MiB/s (limit 8)", secs, rate/(1<<20))
	if rate > limit*1.10 || rate < limit*0.90 {
		t.Fatalf("copy rate %.2f MiB/s is not within 10%% of the 8 MiB/s limit", rate/(1<<20))
	}
}

// localTrees is a copy fixture over two local directory trees, src and
// dst (the roots), beside a directory outside both.
type localTrees struct {
	*copyFixture
	src, dst, outside string
}

func newLocalTrees(t *testing.T) *localTrees {
	env := testenv.Require(t)
	base := t.TempDir()
	l := &localTrees{copyFixture: newCopyFixture(t, env, serde(t, env)),
		src: filepath.Join(base, "src"), dst: filepath.Join(base, "dst"), outside: filepath.Join(base, "outside")}
	for _, d := range []string{l.src, l.dst, l.outside} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return l
}

func (l *localTrees) write(p string, b []byte) {
	l.t.Helper()
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		l.t.Fatal(err)
	}
	if err := os.WriteFile(p, b, 0o644); err != nil {
		l.t.Fatal(err)
	}
}

func (l *localTrees) link(target, name string) {
	l.t.Helper()
	if err := os.Symlink(target, name); err != nil {
		l.t.Fatal(err)
	}
}

func fileURI(p string) string { return "file://" + p }

// run publishes the tasks, runs `hivedr copyd` until each has a
// completion, and returns them.
func (l *localTrees) run() map[string][]*schemas.CopyCompletion {
	t, env := l.t, l.env
	l.publish()
	cfg := writeFile(t, "copyd.yaml", strings.NewReplacer(
		"$BROKERS", strings.Join(env.KafkaBrokers(t), ","), "$PREFIX", l.prefix,
		"$REGISTRY", env.Get(t, "HIVEDR_SCHEMA_REGISTRY"), "$INSTANCE", "l"+uniq(t),
		"$SRC", fileURI(l.src), "$DST", fileURI(l.dst),
	).Replace(`
kafka:
  brokers: [$BROKERS]
  topic_prefix: $PREFIX
  replication_factor: 1
  manifest_partitions: 3
schema_registry: $REGISTRY
copyd:
  group: $PREFIX-copyd
  instance: $INSTANCE
  workers: 4
  retries: 1
  metrics_addr: ""
  target_roots: ["$DST"]
filesystems:
  local: true
replication:
  source_roots: ["$SRC"]
  path_mappings:
    - {source: "$SRC/", target: "$DST/"}
`))
	p := startHivedr(t, "copyd", "copyd", "-config", cfg, "-state-dir", t.TempDir())
	got := l.waitCompletions(p, 2*time.Minute)
	p.stop(t)
	for _, task := range l.tasks {
		if n := len(got[task.TaskID]); n != 1 {
			t.Errorf("task %s has %d completions", task.TaskID, n)
		}
	}
	return got
}

// checkRefused checks that each task of refused (task ID -> path) completed
// FAILED with an error naming the path.
func (l *localTrees) checkRefused(got map[string][]*schemas.CopyCompletion, refused map[string]string) {
	l.t.Helper()
	for id, path := range refused {
		if len(got[id]) == 0 {
			continue
		}
		c := got[id][0]
		if c.Status != schemas.StatusFailed || !strings.Contains(c.Error, path) {
			l.t.Errorf("%s: %s %q; want FAILED naming %s", id, c.Status, c.Error, path)
		} else {
			l.t.Logf("%s refused: %s", id, c.Error)
		}
	}
}

// checkOutside checks that the directory outside the roots holds only
// want, unchanged, and that no copy of secret reached the target tree
// beyond the files the test put there (keep).
func (l *localTrees) checkOutside(want map[string][]byte, keep ...string) {
	l.t.Helper()
	entries, _ := os.ReadDir(l.outside)
	for _, e := range entries {
		if _, ok := want[e.Name()]; !ok {
			l.t.Errorf("written outside the roots: %s", filepath.Join(l.outside, e.Name()))
		}
	}
	for name, b := range want {
		if got, err := os.ReadFile(filepath.Join(l.outside, name)); err != nil || !bytes.Equal(got, b) {
			l.t.Errorf("%s outside the roots was changed (%v)", name, err)
		}
	}
	// The target tree holds the copies and the test's own links, nothing
	// else: no staging file, nothing read from outside the source root.
	filepath.WalkDir(l.dst, func(p string, d iofs.DirEntry, err error) error {
		if err != nil || p == l.dst {
			return nil
		}
		rel, _ := filepath.Rel(l.dst, p)
		rel = filepath.ToSlash(rel)
		if d.IsDir() || slices.Contains(keep, rel) {
			return nil
		}
		if _, ok := l.data[rel]; !ok {
			l.t.Errorf("in the target tree: %s", rel)
		}
		return nil
	})
}

// TestCopydLocalToLocal runs `hivedr copyd` between two local directory
// trees (file:// roots): files of 0 bytes, 1 byte and several MiB, one in
// a directory the target does not have yet, arrive whole with their
// CRC32C; a source that is a symbolic link out of the source root, and a
// target that is one out of the target root, are refused with a FAILED
// completion naming the path, and nothing outside the roots is read into
// the target or written.
func TestCopydLocalToLocal(t *testing.T) {
	l := newLocalTrees(t)
	sizes := map[string]int{"empty": 0, "one": 1, "multi": 5<<20 + 3, "deep/er/nested": 2 << 20}
	for name, n := range sizes {
		b := randomBytes(t, n)
		l.write(filepath.Join(l.src, name), b)
		l.data[name] = b
		l.task(name, fileURI(filepath.Join(l.src, name)), fileURI(filepath.Join(l.dst, name)), "")
	}
	outside := map[string][]byte{"secret": []byte("outside the source root"), "victim": []byte("outside the target root")}
	for name, b := range outside {
		l.write(filepath.Join(l.outside, name), b)
	}
	l.link(filepath.Join(l.outside, "secret"), filepath.Join(l.src, "escape"))
	l.link(filepath.Join(l.outside, "victim"), filepath.Join(l.dst, "trap"))
	srcLink := l.task("src-link", fileURI(filepath.Join(l.src, "escape")), fileURI(filepath.Join(l.dst, "escape")), "")
	dstLink := l.task("dst-link", fileURI(filepath.Join(l.src, "one")), fileURI(filepath.Join(l.dst, "trap")), "")

	got := l.run()
	l.checkRefused(got, map[string]string{
		srcLink.TaskID: filepath.Join(l.src, "escape"),
		dstLink.TaskID: filepath.Join(l.dst, "trap"),
	})
	for name := range sizes {
		id := l.tasks[slices.IndexFunc(l.tasks, func(t schemas.CopyTask) bool { return t.Table == name })].TaskID
		want := l.data[name]
		if cs := got[id]; len(cs) == 1 {
			c := cs[0]
			if c.Status != schemas.StatusCopied || c.Length != int64(len(want)) || c.CRC32C == nil || *c.CRC32C != crcOf(want) {
				t.Errorf("%s: %+v; want COPIED %d bytes crc %08x", id, c, len(want), crcOf(want))
			}
		}
		if b, err := os.ReadFile(filepath.Join(l.dst, name)); err != nil || !bytes.Equal(b, want) {
			t.Errorf("%s: target holds %d bytes (%v), want the source's %d", name, len(b), err, len(want))
		}
	}
	if fi, err := os.Lstat(filepath.Join(l.dst, "trap")); err != nil || fi.Mode()&os.ModeSymlink == 0 {
		t.Errorf("the target that is a link was replaced or removed (%v)", err)
	}
	l.checkOutside(outside, "trap")
}

// TestCopydLocalLinkedDirs: a directory on the way to a source or a
// target that is a symbolic link out of its root must not let copyd read
// or write outside the roots (docs/design.md, guarantee 7): the engine's
// confinement is lexical, and the local FS refuses a link among a
// location's directories, opening each in its parent as an os.Root
// (internal/fs/local.go, TestProdLocalRoot for a link swapped in while
// it works).
func TestCopydLocalLinkedDirs(t *testing.T) {
	l := newLocalTrees(t)
	l.write(filepath.Join(l.src, "one"), []byte("x"))
	l.data["one"] = []byte("x")
	outside := map[string][]byte{"secret": []byte("outside the source root")}
	l.write(filepath.Join(l.outside, "secret"), outside["secret"])
	l.link(l.outside, filepath.Join(l.src, "escdir"))
	l.link(l.outside, filepath.Join(l.dst, "trapdir"))
	srcDir := l.task("src-dirlink", fileURI(filepath.Join(l.src, "escdir", "secret")), fileURI(filepath.Join(l.dst, "secret")), "")
	dstDir := l.task("dst-dirlink", fileURI(filepath.Join(l.src, "one")), fileURI(filepath.Join(l.dst, "trapdir", "planted")), "")

	got := l.run()
	l.checkRefused(got, map[string]string{
		srcDir.TaskID: filepath.Join(l.src, "escdir"),
		dstDir.TaskID: filepath.Join(l.dst, "trapdir"),
	})
	l.checkOutside(outside, "trapdir")
}
