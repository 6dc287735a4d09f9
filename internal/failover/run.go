package failover

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"

	"github.com/beltran/gohive/hive_metastore"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/hivedr/hivedr/internal/config"
	"github.com/hivedr/hivedr/internal/connect"
	"github.com/hivedr/hivedr/internal/drparam"
	"github.com/hivedr/hivedr/internal/hms"
	"github.com/hivedr/hivedr/internal/hmslog"
	"github.com/hivedr/hivedr/internal/kafka"
	"github.com/hivedr/hivedr/schemas"
)

// Options are what `hivedr failover` was asked.
type Options struct {
	// Databases are the databases to fail over; with All, every database
	// with an events topic in the replication scope.
	Databases []string
	All       bool
	Mode      Mode
	// Timeout bounds the wait for the tailer and the applier. A planned
	// failover that times out changes nothing; an unplanned one goes on
	// with what DR reached.
	Timeout time.Duration
	// Poll is how often the wait looks again (default 500 ms).
	Poll time.Duration
	// DryRun checks what a failover would check (the databases, the
	// source's head when planned, the tailer's and the applier's
	// positions) and changes nothing: no wait, no mark.
	DryRun bool
	// Resume takes up the databases a failover marked and was cut short
	// on before it recorded their figures (ErrCutShort): fenced again
	// under this run's token, their mark's time kept, then measured and
	// recorded. Only one failover of a database may run at a time: an
	// unfinished mark looks the same while its failover still runs.
	Resume bool
	Log    *slog.Logger
}

// Skipped is a database -all found (its topic is in the replication
// scope) and leaves out, and why.
type Skipped struct {
	Database string `json:"database"`
	Why      string `json:"why"`
}

// The reasons -all leaves a database out.
const (
	// WhyDrill: a drill's scratch database (DrillPrefix) is never
	// production; a drill fails its own over by name.
	WhyDrill = "a drill's scratch database"
	// WhyDropped: not on DR, and the applier group consumed its topic to
	// the end: the source dropped it (or it never reached DR and is
	// gone) and DR applied that; there is nothing to make writable.
	WhyDropped = "not on DR and its topic is applied to the end: the source dropped it"
)

// Report is the outcome of a failover.
type Report struct {
	Mode Mode      `json:"mode"`
	At   time.Time `json:"failed_over_at"`
	// SourceHead is the source log's head the planned failover waited
	// for (-1: the source was not read).
	SourceHead int64 `json:"source_head_event_id"`
	// TailerEventID is the tailer's newest checkpoint when DR was caught
	// up (or when the wait ended).
	TailerEventID int64 `json:"tailer_checkpoint_event_id"`
	// Cut is the consistent cut: the newest event every database reached.
	Cut       int64      `json:"consistent_cut_event_id"`
	Databases []Database `json:"databases"`
	// Skipped are the databases -all left out.
	Skipped []Skipped `json:"skipped,omitempty"`
	// DryRun: nothing was changed (Options.DryRun); Databases say where
	// each stands now (LastID, CaughtUp).
	DryRun bool `json:"dry_run,omitempty"`
	// WaitSeconds is how long the failover waited for DR to apply, and
	// Seconds the whole failover (the RTO of the step).
	WaitSeconds float64  `json:"wait_seconds"`
	Seconds     float64  `json:"seconds"`
	Notes       []string `json:"notes,omitempty"`
}

// ErrTimeout is returned by a planned failover whose wait timed out; it
// changed nothing.
var ErrTimeout = errors.New("timed out")

// ErrNotFenced is returned when the running appliers did not confirm a
// failover's fence in time: the databases are marked, but a write an
// applier started before the mark may still land (the report says which).
var ErrNotFenced = errors.New("not confirmed by the applier")

// fenceTimeout bounds the wait for the appliers' confirmation of a
// fence; the applier waits up to 2 minutes for a worker to end its step.
const fenceTimeout = 3 * time.Minute

