package failover

import (
	"context"
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

// Run fails over the databases opts names. Everything is checked before
// anything changes: a database that is not this pipeline's replica, is
// being bootstrapped or failed over already makes Run fail untouched.
// Then it waits (planned: until the tailer's checkpoint reached the
// source log's head read at the start and the applier group consumed
// every topic to its end; unplanned: the group only), reads back what DR
// applied, chooses the cut, counts the RPO and marks each database
// (Mark), one metastore write each.
//
// The applier is not stopped: it refuses a failed-over database by
// itself (halt failed_over) once it reads the mark, within a second of
// its cached copy. An event that reaches the applier between the wait's
// end and the mark is applied before the mark; the operator should stop
// writes on the source (planned) before the failover.
func Run(ctx context.Context, conf *config.Config, opts Options) (*Report, error) {
	start := time.Now()
	if opts.Poll <= 0 {
		opts.Poll = 500 * time.Millisecond
	}
	log := opts.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	rep := &Report{Mode: opts.Mode, SourceHead: -1, DryRun: opts.DryRun}
	topics := kafka.Topics{Prefix: conf.Kafka.TopicPrefix}

	kopts, err := connect.Kafka(conf.Kafka)
	if err != nil {
		return nil, err
	}
	cl, err := kgo.NewClient(kopts...)
	if err != nil {
		return nil, fmt.Errorf("kafka %s: %w", strings.Join(conf.Kafka.Brokers, ","), err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	dec, err := connect.Decoder(conf.SchemaRegistry)
	if err != nil {
		return nil, err
	}
	dr, err := hms.Dial(ctx, conf.Applier.Metastore, conf.DRMetastoreOptions())
	if err != nil {
		return nil, fmt.Errorf("DR metastore: %w", err)
	}
	defer dr.Close()

	names, skipped, err := databases(ctx, adm, conf, topics, opts)
	if err != nil {
		return nil, err
	}
	rep.Skipped = skipped
	params := map[string]map[string]string{}
	var refused []string
	for _, db := range names {
		p, err := drParams(ctx, dr, db)
		if err != nil {
			return nil, err
		}
		// A database not on DR yet may be created by what the wait
		// applies; it is checked again after the wait.
		if err := Check(db, conf.Source.Name, p); err != nil && p != nil {
			refused = append(refused, err.Error())
		}
		params[db] = p
	}
	if len(refused) > 0 {
		return nil, fmt.Errorf("nothing changed: %s", strings.Join(refused, "; "))
	}

	if opts.Mode == Planned {
		if rep.SourceHead, err = sourceHead(ctx, conf.Source, conf.SourceMetastoreOptions()); err != nil {
			return nil, fmt.Errorf("a planned failover reads the source log's head (use -unplanned when the source is gone): %w", err)
		}
	}
	if opts.DryRun {
		return dryRun(ctx, cl, kopts, adm, dec, dr, conf, topics, opts, rep, names, params)
	}

	head := rep.SourceHead
	if opts.Mode == Unplanned {
		head = -1
	}
	w := waiter{cl: cl, kopts: kopts, adm: adm, dec: dec, conf: conf, topics: topics, poll: opts.Poll}
	pos, err := w.wait(ctx, names, head, start.Add(opts.Timeout))
	if err != nil {
		return nil, err
	}
	cp, caught, committed := pos.cp, pos.caught, pos.committed
	if what := pos.behind(names, head); len(what) > 0 {
		if opts.Mode == Planned {
			return nil, fmt.Errorf("%w after %s waiting for %s: nothing changed", ErrTimeout, opts.Timeout, strings.Join(what, ", "))
		}
		rep.Notes = append(rep.Notes, fmt.Sprintf("the wait timed out after %s: %s not caught up; failed over at what DR reached", opts.Timeout, strings.Join(what, ", ")))
	}
	rep.WaitSeconds = time.Since(start).Seconds()
	if cp != nil {
		rep.TailerEventID = cp.LastEventID
	}
	log.Info("DR applied what it can", "wait", time.Since(start).Round(time.Millisecond), "tailer_event_id", rep.TailerEventID)

	// Where each database stands, read again now that nothing moves.
	var set []string
	for _, db := range names {
		p, err := drParams(ctx, dr, db)
		if err != nil {
			return nil, err
		}
		if leaveOut(p, caught[db], opts.All) {
			rep.Skipped = append(rep.Skipped, Skipped{Database: db, Why: WhyDropped})
			continue
		}
		set = append(set, db)
		if err := Check(db, conf.Source.Name, p); err != nil {
			refused = append(refused, err.Error())
		}
		params[db] = p
		d := Database{Database: db, CaughtUp: caught[db], LastID: stampOf(p)}
		d.Reached = d.LastID
		if d.CaughtUp && cp != nil && cp.LastEventID >= d.Reached {
			d.Reached, d.ReachedTime = cp.LastEventID, cp.LastEventTime
		}
		// From the event at Reached on: its record dates it.
		recs, err := readBack(ctx, kopts, dec, topics.Events(db), committed[db], d.Reached-1)
		if err != nil {
			return nil, err
		}
		for _, r := range recs { // the newest applied record dates Reached
			switch {
			case r.heartbeat && r.id > d.Reached:
				d.Reached, d.ReachedTime = r.id, r.time
			case r.id == d.Reached && d.ReachedTime.IsZero():
				d.ReachedTime = r.time
			}
		}
		rep.Databases = append(rep.Databases, d)
	}
	if len(refused) > 0 {
		return nil, fmt.Errorf("nothing changed: %s", strings.Join(refused, "; "))
	}
	if len(rep.Databases) == 0 {
		return nil, fmt.Errorf("no database to fail over: %s", skippedText(rep.Skipped))
	}
	rep.Cut = Cut(rep.Databases)
	for i := range rep.Databases {
		d := &rep.Databases[i]
		recs, err := readBack(ctx, kopts, dec, topics.Events(d.Database), committed[d.Database], rep.Cut)
		if err != nil {
			return nil, err
		}
		var applied []Applied
		for _, r := range recs {
			if !r.heartbeat && r.id <= d.Reached {
				applied = append(applied, Applied{EventID: r.id, Table: r.table})
			}
		}
		d.Redo = Redo(rep.Cut, applied)
	}

	// The RPO: the source events of each database after what it reached.
	lost, lerr := countSourceLost(ctx, conf.Source, conf.SourceMetastoreOptions(), rep.Databases)
	if lerr != nil {
		if opts.Mode == Planned {
			return nil, fmt.Errorf("count the source events DR does not have: %w", lerr)
		}
		rep.Notes = append(rep.Notes, fmt.Sprintf("the source log cannot be read (%v): the events lost are unknown until failback reads it (and records them on each DR database); RPO seconds count from the newest source time DR is complete to", lerr))
	}
	drHead, err := sourceHead(ctx, config.Source{Name: "dr", Kind: config.SourceThrift, Metastore: conf.Applier.Metastore}, conf.DRMetastoreOptions())
	if err != nil {
		return nil, fmt.Errorf("the DR metastore's notification log (the reverse pipeline starts there): %w", err)
	}

	rep.At = time.Now().UTC()
	for i := range rep.Databases {
		d := &rep.Databases[i]
		d.LostEvents = -1
		if lerr == nil {
			d.LostEvents = lost[d.Database]
		}
		d.RPOSeconds, d.DRLogHead = RPO(*d, d.LostEvents, rep.At), drHead
	}
	for _, d := range rep.Databases {
		cur, err := dr.GetDatabase(ctx, d.Database)
		if err != nil {
			return rep, fmt.Errorf("get DR database %s: %w", d.Database, err)
		}
		if err := Check(d.Database, conf.Source.Name, cur.Parameters); err != nil {
			return rep, fmt.Errorf("changed while failing over: %w", err)
		}
		cur.Parameters = Mark(cur.Parameters, d, opts.Mode, rep.Cut, set, rep.At)
		if err := dr.AlterDatabase(ctx, d.Database, cur); err != nil {
			return rep, fmt.Errorf("mark DR database %s failed over: %w", d.Database, err)
		}
		log.Info("database failed over", "db", d.Database, "event_id", d.Reached, "rpo_events", d.LostEvents, "rpo_seconds", d.RPOSeconds)
	}
	// Marked: the applier refuses the databases from now on; what it left
	// open for source transactions that never ended goes (txns.go).
	aborted, note, err := abortReplTxns(ctx, dr, set, applierSettle)
	for i := range rep.Databases {
		d := &rep.Databases[i]
		d.ReplTxns = aborted[d.Database]
		if len(d.ReplTxns) > 0 {
			log.Info("aborted DR transactions of source transactions that never ended", "db", d.Database, "txns", d.ReplTxns)
		}
	}
	if note != "" {
		rep.Notes = append(rep.Notes, note)
	}
	if err != nil {
		// The databases are failed over; what is left is the operator's.
		log.Error("could not abort the DR transactions left open by source transactions that never ended", "err", err)
		rep.Notes = append(rep.Notes, fmt.Sprintf("could not abort the DR transactions source transactions left open (%v): "+
			"abort those of user hivedr whose host is %s<database> (abort_txns), or their write IDs stay open", err, drparam.ReplTxnAgentPrefix))
	}
	rep.Seconds = time.Since(start).Seconds()
	return rep, nil
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
	if _, err := groupCaughtUp(ctx, adm, conf.Applier.Group, topics, names, caught, committed); err != nil {
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
func groupCaughtUp(ctx context.Context, adm *kadm.Client, group string, topics kafka.Topics, dbs []string,
	caught map[string]bool, committed map[string]int64) (bool, error) {
	var ts []string
	for _, db := range dbs {
		ts = append(ts, topics.Events(db))
	}
	ends, err := adm.ListEndOffsets(ctx, ts...)
	if err != nil {
		return false, fmt.Errorf("kafka: end offsets: %w", err)
	}
	offs, err := adm.FetchOffsets(ctx, group)
	if err != nil {
		return false, fmt.Errorf("kafka: offsets of the applier group %s: %w", group, err)
	}
	all := true
	for _, db := range dbs {
		t := topics.Events(db)
		end, ok := ends.Lookup(t, 0)
		c, cok := offs.Lookup(t, 0)
		committed[db] = 0
		if cok && c.Err == nil {
			committed[db] = c.At
		}
		// A topic the tailer has not created yet is not caught up.
		caught[db] = ok && end.Err == nil && committed[db] >= end.Offset
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
		all, err := groupCaughtUp(ctx, w.adm, w.conf.Applier.Group, w.topics, dbs, pos.caught, pos.committed)
		if err != nil {
			return pos, err
		}
		if (all && pos.tailerAt(head)) || !time.Now().Before(deadline) {
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

// behind names what had not caught up when the wait ended: databases
// whose topic the group had not consumed to its end, and the tailer.
func (p position) behind(dbs []string, head int64) []string {
	var out []string
	for _, db := range dbs {
		if !p.caught[db] {
			out = append(out, "database "+db)
		}
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
	w := waiter{cl: cl, kopts: kopts, adm: kadm.NewClient(cl), dec: dec, conf: conf, topics: kafka.Topics{Prefix: conf.Kafka.TopicPrefix}, poll: 500 * time.Millisecond}
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
func countSourceLost(ctx context.Context, src config.Source, opts hms.Options, dbs []Database) (map[string]int64, error) {
	octx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	s, err := hmslog.Open(octx, src, opts)
	if err != nil {
		return nil, fmt.Errorf("source %s: %w", src.Name, err)
	}
	defer s.Close()
	lost, err := countLost(octx, s, dbs)
	if err != nil {
		return nil, fmt.Errorf("source %s: %w", src.Name, err)
	}
	return lost, nil
}

// countLost counts, per database, the events of the log s after what it
// reached (read from the oldest of them to the head): at a failover,
// every one of them is lost.
func countLost(ctx context.Context, s hmslog.Source, dbs []Database) (map[string]int64, error) {
	from := int64(-1)
	changed := map[string]map[string]int{}
	for _, d := range dbs {
		changed[d.Database] = map[string]int{}
		if from < 0 || d.Reached < from {
			from = d.Reached
		}
	}
	err := scanLog(ctx, s, from, func(evs []hmslog.RawEvent) {
		for _, d := range dbs {
			Changed(changed[d.Database], evs, d.Database, d.Reached)
		}
	})
	if err != nil {
		return nil, err
	}
	out := map[string]int64{}
	for db, m := range changed {
		out[db] = int64(sum(m))
	}
	return out, nil
}

func stampOf(p map[string]string) int64 {
	var n int64
	fmt.Sscan(p[drparam.LastID], &n)
	return n
}
