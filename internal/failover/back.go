package failover

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"os/user"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/hivedr/hivedr/internal/bootstrap"
	"github.com/hivedr/hivedr/internal/config"
	"github.com/hivedr/hivedr/internal/connect"
	"github.com/hivedr/hivedr/internal/drparam"
	"github.com/hivedr/hivedr/internal/hms"
	"github.com/hivedr/hivedr/internal/hmslog"
	"github.com/hivedr/hivedr/internal/kafka"
	"github.com/hivedr/hivedr/schemas"
)

// CheckReverse lists what is wrong with rev as the reverse of the forward
// pipeline fwd: its source must be fwd's DR metastore and its DR fwd's
// source metastore, under a name and topic prefix of its own, with the
// databases in its scope, and its tailer, when it has no checkpoint yet,
// starting at the DR log position the failover recorded (drLogHead, the
// oldest of the set) or before it.
func CheckReverse(fwd, rev *config.Config, dbs []string, drLogHead int64) []string {
	var out []string
	if rev.Source.Kind != config.SourceThrift || rev.Source.Metastore != fwd.Applier.Metastore {
		out = append(out, fmt.Sprintf("source.metastore is %q: the reverse pipeline reads the forward DR metastore %s (kind thrift)", rev.Source.Metastore, fwd.Applier.Metastore))
	}
	if rev.Applier.Metastore != fwd.Source.Metastore {
		out = append(out, fmt.Sprintf("applier.metastore is %q: the reverse pipeline writes into the old primary's metastore %s", rev.Applier.Metastore, fwd.Source.Metastore))
	}
	if rev.Source.Name == fwd.Source.Name {
		out = append(out, fmt.Sprintf("source.name %q is the forward pipeline's: the reverse one needs its own (it marks its replicas with it)", rev.Source.Name))
	}
	if rev.Kafka.TopicPrefix == fwd.Kafka.TopicPrefix {
		out = append(out, fmt.Sprintf("kafka.topic_prefix %q is the forward pipeline's: the reverse one needs its own topics", rev.Kafka.TopicPrefix))
	}
	if rev.Applier.Group == fwd.Applier.Group {
		out = append(out, fmt.Sprintf("applier.group %q is the forward pipeline's", rev.Applier.Group))
	}
	for _, db := range dbs {
		if _, ok := rev.Replication.Scope(db); !ok {
			out = append(out, fmt.Sprintf("replication.databases does not hold %s", db))
		}
	}
	if start, err := strconv.ParseInt(rev.Tailer.StartEventID, 10, 64); err != nil || start > drLogHead {
		out = append(out, fmt.Sprintf("tailer.start_event_id is %q: a reverse tailer without a checkpoint starts after %d, the DR log's head when the failover was recorded", rev.Tailer.StartEventID, drLogHead))
	}
	return out
}

// changed collects the tables of db that events after event after
// change (lower case), counting the events; database-level events count
// under "". touched are the tables of each event (logTables.touched): a
// transaction's commit or abort counts where it wrote.
func changed(into map[string]int, evs []hmslog.RawEvent, touched [][]tableRef, db string, after int64) {
	countTouched(into, evs, touched, db, after, nil)
}

// splitAtFailover counts the events of db after event after that the
// old primary's log holds, by table ("" for database-level events), into
// lost, those written at or before the failover at (what the failover
// could not have: its RPO in events), and late, those written on the old
// primary after it. The log keeps an event's time in whole seconds, and
// the failover's record keeps at to the second: an event of the
// failover's own second counts as lost, so the split errs toward a larger
// loss. The times are the old primary's clock and the failover's host's.
func splitAtFailover(lost, late map[string]int, evs []hmslog.RawEvent, touched [][]tableRef, db string, after int64, at time.Time) {
	cut := at.Unix()
	countTouched(lost, evs, touched, db, after, func(e hmslog.RawEvent) bool { return e.EventTime <= cut })
	countTouched(late, evs, touched, db, after, func(e hmslog.RawEvent) bool { return e.EventTime > cut })
}