// Run fails over the databases opts names, in named steps:
//
//  1. check: everything is checked before anything changes: a database
//     that is not this pipeline's replica, is being bootstrapped on DR or
//     failed over already makes Run fail untouched;
//  2. wait: planned, until the tailer's checkpoint reached the source
//     log's head read at the start, no bootstrap in the tailer holds the
//     databases' events back, and the applier group consumed every topic
//     to its end; unplanned, the group only. A planned failover that
//     times out changes nothing;
//  3. fence: mark each database failed over (drparam.FailedOverAt, with a
//     token) and have the applier that owns its topic confirm it
//     (schemas.ControlFence): its worker stopped between two steps and
//     the mark read back. A mark undone meanwhile (a whole-database write
//     of the applier's, from a copy read before the mark) is made again
//     and confirmed again. From the confirmation on nothing of the
//     applier's lands on the database;
//  4. measure: what DR applied, read now that nothing moves: the cut, the
//     RPO, what a restarted ETL must redo;
//  5. record: the failover's figures written beside the mark;
//  6. the DR transactions left open for source transactions that never
//     ended are aborted.
//
// Interleavings (docs/design.md, "Failover and bootstrap together"): the
// wait counts a bootstrap the tailer has queued or is running as events
// held back, so a planned failover never reports RPO 0 over them; an
// unplanned one counts them lost. The fence makes the mark final: the
// applier's whole-database writes re-read the database in the same step
// (FencedError), and the confirmation comes from the applier itself after
// its worker has stopped.
func Run(ctx context.Context, conf *config.Config, opts Options) (*Report, error) {
	start := time.Now()
	if opts.Poll <= 0 {
		opts.Poll = 500 * time.Millisecond
	}
	if opts.Log == nil {
		opts.Log = slog.New(slog.DiscardHandler)
	}
	r, err := dialRun(ctx, conf, opts)
	if err != nil {
		return nil, err
	}
	defer r.close()

	names, params, err := r.check(ctx)
	if err != nil {
		return nil, err
	}
	if opts.Mode == Planned {
		if r.rep.SourceHead, err = sourceHead(ctx, conf.Source, conf.SourceMetastoreOptions()); err != nil {
			return nil, fmt.Errorf("a planned failover reads the source log's head (use -unplanned when the source is gone): %w", err)
		}
	}
	if opts.DryRun {
		return dryRun(ctx, r.cl, r.kopts, r.adm, r.dec, r.dr, conf, r.topics, opts, r.rep, names, params)
	}
	pos, err := r.wait(ctx, names, start)
	if err != nil {
		return nil, err
	}
	set, err := r.choose(ctx, names, pos)
	if err != nil {
		return nil, err
	}
	r.rep.At = time.Now().UTC()
	if err := r.again(ctx, "fence", fenceTimeout, func() error { return r.fence(ctx, set) }); err != nil {
		return r.rep, err
	}
	fault(FaultFenced)
	if err := r.finish(ctx, set, pos); err != nil {
		return r.rep, err
	}
	r.abortTxns(ctx, set)
	r.rep.Seconds = time.Since(start).Seconds()
	return r.rep, nil
}

// run is one failover's clients and report, shared by its steps.
type run struct {
	conf   *config.Config
	opts   Options
	log    *slog.Logger
	rep    *Report
	topics kafka.Topics
	kopts  []kgo.Opt
	cl     *kgo.Client
	adm    *kadm.Client
	dec    *schemas.Decoder
	dr     *hms.Client
	// token is the fence token written with every mark of this failover.
	token string
	// resumed are the databases cut short that this run takes up
	// (Options.Resume): fenced already, so the wait leaves them out.
	resumed map[string]bool
	// markedAt is when each database was failed over: rep.At, or the
	// first mark's time of a database resumed (Options.Resume).
	markedAt map[string]time.Time
}

// at is when db was failed over (markedAt, else the run's time).
func (r *run) at(db string) time.Time {
	if t, ok := r.markedAt[db]; ok {
		return t
	}
	return r.rep.At
}

func dialRun(ctx context.Context, conf *config.Config, opts Options) (*run, error) {
	r := &run{conf: conf, opts: opts, log: opts.Log, rep: &Report{Mode: opts.Mode, SourceHead: -1, DryRun: opts.DryRun},
		topics: kafka.Topics{Prefix: conf.Kafka.TopicPrefix, Site: conf.TopicSite()}}
	var err error
	if r.kopts, err = connect.Kafka(conf.Kafka); err != nil {
		return nil, err
	}
	if r.cl, err = kgo.NewClient(r.kopts...); err != nil {
		return nil, fmt.Errorf("kafka %s: %w", strings.Join(conf.Kafka.Brokers, ","), err)
	}
	r.adm = kadm.NewClient(r.cl)
	if r.dec, err = connect.Decoder(conf.SchemaRegistry); err != nil {
		r.cl.Close()
		return nil, err
	}
	if r.dr, err = hms.Dial(ctx, conf.Applier.Metastore, conf.DRMetastoreOptions()); err != nil {
		r.cl.Close()
		return nil, fmt.Errorf("DR metastore: %w", err)
	}
	var b [8]byte
	if _, err := rand.Read(b[:]); err != nil {
		r.close()
		return nil, fmt.Errorf("fence token: %w", err)
	}
	r.token = hex.EncodeToString(b[:])
	return r, nil
}

func (r *run) close() {
	r.dr.Close()
	r.cl.Close()
}

// check finds the databases and refuses, changing nothing, any that
// cannot be failed over (one not on DR yet is checked again after the
// wait, which may create it).
func (r *run) check(ctx context.Context) ([]string, map[string]map[string]string, error) {
	names, skipped, err := databases(ctx, r.adm, r.conf, r.topics, r.opts)
	if err != nil {
		return nil, nil, err
	}
	r.rep.Skipped = skipped
	params := map[string]map[string]string{}
	var refused []string
	for _, db := range names {
		p, err := drParams(ctx, r.dr, db)
		if err != nil {
			return nil, nil, err
		}
		if err := r.checkDB(db, p); err != nil && p != nil {
			refused = append(refused, err.Error())
		}
		params[db] = p
	}
	if len(refused) > 0 {
		return nil, nil, fmt.Errorf("nothing changed: %s", strings.Join(refused, "; "))
	}
	return names, params, nil
}

// checkDB is Check, with a database cut short accepted when the run
// resumes (Options.Resume).
func (r *run) checkDB(db string, params map[string]string) error {
	err := Check(db, r.conf.Source.Name, params)
	if r.opts.Resume && errors.Is(err, ErrCutShort) {
		if r.resumed == nil {
			r.resumed = map[string]bool{}
		}
		r.resumed[db] = true
		return nil
	}
	return err
}

