//go:build soak

package e2e

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/colinmarc/hdfs/v2"

	wl "github.com/hivedr/hivedr/e2e/workload"
	"github.com/hivedr/hivedr/internal/drparam"
	"github.com/hivedr/hivedr/internal/fs"
	"github.com/hivedr/hivedr/internal/hms"
	"github.com/hivedr/hivedr/internal/kafka"
	"github.com/hivedr/hivedr/internal/testenv"
	"github.com/hivedr/hivedr/schemas"
)

// The soak's knobs (docs/development.md "The soak").
const (
	soakDurationEnv = "HIVEDR_SOAK_DURATION"
	soakDefault     = 15 * time.Minute
	// soakDatabases is how many databases the workload changes at once.
	soakDatabases = 4
	// soakBacklog is how far (in source events) the workload may run
	// ahead of what the applier has applied; it waits beyond that, so a
	// slow pipeline is not buried under a backlog it cannot clear.
	soakBacklog = 400
	// soakConverge bounds the wait for DR to converge after the chaos.
	soakConverge = 10 * time.Minute
	// soakStall is how long the soak waits for any progress before it
	// calls the pipeline stuck.
	soakStall = 5 * time.Minute
	// soakOpsGrace bounds how long the soak waits after the chaos for the
	// operator's action under way.
	soakOpsGrace = 6 * time.Minute
	// restartEvery: one fault in this many restarts a service instead of
	// killing a role.
	restartEvery = 9
)

// soakServices are the stack daemons the soak restarts (stack.sh restart):
// the broker, the registry, both metastores and a DataNode of each HDFS
// cluster. Those the workload writes to (the source metastore and
// DataNode) are restarted between workload steps.
var soakServices = []struct {
	name   string
	source bool
}{
	{"kafka", false}, {"registry", false}, {"hms-src", true}, {"hms-dr", false}, {"dn-src", true}, {"dn-dr", false},
}

// soakRole is one hivedr daemon of the soak's pipeline, killed and
// restarted by the chaos driver.
type soakRole struct {
	name     string
	metrics  string // its /metrics URL
	progress func(m map[string]float64) (float64, bool)
	start    func() *proc

	mu    sync.Mutex
	p     *proc
	kills int
	exits int  // exits the driver did not cause
	held  bool // stopped by the operator: neither killed nor restarted
	log   *os.File
}

// hold stops the role for the operator: its process is killed and
// neither the chaos driver nor the watch starts it again until release.
func (r *soakRole) hold(why string) {
	r.mu.Lock()
	r.held = true
	p := r.p
	r.mu.Unlock()
	p.kill9()
	r.keep(p, why)
}

// release starts a held role again.
func (r *soakRole) release() {
	r.restart()
	r.mu.Lock()
	r.held = false
	r.mu.Unlock()
}

func (r *soakRole) isHeld() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.held
}

func (r *soakRole) proc() *proc {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.p
}

// keep appends a finished process's whole output to the role's log file.
func (r *soakRole) keep(p *proc, why string) {
	fmt.Fprintf(r.log, "\n==== %s %s (%s)\n%s", time.Now().Format(time.RFC3339), r.name, why, p.out.String())
}

// restart starts the role again after its process ended.
func (r *soakRole) restart() {
	p := r.start()
	r.mu.Lock()
	r.p = p
	r.mu.Unlock()
}