// RecordLost returns the parameters of a failed-over DR database with
// the events its failover lost, as failback counted them at at (the
// failover recorded them unknown): hivedr.failover.rpo_events, and
// rpo_counted_at; the RPO in seconds becomes 0 when nothing was lost.
// params is not changed.
func RecordLost(params map[string]string, lost int, at time.Time) map[string]string {
	out := make(map[string]string, len(params)+2)
	for k, v := range params {
		out[k] = v
	}
	out[drparam.FailoverRPOEvents] = strconv.Itoa(lost)
	out[drparam.FailoverRPOCountedAt] = at.UTC().Format(time.RFC3339)
	if lost == 0 {
		out[drparam.FailoverRPOSeconds] = strconv.FormatFloat(0, 'f', 1, 64)
	}
	return out
}

func sum(m map[string]int) int {
	n := 0
	for _, v := range m {
		n += v
	}
	return n
}

// BackDatabase is what failback decided for one database.
type BackDatabase struct {
	Database string `json:"database"`
	// EventID and DRLogHead are the failover's record: the old source's
	// event DR reflected, and the DR log's head.
	EventID   int64 `json:"failover_event_id"`
	DRLogHead int64 `json:"dr_log_head"`
	// FailedOverAt is the failover's time, as recorded.
	FailedOverAt time.Time `json:"failed_over_at"`
	// SourceChanged are the old primary's tables changed after EventID
	// (events DR never got: the unplanned loss, or writes after the
	// failover), with their event counts; SourceEvents their total.
	SourceChanged map[string]int `json:"source_changed"`
	SourceEvents  int            `json:"source_events_after_failover_event"`
	// LostEvents and LateEvents split SourceEvents at FailedOverAt
	// (SplitAtFailover): those written at or before the failover, which it
	// lost (its RPO in events), and those written after it.
	LostEvents int `json:"lost_events"`
	LateEvents int `json:"late_events"`
	// RecordedLost is the RPO in events the failover recorded (-1:
	// unknown, the source was unreadable). RPORecorded: it was unknown,
	// and failback wrote LostEvents on the DR database (RecordLost).
	RecordedLost int64 `json:"failover_rpo_events"`
	RPORecorded  bool  `json:"rpo_events_recorded"`
	// DRChanged are the new primary's tables changed since the failover.
	DRChanged map[string]int `json:"dr_changed"`
	// Moved are the tables re-bootstrapped (changed on either side); the
	// rest resume incrementally from DRLogHead.
	Moved     []string `json:"moved_tables"`
	Unchanged int      `json:"unchanged_tables"`
	RequestID string   `json:"bootstrap_request_id,omitempty"`
}

// BackReport is the outcome of a failback.
type BackReport struct {
	Databases []BackDatabase `json:"databases"`
	// MovedTables counts the tables moved, over every database.
	MovedTables int     `json:"moved_tables"`
	Seconds     float64 `json:"seconds"`
}

// Moved is the union of the tables changed on either side, sorted; ""
// (database-level events) is not a table.
func Moved(src, dr map[string]int) []string {
	var out []string
	seen := map[string]bool{}
	for _, m := range []map[string]int{src, dr} {
		for t := range m {
			if t != "" && !seen[t] {
				seen[t] = true
				out = append(out, t)
			}
		}
	}
	sort.Strings(out)
	return out
}

// CheckOldPrimary refuses an old primary's database that failback cannot
// make the reverse pipeline's replica: not there (params nil), the
// replica of another pipeline, or this reverse pipeline's replica already
// (failback ran to its end: it runs once, unless again). One a failback
// marked but did not finish (the new primary's database, drParams, has no
// drparam.FailbackDone for its failover: cut short before its requests
// were written, by a Kafka or metastore outage) is resumed. revMark is
// the reverse pipeline's drparam.TargetMark.
func CheckOldPrimary(db string, params, drParams map[string]string, revMark string, again bool) error {
	switch t := params[drparam.Target]; {
	case params == nil:
		return fmt.Errorf("database %s: not on the old primary (bootstrap it there with the reverse pipeline instead)", db)
	case t != "" && t != revMark:
		return fmt.Errorf("database %s on the old primary is a replica of %q already", db, t)
	case t == revMark && drParams[drparam.FailbackDone] != drParams[drparam.FailedOverAt]:
		return nil // cut short: resumed
	case t == revMark && !again:
		at := params[drparam.FailbackAt]
		if at == "" {
			at = "an unknown time"
		}
		return fmt.Errorf("database %s on the old primary is the reverse pipeline's replica already (failed back at %s, from DR log event %s): "+
			"a failback runs once; add -again to mark it and request its tables' bootstrap again", db, at, params[drparam.FailbackDRLogHead])
	}
	return nil
}