// wait waits for the pipeline (waiter.wait) and turns what did not get
// there into ErrTimeout (planned) or a note (unplanned).
func (r *run) wait(ctx context.Context, names []string, start time.Time) (position, error) {
	head := r.rep.SourceHead
	if r.opts.Mode == Unplanned {
		head = -1
	}
	w := waiter{cl: r.cl, kopts: r.kopts, adm: r.adm, dec: r.dec, conf: r.conf, topics: r.topics, poll: r.opts.Poll}
	// A database resumed is fenced: the applier applies nothing more
	// there, so waiting for it could only time out. What it reached is
	// measured as it stands.
	waitFor := slices.DeleteFunc(slices.Clone(names), func(db string) bool { return r.resumed[db] })
	pos, err := w.wait(ctx, waitFor, head, start.Add(r.opts.Timeout))
	if err != nil {
		return pos, err
	}
	if what := pos.behind(waitFor, head); len(what) > 0 {
		if r.opts.Mode == Planned {
			return pos, fmt.Errorf("%w after %s waiting for %s: nothing changed", ErrTimeout, r.opts.Timeout, strings.Join(what, ", "))
		}
		r.rep.Notes = append(r.rep.Notes, fmt.Sprintf("the wait timed out after %s: %s not caught up; failed over at what DR reached", r.opts.Timeout, strings.Join(what, ", ")))
	}
	r.rep.WaitSeconds = time.Since(start).Seconds()
	if pos.cp != nil {
		r.rep.TailerEventID = pos.cp.LastEventID
	}
	for _, db := range names {
		if b, ok := pos.held(db); ok {
			r.rep.Notes = append(r.rep.Notes, fmt.Sprintf("database %s: a bootstrap in the tailer (%s, cut at event %d) holds back its source events after the cut: they are not on DR and count as lost",
				db, phaseOf(b), b.CutEventID))
		}
	}
	r.log.Info("DR applied what it can", "wait", time.Since(start).Round(time.Millisecond), "tailer_event_id", r.rep.TailerEventID)
	return pos, nil
}

// choose is the set to fail over, read after the wait: -all leaves out
// the databases the source dropped; every other one must pass Check.
func (r *run) choose(ctx context.Context, names []string, pos position) ([]string, error) {
	var set, refused []string
	for _, db := range names {
		p, err := drParams(ctx, r.dr, db)
		if err != nil {
			return nil, err
		}
		if leaveOut(p, pos.caught[db], r.opts.All) {
			r.rep.Skipped = append(r.rep.Skipped, Skipped{Database: db, Why: WhyDropped})
			continue
		}
		if err := r.checkDB(db, p); err != nil {
			refused = append(refused, err.Error())
			continue
		}
		set = append(set, db)
	}
	if len(refused) > 0 {
		return nil, fmt.Errorf("nothing changed: %s", strings.Join(refused, "; "))
	}
	if len(set) == 0 {
		return nil, fmt.Errorf("no database to fail over: %s", skippedText(r.rep.Skipped))
	}
	return set, nil
}

// fence marks each database of set failed over (FenceMark) and waits
// until the applier that owns its topic confirms it (or no applier of
// the group runs: nothing can write then). A mark found undone is made
// again and asked again. Past fenceTimeout it returns ErrNotFenced, the
// marks in place.
func (r *run) fence(ctx context.Context, set []string) error {
	for _, db := range set {
		if err := r.markFence(ctx, db, true); err != nil {
			return err
		}
	}
	deadline := time.Now().Add(fenceTimeout)
	pending := slices.Clone(set)
	asked := time.Now()
	for len(pending) > 0 {
		members, err := groupMembers(ctx, r.adm, r.conf.Applier.Group)
		if err != nil {
			return err
		}
		var still []string
		for _, db := range pending {
			p, err := drParams(ctx, r.dr, db)
			if err != nil {
				return err
			}
			switch {
			case p == nil:
				return fmt.Errorf("%w: DR database %s is gone", errFinal, db)
			case p[drparam.FailoverFence] != r.token || p[drparam.FailedOverAt] == "":
				// Undone by a write that read the database before the mark.
				r.log.Warn("the failover mark was undone by the applier; marking again", "db", db)
				r.rep.Notes = append(r.rep.Notes, fmt.Sprintf("database %s: the mark was undone by an applier write made from an older copy; marked again and confirmed", db))
				if err := r.markFence(ctx, db, true); err != nil {
					return err
				}
				still = append(still, db)
			case p[drparam.FailoverFenced] == r.token:
				r.log.Info("the applier confirmed the fence", "db", db)
			case members == 0:
				r.log.Info("no applier of the group runs: nothing writes into the database", "db", db, "group", r.conf.Applier.Group)
			default:
				if time.Since(asked) > 10*time.Second {
					// A request sent while the owner was rebalancing may
					// have found no owner: ask again.
					if err := r.sendFence(ctx, db); err != nil {
						return err
					}
				}
				still = append(still, db)
			}
		}
		if time.Since(asked) > 10*time.Second {
			asked = time.Now()
		}
		pending = still
		if len(pending) == 0 {
			break
		}
		if !time.Now().Before(deadline) {
			r.rep.Notes = append(r.rep.Notes, fmt.Sprintf("the applier group %s did not confirm the fence of %s within %s: the databases are marked, but a write its appliers started before the mark may still land; stop them, then check the databases",
				r.conf.Applier.Group, strings.Join(pending, ", "), fenceTimeout))
			return fmt.Errorf("fence of %s: %w within %s (the marks are in place)", strings.Join(pending, ", "), ErrNotFenced, fenceTimeout)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(r.opts.Poll):
		}
	}
	return nil
}

