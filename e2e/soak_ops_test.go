//go:build soak

package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/hivedr/hivedr/internal/drparam"
	"github.com/hivedr/hivedr/internal/failover"
	"github.com/hivedr/hivedr/internal/hms"
)

// soakOps are the operator actions the soak takes while the chaos runs,
// in order, each once the run is far enough in: a bootstrap of a
// replicated database (`hivedr bootstrap -no-wait`), a re-drive of
// another's topic (`hivedr replay -from-event -coordinate`), a purge of
// the source's log past the tailer's checkpoint and its repair
// (`hivedr bootstrap -repair-chain`), a planned failover of a third
// (`hivedr failover`), then its failback
// (`hivedr failback` and the reverse pipeline's daemons). The failed-over
// database leaves the checker at once and the forward comparison; after
// the failback its old primary is compared, as the reverse pipeline's
// replica, with DR.
type soakOps struct {
	bin, conf string
	dr        *hms.Client // its own connection, dialed again after an error
	drAddr    string
	model     *soakModel
	work      *soakWork
	checker   *soakChecker
	logf      func(format string, args ...any)
	// boot, replay and fail are the databases of the actions; rev the
	// reverse pipeline of fail (its start event is set at the failback).
	boot, replay, fail string
	dbs                []string // all the soak's databases
	// The purge: the tailer role the operator stops and the arguments it
	// runs with, the source metastore and the Postgres database of its
	// notification log, and the workload's pause (a step and its
	// recording run whole before it returns; the returned func resumes).
	tailer      *soakRole
	tailArgs    []string
	srcAddr     string
	srcLogDSN   string
	pauseSource func() func()
	rev         *pipeline
	revStart    string   // the reverse configuration's start line to replace
	revProcs    []*proc  // the reverse pipeline's daemons, once started
	revLog      *os.File // their output
	revMetrics  string   // the reverse tailer's metrics address

	mu         sync.Mutex
	done       []string // actions done, as the summary tells them
	problems   []string
	failedOver bool
	failedBack bool
}

func (o *soakOps) note(s string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.done = append(o.done, s)
	o.logf("soak: operator: %s", s)
}

func (o *soakOps) problem(s string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.problems = append(o.problems, s)
	o.logf("soak: operator: %s", s)
}

// state returns what the operator did and what went wrong, and whether
// the failover and the failback happened.
func (o *soakOps) state() (done, problems []string, failedOver, failedBack bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	return append([]string(nil), o.done...), append([]string(nil), o.problems...), o.failedOver, o.failedBack
}

// tool runs hivedr with args and returns its output and exit status.
func (o *soakOps) tool(ctx context.Context, d time.Duration, args ...string) (string, string, int, error) {
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	cmd := exec.CommandContext(ctx, o.bin, args...)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return out.String(), errOut.String(), ee.ExitCode(), nil
	}
	if err != nil {
		return "", "", 0, fmt.Errorf("hivedr %s: %w", args[0], err)
	}
	return out.String(), errOut.String(), 0, nil
}

// attempt runs hivedr with args (run's time-out d) up to 5 times, as an
// operator tries again once the system a command could not reach is
// back (each of these commands changes nothing when it fails, or is
// safe to repeat), pausing between tries; ok reports whether a run
// exited 0 with output decode accepts. again, when not nil, may change
// the arguments after a failed try.
func (o *soakOps) attempt(ctx context.Context, d time.Duration, decode func(out string) error, again func(errOut string, args []string) []string, args ...string) (tries int, ok bool) {
	for try := 1; ; try++ {
		out, errOut, code, err := o.tool(ctx, d, args...)
		if err == nil && code == 0 {
			err = decode(out)
		}
		if err == nil && code == 0 {
			return try, true
		}
		if try == 5 || ctx.Err() != nil {
			o.problem(fmt.Sprintf("hivedr %s: exit %d, %v, %s%s", strings.Join(args, " "), code, err, out, errOut))
			return try, false
		}
		o.logf("soak: operator: hivedr %s, attempt %d: exit %d, %v %s; again in 20s", args[0], try, code, err, strings.TrimSpace(errOut))
		if again != nil {
			args = again(errOut, args)
		}
		if !wait(ctx, time.Now().Add(20*time.Second)) {
			return try, false
		}
	}
}

// wait sleeps until at (pacing the schedule) or ctx ends.
func wait(ctx context.Context, at time.Time) bool {
	select {
	case <-ctx.Done():
		return false
	case <-time.After(time.Until(at)):
		return true
	}
}