// BackOptions are what `hivedr failback` was asked.
type BackOptions struct {
	// Databases are the failed-over databases to fail back.
	Databases []string
	// Again fails back a database whose old primary is the reverse
	// pipeline's replica already (an earlier failback marked it): marked
	// again at the failover's DR log head, its changed tables requested
	// again.
	Again bool
	Log   *slog.Logger
}

// Failback makes the old primary (fwd's source) the replica of the new
// one (fwd's DR) through the reverse pipeline rev, for the failed-over
// databases opts names: it checks rev (CheckReverse) and each old
// primary's database (CheckOldPrimary), reads both logs after the
// failover's record, marks each old-primary database as rev's replica at
// the DR log's recorded head (so the reverse applier applies every DR
// event after it) and writes one table-scoped bootstrap request per
// database with changed tables to rev's control topic. The reverse
// pipeline's daemons do the rest; this returns once the requests are
// written.
func Failback(ctx context.Context, fwd, rev *config.Config, opts BackOptions) (*BackReport, error) {
	b := &failingBack{fwd: fwd, rev: rev, opts: opts, log: opts.Log, start: time.Now(), rep: &BackReport{}}
	if b.log == nil {
		b.log = slog.New(slog.DiscardHandler)
	}
	var err error
	if b.dr, err = hms.Dial(ctx, fwd.Applier.Metastore, fwd.DRMetastoreOptions()); err != nil {
		return nil, fmt.Errorf("the new primary (forward DR) metastore: %w", err)
	}
	defer b.dr.Close()
	if b.old, err = hms.Dial(ctx, fwd.Source.Metastore, fwd.SourceMetastoreOptions()); err != nil {
		return nil, fmt.Errorf("the old primary's metastore: %w", err)
	}
	defer b.old.Close()

	minEvent, minHead, err := b.checkFailedOver(ctx)
	if err != nil {
		return nil, err
	}
	if probs := CheckReverse(fwd, rev, opts.Databases, minHead); len(probs) > 0 {
		return nil, fmt.Errorf("the reverse configuration %s: %s", rev.File(), strings.Join(probs, "; "))
	}
	if err := b.scanLogs(ctx, minEvent, minHead); err != nil {
		return nil, err
	}

	kopts, err := connect.Kafka(rev.Kafka)
	if err != nil {
		return nil, fmt.Errorf("the reverse pipeline's %w", err)
	}
	cl, err := kgo.NewClient(kopts...)
	if err != nil {
		return nil, fmt.Errorf("kafka %s: %w", strings.Join(rev.Kafka.Brokers, ","), err)
	}
	defer cl.Close()
	serde, err := connect.Serde(ctx, rev.SchemaRegistry)
	if err != nil {
		return nil, err
	}
	by := requestedBy()
	for i := range b.rep.Databases {
		if err := b.handBack(ctx, &b.rep.Databases[i], cl, serde, by); err != nil {
			return nil, err
		}
	}
	b.rep.Seconds = time.Since(b.start).Seconds()
	return b.rep, nil
}

// failingBack is one failback under way: the forward and reverse
// configurations, both metastores, and its report as the steps of
// Failback fill it.
type failingBack struct {
	fwd, rev *config.Config
	opts     BackOptions
	log      *slog.Logger
	start    time.Time
	dr, old  *hms.Client // the new primary (forward DR) and the old primary
	rep      *BackReport
}