// markFence writes the fence mark on DR database db (read afresh: the
// failover's own write keeps whatever the database has) and, with ask,
// asks the appliers to confirm it.
func (r *run) markFence(ctx context.Context, db string, ask bool) error {
	cur, err := r.dr.GetDatabase(ctx, db)
	if err != nil {
		return fmt.Errorf("get DR database %s: %w", db, err)
	}
	at := r.rep.At
	if cur.Parameters[drparam.FailoverFence] != r.token {
		err := r.checkDB(db, cur.Parameters)
		if err != nil {
			return fmt.Errorf("%w: %w", errFinal, err)
		}
		if prev, perr := time.Parse(time.RFC3339, cur.Parameters[drparam.FailedOverAt]); perr == nil && cur.Parameters[drparam.FailoverEventID] == "" {
			// Resumed: failed over when it was first marked.
			at = prev
			r.log.Info("resuming a failover cut short before its figures were recorded", "db", db, "failed_over_at", prev)
			r.rep.Notes = append(r.rep.Notes, fmt.Sprintf("database %s: resumed a failover cut short before its figures were recorded (marked at %s)", db, prev.Format(time.RFC3339)))
		}
	}
	if r.markedAt == nil {
		r.markedAt = map[string]time.Time{}
	}
	r.markedAt[db] = at
	cur.Parameters = FenceMark(cur.Parameters, r.opts.Mode, r.token, at)
	if err := r.dr.AlterDatabase(ctx, db, cur); err != nil {
		return fmt.Errorf("mark DR database %s failed over: %w", db, err)
	}
	if !ask {
		return nil
	}
	return r.sendFence(ctx, db)
}

func (r *run) sendFence(ctx context.Context, db string) error {
	c := schemas.ApplierControl{Kind: schemas.ControlFence, Database: db, Fence: r.token, By: "hivedr failover", At: time.Now().UTC()}
	if err := kafka.SendApplierControl(ctx, r.cl, r.topics, r.conf.Kafka.ReplicationFactor, r.conf.Kafka.PrecreatedTopics, c); err != nil {
		return fmt.Errorf("ask the applier to confirm the failover of %s: %w", db, err)
	}
	return nil
}

// groupMembers is how many members the applier group has now.
func groupMembers(ctx context.Context, adm *kadm.Client, group string) (int, error) {
	gs, err := adm.DescribeGroups(ctx, group)
	if err != nil {
		return 0, fmt.Errorf("kafka: describe the applier group %s: %w", group, err)
	}
	g, ok := gs[group]
	if !ok || g.Err != nil {
		return 0, nil
	}
	return len(g.Members), nil
}

// recordTimeout bounds how long a fenced failover retries measuring and
// recording its figures through an outage of Kafka or a metastore.
const recordTimeout = 3 * time.Minute

// finish measures and records the fenced databases of set, again and
// again until it succeeds or recordTimeout passes: nothing moves in them
// any more, so a try cut short by an outage (the source metastore
// restarting while the RPO is counted) is simply made again. The marks
// stay either way; a failover whose figures could not be recorded says
// so (Check names it cut short).
func (r *run) finish(ctx context.Context, set []string, pos position) error {
	err := r.again(ctx, "measure and record", recordTimeout, func() error {
		r.rep.Databases, r.rep.Cut = nil, 0
		if err := r.measure(ctx, set, pos); err != nil {
			return err
		}
		return r.record(ctx, set)
	})
	if err != nil && ctx.Err() == nil {
		return fmt.Errorf("%s are failed over (writable on DR), but their figures could not be recorded: %w", strings.Join(set, ", "), err)
	}
	return err
}

// errFinal marks a failure of a step after the mark that trying again
// cannot mend: the database changed under the failover.
var errFinal = errors.New("changed while failing over")

// again runs step, a step after the marks are written (each idempotent),
// until it succeeds, ctx ends, it fails for good (ErrNotFenced, errFinal)
// or limit passes, dialling the DR metastore again after each failure:
// the chaos of an outage (Kafka or a metastore restarting) must not
// leave a database marked without its figures.
func (r *run) again(ctx context.Context, what string, limit time.Duration, step func() error) error {
	deadline := time.Now().Add(limit)
	for attempt := 1; ; attempt++ {
		err := step()
		if err == nil || ctx.Err() != nil || errors.Is(err, ErrNotFenced) || errors.Is(err, errFinal) {
			return err
		}
		if !time.Now().Before(deadline) {
			return fmt.Errorf("%s: failing for %s: %w", what, limit, err)
		}
		r.log.Warn("a failover step failed; trying again", "step", what, "attempt", attempt, "err", err)
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(r.opts.Poll):
		}
		if dr, derr := hms.Dial(ctx, r.conf.Applier.Metastore, r.conf.DRMetastoreOptions()); derr == nil {
			r.dr.Close()
			r.dr = dr
		}
	}
}