// run takes the actions at fractions of the chaos from began to end.
func (o *soakOps) run(ctx context.Context, began, end time.Time) {
	at := func(f float64) time.Time { return began.Add(time.Duration(f * float64(end.Sub(began)))) }
	if !wait(ctx, at(0.15)) {
		return
	}
	o.bootstrap(ctx)
	if !wait(ctx, at(0.3)) {
		return
	}
	o.replayTopic(ctx)
	if !wait(ctx, at(0.35)) {
		return
	}
	o.purgeRepair(ctx)
	if !wait(ctx, at(0.45)) {
		return
	}
	head, ok := o.failover(ctx)
	if !ok || !wait(ctx, at(0.65)) {
		return
	}
	o.failback(ctx, head)
}

func (o *soakOps) bootstrap(ctx context.Context) {
	prev := o.drParam(ctx, o.boot, drparam.BootstrapDone)
	var res struct {
		RequestID string `json:"request_id"`
		Outcome   string `json:"outcome"`
	}
	decode := func(out string) error {
		if err := json.Unmarshal([]byte(out), &res); err != nil {
			return err
		}
		if res.Outcome != "written" {
			return fmt.Errorf("outcome %q, want written", res.Outcome)
		}
		return nil
	}
	if _, ok := o.attempt(ctx, 2*time.Minute, decode, nil, "bootstrap", "-config", o.conf, "-no-wait", "-json", "-db", o.boot); !ok {
		return
	}
	t0 := time.Now()
	for time.Since(t0) < 8*time.Minute && ctx.Err() == nil {
		if d := o.drParam(ctx, o.boot, drparam.BootstrapDone); d != "" && d != prev {
			o.note(fmt.Sprintf("bootstrap of %s (request %s) applied on DR %s after the request", o.boot, res.RequestID, time.Since(t0).Round(time.Second)))
			return
		}
		if !wait(ctx, time.Now().Add(time.Second)) { // polls DR
			return
		}
	}
	o.problem(fmt.Sprintf("bootstrap of %s (request %s) not applied on DR %s after the request", o.boot, res.RequestID, time.Since(t0).Round(time.Second)))
}

// purgeRepair does what a source log purged past the tailer's checkpoint
// takes: the tailer is stopped while the workload goes on, the source's
// notification log is purged up to the newest event but one (the
// metastore's cleaner with a short time to live), the tailer started
// again must stop on CHAIN_BROKEN (exit 3), then `hivedr bootstrap
// -repair-chain` and the tailer's restart bootstrap every database
// again, each applied on DR.
func (o *soakOps) purgeRepair(ctx context.Context) {
	// The chaos may be restarting the source metastore: dial until it
	// answers.
	var src *hms.Client
	for t0 := time.Now(); ; {
		var err error
		if src, err = hms.Dial(ctx, o.srcAddr, hms.Options{}); err == nil {
			break
		}
		if time.Since(t0) > 2*time.Minute {
			o.problem(fmt.Sprintf("purge: the source metastore: %v", err))
			return
		}
		if !wait(ctx, time.Now().Add(time.Second)) { // polls the source metastore
			return
		}
	}
	defer func() { src.Close() }()
	head := func() int64 {
		h, err := src.GetCurrentNotificationEventId(ctx)
		if err != nil {
			if c, err := hms.Dial(ctx, o.srcAddr, hms.Options{}); err == nil {
				src.Close()
				src = c
			}
			return 0
		}
		return h.EventId
	}
	prev := map[string]string{}
	for _, db := range o.dbs {
		prev[db] = o.drParam(ctx, db, drparam.BootstrapDone)
	}
	o.tailer.hold("stopped by the operator for the purge")
	released := false
	defer func() {
		if !released {
			o.tailer.release()
		}
	}()
	// The workload goes on meanwhile: events the tailer has not published.
	// (The workload keeps within soakBacklog events of what the applier
	// applied, so it may stop short of 20: then 2 will do.)
	h0, t0 := head(), time.Now()
	for h := head(); h0 == 0 || h < h0+20 && (time.Since(t0) < 2*time.Minute || h < h0+2); h = head() {
		if !wait(ctx, time.Now().Add(time.Second)) { // polls the source's head
			return
		}
		if h0 == 0 {
			h0 = head()
		}
	}
	resume := o.pauseSource()
	upTo := head() - 1
	purged, err := purgeLog(ctx, o.srcLogDSN, upTo)
	resume()
	if err != nil || upTo <= 0 {
		o.problem(fmt.Sprintf("purge of the source log up to event %d: %v", upTo, err))
		return
	}
	out, errOut, code, err := o.tool(ctx, 3*time.Minute, o.tailArgs...)
	if err != nil || code != 3 || !strings.Contains(out+errOut, "CHAIN_BROKEN") {
		o.problem(fmt.Sprintf("the tailer after a purge of events up to %d: exit %d, %v, want 3 (CHAIN_BROKEN):\n%s", upTo, code, err, tail(out+errOut, 15)))
		return
	}
	decode := func(out string) error {
		var res struct {
			Outcome string `json:"outcome"`
		}
		if err := json.Unmarshal([]byte(out), &res); err != nil {
			return err
		}
		if res.Outcome != "written" {
			return fmt.Errorf("outcome %q, want written", res.Outcome)
		}
		return nil
	}
	if _, ok := o.attempt(ctx, 2*time.Minute, decode, nil, "bootstrap", "-config", o.conf, "-repair-chain", "-no-wait", "-json"); !ok {
		return
	}
	o.tailer.release()
	released = true
	t0 = time.Now()
	for _, db := range o.dbs {
		for o.drParam(ctx, db, drparam.BootstrapDone) == prev[db] {
			if time.Since(t0) > 10*time.Minute {
				o.problem(fmt.Sprintf("repair after the purge: %s not bootstrapped again on DR %s after the request", db, time.Since(t0).Round(time.Second)))
				return
			}
			if !wait(ctx, time.Now().Add(time.Second)) { // polls DR
				return
			}
		}
	}
	o.note(fmt.Sprintf("purge of %d source events up to %d behind the stopped tailer, which then stopped on CHAIN_BROKEN (exit 3); bootstrap -repair-chain: %d databases bootstrapped again on DR %s after the request",
		purged, upTo, len(o.dbs), time.Since(t0).Round(time.Second)))
}