// TestSoak is the chaos soak (`make soak`, build tag soak; README "The
// soak"). A mixed workload with files changes soakDatabases databases on
// the source for HIVEDR_SOAK_DURATION (default 15m), while a chaos driver,
// each time the pipeline has made a random amount of observed progress
// (events published, files copied, events applied), kills a random role
// with SIGKILL (the tailer, one of two copy daemons, the applier) and
// restarts it at once, and every restartEvery-th time restarts a service
// of the stack instead (SIGKILL or SIGTERM, at random). Random choices
// come from the logged seed (HIVEDR_TEST_SEED replays them; the timing of
// the processes does not replay). The workload also writes transactional
// tables (soakWork), an operator bootstraps, replays, fails over and
// fails back databases meanwhile (soakOps), and a checker samples DR
// against the workload's model of the source (soakChecker): every state
// DR shows at repl.last.id N must be the source's after N. At the end the DR metastore and files
// must equal the source's, every event must be once on its topic, every
// copy task must have one completion, no staging file may be left on DR,
// no database halted, and no daemon may have exited on its own. It prints
// a summary.
//
// It restarts the stack's services, so it must run on a stack of its own:
// `make soak` starts one in .stack-soak with port offset 1000, and the
// test refuses a stack whose env file names no port offset.
func TestSoak(t *testing.T) {
	dur := soakDefault
	if v := os.Getenv(soakDurationEnv); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 {
			t.Fatalf("%s=%q: want a positive duration such as 15m", soakDurationEnv, v)
		}
		dur = d
	}
	env := testenv.Require(t)
	stackDir := env.Get(t, "HIVEDR_STACK_DIR")
	offset, _ := env.Lookup("HIVEDR_STACK_PORT_OFFSET")
	if offset == "" || offset == "0" {
		t.Fatalf("the stack in %s has port offset %q: the soak restarts services and needs a stack of its own (make soak starts one)", stackDir, offset)
	}
	if os.Getenv(seedEnv) == "" {
		t.Setenv(seedEnv, fmt.Sprint(uint64(time.Now().UnixNano())))
	}
	seed := os.Getenv(seedEnv)
	rng := testRand(t)
	began := time.Now()
	ctx := ctxFor(t, dur+40*time.Minute)
	u := uniq(t)
	var dbs []string
	for i := range soakDatabases {
		dbs = append(dbs, fmt.Sprintf("soak_%c_%s", 'a'+i, u))
	}
	src := env.HMS(t, testenv.Source)
	srcFS, drFS := pipelineFS(t, env)
	p := newPipeline(t, env, dbs, currentEventID(t, ctx, src))
	s := serde(t, env)
	topics := kafka.Topics{Prefix: p.prefix}
	logDir := filepath.Join(stackDir, "logs", "soak-"+u)
	if err := os.MkdirAll(logDir, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Logf("soak: %s over databases %v, pipeline prefix %s; daemon logs in %s", dur, dbs, p.prefix, logDir)

	// Four roles: the tailer, two copy daemons (instances of one group)
	// and the applier, each serving /metrics.
	conf, err := os.ReadFile(p.conf)
	if err != nil {
		t.Fatal(err)
	}
	// copyd.retries as a deployment with restarting DataNodes needs: the
	// backoff (0.2s doubling) then outlasts a DataNode restart of some 30s.
	inst, retries := "\n  instance: "+p.prefix+"\n", "\n  retries: 2\n"
	if strings.Count(string(conf), inst) != 1 || strings.Count(string(conf), retries) != 1 {
		t.Fatalf("the pipeline's YAML changed shape; cannot set copyd.instance and copyd.retries:\n%s", conf)
	}
	soakConf := strings.Replace(string(conf), retries, "\n  retries: 8\n", 1)
	conf1 := writeFile(t, "pipeline-soak.yaml", soakConf)
	conf2 := writeFile(t, "pipeline-copyd2.yaml", strings.Replace(soakConf, inst, "\n  instance: "+p.prefix+"-2\n", 1))
	addr := func() string { return fmt.Sprintf("127.0.0.1:%d", freePort(t)) }
	tailAddr, c1Addr, c2Addr := addr(), addr(), addr()
	// A gauge counts only once its process reports it (a process that
	// has not reported yet is no progress, nor a step back).
	maxSeries := func(prefix string) func(m map[string]float64) (float64, bool) {
		return func(m map[string]float64) (float64, bool) {
			best, found := 0.0, false
			for k, v := range m {
				if k == prefix || strings.HasPrefix(k, prefix+"{") {
					best, found = max(best, v), true
				}
			}
			return best, found
		}
	}
	copydSum := func(m map[string]float64) (float64, bool) { return metricSum(m, "hivedr_copyd_files_total"), true }
	roles := []*soakRole{
		{name: "tailer", metrics: tailAddr, progress: maxSeries("hivedr_tailer_last_published_event_id"), start: func() *proc {
			return startSoakProc(t, "tail", "tail", "-config", conf1, "-metrics-addr", tailAddr)
		}},
		{name: "copyd-1", metrics: c1Addr, progress: copydSum, start: func() *proc {
			return startSoakProc(t, "copyd-1", "copyd", "-config", conf1, "-state-dir", filepath.Join(p.state, "copyd-1"), "-metrics-addr", c1Addr)
		}},
		{name: "copyd-2", metrics: c2Addr, progress: copydSum, start: func() *proc {
			return startSoakProc(t, "copyd-2", "copyd", "-config", conf2, "-state-dir", filepath.Join(p.state, "copyd-2"), "-metrics-addr", c2Addr)
		}},
		{name: "applier", metrics: p.metrics, progress: maxSeries("hivedr_applier_last_event_id"), start: func() *proc {
			return startSoakProc(t, "apply", "apply", "-config", conf1, "-state-dir", filepath.Join(p.state, "applier"))
		}},
	}
	for _, r := range roles {
		f, err := os.Create(filepath.Join(logDir, r.name+".log"))
		if err != nil {
			t.Fatal(err)
		}
		r.log = f
		t.Cleanup(func() {
			if pr := r.proc(); pr != nil {
				pr.kill9()
				r.keep(pr, "soak ended")
			}
			f.Close()
		})
		r.restart()
	}
	applier := roles[3]

	// applied is the highest event ID the applier reported applied; the
	// workload keeps within soakBacklog of it.
	var applied atomic.Int64
	applied.Store(p.start)
	progress := &soakProgress{roles: roles, last: map[*soakRole]float64{}, applier: applier, applied: &applied}
	// watch restarts a role whose process exited without being killed,
	// counting it: a daemon must ride out every fault the soak makes.
	watch := func() {
		for _, r := range roles {
			pr := r.proc()
			if r.isHeld() || !pr.exited() {
				continue
			}
			r.mu.Lock()
			r.exits++
			r.mu.Unlock()
			r.keep(pr, "exited by itself")
			t.Logf("soak: %s exited by itself (%v); restarting it. Last lines:\n%s", r.name, pr.err, tail(pr.out.String(), 15))
			r.restart()
		}
	}

	// The workload: random steps over the databases, with data files,
	// until stopWork; srcLock keeps source restarts between its steps.
	var srcLock sync.RWMutex
	var stopWork atomic.Bool
	w := wl.NewSource(src, srcFS, env.Get(t, "HIVEDR_HMS_SRC_EXTERNAL"))
	work := newSoakWork(dbs, rand.New(rand.NewPCG(rng.Uint64(), rng.Uint64())), hdfsPath(env.Get(t, "HIVEDR_HMS_SRC_CMROOT")), env.HDFS(t, testenv.Source))
	// redialSource gives the workload a new source metastore connection
	// (srcLock held for writing); the metastore may be starting still.
	redialSource := func() {
		c, err := hms.Dial(ctx, env.Get(t, "HIVEDR_HMS_SRC"), hms.Options{})
		if err != nil {
			t.Logf("soak: reconnect to the source metastore: %v", err)
			return
		}
		w.HMS.Close()
		w.HMS = c
		t.Cleanup(func() { c.Close() })
	}
	workDone := make(chan error, 1)
	var steps atomic.Int64
	model := newSoakModel()
	// record runs one workload step on db (srcLock held for reading) and
	// records it in the model: the events it made and the state of the
	// tables it touched afterwards.
	record := func(db string, fn func() (soakStepResult, error)) error {
		head, err := w.HMS.GetCurrentNotificationEventId(ctx)
		if err != nil {
			return fmt.Errorf("the source log's head before a step: %w", err)
		}
		st := model.begin(db, "", head.EventId)
		res, err := fn()
		if err != nil {
			return fmt.Errorf("workload step %d on %s (%s): %w", st.n, db, res.what, err)
		}
		after, err := w.HMS.GetCurrentNotificationEventId(ctx)
		if err != nil {
			return fmt.Errorf("the source log's head after step %d: %w", st.n, err)
		}
		last, err := stepLast(ctx, w.HMS, db, head.EventId, after.EventId)
		if err != nil {
			return fmt.Errorf("the events of step %d: %w", st.n, err)
		}
		touched := append([]string{}, res.touched...)
		state, err := captureSoakTables(ctx, w.HMS, w.FS, db, touched)
		if err != nil {
			return fmt.Errorf("the source state after step %d: %w", st.n, err)
		}
		model.finish(st, res, last, after.EventId, state, touched)
		steps.Add(1)
		return nil
	}
	go func() {
		workDone <- func() error {
			for _, db := range dbs {
				err := record(db, func() (soakStepResult, error) { return did("create database"), w.CreateDatabase(ctx, db) })
				if err != nil {
					return err
				}
			}
			for !stopWork.Load() {
				for !stopWork.Load() {
					srcLock.RLock()
					head, err := w.HMS.GetCurrentNotificationEventId(ctx)
					srcLock.RUnlock()
					if err == nil && head.EventId-applied.Load() <= soakBacklog {
						break
					}
					if err != nil {
						// A connection that failed mid-call (the
						// metastore restarting) is not used again.
						srcLock.Lock()
						redialSource()
						srcLock.Unlock()
					}
					// Paced: the writer polls the backlog, it waits for nothing.
					select {
					case <-ctx.Done():
						return ctx.Err()
					case <-time.After(200 * time.Millisecond):
					}
				}
				srcLock.RLock()
				work.mu.Lock()
				var err error
				if db := work.pick(); db != "" {
					err = record(db, func() (soakStepResult, error) { return work.step(ctx, w, db) })
				}
				work.mu.Unlock()
				srcLock.RUnlock()
				if err != nil {
					return err
				}
			}
			return nil
		}()
	}()

	// The checker samples DR while the chaos runs and DR converges;
	// the operator acts on three databases.
	drAddr := env.Get(t, "HIVEDR_HMS_DR")
	_, checkFS := pipelineFS(t, env)
	checker := &soakChecker{dr: env.HMS(t, testenv.DR), drAddr: drAddr, drFS: checkFS, model: model, rng: rand.New(rand.NewPCG(rng.Uint64(), rng.Uint64())), skip: map[string]bool{}, seen: map[string]int{}}
	checkCtx, stopCheck := context.WithCancel(ctx)
	checkDone := make(chan struct{})
	var checkErrs atomic.Int64
	go func() {
		defer close(checkDone)
		checker.run(checkCtx, dbs, func(error) { checkErrs.Add(1) })
	}()
	rev := reverseOf(t, p, p.start, dbs[3])
	revLog, err := os.Create(filepath.Join(logDir, "reverse.log"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { revLog.Close() })
	ops := &soakOps{bin: hivedrBin(t), conf: conf1, dr: env.HMS(t, testenv.DR), drAddr: drAddr, model: model, work: work, checker: checker, logf: t.Logf,
		boot: dbs[0], replay: dbs[1], fail: dbs[3], dbs: dbs, rev: rev,
		tailer: roles[0], tailArgs: []string{"tail", "-config", conf1, "-metrics-addr", tailAddr},
		srcAddr: env.Get(t, "HIVEDR_HMS_SRC"), srcLogDSN: env.Get(t, "HIVEDR_POSTGRES_SRC_DSN"),
		pauseSource: func() func() { srcLock.Lock(); return srcLock.Unlock }, revStart: fmt.Sprintf("start_event_id: \"%d\"", p.start),
		revLog: revLog, revMetrics: fmt.Sprintf("127.0.0.1:%d", freePort(t))}
	t.Cleanup(ops.stop)
	opsDone := make(chan struct{})

	// The chaos driver.
	services := append(soakServices[:0:0], soakServices...)
	rng.Shuffle(len(services), func(i, j int) { services[i], services[j] = services[j], services[i] })
	restarts := map[string]int{}
	restartService := func(i int) {
		svc := services[i%len(services)]
		args := []string{filepath.Join("stack", "stack.sh"), "restart"}
		how := "SIGTERM"
		if rng.IntN(2) == 0 {
			args = append(args, "-kill")
			how = "SIGKILL"
		}
		args = append(args, svc.name)
		if svc.source {
			srcLock.Lock()
			defer srcLock.Unlock()
		}
		t0 := time.Now()
		cmd := exec.CommandContext(ctx, "bash", args...)
		cmd.Env = append(os.Environ(), "HIVEDR_STACK_DIR="+stackDir, "HIVEDR_STACK_PORT_OFFSET="+offset)
		out, err := cmd.CombinedOutput()
		if err != nil {
			// The stack's own trouble, not hivedr's: bring it up again,
			// and fail only if that does not work.
			t.Logf("soak: stack.sh restart %s: %v\n%s\nsoak: bringing the stack up again", svc.name, err, out)
			up := exec.CommandContext(ctx, "bash", filepath.Join("stack", "stack.sh"), "up")
			up.Env = cmd.Env
			if out, err := up.CombinedOutput(); err != nil {
				t.Fatalf("soak: stack.sh up after a failed restart of %s: %v\n%s", svc.name, err, out)
			}
		}
		if svc.name == "hms-src" {
			redialSource() // the workload's own connection died with the metastore
		}
		restarts[svc.name]++
		t.Logf("soak: restarted %s (%s) in %s", svc.name, how, time.Since(t0).Round(100*time.Millisecond))
	}
	end := began.Add(dur)
	opsCtx, stopOps := context.WithCancel(ctx)
	defer stopOps()
	go func() {
		defer close(opsDone)
		ops.run(opsCtx, began, end)
	}()
	faults, restartsDone := 0, 0
	for time.Now().Before(end) {
		select {
		case err := <-workDone:
			t.Fatalf("soak: the workload stopped: %v", err)
		default:
		}
		service := faults%restartEvery == restartEvery-1
		r := roles[rng.IntN(len(roles))]
		// The fault fires once the pipeline has made a random amount of
		// progress, whichever role made it: events published, files
		// copied, events applied (a victim's own progress may wait on
		// another role it needs).
		need := float64(1 + rng.IntN(8))
		start := progress.total()
		poll(t, soakStall, 100*time.Millisecond, fmt.Sprintf("the pipeline to make progress (fault %d)", faults+1), func() bool {
			watch()
			progress.observe()
			return progress.total()-start >= need
		})
		faults++
		if service {
			restartService(restartsDone)
			restartsDone++
			continue
		}
		if r.isHeld() {
			continue // the operator holds it stopped
		}
		pr := r.proc()
		pr.kill9()
		r.mu.Lock()
		r.kills++
		r.mu.Unlock()
		r.keep(pr, "killed")
		r.restart()
	}
	stopWork.Store(true)
	if err := <-workDone; err != nil {
		t.Fatalf("soak: the workload stopped: %v", err)
	}
	// The operator's last action may still run (a failover waits for the
	// pipeline): it gets soakOpsGrace, the roles watched meanwhile.
	for grace, waiting := time.Now().Add(soakOpsGrace), true; waiting; {
		select {
		case <-opsDone:
			waiting = false
		case <-time.After(time.Second): // polls the roles
			watch()
			if time.Now().After(grace) {
				stopOps() // its command is killed and counted as failed
			}
		}
	}
	opsDoneList, opsProblems, failedOver, failedBack := ops.state()
	fwd := dbs
	if failedOver {
		// The forward pipeline no longer replicates it: the failback
		// marks the old primary, which the forward applier refuses.
		fwd = slices.DeleteFunc(slices.Clone(dbs), func(db string) bool { return db == ops.fail })
		p.dbs = fwd
	}
	chaosEnd := time.Now()
	t.Logf("soak: chaos over after %s: %d faults, %d workload steps; waiting for DR to converge", chaosEnd.Sub(began).Round(time.Second), faults, steps.Load())

	// Convergence, with every role watched (and restarted if it exits).
	srcCheck, drCheck := env.HMS(t, testenv.Source), env.HMS(t, testenv.DR)
	var (
		diffs     []string
		problems  []string
		converged time.Duration
	)
	for deadline := time.Now().Add(soakConverge); ; {
		watch()
		diffs, err = soakDiffs(ctx, srcCheck, drCheck, srcFS, drFS, fwd, p.mapLocation)
		if failedBack && err == nil && len(diffs) == 0 {
			// The failed-back database: DR is its source now.
			diffs, err = soakDiffs(ctx, drCheck, srcCheck, drFS, srcFS, []string{ops.fail}, rev.mapLocation)
		}
		if err == nil && len(diffs) == 0 && p.caughtUp(ctx) && (!failedBack || rev.caughtUp(ctx)) {
			converged = time.Since(chaosEnd)
			break
		}
		if err != nil {
			t.Logf("compare: %v", err)
		}
		if time.Now().After(deadline) {
			problems = append(problems, fmt.Sprintf("DR did not converge in %s: %d differences", soakConverge, len(diffs)))
			for i, d := range diffs {
				if i == 20 {
					problems = append(problems, fmt.Sprintf("... and %d more differences", len(diffs)-i))
					break
				}
				problems = append(problems, "difference: "+d)
			}
			converged = -1
			break
		}
		select {
		case <-ctx.Done():
			t.Fatal(ctx.Err())
		case <-time.After(time.Second): // polls for convergence
		}
	}

	// Every event once per topic, one completion per copy task.
	nEvents := 0
	for _, db := range dbs {
		seen := map[int64]int{}
		for _, ev := range events(readTopic(t, env, s, topics.Events(db))) {
			// A bootstrap's records share its cut's ID.
			if !strings.HasPrefix(string(ev.EventType), "HIVEDR_SNAPSHOT_") {
				seen[ev.EventID]++
			}
		}
		for id, n := range seen {
			if n != 1 {
				problems = append(problems, fmt.Sprintf("event %d is %d times on the topic of %s", id, n, db))
			}
		}
		nEvents += len(seen)
	}
	tasks := map[string]bool{}
	for _, d := range readTopic(t, env, s, topics.Manifests()) {
		if task, ok := d.value.(*schemas.CopyTask); ok {
			tasks[task.TaskID] = true
		}
	}
	completions := map[string]int{}
	var copied, failed int
	for _, d := range readTopic(t, env, s, topics.Completions()) {
		if c, ok := d.value.(*schemas.CopyCompletion); ok {
			completions[c.TaskID]++
			switch c.Status {
			case schemas.StatusFailed:
				failed++
			case schemas.StatusCopied:
				copied++
			}
		}
	}
	for id := range tasks {
		if n := completions[id]; n != 1 {
			problems = append(problems, fmt.Sprintf("copy task %s has %d completions", id, n))
		}
	}
	for id := range completions {
		if !tasks[id] {
			problems = append(problems, fmt.Sprintf("completion of task %s, which is on no manifest", id))
		}
	}
	// No staging file left on DR, no database halted.
	drHDFS := env.HDFS(t, testenv.DR)
	for _, db := range dbs {
		d, err := drCheck.GetDatabase(ctx, db)
		if err != nil {
			problems = append(problems, fmt.Sprintf("DR database %s: %v", db, err))
			continue
		}
		if h := d.Parameters[drparam.Halted]; h != "" && !(failedOver && db == ops.fail && drparam.HaltReason(h) == "failed_over") {
			problems = append(problems, fmt.Sprintf("DR database %s halted: %s", db, h))
		}
		for _, f := range stagingLeftovers(t, drHDFS, d.LocationUri) {
			problems = append(problems, "staging file left on DR: "+f)
		}
	}
	stopCheck()
	<-checkDone
	sampled, judged, early, late, ahead, wrongSamples, wrong := checker.counts()
	for _, w := range wrong {
		problems = append(problems, w)
	}
	problems = append(problems, opsProblems...)
	for _, e := range ops.reverseExits() {
		problems = append(problems, "the reverse pipeline's "+e)
	}
	var exits []string
	for _, r := range roles {
		if r.exits > 0 {
			exits = append(exits, fmt.Sprintf("%s %d", r.name, r.exits))
			problems = append(problems, fmt.Sprintf("%s exited %d times by itself (its log: %s)", r.name, r.exits, r.log.Name()))
		}
	}

	// The summary.
	var b strings.Builder
	outcome := "PASS"
	if len(problems) > 0 {
		outcome = fmt.Sprintf("FAIL (%d problems)", len(problems))
	}
	kills, byRole := 0, []string{}
	for _, r := range roles {
		kills += r.kills
		byRole = append(byRole, fmt.Sprintf("%s %d", r.name, r.kills))
	}
	var byService []string
	for _, svc := range soakServices {
		byService = append(byService, fmt.Sprintf("%s %d", svc.name, restarts[svc.name]))
	}
	live := w.LiveFiles()
	fmt.Fprintf(&b, "soak summary (seed %s; HIVEDR_TEST_SEED=%s replays the choices)\n", seed, seed)
	conv := fmt.Sprintf("DR converged %s later", converged.Round(time.Second))
	if converged < 0 {
		conv = "DR did not converge"
	}
	fmt.Fprintf(&b, "  duration    %s of chaos, %s\n", chaosEnd.Sub(began).Round(time.Second), conv)
	fmt.Fprintf(&b, "  workload    %d steps over %d databases, %d data files written (%d live at the end)\n", steps.Load(), len(dbs), len(w.Files()), len(live))
	fmt.Fprintf(&b, "  kills       %d SIGKILLs: %s\n", kills, strings.Join(byRole, ", "))
	fmt.Fprintf(&b, "  restarts    %d: %s\n", restartsDone, strings.Join(byService, ", "))
	fmt.Fprintf(&b, "  self-exits  %s\n", orNone(exits))
	fmt.Fprintf(&b, "  events      %d on the database topics\n", nEvents)
	fmt.Fprintf(&b, "  copy tasks  %d, completions %d (%d COPIED, %d FAILED)\n", len(tasks), len(completions), copied, failed)
	fmt.Fprintf(&b, "  operator    %d actions: %s\n", len(opsDoneList), orNone(opsDoneList))
	fmt.Fprintf(&b, "  checker     %d DR states sampled (repl.last.id unmoved while read), %d judged against the model (at a step boundary), %d wrong (%d distinct); %d samples failed to read; %d files seen copied ahead of their event; %d objects or files missing that the source removed after the sample's event; %d tables at a later state (the applier's plan past repl.last.id)\n",
		sampled, judged, wrongSamples, len(wrong), checkErrs.Load(), early, late, ahead)
	fmt.Fprintf(&b, "  outcome     %s\n", outcome)
	for _, pr := range problems {
		fmt.Fprintf(&b, "    - %s\n", pr)
	}
	t.Log(b.String())
	if len(problems) > 0 {
		_ = os.WriteFile(filepath.Join(logDir, "history.txt"), []byte(strings.Join(model.history(int(steps.Load())+1, int(steps.Load())+1), "\n")+"\n"), 0o644)
		t.Logf("the workload's whole history: %s", filepath.Join(logDir, "history.txt"))
	}
	_ = os.WriteFile(filepath.Join(logDir, "summary.txt"), []byte(b.String()), 0o644)
	if len(problems) > 0 {
		t.Fail()
	}
	if kills < 100 && dur >= soakDefault {
		t.Errorf("only %d kills in a %s soak: want at least 100", kills, dur)
	}
	for _, svc := range soakServices {
		if restarts[svc.name] == 0 && dur >= soakDefault {
			t.Errorf("%s was never restarted", svc.name)
		}
	}
}

// soakProgress adds up the progress the roles report in their metrics:
// the tailer's checkpoint, each copy daemon's finished tasks, the
// applier's highest applied event. A restarted process starts its
// counters again, so each role's value counts from its first scrape, and
// a value that drops counts from zero again.
type soakProgress struct {
	roles   []*soakRole
	applier *soakRole
	applied *atomic.Int64 // highest event the applier reported applied
	last    map[*soakRole]float64
	sum     float64
}

func (sp *soakProgress) total() float64 { return sp.sum }

// observe scrapes every role once.
func (sp *soakProgress) observe() {
	for _, r := range sp.roles {
		m, ok := scrape("http://" + r.metrics + "/metrics")
		if !ok {
			continue
		}
		v, ok := r.progress(m)
		if !ok {
			continue
		}
		if r == sp.applier {
			for cur := sp.applied.Load(); int64(v) > cur && !sp.applied.CompareAndSwap(cur, int64(v)); cur = sp.applied.Load() {
			}
		}
		last, seen := sp.last[r]
		switch {
		case !seen:
		case v >= last:
			sp.sum += v - last
		case r.name != "tailer" && r != sp.applier:
			sp.sum += v // a restarted copy daemon counts from zero
		}
		sp.last[r] = v
	}
}

// startSoakProc is startHivedr without the dump of the process's output
// when the test fails: the soak starts hundreds of processes and keeps
// every one's output in its role's log file instead.
func startSoakProc(t *testing.T, name string, args ...string) *proc {
	t.Helper()
	p := &proc{name: name, cmd: exec.Command(hivedrBin(t), args...), out: &syncBuffer{}, done: make(chan struct{})}
	p.cmd.Stdout, p.cmd.Stderr = p.out, p.out
	if err := p.cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", name, err)
	}
	go func() { p.err = p.cmd.Wait(); close(p.done) }()
	t.Cleanup(p.kill9)
	return p
}

func orNone(s []string) string {
	if len(s) == 0 {
		return "none"
	}
	return strings.Join(s, ", ")
}

// stagingLeftovers lists the staging files under dir (a location) on DR.
func stagingLeftovers(t *testing.T, c *hdfs.Client, loc string) []string {
	t.Helper()
	i := strings.Index(loc, "://")
	if i < 0 {
		t.Fatalf("DR location %q has no scheme", loc)
	}
	p := loc[i+3:]
	if j := strings.IndexByte(p, '/'); j >= 0 {
		p = p[j:]
	}
	var out []string
	err := c.Walk(p, func(name string, info os.FileInfo, err error) error {
		if err != nil {
			if errors.Is(err, os.ErrNotExist) {
				return nil
			}
			return err
		}
		if !info.IsDir() && fs.IsStagingName(path.Base(name)) {
			out = append(out, name)
		}
		return nil
	})
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("walk %s on DR: %v", p, err)
	}
	return out
}