// checkFailedOver checks that each database was failed over from this
// pipeline's source and that the old primary may become its replica, and
// starts its row of the report. It returns the oldest failover event and
// DR log head among them, where the logs are read from.
func (b *failingBack) checkFailedOver(ctx context.Context) (minEvent, minHead int64, err error) {
	minEvent, minHead = -1, -1
	for _, db := range b.opts.Databases {
		p, err := drParams(ctx, b.dr, db)
		if err != nil {
			return 0, 0, err
		}
		r, ok, err := ReadRecord(p)
		switch {
		case err != nil:
			return 0, 0, fmt.Errorf("database %s: %w", db, err)
		case !ok:
			return 0, 0, fmt.Errorf("database %s: not failed over on DR (no %s): nothing to fail back", db, drparam.FailedOverAt)
		case r.WasTargetFor != drparam.TargetMark(b.fwd.Source.Name):
			return 0, 0, fmt.Errorf("database %s: failed over from %q, not from this pipeline's source %s", db, r.WasTargetFor, b.fwd.Source.Name)
		}
		op, err := drParams(ctx, b.old, db)
		if err != nil {
			return 0, 0, fmt.Errorf("old primary: %w", err)
		}
		if err := CheckOldPrimary(db, op, p, drparam.TargetMark(b.rev.Source.Name), b.opts.Again); err != nil {
			return 0, 0, err
		}
		b.rep.Databases = append(b.rep.Databases, BackDatabase{Database: db, EventID: r.EventID, DRLogHead: r.DRLogHead, FailedOverAt: r.At,
			SourceChanged: map[string]int{}, DRChanged: map[string]int{}, RecordedLost: r.LostEvents})
		if minEvent < 0 || r.EventID < minEvent {
			minEvent = r.EventID
		}
		if minHead < 0 || r.DRLogHead < minHead {
			minHead = r.DRLogHead
		}
	}
	return minEvent, minHead, nil
}

// scanLogs reads both logs after the failover: the old primary's from
// minEvent (the tables it changed since, and the events the failover
// lost or that came after it) and the new primary's from minHead (the
// tables changed there).
func (b *failingBack) scanLogs(ctx context.Context, minEvent, minHead int64) error {
	dbs := b.rep.Databases
	lost, late := make([]map[string]int, len(dbs)), make([]map[string]int, len(dbs))
	for i := range dbs {
		lost[i], late[i] = map[string]int{}, map[string]int{}
	}
	// From before the allocations of the transactions open at the forward
	// tailer's last checkpoint: their commits on the old primary count
	// where they wrote.
	cp, err := forwardCheckpoint(ctx, b.fwd)
	if err != nil {
		b.log.Warn("the forward tailer's checkpoint cannot be read: a transaction that allocated write IDs before the failover and committed on the old primary after it is counted only if its allocation is after the failover's event", "err", err)
	}
	from := scanFrom(minEvent, cp)
	srcTables := newLogTables()
	if err := scanSource(ctx, b.fwd.Source, b.fwd.SourceMetastoreOptions(), from, func(evs []hmslog.RawEvent) {
		touched := srcTables.touched(evs)
		for i := range dbs {
			d := &dbs[i]
			changed(d.SourceChanged, evs, touched, d.Database, d.EventID)
			splitAtFailover(lost[i], late[i], evs, touched, d.Database, d.EventID, d.FailedOverAt)
		}
	}); err != nil {
		return fmt.Errorf("the old primary's log after event %d: %w", from, err)
	}
	for i := range dbs {
		dbs[i].LostEvents, dbs[i].LateEvents = sum(lost[i]), sum(late[i])
	}
	drTables := newLogTables()
	if err := scanSource(ctx, b.rev.Source, b.rev.SourceMetastoreOptions(), minHead, func(evs []hmslog.RawEvent) {
		touched := drTables.touched(evs)
		for i := range dbs {
			d := &dbs[i]
			changed(d.DRChanged, evs, touched, d.Database, d.DRLogHead)
		}
	}); err != nil {
		return fmt.Errorf("the new primary's log after event %d: %w", minHead, err)
	}
	return nil
}