// purgeLog deletes the source metastore's notification log rows up to
// event upTo, as its cleaner deletes those past their time to live.
func purgeLog(ctx context.Context, dsn string, upTo int64) (int64, error) {
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return 0, fmt.Errorf("connect to the source metastore's database: %w", err)
	}
	defer conn.Close(context.Background())
	tag, err := conn.Exec(ctx, `DELETE FROM "NOTIFICATION_LOG" WHERE "EVENT_ID" <= $1`, upTo)
	if err != nil {
		return 0, fmt.Errorf("delete from NOTIFICATION_LOG: %w", err)
	}
	return tag.RowsAffected(), nil
}

func (o *soakOps) drParam(ctx context.Context, db, key string) string {
	d, err := o.dr.GetDatabase(ctx, db)
	if err != nil {
		if c, err := hms.Dial(ctx, o.drAddr, hms.Options{}); err == nil {
			o.dr.Close()
			o.dr = c
		}
		return ""
	}
	return d.Parameters[key]
}

// replayTopic re-drives the replay database's topic from the event its
// workload reached a third of the way to now.
func (o *soakOps) replayTopic(ctx context.Context) {
	o.model.mu.Lock()
	steps := o.model.steps[o.replay]
	var from int64
	if len(steps) > 0 {
		from = steps[len(steps)/3].before + 1
	}
	o.model.mu.Unlock()
	if from == 0 {
		o.problem("replay: no workload step on " + o.replay + " yet")
		return
	}
	none := func(string) error { return nil }
	if try, ok := o.attempt(ctx, 2*time.Minute, none, nil, "replay", "-config", o.conf, "-db", o.replay, "-from-event", fmt.Sprint(from), "-coordinate", "-timeout", "90s"); ok {
		o.note(fmt.Sprintf("replay of %s from event %d (-coordinate), attempt %d", o.replay, from, try))
	}
}

