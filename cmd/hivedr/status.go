package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/beltran/gohive/hive_metastore"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/hivedr/hivedr/applier"
	"github.com/hivedr/hivedr/internal/config"
	"github.com/hivedr/hivedr/internal/hms"
	"github.com/hivedr/hivedr/internal/kafka"
	"github.com/hivedr/hivedr/producer"
	"github.com/hivedr/hivedr/schemas"
)

// Database states in `hivedr status`.
const (
	stateOK        = "ok"
	stateLagging   = "lagging"
	stateHalted    = "HALTED"
	stateNoTopic   = "no topic"
	stateNotOnDR   = "not on DR"
	stateNotTarget = "not a target"
	stateUnknown   = "unknown"
)

// statusReport is what `hivedr status` prints: the tailer's position, one
// row per replicated database, totals, and what could not be reached.
type statusReport struct {
	Time      time.Time       `json:"time"`
	Tailer    tailerStatus    `json:"tailer"`
	Applier   applierStatus   `json:"applier"`
	Databases []dbStatus      `json:"databases"`
	Total     statusTotal     `json:"total"`
	CaughtUp  bool            `json:"caught_up"`
	Errors    []string        `json:"errors,omitempty"`
	required  map[string]bool // databases named with -db
}

type tailerStatus struct {
	Source string `json:"source"`
	// CheckpointEventID is the newest event the tailer published (or
	// filtered), from <prefix>.tailer.checkpoints; 0 with no checkpoint.
	CheckpointEventID int64     `json:"checkpoint_event_id"`
	CheckpointWritten time.Time `json:"checkpoint_written,omitzero"`
	// SourceHeadEventID is the source log's newest event when status
	// started; 0 when the source could not be read.
	SourceHeadEventID int64 `json:"source_head_event_id"`
	// CaughtUp: the checkpoint reached the source head within -tailer-wait.
	CaughtUp bool `json:"caught_up"`
	// Unknown: the checkpoint could not be read (see the report's errors).
	Unknown bool `json:"unknown,omitempty"`
}

type applierStatus struct {
	Group     string `json:"group"`
	Members   int    `json:"members"` // -1: unknown
	Metastore string `json:"dr_metastore"`
}

type dbStatus struct {
	Database    string `json:"database"`
	Topic       string `json:"topic"`
	TopicExists bool   `json:"topic_exists"`
	InConfig    bool   `json:"in_config"`
	// OnDR: the DR metastore has the database; ReplTarget is its
	// repl.target.for and LastEventID its repl.last.id (0 when absent).
	OnDR        bool           `json:"on_dr"`
	ReplTarget  string         `json:"repl_target_for,omitempty"`
	LastEventID int64          `json:"repl_last_id"`
	Halted      string         `json:"halted,omitempty"`
	Skipped     []skippedEvent `json:"skipped,omitempty"`
	Committed   int64          `json:"committed_offset"` // -1: the group has committed nothing
	End         int64          `json:"end_offset"`       // last stable offset
	Lag         int64          `json:"lag"`              // records; -1 unknown
	Behind      *float64       `json:"behind_seconds,omitempty"`
	Newest      time.Time      `json:"newest_record_time,omitzero"`
	NewestType  string         `json:"newest_record_type,omitempty"`
	State       string         `json:"state"`
	known       struct{ dr, kafka bool }
}

type skippedEvent struct {
	EventID int64  `json:"event_id"`
	Note    string `json:"note"`
}

type statusTotal struct {
	Databases int   `json:"databases"`
	Lag       int64 `json:"lag"`
	Lagging   int   `json:"lagging"`
	Halted    int   `json:"halted"`
	Skipped   int   `json:"skipped"`
}