// measure reads, now that the applier writes nothing more into them,
// where the databases of set stand: each one's Reached, the cut, what a
// restarted ETL must redo, and the RPO.
func (r *run) measure(ctx context.Context, set []string, pos position) error {
	cp, committed := pos.cp, pos.committed
	// The group may have committed more before the fence; what it
	// consumed is measured against the topics' ends the wait read.
	caught := map[string]bool{}
	if pos.ends == nil {
		pos.ends = map[string]int64{}
	}
	if _, err := groupCaughtUp(ctx, r.adm, r.conf.Applier.Group, r.topics, set, caught, committed, pos.ends); err != nil {
		return err
	}
	for _, db := range set {
		p, err := drParams(ctx, r.dr, db)
		if err != nil {
			return err
		}
		d := Database{Database: db, CaughtUp: caught[db], LastID: stampOf(p)}
		d.Reached = d.LastID
		_, held := pos.held(db)
		// Complete up to the tailer's checkpoint when every event of it
		// is applied, unless a bootstrap holds its events back there.
		if d.CaughtUp && !held && cp != nil && cp.LastEventID >= d.Reached {
			d.Reached, d.ReachedTime = cp.LastEventID, cp.LastEventTime
		}
		// From the event at Reached on: its record dates it.
		recs, err := readBack(ctx, r.kopts, r.dec, r.topics.Events(db), committed[db], d.Reached-1)
		if err != nil {
			return err
		}
		for _, rec := range recs { // the newest applied record dates Reached
			switch {
			case rec.heartbeat && rec.id > d.Reached:
				d.Reached, d.ReachedTime = rec.id, rec.time
			case rec.id == d.Reached && d.ReachedTime.IsZero():
				d.ReachedTime = rec.time
			}
		}
		r.rep.Databases = append(r.rep.Databases, d)
	}
	r.rep.Cut = Cut(r.rep.Databases)
	for i := range r.rep.Databases {
		d := &r.rep.Databases[i]
		recs, err := readBack(ctx, r.kopts, r.dec, r.topics.Events(d.Database), committed[d.Database], r.rep.Cut)
		if err != nil {
			return err
		}
		var applied []Applied
		for _, rec := range recs {
			if !rec.heartbeat && rec.id <= d.Reached {
				applied = append(applied, Applied{EventID: rec.id, Table: rec.table})
			}
		}
		d.Redo = Redo(r.rep.Cut, applied)
	}

	// The RPO: the source events of each database after what it reached.
	lost, lerr := countSourceLost(ctx, r.conf.Source, r.conf.SourceMetastoreOptions(), r.rep.Databases, cp)
	if lerr != nil {
		if r.opts.Mode == Planned {
			return fmt.Errorf("count the source events DR does not have: %w", lerr)
		}
		r.rep.Notes = append(r.rep.Notes, fmt.Sprintf("the source log cannot be read (%v): the events lost are unknown until failback reads it (and records them on each DR database); RPO seconds count from the newest source time DR is complete to", lerr))
	}
	drHead, err := sourceHead(ctx, config.Source{Name: "dr", Kind: config.SourceThrift, Metastore: r.conf.Applier.Metastore}, r.conf.DRMetastoreOptions())
	if err != nil {
		return fmt.Errorf("the DR metastore's notification log (the reverse pipeline starts there): %w", err)
	}
	for i := range r.rep.Databases {
		d := &r.rep.Databases[i]
		d.LostEvents = -1
		if lerr == nil {
			d.LostEvents = lost[d.Database]
		}
		d.RPOSeconds, d.DRLogHead = RPO(*d, d.LostEvents, r.at(d.Database)), drHead
	}
	return nil
}

// record writes each database's failover figures beside its mark.
func (r *run) record(ctx context.Context, set []string) error {
	for _, d := range r.rep.Databases {
		cur, err := r.dr.GetDatabase(ctx, d.Database)
		if err != nil {
			return fmt.Errorf("get DR database %s: %w", d.Database, err)
		}
		if cur.Parameters[drparam.FailoverFence] != r.token {
			return fmt.Errorf("%w: DR database %s: the failover mark is another's (fence %q, want %q)", errFinal, d.Database, cur.Parameters[drparam.FailoverFence], r.token)
		}
		cur.Parameters = Mark(cur.Parameters, d, r.opts.Mode, r.rep.Cut, set, r.at(d.Database))
		if err := r.dr.AlterDatabase(ctx, d.Database, cur); err != nil {
			return fmt.Errorf("record the failover of DR database %s: %w", d.Database, err)
		}
		r.log.Info("database failed over", "db", d.Database, "event_id", d.Reached, "rpo_events", d.LostEvents, "rpo_seconds", d.RPOSeconds)
	}
	return nil
}

// abortTxns aborts what the applier left open for source transactions
// that never ended (txns.go); a failure is the operator's, noted.
func (r *run) abortTxns(ctx context.Context, set []string) {
	aborted, note, err := abortReplTxns(ctx, r.dr, set, applierSettle)
	for i := range r.rep.Databases {
		d := &r.rep.Databases[i]
		d.ReplTxns = aborted[d.Database]
		if len(d.ReplTxns) > 0 {
			r.log.Info("aborted DR transactions of source transactions that never ended", "db", d.Database, "txns", d.ReplTxns)
		}
	}
	if note != "" {
		r.rep.Notes = append(r.rep.Notes, note)
	}
	if err != nil {
		r.log.Error("could not abort the DR transactions left open by source transactions that never ended", "err", err)
		r.rep.Notes = append(r.rep.Notes, fmt.Sprintf("could not abort the DR transactions source transactions left open (%v): "+
			"abort those of user hivedr whose host is %s<database> (abort_txns), or their write IDs stay open", err, drparam.ReplTxnAgentPrefix))
	}
}