// failover retires the failover database from the workload (its open
// transaction ended first) and the checker, then fails it over, planned.
// It returns the DR log head the failover recorded.
func (o *soakOps) failover(ctx context.Context) (int64, bool) {
	o.work.mu.Lock()
	o.work.retired[o.fail] = true
	o.work.mu.Unlock()
	o.checker.exclude(o.fail)
	for {
		o.work.mu.Lock()
		open := o.work.open[o.fail] != nil
		o.work.mu.Unlock()
		if !open {
			break
		}
		if !wait(ctx, time.Now().Add(200*time.Millisecond)) { // the workload ends it in its next step
			return 0, false
		}
	}
	t0 := time.Now()
	var rep failover.Report
	decode := func(out string) error {
		if err := json.Unmarshal([]byte(out), &rep); err != nil {
			return err
		}
		if len(rep.Databases) != 1 {
			return fmt.Errorf("a report of %d databases, want 1", len(rep.Databases))
		}
		return nil
	}
	// An attempt cut short after it marked the database (killed, or its
	// figures unrecorded through an outage) is finished by the next one,
	// -resume (no other failover of it runs: the soak runs them in turn).
	resume := func(errOut string, args []string) []string {
		if strings.Contains(errOut, failover.ErrCutShort.Error()) && !slices.Contains(args, "-resume") {
			return append(args, "-resume")
		}
		return args
	}
	try, ok := o.attempt(ctx, 5*time.Minute, decode, resume, "failover", "-config", o.conf, "-json", "-db", o.fail, "-timeout", "4m")
	if !ok {
		return 0, false
	}
	o.mu.Lock()
	o.failedOver = true
	o.mu.Unlock()
	d := rep.Databases[0]
	o.note(fmt.Sprintf("planned failover of %s at source event %d (DR log head %d) in %s, attempt %d",
		o.fail, d.Reached, d.DRLogHead, time.Since(t0).Round(time.Second), try))
	return d.DRLogHead, true
}

// failback points the reverse pipeline at the DR log head, runs
// `hivedr failback` and starts the reverse daemons.
func (o *soakOps) failback(ctx context.Context, head int64) {
	y, err := os.ReadFile(o.rev.conf)
	if err == nil && !strings.Contains(string(y), o.revStart) {
		err = fmt.Errorf("no %q in %s", o.revStart, o.rev.conf)
	}
	if err == nil {
		err = os.WriteFile(o.rev.conf, []byte(strings.Replace(string(y), o.revStart, fmt.Sprintf("start_event_id: \"%d\"", head), 1)), 0o644)
	}
	if err != nil {
		o.problem(fmt.Sprintf("failback of %s: the reverse configuration: %v", o.fail, err))
		return
	}
	var back failover.BackReport
	decode := func(out string) error { return json.Unmarshal([]byte(out), &back) }
	// An attempt cut short after it marked the database is resumed by the
	// next one as it is (no -again).
	if _, ok := o.attempt(ctx, 3*time.Minute, decode, nil, "failback", "-config", o.conf, "-reverse-config", o.rev.conf, "-db", o.fail, "-json"); !ok {
		return
	}
	for _, role := range [][]string{
		{"tail", "-config", o.rev.conf, "-metrics-addr", o.revMetrics},
		{"copyd", "-config", o.rev.conf, "-state-dir", filepath.Join(o.rev.state, "copyd")},
		{"apply", "-config", o.rev.conf, "-state-dir", filepath.Join(o.rev.state, "applier")},
	} {
		p := &proc{name: "reverse " + role[0], cmd: exec.Command(o.bin, role...), out: &syncBuffer{}, done: make(chan struct{})}
		p.cmd.Stdout, p.cmd.Stderr = p.out, p.out
		if err := p.cmd.Start(); err != nil {
			o.problem(fmt.Sprintf("start the reverse %s: %v", role[0], err))
			return
		}
		go func() { p.err = p.cmd.Wait(); close(p.done) }()
		o.mu.Lock()
		o.revProcs = append(o.revProcs, p)
		o.mu.Unlock()
	}
	o.mu.Lock()
	o.failedBack = true
	o.mu.Unlock()
	o.note(fmt.Sprintf("failback of %s (%d tables moved) and the reverse pipeline started", o.fail, back.MovedTables))
}

// stop ends the reverse daemons, keeping their output.
func (o *soakOps) stop() {
	o.mu.Lock()
	defer o.mu.Unlock()
	for _, p := range o.revProcs {
		p.kill9()
		fmt.Fprintf(o.revLog, "\n==== %s (soak ended; exited early: %v)\n%s", p.name, p.err, p.out.String())
	}
	o.revProcs = nil
}

// reverseExits lists the reverse daemons that exited by themselves.
func (o *soakOps) reverseExits() []string {
	o.mu.Lock()
	defer o.mu.Unlock()
	var out []string
	for _, p := range o.revProcs {
		if p.exited() {
			out = append(out, fmt.Sprintf("%s exited by itself (%v):\n%s", p.name, p.err, tail(p.out.String(), 15)))
		}
	}
	return out
}