func runStatus(args []string, stdout, stderr io.Writer) int {
	fl, cf := newFlagSet("status", "Usage: hivedr status [flags]\n\n"+
		"Show, per replicated database (the <prefix>.events.<db> topics in Kafka and the names in\n"+
		"replication.databases): the DR database's repl.last.id, whether its applier worker halted\n"+
		"and why (hivedr.halted), events skipped by operators (hivedr.skipped.*), and the applier\n"+
		"group's lag on the database's topic, with the tailer's checkpoint against the source log.\n\n"+
		"Columns: REPL.LAST.ID the last source event applied to the DR database (- when it is not\n"+
		"on the DR); LAG records (events, heartbeats, transaction markers) of the topic the\n"+
		"applier group has not committed, up to the last stable offset; BEHIND how long ago the\n"+
		"oldest of them was published; NEWEST RECORD the age of the topic's newest event or\n"+
		"heartbeat; SKIPPED events skipped with apply -skip-event; STATE ok, lagging, HALTED,\n"+
		"no topic, not on DR, not a target (a DR database without repl.target.for), unknown.\n\n"+
		"Exit status: 0 when the tailer has published the source log as it was when status\n"+
		"started and every database is applied to its topic's end with none halted; 1 when some\n"+
		"lag, halted, or a system could not be reached; 2 on bad flags or configuration. So a\n"+
		"script can wait with: until hivedr status -db finance >/dev/null; do sleep 2; done", stderr)
	asJSON := fl.Bool("json", false, "print the report as one JSON object instead of a table")
	dbList := fl.String("db", "", "only these databases, comma-separated; each must have its topic and its DR database to count as caught up")
	tailerWait := fl.Duration("tailer-wait", 5*time.Second, "how long to wait for the tailer's checkpoint to reach the source log's head before calling it behind")
	timeout := fl.Duration("timeout", 30*time.Second, "give up on unreachable systems after this long in all")
	fl.Lookup("log-level").Usage = "accepted like every command's; status logs nothing"
	conf, _, ok := setup(fl, cf, args, stderr)
	if !ok {
		return exitUsage
	}
	if fl.NArg() > 0 {
		fmt.Fprintf(stderr, "hivedr status: unexpected arguments %q\n", fl.Args())
		return exitUsage
	}
	if *timeout <= 0 || *tailerWait < 0 {
		fmt.Fprintln(stderr, "hivedr status: -timeout must be positive and -tailer-wait not negative")
		return exitUsage
	}
	ctx, stop := signalContext()
	defer stop()
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	rep := gatherStatus(ctx, conf, splitList(*dbList), *tailerWait)
	if *asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		enc.Encode(rep)
	} else {
		writeStatus(stdout, rep)
	}
	if !rep.CaughtUp {
		return exitError
	}
	return exitOK
}

func splitList(s string) []string {
	var out []string
	for _, d := range strings.Split(s, ",") {
		if d = strings.ToLower(strings.TrimSpace(d)); d != "" && !slices.Contains(out, d) {
			out = append(out, d)
		}
	}
	return out
}