// databases are the (lower-case) databases opts names, sorted; with
// All, those of the scope with an events topic, drills' scratch
// databases left out.
func databases(ctx context.Context, adm *kadm.Client, conf *config.Config, topics kafka.Topics, opts Options) ([]string, []Skipped, error) {
	var out []string
	var skipped []Skipped
	if !opts.All {
		for _, db := range opts.Databases {
			db = strings.ToLower(strings.TrimSpace(db))
			if _, ok := conf.Replication.Scope(db); !ok {
				return nil, nil, fmt.Errorf("database %s: not in the replication scope", db)
			}
			out = append(out, db)
		}
	} else {
		td, err := adm.ListTopics(ctx)
		if err != nil {
			return nil, nil, fmt.Errorf("kafka: list topics: %w", err)
		}
		pat := topics.EventsPattern()
		for _, name := range td.Names() {
			m := pat.FindStringSubmatch(name)
			if m == nil {
				continue
			}
			if _, ok := conf.Replication.Scope(m[1]); !ok {
				continue
			}
			if IsDrill(m[1]) {
				skipped = append(skipped, Skipped{Database: m[1], Why: WhyDrill})
				continue
			}
			out = append(out, m[1])
		}
	}
	slices.Sort(out)
	out = slices.Compact(out)
	slices.SortFunc(skipped, func(a, b Skipped) int { return strings.Compare(a.Database, b.Database) })
	if len(out) == 0 {
		return nil, nil, fmt.Errorf("no database to fail over: %s", skippedText(skipped))
	}
	return out, skipped, nil
}

// leaveOut reports whether a database -all found is left out as dropped:
// not on DR (params nil) with its topic consumed to the end.
func leaveOut(params map[string]string, caughtUp, all bool) bool {
	return all && params == nil && caughtUp
}

func skippedText(s []Skipped) string {
	if len(s) == 0 {
		return "none found"
	}
	var out []string
	for _, x := range s {
		out = append(out, x.Database+" ("+x.Why+")")
	}
	return "left out " + strings.Join(out, ", ")
}

// dryRun is Run's checks without the wait or the marks: where the
// tailer and the applier group stand now, each database's position and
// whether it could be failed over.
func dryRun(ctx context.Context, cl *kgo.Client, kopts []kgo.Opt, adm *kadm.Client, dec *schemas.Decoder, dr DRTxns, conf *config.Config, topics kafka.Topics,
	opts Options, rep *Report, names []string, params map[string]map[string]string) (*Report, error) {
	cp, err := kafka.NewestCheckpoint(ctx, cl, kopts, topics.Checkpoints(), conf.Source.Name, dec)
	if err != nil {
		return nil, err
	}
	if cp != nil {
		rep.TailerEventID = cp.LastEventID
	}
	caught, committed := map[string]bool{}, map[string]int64{}
	if _, err := groupCaughtUp(ctx, adm, conf.Applier.Group, topics, names, caught, committed, map[string]int64{}); err != nil {
		return nil, err
	}
	var refused []string
	for _, db := range names {
		p := params[db]
		if leaveOut(p, caught[db], opts.All) {
			rep.Skipped = append(rep.Skipped, Skipped{Database: db, Why: WhyDropped})
			continue
		}
		if err := Check(db, conf.Source.Name, p); err != nil {
			refused = append(refused, err.Error())
			continue
		}
		rep.Databases = append(rep.Databases, Database{Database: db, LastID: stampOf(p), Reached: stampOf(p), CaughtUp: caught[db], LostEvents: -1})
	}
	if len(refused) > 0 {
		return nil, fmt.Errorf("dry run: a failover would change nothing: %s", strings.Join(refused, "; "))
	}
	if len(rep.Databases) == 0 {
		return nil, fmt.Errorf("dry run: no database to fail over: %s", skippedText(rep.Skipped))
	}
	var dbs []string
	for _, d := range rep.Databases {
		dbs = append(dbs, d.Database)
	}
	open, _, err := OpenReplTxns(ctx, dr, dbs)
	if err != nil {
		return nil, err
	}
	for i := range rep.Databases {
		rep.Databases[i].ReplTxns = open[rep.Databases[i].Database]
	}
	rep.Cut = Cut(rep.Databases)
	return rep, nil
}

func drParams(ctx context.Context, dr *hms.Client, db string) (map[string]string, error) {
	d, err := dr.GetDatabase(ctx, db)
	var nso *hive_metastore.NoSuchObjectException
	if errors.As(err, &nso) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("get DR database %s: %w", db, err)
	}
	if d.Parameters == nil {
		d.Parameters = map[string]string{}
	}
	return d.Parameters, nil
}

func sourceHead(ctx context.Context, src config.Source, opts hms.Options) (int64, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	s, err := hmslog.Open(ctx, src, opts)
	if err != nil {
		return 0, fmt.Errorf("metastore %s: %w", src.Name, err)
	}
	defer s.Close()
	h, err := s.Head(ctx)
	if err != nil {
		return 0, fmt.Errorf("metastore %s: head of the notification log: %w", src.Name, err)
	}
	return h, nil
}