// handBack fails one database back: it decides the tables to move,
// records on DR what its failover lost when that was unknown, makes the
// old primary's database the reverse pipeline's replica, asks the
// reverse applier to plan it again and requests the bootstrap of the
// tables moved.
func (b *failingBack) handBack(ctx context.Context, d *BackDatabase, cl *kgo.Client, serde *schemas.Serde, by string) error {
	if err := b.tablesMoved(ctx, d); err != nil {
		return err
	}
	if err := b.recordLost(ctx, d); err != nil {
		return err
	}
	if err := b.markReplica(ctx, d); err != nil {
		return err
	}
	if err := b.requestMoves(ctx, d, cl, serde, by); err != nil {
		return err
	}
	if err := b.markDone(ctx, d); err != nil {
		return err
	}
	b.rep.MovedTables += len(d.Moved)
	b.log.Info("failing back", "db", d.Database, "moved_tables", d.Moved, "unchanged_tables", d.Unchanged, "source_events_after_failover", d.SourceEvents,
		"lost_events", d.LostEvents, "late_events", d.LateEvents)
	return nil
}

// tablesMoved sets d's source events, the tables to move (Moved) and how
// many of the new primary's tables stay as they are.
func (b *failingBack) tablesMoved(ctx context.Context, d *BackDatabase) error {
	for _, n := range d.SourceChanged {
		d.SourceEvents += n
	}
	d.Moved = Moved(d.SourceChanged, d.DRChanged)
	tables, err := b.dr.GetAllTables(ctx, d.Database)
	if err != nil {
		return fmt.Errorf("tables of %s on the new primary: %w", d.Database, err)
	}
	for _, t := range tables {
		if !contains(d.Moved, strings.ToLower(t)) {
			d.Unchanged++
		}
	}
	return nil
}

// recordLost records on the DR database the events its failover lost,
// when the failover could not count them: now they are known.
func (b *failingBack) recordLost(ctx context.Context, d *BackDatabase) error {
	if d.RecordedLost >= 0 {
		return nil
	}
	cur, err := b.dr.GetDatabase(ctx, d.Database)
	if err != nil {
		return fmt.Errorf("get DR database %s: %w", d.Database, err)
	}
	cur.Parameters = RecordLost(cur.Parameters, d.LostEvents, time.Now())
	if err := b.dr.AlterDatabase(ctx, d.Database, cur); err != nil {
		return fmt.Errorf("record on DR database %s the %d event(s) its failover lost: %w", d.Database, d.LostEvents, err)
	}
	d.RPORecorded = true
	return nil
}

// markReplica makes the old primary's database the reverse pipeline's
// replica at the DR log's recorded head (MarkReplica).
func (b *failingBack) markReplica(ctx context.Context, d *BackDatabase) error {
	odb, err := b.old.GetDatabase(ctx, d.Database)
	if err != nil {
		return fmt.Errorf("old primary: get database %s: %w", d.Database, err)
	}
	rev := drparam.TargetMark(b.rev.Source.Name)
	keep := !b.opts.Again && odb.Parameters[drparam.Target] == rev && odb.Parameters[drparam.FailbackDRLogHead] == strconv.FormatInt(d.DRLogHead, 10)
	if keep {
		b.log.Info("resuming a failback cut short: the old primary's database keeps its position", "db", d.Database, "last_id", odb.Parameters[drparam.LastID])
	}
	odb.Parameters = MarkReplica(odb.Parameters, rev, d.DRLogHead, keep, time.Now())
	if err := b.old.AlterDatabase(ctx, d.Database, odb); err != nil {
		return fmt.Errorf("old primary: mark %s a replica of %s: %w", d.Database, b.rev.Source.Name, err)
	}
	return nil
}

// MarkReplica returns an old primary database's parameters marked as
// the replica revMark names from the new primary's log head on. keep
// (resuming a failback cut short after it marked the database) keeps the
// database's position and mark time: the reverse applier may have
// applied events after the head since.
func MarkReplica(params map[string]string, revMark string, drLogHead int64, keep bool, now time.Time) map[string]string {
	out := maps.Clone(params)
	if out == nil {
		out = map[string]string{}
	}
	head := strconv.FormatInt(drLogHead, 10)
	out[drparam.Target] = revMark
	if !keep || out[drparam.LastID] == "" {
		out[drparam.LastID] = head
	}
	if !keep || out[drparam.FailbackAt] == "" {
		out[drparam.FailbackAt] = now.UTC().Format(time.RFC3339)
	}
	out[drparam.FailbackDRLogHead] = head
	delete(out, drparam.Halted)
	return out
}