// gatherStatus asks Kafka, the schema registry, the source and the DR
// metastore; what cannot be reached becomes an entry of Errors.
func gatherStatus(ctx context.Context, conf *config.Config, only []string, tailerWait time.Duration) *statusReport {
	rep := &statusReport{Time: time.Now(), required: map[string]bool{}}
	rep.Tailer.Source = conf.Source.Name
	rep.Applier = applierStatus{Group: conf.Applier.Group, Members: -1, Metastore: conf.Applier.Metastore}
	rep.Tailer.Unknown = true
	topics := kafka.Topics{Prefix: conf.Kafka.TopicPrefix}
	brokers := strings.Join(conf.Kafka.Brokers, ",")
	fail := func(format string, args ...any) { rep.Errors = append(rep.Errors, fmt.Sprintf(format, args...)) }

	// The source log's head first: the tailer is caught up when its
	// checkpoint reaches what the source had when we started.
	head, err := sourceHead(ctx, conf)
	if err != nil {
		fail("%v", err)
	}
	rep.Tailer.SourceHeadEventID = head

	dbs := map[string]*dbStatus{}
	add := func(name string) *dbStatus {
		name = strings.ToLower(name)
		if d := dbs[name]; d != nil {
			return d
		}
		d := &dbStatus{Database: name, Topic: topics.Events(name), Committed: -1, Lag: -1}
		dbs[name] = d
		return d
	}
	for _, p := range conf.Replication.Databases {
		if !strings.ContainsAny(p.Name, `*?[\`) { // patterns name no database
			add(p.Name).InConfig = true
		}
	}

	cl, err := kgo.NewClient(kgo.SeedBrokers(conf.Kafka.Brokers...), kgo.DialTimeout(5*time.Second))
	if err != nil {
		fail("kafka %s: %v", brokers, err)
	}
	kafkaOK := err == nil
	var adm *kadm.Client
	if kafkaOK {
		defer cl.Close()
		adm = kadm.NewClient(cl)
		lctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		td, err := adm.ListTopics(lctx)
		cancel()
		if err != nil {
			fail("kafka %s: list topics: %v (is Kafka up?)", brokers, err)
			kafkaOK = false
		} else {
			pat := topics.EventsPattern()
			for _, name := range td.Names() {
				if m := pat.FindStringSubmatch(name); m != nil {
					add(m[1]).TopicExists = true
				}
			}
		}
	}
	if len(only) > 0 {
		for name := range dbs {
			if !slices.Contains(only, name) {
				delete(dbs, name)
			}
		}
		for _, name := range only {
			add(name)
			rep.required[name] = true
		}
	}
	for _, d := range dbs {
		rep.Databases = append(rep.Databases, *d)
	}
	sort.Slice(rep.Databases, func(i, j int) bool { return rep.Databases[i].Database < rep.Databases[j].Database })

	if kafkaOK {
		if err := tailerPosition(ctx, conf, cl, topics.Checkpoints(), head, tailerWait, &rep.Tailer); err != nil {
			fail("tailer checkpoint (%s): %v", topics.Checkpoints(), err)
		}
		if err := groupLag(ctx, conf, adm, rep); err != nil {
			fail("kafka %s: applier group %s: %v", brokers, conf.Applier.Group, err)
		} else {
			recordTimes(ctx, conf.Kafka.Brokers, rep.Databases)
		}
	}
	if err := drParameters(ctx, conf.Applier.Metastore, rep.Databases); err != nil {
		fail("DR metastore %s: %v", conf.Applier.Metastore, err)
	}
	rep.summarize()
	return rep
}

// summarize sets each database's state, the totals and CaughtUp.
func (r *statusReport) summarize() {
	r.Total = statusTotal{Databases: len(r.Databases)}
	r.CaughtUp = len(r.Errors) == 0 && r.Tailer.CaughtUp
	for i := range r.Databases {
		d := &r.Databases[i]
		req := r.required[d.Database]
		switch {
		case !d.known.kafka || !d.known.dr:
			d.State = stateUnknown
		case d.Halted != "":
			d.State = stateHalted
		case !d.TopicExists:
			d.State = stateNoTopic
		case d.Lag > 0:
			d.State = stateLagging
		case !d.OnDR:
			d.State = stateNotOnDR
		case d.ReplTarget == "":
			d.State = stateNotTarget
		default:
			d.State = stateOK
		}
		if d.Lag > 0 {
			r.Total.Lag += d.Lag
			r.Total.Lagging++
		}
		if d.Halted != "" {
			r.Total.Halted++
		}
		r.Total.Skipped += len(d.Skipped)
		switch d.State {
		case stateOK:
		case stateNoTopic, stateNotOnDR:
			// Nothing of it replicated yet (an in-scope database with no
			// event since the tailer started): fine, unless asked for.
			if req {
				r.CaughtUp = false
			}
		default:
			r.CaughtUp = false
		}
	}
}

// sourceHead is the newest event ID of the source log.
func sourceHead(ctx context.Context, conf *config.Config) (int64, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	var src producer.Source
	what := "source metastore " + conf.Source.Metastore
	if conf.Source.Kind == "postgres" {
		what = "source database (source.postgres_dsn)"
		s, err := producer.NewPostgresSource(ctx, conf.Source.PostgresDSN)
		if err != nil {
			return 0, fmt.Errorf("%s: %w", what, err)
		}
		src = s
	} else {
		src = producer.NewThriftSource(conf.Source.Metastore)
	}
	defer src.Close()
	head, err := src.Head(ctx)
	if err != nil {
		return 0, fmt.Errorf("%s: %w", what, err)
	}
	return head, nil
}

// tailerPosition reads the tailer's newest checkpoint, re-reading for up
// to wait until it reaches head.
func tailerPosition(ctx context.Context, conf *config.Config, cl *kgo.Client, topic string, head int64, wait time.Duration, ts *tailerStatus) error {
	serde, err := newSerde(ctx, conf.SchemaRegistry)
	if err != nil {
		return err
	}
	deadline := time.Now().Add(wait)
	for {
		cp, err := readTailerCheckpoint(ctx, cl, conf.Kafka.Brokers, topic, conf.Source.Name, serde)
		if err != nil {
			return err
		}
		ts.Unknown = false
		if cp != nil {
			ts.CheckpointEventID, ts.CheckpointWritten = cp.LastEventID, cp.Written
			ts.CaughtUp = head > 0 && cp.LastEventID >= head
		}
		if ts.CaughtUp || head == 0 || !time.Now().Before(deadline) {
			return nil
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// readTailerCheckpoint returns source's newest committed checkpoint, or
// nil when there is none (or no checkpoints topic yet).
func readTailerCheckpoint(ctx context.Context, cl *kgo.Client, brokers []string, topic, source string, serde *schemas.Serde) (*schemas.TailerCheckpoint, error) {
	adm := kadm.NewClient(cl)
	ends, err := adm.ListCommittedOffsets(ctx, topic)
	if err != nil {
		return nil, err
	}
	end, ok := ends.Lookup(topic, 0)
	if !ok || errors.Is(end.Err, kerr.UnknownTopicOrPartition) {
		return nil, nil
	}
	if end.Err != nil {
		return nil, end.Err
	}
	starts, err := adm.ListStartOffsets(ctx, topic)
	if err != nil {
		return nil, err
	}
	start := int64(0)
	if s, ok := starts.Lookup(topic, 0); ok && s.Err == nil {
		start = s.Offset
	}
	for window := int64(64); end.Offset > start; window *= 4 {
		from := max(start, end.Offset-window)
		rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		recs, err := kafka.ReadCommitted(rctx, []kgo.Opt{kgo.SeedBrokers(brokers...)}, topic, 0, from, end.Offset)
		cancel()
		if err != nil {
			return nil, err
		}
		for i := len(recs) - 1; i >= 0; i-- {
			if string(recs[i].Key) != source {
				continue
			}
			v, err := serde.Decode(ctx, recs[i].Value)
			if err != nil {
				return nil, fmt.Errorf("decode the checkpoint at offset %d: %w", recs[i].Offset, err)
			}
			if cp, ok := v.(*schemas.TailerCheckpoint); ok {
				return cp, nil
			}
			return nil, fmt.Errorf("record at offset %d is a %T, not a TailerCheckpoint", recs[i].Offset, v)
		}
		if from == start {
			break
		}
	}
	return nil, nil
}

// groupLag fills the applier group's committed offsets, the topics' last
// stable offsets (what a read_committed consumer can reach) and the lag.
func groupLag(ctx context.Context, conf *config.Config, adm *kadm.Client, rep *statusReport) error {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	group := conf.Applier.Group
	dg, err := adm.DescribeGroups(ctx, group)
	if err != nil {
		return err
	}
	rep.Applier.Members = 0
	if g, ok := dg[group]; ok && g.Err == nil {
		rep.Applier.Members = len(g.Members)
	}
	var names []string
	for _, d := range rep.Databases {
		if d.TopicExists {
			names = append(names, d.Topic)
		}
	}
	committed, err := adm.FetchOffsets(ctx, group)
	if err != nil && !errors.Is(err, kerr.GroupIDNotFound) {
		return err
	}
	var ends, starts kadm.ListedOffsets
	if len(names) > 0 {
		if ends, err = adm.ListCommittedOffsets(ctx, names...); err != nil {
			return err
		}
		if starts, err = adm.ListStartOffsets(ctx, names...); err != nil {
			return err
		}
	}
	for i := range rep.Databases {
		d := &rep.Databases[i]
		d.known.kafka = true
		if !d.TopicExists {
			d.Lag, d.End = 0, 0
			continue
		}
		end, ok := ends.Lookup(d.Topic, 0)
		if !ok || end.Err != nil {
			d.known.kafka = false
			continue
		}
		d.End = end.Offset
		from := int64(0)
		if s, ok := starts.Lookup(d.Topic, 0); ok && s.Err == nil {
			from = s.Offset
		}
		if c, ok := committed.Lookup(d.Topic, 0); ok && c.Err == nil && c.At >= 0 {
			d.Committed = c.At
			from = max(from, c.At)
		}
		d.Lag = max(0, d.End-from)
	}
	return nil
}

// recordTimes reads a few records of each topic: the newest (its time and
// type) and, where the group lags, the oldest unapplied one (how long it
// has waited). Best effort: what is not read in time stays unset.
func recordTimes(ctx context.Context, brokers []string, dbs []dbStatus) {
	newest, oldest := map[string][2]int64{}, map[string][2]int64{}
	for _, d := range dbs {
		if !d.TopicExists || d.End <= 0 {
			continue
		}
		newest[d.Topic] = [2]int64{max(0, d.End-4), d.End}
		if d.Lag > 0 {
			from := d.End - d.Lag
			oldest[d.Topic] = [2]int64{from, min(d.End, from+16)}
		}
	}
	byTopic := map[string]*dbStatus{}
	for i := range dbs {
		byTopic[dbs[i].Topic] = &dbs[i]
	}
	// Four offsets back hold at least one data record: each of the
	// tailer's transactions is records then one marker.
	for topic, recs := range readRanges(ctx, brokers, newest) {
		for _, r := range recs {
			d := byTopic[topic]
			if r.Timestamp.After(d.Newest) {
				d.Newest, d.NewestType = r.Timestamp, recordType(r)
			}
		}
	}
	now := time.Now()
	for topic, recs := range readRanges(ctx, brokers, oldest) {
		if len(recs) > 0 {
			s := now.Sub(recs[0].Timestamp).Seconds()
			byTopic[topic].Behind = &s
		}
	}
}

func recordType(r *kgo.Record) string {
	for _, h := range r.Headers {
		if h.Key == kafka.HeaderType {
			switch string(h.Value) {
			case schemas.NameHeartbeat:
				return "heartbeat"
			case schemas.NameMetastoreEvent:
				return "event"
			}
			return string(h.Value)
		}
	}
	return ""
}

// readRanges reads the committed data records of [from, to) of partition 0
// of each topic, for at most three seconds.
func readRanges(ctx context.Context, brokers []string, ranges map[string][2]int64) map[string][]*kgo.Record {
	out := map[string][]*kgo.Record{}
	offsets := map[string]map[int32]kgo.Offset{}
	reached := map[string]int64{}
	for t, r := range ranges {
		if r[0] < r[1] {
			offsets[t] = map[int32]kgo.Offset{0: kgo.NewOffset().At(r[0])}
			reached[t] = r[0] - 1
		}
	}
	if len(offsets) == 0 {
		return out
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.ConsumePartitions(offsets),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.KeepControlRecords())
	if err != nil {
		return out
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	done := func() bool {
		for t, r := range ranges {
			if r[0] < r[1] && reached[t] < r[1]-1 {
				return false
			}
		}
		return true
	}
	for !done() && ctx.Err() == nil {
		cl.PollFetches(ctx).EachRecord(func(r *kgo.Record) {
			reached[r.Topic] = max(reached[r.Topic], r.Offset)
			if !r.Attrs.IsControl() && r.Offset < ranges[r.Topic][1] {
				out[r.Topic] = append(out[r.Topic], r)
			}
		})
	}
	return out
}

// drParameters reads each database's replication parameters from the DR
// metastore.
func drParameters(ctx context.Context, addr string, dbs []dbStatus) error {
	if len(dbs) == 0 {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	c, err := hms.Dial(ctx, addr, hms.Options{ConnectTimeout: 5 * time.Second, SocketTimeout: 15 * time.Second})
	if err != nil {
		return err
	}
	defer c.Close()
	for i := range dbs {
		d := &dbs[i]
		db, err := c.GetDatabase(ctx, d.Database)
		var nso *hive_metastore.NoSuchObjectException
		if errors.As(err, &nso) {
			d.known.dr = true
			continue
		}
		if err != nil {
			return fmt.Errorf("get database %s: %w", d.Database, err)
		}
		d.known.dr, d.OnDR = true, true
		p := db.Parameters
		d.ReplTarget, d.Halted = p[applier.ParamTarget], p[applier.ParamHalted]
		d.LastEventID, _ = strconv.ParseInt(p[applier.ParamLastID], 10, 64)
		for k, v := range p {
			if id, ok := strings.CutPrefix(k, applier.ParamSkippedPrefix); ok {
				n, _ := strconv.ParseInt(id, 10, 64)
				d.Skipped = append(d.Skipped, skippedEvent{EventID: n, Note: v})
			}
		}
		sort.Slice(d.Skipped, func(a, b int) bool { return d.Skipped[a].EventID < d.Skipped[b].EventID })
	}
	return nil
}

// writeStatus prints the report as a table, then halts, skips and errors.
func writeStatus(w io.Writer, r *statusReport) {
	t := r.Tailer
	var line string
	switch {
	case t.Unknown:
		line = "checkpoint unknown (see errors)"
	case t.CheckpointEventID == 0 && t.CheckpointWritten.IsZero():
		line = "no checkpoint yet (has `hivedr tail` run?)"
	default:
		line = fmt.Sprintf("checkpoint event %d, written %s", t.CheckpointEventID, ago(r.Time, t.CheckpointWritten))
	}
	if t.SourceHeadEventID > 0 {
		line += fmt.Sprintf("; source head %d", t.SourceHeadEventID)
		if t.CaughtUp {
			line += ": caught up"
		} else if t.CheckpointEventID > 0 {
			line += fmt.Sprintf(": %d events not published yet (is `hivedr tail` running?)", t.SourceHeadEventID-t.CheckpointEventID)
		}
	}
	fmt.Fprintf(w, "tailer (source %s): %s\n", t.Source, line)
	members := fmt.Sprintf("%d members", r.Applier.Members)
	switch r.Applier.Members {
	case -1:
		members = "members unknown"
	case 0:
		members = "no members (is `hivedr apply` running?)"
	case 1:
		members = "1 member"
	}
	fmt.Fprintf(w, "applier (group %s): %s; DR metastore %s\n\n", r.Applier.Group, members, r.Applier.Metastore)

	if len(r.Databases) == 0 {
		fmt.Fprintln(w, "no replicated databases: no event topics in Kafka and none named in replication.databases")
	} else {
		tw := tabwriter.NewWriter(w, 0, 0, 3, ' ', 0)
		fmt.Fprintln(tw, "DATABASE\tREPL.LAST.ID\tLAG\tBEHIND\tNEWEST RECORD\tSKIPPED\tSTATE")
		for _, d := range r.Databases {
			last := "-"
			switch {
			case !d.known.dr:
				last = "?"
			case d.LastEventID > 0:
				last = strconv.FormatInt(d.LastEventID, 10)
			}
			lag := "?"
			if d.known.kafka && d.Lag >= 0 {
				lag = strconv.FormatInt(d.Lag, 10)
			}
			behind := "-"
			if d.Behind != nil {
				behind = (time.Duration(*d.Behind) * time.Second).String()
			} else if d.Lag > 0 {
				behind = "?"
			}
			newest := "-"
			if !d.Newest.IsZero() {
				newest = ago(r.Time, d.Newest)
				if d.NewestType != "" {
					newest += " (" + d.NewestType + ")"
				}
			}
			skipped := "-"
			if len(d.Skipped) > 0 {
				skipped = strconv.Itoa(len(d.Skipped))
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", d.Database, last, lag, behind, newest, skipped, d.State)
		}
		tw.Flush()
	}
	verdict := "caught up"
	if !r.CaughtUp {
		verdict = "NOT caught up"
	}
	fmt.Fprintf(w, "\ntotal: %d databases, lag %d records, %d lagging, %d halted, %d skipped events: %s\n",
		r.Total.Databases, r.Total.Lag, r.Total.Lagging, r.Total.Halted, r.Total.Skipped, verdict)
	section := func(title string, lines []string) {
		if len(lines) == 0 {
			return
		}
		fmt.Fprintf(w, "\n%s:\n", title)
		for _, l := range lines {
			fmt.Fprintf(w, "  %s\n", l)
		}
	}
	var halted, skipped []string
	for _, d := range r.Databases {
		if d.Halted != "" {
			halted = append(halted, d.Database+": "+d.Halted)
		}
		for _, s := range d.Skipped {
			skipped = append(skipped, fmt.Sprintf("%s: event %d: %s", d.Database, s.EventID, s.Note))
		}
	}
	section("halted (see the applier's log; `hivedr apply -skip-event db:id` skips an event)", halted)
	section("skipped events", skipped)
	section("errors", r.Errors)
}

// ago is how long before now t was, in whole seconds.
func ago(now, t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	d := max(0, now.Sub(t)).Round(time.Second)
	return d.String() + " ago"
}