// groupCaughtUp fills caught and committed for every database's topic
// and reports whether the applier group consumed them all to their ends.
// ends holds the end offsets to measure against: a topic missing from it
// is asked for its end now, which ends then keeps. A failover measures
// against the ends its wait read after the tailer's checkpoint, so the
// records appended since (heartbeats, events past that checkpoint) do
// not make a database that has every event up to it look behind.
func groupCaughtUp(ctx context.Context, adm *kadm.Client, group string, topics kafka.Topics, dbs []string,
	caught map[string]bool, committed, ends map[string]int64) (bool, error) {
	var ask []string
	for _, db := range dbs {
		if _, ok := ends[db]; !ok {
			ask = append(ask, topics.Events(db))
		}
	}
	if len(ask) > 0 {
		listed, err := adm.ListEndOffsets(ctx, ask...)
		if err != nil {
			return false, fmt.Errorf("kafka: end offsets: %w", err)
		}
		for _, db := range dbs {
			// A topic the tailer has not created yet has no end.
			if end, ok := listed.Lookup(topics.Events(db), 0); ok && end.Err == nil {
				ends[db] = end.Offset
			}
		}
	}
	offs, err := adm.FetchOffsets(ctx, group)
	if err != nil {
		return false, fmt.Errorf("kafka: offsets of the applier group %s: %w", group, err)
	}
	all := true
	for _, db := range dbs {
		t := topics.Events(db)
		c, cok := offs.Lookup(t, 0)
		committed[db] = 0
		if cok && c.Err == nil {
			committed[db] = c.At
		}
		// A topic the tailer has not created yet is not caught up.
		end, ok := ends[db]
		caught[db] = ok && committed[db] >= end
		all = all && caught[db]
	}
	return all, nil
}

// waiter waits for a pipeline's tailer and applier group.
type waiter struct {
	cl     *kgo.Client
	kopts  []kgo.Opt // the client options of every connection to the cluster
	adm    *kadm.Client
	dec    *schemas.Decoder
	conf   *config.Config
	topics kafka.Topics
	poll   time.Duration
}

// position is where a pipeline stood when a wait ended.
type position struct {
	cp        *schemas.TailerCheckpoint
	caught    map[string]bool
	committed map[string]int64
	ends      map[string]int64 // each topic's end offset, read after cp
}

// wait polls until the tailer's checkpoint reached event head (head < 0:
// the tailer is not waited for) and the applier group consumed every
// database's topic to its end, or until deadline; pos.behind says what
// did not get there. The checkpoint is read first, then the topics' ends,
// so every record up to the checkpoint is below the ends read after it.
func (w waiter) wait(ctx context.Context, dbs []string, head int64, deadline time.Time) (position, error) {
	pos := position{caught: map[string]bool{}, committed: map[string]int64{}}
	for {
		var err error
		if pos.cp, err = kafka.NewestCheckpoint(ctx, w.cl, w.kopts, w.topics.Checkpoints(), w.conf.Source.Name, w.dec); err != nil {
			return pos, err
		}
		pos.ends = map[string]int64{}
		all, err := groupCaughtUp(ctx, w.adm, w.conf.Applier.Group, w.topics, dbs, pos.caught, pos.committed, pos.ends)
		if err != nil {
			return pos, err
		}
		if (all && pos.tailerAt(head) && (head < 0 || len(pos.holding(dbs)) == 0)) || !time.Now().Before(deadline) {
			return pos, nil
		}
		select {
		case <-ctx.Done():
			return pos, ctx.Err()
		case <-time.After(w.poll):
		}
	}
}

// tailerAt reports whether the tailer's checkpoint reached head (any
// checkpoint, or none, when head < 0).
func (p position) tailerAt(head int64) bool {
	return head < 0 || (p.cp != nil && p.cp.LastEventID >= head)
}

// held returns the bootstrap of db the tailer's checkpoint has in
// progress or queued (any phase): while it is there the tailer publishes
// none of db's events after its cut, so db's topic consumed to its end
// does not mean DR has them.
func (p position) held(db string) (schemas.BootstrapState, bool) {
	if p.cp == nil {
		return schemas.BootstrapState{}, false
	}
	for _, b := range p.cp.Bootstraps {
		if strings.EqualFold(b.Database, db) {
			return b, true
		}
	}
	return schemas.BootstrapState{}, false
}

// holding names the databases of dbs a bootstrap in the tailer holds
// back (held).
func (p position) holding(dbs []string) []string {
	var out []string
	for _, db := range dbs {
		if b, ok := p.held(db); ok {
			out = append(out, fmt.Sprintf("database %s (a bootstrap in the tailer, %s, cut at event %d, holds its events back)", db, phaseOf(b), b.CutEventID))
		}
	}
	return out
}

// phaseOf says where a bootstrap in the tailer stands.
func phaseOf(b schemas.BootstrapState) string {
	switch {
	case b.Phase == schemas.PhaseCatchup:
		return "catching up after its END"
	case b.Seq == 0 && len(b.PublishedTables) == 0 && b.TableInProgress == "":
		return "queued"
	default:
		return "publishing its snapshot"
	}
}

// behind names what had not caught up when the wait ended: databases
// whose topic the group had not consumed to its end, those a bootstrap
// in the tailer holds back (when the tailer is waited for), and the
// tailer.
func (p position) behind(dbs []string, head int64) []string {
	var out []string
	for _, db := range dbs {
		if !p.caught[db] {
			out = append(out, "database "+db)
		}
	}
	if head >= 0 {
		out = append(out, p.holding(dbs)...)
	}
	if !p.tailerAt(head) {
		at := int64(0)
		if p.cp != nil {
			at = p.cp.LastEventID
		}
		out = append(out, fmt.Sprintf("the tailer (at event %d of the source head %d)", at, head))
	}
	return out
}