// markDone records on the new primary's database that the failback of
// its failover finished (drparam.FailbackDone): a run after it is
// refused unless asked to run again. (The new primary's database, not
// the old one's, which the reverse applier writes from now on.)
func (b *failingBack) markDone(ctx context.Context, d *BackDatabase) error {
	cur, err := b.dr.GetDatabase(ctx, d.Database)
	if err != nil {
		return fmt.Errorf("get DR database %s: %w", d.Database, err)
	}
	cur.Parameters[drparam.FailbackDone] = cur.Parameters[drparam.FailedOverAt]
	if err := b.dr.AlterDatabase(ctx, d.Database, cur); err != nil {
		return fmt.Errorf("record on DR database %s that its failback finished: %w", d.Database, err)
	}
	return nil
}

// requestMoves asks the reverse applier to plan the database again (one
// that ran before the mark halted it: not_a_replica) and the reverse
// tailer to bootstrap the tables moved.
func (b *failingBack) requestMoves(ctx context.Context, d *BackDatabase, cl *kgo.Client, serde *schemas.Serde, by string) error {
	rev := b.rev
	c := schemas.ApplierControl{Kind: schemas.ControlReplan, Database: d.Database, By: by, At: time.Now().UTC()}
	if err := kafka.SendApplierControl(ctx, cl, kafka.Topics{Prefix: rev.Kafka.TopicPrefix}, rev.Kafka.ReplicationFactor, rev.Kafka.PrecreatedTopics, c); err != nil {
		return fmt.Errorf("ask the reverse applier to plan %s again: %w", d.Database, err)
	}
	if len(d.Moved) == 0 {
		return nil
	}
	o, err := bootstrap.Options{Databases: []string{d.Database}, Tables: d.Moved}.Validate()
	if err != nil {
		return fmt.Errorf("bootstrap request for %s: %w", d.Database, err)
	}
	req := bootstrap.Request(o, rev.Source.Name, by, time.Now())
	if _, err := bootstrap.Write(ctx, cl, serde, kafka.Topics{Prefix: rev.Kafka.TopicPrefix}, rev.Kafka, &req); err != nil {
		return err
	}
	d.RequestID = req.RequestID
	return nil
}

func contains(s []string, v string) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

// scanSource hands fn the log of src after event after, in pages, to its
// head.
func scanSource(ctx context.Context, src config.Source, opts hms.Options, after int64, fn func([]hmslog.RawEvent)) error {
	s, err := hmslog.Open(ctx, src, opts)
	if err != nil {
		return err
	}
	defer s.Close()
	return scanLog(ctx, s, after, fn)
}

// scanLog hands fn the log s reads after event after, in pages, to its
// head.
func scanLog(ctx context.Context, s hmslog.Source, after int64, fn func([]hmslog.RawEvent)) error {
	for {
		evs, err := s.Next(ctx, after, 1000)
		if err != nil {
			return err
		}
		if len(evs) == 0 {
			return nil
		}
		fn(evs)
		after = evs[len(evs)-1].EventID
	}
}

func requestedBy() string {
	name := "unknown"
	if u, err := user.Current(); err == nil {
		name = u.Username
	}
	host, _ := os.Hostname()
	return name + "@" + host
}

// forwardCheckpoint is the forward tailer's newest checkpoint (nil when
// it has none).
func forwardCheckpoint(ctx context.Context, fwd *config.Config) (*schemas.TailerCheckpoint, error) {
	kopts, err := connect.Kafka(fwd.Kafka)
	if err != nil {
		return nil, err
	}
	cl, err := kgo.NewClient(kopts...)
	if err != nil {
		return nil, fmt.Errorf("kafka %s: %w", strings.Join(fwd.Kafka.Brokers, ","), err)
	}
	defer cl.Close()
	dec, err := connect.Decoder(fwd.SchemaRegistry)
	if err != nil {
		return nil, err
	}
	return kafka.NewestCheckpoint(ctx, cl, kopts, kafka.Topics{Prefix: fwd.Kafka.TopicPrefix}.Checkpoints(), fwd.Source.Name, dec)
}