// WaitApplied waits, for up to timeout, until conf's tailer has
// published the source log up to event head (head < 0: not waited for)
// and its applier group has consumed the topics of dbs to their ends:
// every event up to head of those databases is applied on DR (or found
// to need nothing). Databases without a topic are not waited for (none:
// it returns at once). An error names what did not get there.
func WaitApplied(ctx context.Context, conf *config.Config, dbs []string, head int64, timeout time.Duration) error {
	kopts, err := connect.Kafka(conf.Kafka)
	if err != nil {
		return err
	}
	cl, err := kgo.NewClient(kopts...)
	if err != nil {
		return fmt.Errorf("kafka %s: %w", strings.Join(conf.Kafka.Brokers, ","), err)
	}
	defer cl.Close()
	dec, err := connect.Decoder(conf.SchemaRegistry)
	if err != nil {
		return err
	}
	w := waiter{cl: cl, kopts: kopts, adm: kadm.NewClient(cl), dec: dec, conf: conf, topics: kafka.Topics{Prefix: conf.Kafka.TopicPrefix, Site: conf.TopicSite()}, poll: 500 * time.Millisecond}
	// A database without a topic has nothing the applier could be at.
	var ts []string
	for _, db := range dbs {
		ts = append(ts, w.topics.Events(db))
	}
	td, err := w.adm.ListTopics(ctx, ts...)
	if err != nil {
		return fmt.Errorf("kafka: list topics: %w", err)
	}
	var with []string
	for _, db := range dbs {
		if t, ok := td[w.topics.Events(db)]; ok && t.Err == nil {
			with = append(with, db)
		}
	}
	if len(with) == 0 {
		return nil
	}
	dbs = with
	pos, err := w.wait(ctx, dbs, head, time.Now().Add(timeout))
	if err != nil {
		return err
	}
	if what := pos.behind(dbs, head); len(what) > 0 {
		return fmt.Errorf("%w after %s waiting for %s", ErrTimeout, timeout, strings.Join(what, ", "))
	}
	return nil
}

// SourceHead is the newest event ID of src's notification log.
func SourceHead(ctx context.Context, src config.Source, opts hms.Options) (int64, error) {
	return sourceHead(ctx, src, opts)
}

// record is what readBack keeps of one record of a database's topic.
type record struct {
	id        int64 // the event's ID, or the heartbeat's scanned event
	time      time.Time
	table     string
	heartbeat bool
}

// readBack reads a database's topic below offset end (what the applier
// group committed), backwards in growing windows, until it has every
// record after event after (or the topic's start).
func readBack(ctx context.Context, kopts []kgo.Opt, dec *schemas.Decoder, topic string, end, after int64) ([]record, error) {
	var out []record
	for n := int64(256); ; n *= 4 {
		from := max(0, end-n)
		recs, err := kafka.ReadCommitted(ctx, kopts, topic, 0, from, end)
		if err != nil {
			return nil, err
		}
		out = out[:0]
		older := from == 0
		for _, r := range recs {
			v, err := dec.Decode(ctx, r.Value)
			if err != nil {
				return nil, fmt.Errorf("%s offset %d: %w", topic, r.Offset, err)
			}
			switch v := v.(type) {
			case *schemas.Event:
				if v.EventID <= after {
					older = true
					continue
				}
				out = append(out, record{id: v.EventID, time: v.EventTime, table: strings.ToLower(v.Table)})
			case *schemas.Heartbeat:
				out = append(out, record{id: v.ScannedEventID, time: v.ScannedEventTime, heartbeat: true})
			}
		}
		if older || from == 0 {
			return out, nil
		}
	}
}

// countSourceLost is countLost on src's log, given a minute: with
// source.kind postgres the log is read from the metastore's database,
// which may answer while the metastore does not.
func countSourceLost(ctx context.Context, src config.Source, opts hms.Options, dbs []Database, cp *schemas.TailerCheckpoint) (map[string]int64, error) {
	octx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	s, err := hmslog.Open(octx, src, opts)
	if err != nil {
		return nil, fmt.Errorf("source %s: %w", src.Name, err)
	}
	defer s.Close()
	lost, err := countLost(octx, s, dbs, cp)
	if err != nil {
		return nil, fmt.Errorf("source %s: %w", src.Name, err)
	}
	return lost, nil
}

// countLost counts, per database, the events of the log s after what it
// reached (read from the oldest of them to the head, or from before the
// first allocation of a transaction cp says was open: its commit counts
// where it wrote): at a failover, every one of them is lost.
func countLost(ctx context.Context, s hmslog.Source, dbs []Database, cp *schemas.TailerCheckpoint) (map[string]int64, error) {
	from := int64(-1)
	counts := map[string]map[string]int{}
	for _, d := range dbs {
		counts[d.Database] = map[string]int{}
		if from < 0 || d.Reached < from {
			from = d.Reached
		}
	}
	lt := newLogTables()
	err := scanLog(ctx, s, scanFrom(from, cp), func(evs []hmslog.RawEvent) {
		touched := lt.touched(evs)
		for _, d := range dbs {
			changed(counts[d.Database], evs, touched, d.Database, d.Reached)
		}
	})
	if err != nil {
		return nil, err
	}
	out := map[string]int64{}
	for db, m := range counts {
		out[db] = int64(sum(m))
	}
	return out, nil
}

func stampOf(p map[string]string) int64 {
	var n int64
	fmt.Sscan(p[drparam.LastID], &n)
	return n
}
