package status

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/beltran/gohive/hive_metastore"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
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

// Gather asks Kafka, the schema registry, the source and the DR metastore
// and returns the summarized report; what cannot be reached becomes an
// entry of Report.Errors (and makes the report not caught up), so Gather
// always returns a report. ctx bounds the whole of it. Gather only reads:
// it decodes with writer schemas fetched by ID (schemas.Decoder) and
// registers nothing, joins no consumer group and commits nothing.
//
// The databases are those with an events topic in Kafka and those
// replication.databases names; a non-empty only restricts them to these
// (lower-case) names, each of which must then be replicated to count as
// caught up. tailerWait is how long to re-read the tailer's checkpoint
// until it reaches the source log's head; it is at least
// tailer.poll_interval + 1s, what one poll of the tailer (and its
// transaction) takes.
func Gather(ctx context.Context, conf *config.Config, only []string, tailerWait time.Duration) *Report {
	rep := gather(ctx, conf, only, tailerWait)
	if conf.TopicSite() != "" || len(conf.Sites) == 0 {
		return rep
	}
	// One tailer, several sites: each further site's report beside the
	// top-level one's, gathered at once.
	rep.Sites = make([]*Report, len(conf.Sites))
	var wg sync.WaitGroup
	for i, name := range conf.SiteNames()[1:] {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sc, err := conf.ForSite(name)
			if err != nil {
				rep.Sites[i] = &Report{Site: name, Errors: []string{err.Error()}}
				return
			}
			rep.Sites[i] = gather(ctx, sc, only, tailerWait)
		}()
	}
	wg.Wait()
	for _, s := range rep.Sites {
		rep.CaughtUp = rep.CaughtUp && s.CaughtUp
	}
	return rep
}

// gather is Gather for one site.
func gather(ctx context.Context, conf *config.Config, only []string, tailerWait time.Duration) *Report {
	rep := &Report{Site: conf.SiteName(), required: map[string]bool{}}
	rep.Tailer.Source = conf.Source.Name
	rep.Tailer.DownAfter = DownAfter(conf.Tailer).Seconds()
	rep.Applier = Applier{Group: conf.Applier.Group, Members: -1, Metastore: conf.Applier.Metastore}
	rep.Tailer.Unknown = true
	topics := kafka.Topics{Prefix: conf.Kafka.TopicPrefix, Site: conf.TopicSite()}
	brokers := strings.Join(conf.Kafka.Brokers, ",")
	fail := func(format string, args ...any) { rep.Errors = append(rep.Errors, fmt.Sprintf(format, args...)) }
	rep.Phases = map[string]float64{}
	mark := time.Now()
	phase := func(name string) {
		now := time.Now()
		rep.Phases[name] += now.Sub(mark).Seconds()
		mark = now
	}

	// The source log's head first: the tailer is caught up when its
	// checkpoint reaches what the source had when we started.
	head, err := sourceHead(ctx, conf)
	if err != nil {
		fail("%v", err)
	}
	rep.Tailer.SourceHeadEventID = head

	phase("source_head")
	dbs := map[string]*Database{}
	add := func(name string) *Database {
		name = strings.ToLower(name)
		if d := dbs[name]; d != nil {
			return d
		}
		d := &Database{Database: name, Topic: topics.Events(name), Committed: -1, LagEvents: -1, UncommittedRecords: -1}
		if p, ok := conf.Replication.Scope(name); ok {
			d.InScope, d.RPO = true, rpo(p).Seconds()
		}
		dbs[name] = d
		return d
	}
	for _, p := range conf.Replication.Databases {
		if !strings.ContainsAny(p.Name, `*?[\`) { // patterns name no database
			add(p.Name).InConfig = true
		}
	}

	dec, err := connect.Decoder(conf.SchemaRegistry)
	if err != nil {
		fail("%v", err)
	}
	kopts, err := connect.Kafka(conf.Kafka)
	var cl *kgo.Client
	if err == nil {
		cl, err = kgo.NewClient(append(slices.Clone(kopts), kgo.DialTimeout(5*time.Second))...)
	}
	if err != nil {
		fail("kafka %s: %v", brokers, err)
	}
	kafkaOK := err == nil
	var adm *kadm.Client
	if kafkaOK {
		defer cl.Close()
		adm = kadm.NewClient(cl)
	}
	// The tailer's position before the topics: it creates a database's
	// topic before the transaction that holds the database's first event
	// and its checkpoint commits, so every database with an event up to
	// the checkpoint read here is in the listing after it. (Listed first,
	// a database the tailer published to while status waited for its
	// checkpoint had no topic yet, which is no lag: status said caught up
	// with that database's events unapplied.)
	if kafkaOK && dec != nil {
		wait := max(tailerWait, conf.Tailer.PollInterval.Duration+time.Second)
		if err := tailerPosition(ctx, conf, cl, kopts, dec, topics.Checkpoints(), head, wait, &rep.Tailer); err != nil {
			fail("tailer checkpoint (%s): %v", topics.Checkpoints(), connect.Explain(conf, err))
		}
	}
	phase("tailer")
	if kafkaOK {
		lctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		td, err := adm.ListTopics(lctx)
		cancel()
		if err != nil {
			fail("kafka %s: list topics: %v (is Kafka up?)", brokers, connect.Explain(conf, err))
			kafkaOK = false
		} else {
			pat := topics.EventsPattern()
			for _, name := range td.Names() {
				if m := pat.FindStringSubmatch(name); m != nil {
					if _, ok := conf.Replication.Scope(m[1]); !ok && conf.TopicSite() != "" {
						continue // another site's database: a further site reads its own only
					}
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
	phase("topics")

	offsetsOK := false
	if kafkaOK {
		if err := groupOffsets(ctx, conf, adm, rep); err != nil {
			fail("kafka %s: applier group %s: %v", brokers, conf.Applier.Group, connect.Explain(conf, err))
		} else {
			offsetsOK = true
		}
	}
	phase("offsets")
	// The DR after Kafka: repl.last.id read later is only further on, so
	// no event counts as applied that is not.
	if err := drParameters(ctx, conf.Applier.Metastore, conf.DRMetastoreOptions(), rep.Databases); err != nil {
		fail("DR metastore %s: %v", conf.Applier.Metastore, err)
	}
	phase("dr")
	if offsetsOK && dec != nil {
		rep.Errors = append(rep.Errors, scanTopics(ctx, kopts, dec, rep.Databases)...)
	}
	phase("scan")
	if kafkaOK && dec != nil && !rep.Tailer.Unknown {
		if err := pastStates(ctx, conf, cl, kopts, dec, topics.Checkpoints(), rep); err != nil {
			fail("tailer checkpoints (%s): %v", topics.Checkpoints(), connect.Explain(conf, err))
		}
	}
	phase("past_states")
	if kafkaOK && dec != nil {
		if err := bootstrapCopies(ctx, conf, kopts, dec, topics.Completions(), rep); err != nil {
			fail("completions (%s): %v", topics.Completions(), err)
		}
	}
	phase("bootstrap_copies")
	rep.Time = time.Now()
	rep.summarize()
	return rep
}

// pastCheckpoints is how many checkpoint records pastStates reads back at
// most: a tailer writes about one a second when quiet, so this reaches
// about an hour back (more under load, when the applier is rarely long
// behind the tailer).
const pastCheckpoints = 4096

// pastStates finds, for each DR database applying a bootstrap that the
// tailer's newest checkpoint no longer holds (the tailer has published
// all of it), the bootstrap's last state in the older checkpoints: its
// totals, which the DR parameters do not have.
func pastStates(ctx context.Context, conf *config.Config, cl *kgo.Client, kopts []kgo.Opt, dec *schemas.Decoder, topic string, rep *Report) error {
	want := map[string]bool{}
	for _, d := range rep.Databases {
		if id := d.params[drparam.BootstrapID]; id != "" && !slices.ContainsFunc(rep.Tailer.boots, func(b schemas.BootstrapState) bool { return b.BootstrapID == id }) {
			want[id] = true
		}
	}
	if len(want) == 0 {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	return kafka.CheckpointsBackward(ctx, cl, kopts, topic, conf.Source.Name, dec, pastCheckpoints, func(cp *schemas.TailerCheckpoint) bool {
		for _, b := range cp.Bootstraps {
			if want[b.BootstrapID] {
				rep.Tailer.past = append(rep.Tailer.past, b)
				delete(want, b.BootstrapID)
			}
		}
		return len(want) > 0
	})
}

// bootstrapCopies reads the completions of bootstrap copy tasks written
// since the earliest bootstrap in progress started (its state's start, or
// the time its ID names), within scanBudget: the files copied so far.
func bootstrapCopies(ctx context.Context, conf *config.Config, kopts []kgo.Opt, dec *schemas.Decoder, topic string, rep *Report) error {
	var since time.Time
	earliest := func(t time.Time) {
		if !t.IsZero() && (since.IsZero() || t.Before(since)) {
			since = t
		}
	}
	for _, b := range append(slices.Clone(rep.Tailer.boots), rep.Tailer.past...) {
		earliest(b.Started)
	}
	for _, d := range rep.Databases {
		if t, ok := bootstrap.BootstrapStart(d.params[drparam.BootstrapID]); ok {
			earliest(t)
		}
	}
	if since.IsZero() {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, scanBudget)
	defer cancel()
	// A minute earlier: clocks of the tailer and the brokers differ.
	_, err := bootstrap.ReadCompletions(ctx, kopts, dec, topic, since.Add(-time.Minute),
		func(c *schemas.CopyCompletion) {
			rep.copies = append(rep.copies, schemas.CopyCompletion{TaskID: c.TaskID, Status: c.Status, Length: c.Length})
		})
	return err
}

// rpo is a database policy's RPO; a policy that was never validated (the
// catch-all of an empty replication.databases) gets the default.
func rpo(p *config.DatabasePolicy) time.Duration {
	if p.RPO.Duration > 0 {
		return p.RPO.Duration
	}
	return defaultRPO
}

// defaultRPO is the default of replication.databases[].rpo (config sets it
// on every entry), for the catch-all policy of an empty
// replication.databases, which has no entry to carry it.
const defaultRPO = 5 * time.Minute

// sourceHead is the newest event ID of the source log.
func sourceHead(ctx context.Context, conf *config.Config) (int64, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	src, err := hmslog.Open(ctx, conf.Source, conf.SourceMetastoreOptions())
	if err != nil {
		return 0, fmt.Errorf("source %s: %w", conf.Source.Name, err)
	}
	defer src.Close()
	head, err := src.Head(ctx)
	if err != nil {
		return 0, fmt.Errorf("source %s: head of the notification log: %w", conf.Source.Name, err)
	}
	return head, nil
}

// tailerPosition reads the tailer's newest checkpoint, re-reading for up
// to wait until it reaches head. It stops early on a checkpoint that will
// not move: CHAIN_BROKEN, or older than DownAfter.
func tailerPosition(ctx context.Context, conf *config.Config, cl *kgo.Client, kopts []kgo.Opt, dec *schemas.Decoder, topic string, head int64, wait time.Duration, ts *Tailer) error {
	deadline := time.Now().Add(wait)
	downAfter := DownAfter(conf.Tailer)
	for {
		cp, err := kafka.NewestCheckpoint(ctx, cl, kopts, topic, conf.Source.Name, dec)
		if err != nil {
			return err
		}
		ts.Unknown = false
		stuck := false
		if cp != nil {
			ts.fromCheckpoint(cp)
			stuck = cp.State == schemas.StateChainBroken || time.Since(cp.Written) > downAfter
		}
		caughtUp := head > 0 && ts.CheckpointEventID >= head
		if caughtUp || stuck || head == 0 || !time.Now().Before(deadline) {
			return nil
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// groupOffsets fills the applier group's committed offsets, the topics'
// first and last stable offsets (what a read_committed consumer can
// reach) and the uncommitted records between them.
func groupOffsets(ctx context.Context, conf *config.Config, adm *kadm.Client, rep *Report) error {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	group := conf.Applier.Group
	dg, err := adm.DescribeGroups(ctx, group)
	if err != nil {
		return fmt.Errorf("describe: %w", err)
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
		return fmt.Errorf("fetch committed offsets: %w", err)
	}
	var ends, starts kadm.ListedOffsets
	if len(names) > 0 {
		if ends, err = adm.ListCommittedOffsets(ctx, names...); err != nil {
			return fmt.Errorf("list end offsets: %w", err)
		}
		if starts, err = adm.ListStartOffsets(ctx, names...); err != nil {
			return fmt.Errorf("list start offsets: %w", err)
		}
	}
	for i := range rep.Databases {
		d := &rep.Databases[i]
		d.known.kafka = true
		if !d.TopicExists {
			d.UncommittedRecords, d.LagEvents, d.End = 0, 0, 0
			continue
		}
		end, ok := ends.Lookup(d.Topic, 0)
		if !ok || end.Err != nil {
			d.known.kafka = false
			continue
		}
		d.End = end.Offset
		if s, ok := starts.Lookup(d.Topic, 0); ok && s.Err == nil {
			d.start = s.Offset
		}
		from := d.start
		if c, ok := committed.Lookup(d.Topic, 0); ok && c.Err == nil && c.At >= 0 {
			d.Committed = c.At
			from = max(from, c.At)
		}
		d.UncommittedRecords = max(0, d.End-from)
	}
	return nil
}

// Limits of scanTopics: the time it may take in all, and the most records
// of one topic it tallies (a lower bound of the lag is shown beyond).
const (
	scanBudget = 10 * time.Second
	scanLimit  = 200_000
)

// scanTopics reads each database's topic from a few offsets before the
// applier group's committed offset to the topic's last stable offset and
// tallies it (see tally), reading further back where those offsets held
// no data record (an aborted transaction). It decodes only the newest
// applied event and heartbeat of each topic: the replica is complete up
// to the later of them. It returns what it could not decode.
//
// Best effort within scanBudget: a topic not read to its end in time has
// LagEventsPartial set; one whose DR database could not be read has an
// unknown LagEvents (what is applied past the commit is not known).
func scanTopics(ctx context.Context, kopts []kgo.Opt, dec *schemas.Decoder, dbs []Database) []string {
	ctx, cancel := context.WithTimeout(ctx, scanBudget)
	defer cancel()
	type scan struct {
		d              *Database
		t              tally
		from, lo, hi   int64       // the tail starts at from; [lo, hi) is being read
		n              int         // records of the tail tallied
		newest         int64       // offset of the newest data record seen
		lastEv, lastHb *kgo.Record // newest applied event, heartbeat
		partial        bool
	}
	scans := map[string]*scan{}
	ranges := map[string][2]int64{}
	for i := range dbs {
		d := &dbs[i]
		if !d.TopicExists || !d.known.kafka {
			continue
		}
		from := max(d.start, d.Committed)
		s := &scan{d: d, t: tally{committed: d.Committed, lastID: d.LastEventID}, from: from, lo: max(d.start, from-16), hi: d.End, newest: -1}
		scans[d.Topic] = s
		if s.lo < s.hi {
			ranges[d.Topic] = [2]int64{s.lo, s.hi}
		}
	}
	var errs []string
	failed := map[string]bool{}
	// decode returns a record's value, or nil after noting the error
	// (once per topic).
	decode := func(r *kgo.Record) any {
		v, err := dec.Decode(ctx, r.Value)
		if err != nil {
			if !failed[r.Topic] {
				errs = append(errs, fmt.Sprintf("%s: record at offset %d does not decode: %v", r.Topic, r.Offset, err))
			}
			failed[r.Topic] = true
			return nil
		}
		return v
	}
	// tallyRecord counts one data record of a topic.
	tallyRecord := func(r *kgo.Record) bool {
		s := scans[r.Topic]
		tr := topicRecord{offset: r.Offset, published: r.Timestamp}
		typ, id := header(r, kafka.HeaderType), header(r, kafka.HeaderEventID)
		switch {
		case typ == schemas.NameHeartbeat:
			tr.heartbeat = true
		case typ == schemas.NameMetastoreEvent && id != "":
			tr.eventID, _ = strconv.ParseInt(id, 10, 64)
		default: // no headers to go by (another writer): decode
			switch v := decode(r).(type) {
			case *schemas.Heartbeat:
				tr.heartbeat = true
			case *schemas.Event:
				tr.eventID = v.EventID
			default:
				return true
			}
		}
		if s.t.applied(tr) {
			if tr.heartbeat {
				s.lastHb = newer(s.lastHb, r)
			} else {
				s.lastEv = newer(s.lastEv, r)
			}
		}
		s.t.add(tr)
		if r.Offset >= s.from {
			s.n++
		}
		if r.Offset > s.newest {
			s.newest = r.Offset
			s.d.Newest, s.d.NewestType = r.Timestamp, recordType(r)
		}
		return s.n < scanLimit
	}
	unfinished := readRanges(ctx, kopts, ranges, tallyRecord)
	for topic := range unfinished {
		s := scans[topic]
		// The newest record seen is not the topic's newest.
		s.partial, s.d.Newest, s.d.NewestType = true, time.Time{}, ""
	}
	// Read further back, where the window before the commit held no
	// applied data record; every record there is applied.
	for _, window := range []int64{1024, 65536} {
		ranges = map[string][2]int64{}
		for topic, s := range scans {
			if s.lastEv == nil && s.lastHb == nil && s.lo > s.d.start && s.lo <= s.d.Committed {
				s.hi, s.lo = s.lo, max(s.d.start, s.lo-window)
				ranges[topic] = [2]int64{s.lo, s.hi}
			}
		}
		if len(ranges) == 0 || ctx.Err() != nil {
			break
		}
		readRanges(ctx, kopts, ranges, func(r *kgo.Record) bool {
			s := scans[r.Topic]
			switch header(r, kafka.HeaderType) {
			case schemas.NameHeartbeat:
				s.lastHb = newer(s.lastHb, r)
			case schemas.NameMetastoreEvent:
				s.lastEv = newer(s.lastEv, r)
			}
			return true
		})
	}
	for _, s := range scans {
		for _, r := range []*kgo.Record{s.lastEv, s.lastHb} {
			if r == nil {
				continue
			}
			switch v := decode(r).(type) {
			case *schemas.Event:
				s.t.completes(v.EventTime)
			case *schemas.Heartbeat:
				s.t.completes(v.CompleteAt())
			}
		}
		s.d.fromTally(s.t, s.partial)
	}
	return errs
}

// newer returns the later of two records of one partition.
func newer(have, r *kgo.Record) *kgo.Record {
	if have == nil || r.Offset > have.Offset {
		return r
	}
	return have
}

// header returns the value of a record's header, or "".
func header(r *kgo.Record, key string) string {
	for _, h := range r.Headers {
		if h.Key == key {
			return string(h.Value)
		}
	}
	return ""
}

// recordType names a record by its type header: event, heartbeat, or the
// header's value; empty without one.
func recordType(r *kgo.Record) string {
	switch t := header(r, kafka.HeaderType); t {
	case schemas.NameHeartbeat:
		return "heartbeat"
	case schemas.NameMetastoreEvent:
		return "event"
	default:
		return t
	}
}

// readRanges reads the committed data records of [from, to) of partition 0
// of each topic, in offset order, passing each to fn until fn returns
// false for its topic. It returns the topics it did not read to their end
// (fn stopped them, or ctx ended first). A range ends at the topic's last
// stable offset, or anywhere below it: the read is done when it has seen
// offset to-1 or any later one.
func readRanges(ctx context.Context, kopts []kgo.Opt, ranges map[string][2]int64, fn func(*kgo.Record) bool) map[string]bool {
	unfinished := map[string]bool{}
	offsets := map[string]map[int32]kgo.Offset{}
	reached := map[string]int64{}
	for t, r := range ranges {
		if r[0] < r[1] {
			offsets[t] = map[int32]kgo.Offset{0: kgo.NewOffset().At(r[0])}
			reached[t] = r[0] - 1
			unfinished[t] = true
		}
	}
	if len(offsets) == 0 {
		return unfinished
	}
	// A range is read once its records are there: a fetch that finds
	// nothing new returns soon (franz-go waits 5 s by default, which a
	// range ending where no record comes would cost every time).
	cl, err := kgo.NewClient(append(slices.Clone(kopts), kgo.ConsumePartitions(offsets),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.KeepControlRecords(), kgo.FetchMaxWait(100*time.Millisecond))...)
	if err != nil {
		return unfinished
	}
	defer cl.Close()
	stopped := map[string]bool{}
	open := func() bool {
		for t := range offsets {
			if !stopped[t] && reached[t] < ranges[t][1]-1 {
				return true
			}
		}
		return false
	}
	paused := map[string]bool{}
	for open() && ctx.Err() == nil {
		var done []string
		cl.PollFetches(ctx).EachRecord(func(r *kgo.Record) {
			// Any offset at or past the range's end ends it too: a range
			// may end inside an aborted transaction, whose records a
			// read_committed consumer never gets.
			reached[r.Topic] = max(reached[r.Topic], r.Offset)
			if !stopped[r.Topic] && r.Offset < ranges[r.Topic][1] && !r.Attrs.IsControl() && !fn(r) {
				stopped[r.Topic] = true
			}
			if !paused[r.Topic] && (stopped[r.Topic] || reached[r.Topic] >= ranges[r.Topic][1]-1) {
				paused[r.Topic] = true
				done = append(done, r.Topic)
			}
		})
		// Nothing more wanted from these: paused once a poll, together
		// (each pause copies the client's set of paused topics, so a
		// call a record was quadratic in the topics: seconds at 2,000).
		if len(done) > 0 {
			cl.PauseFetchTopics(done...)
		}
	}
	for t := range offsets {
		if !stopped[t] && reached[t] >= ranges[t][1]-1 {
			delete(unfinished, t)
		}
	}
	return unfinished
}

// drParameters reads each database's replication parameters from the DR
// metastore, on up to drReaders connections at once (thousands of
// databases, one get_database each: one connection took seconds).
func drParameters(ctx context.Context, addr string, opts hms.Options, dbs []Database) error {
	if len(dbs) == 0 {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	opts.ConnectTimeout, opts.SocketTimeout = 5*time.Second, 15*time.Second
	readers := min(drReaders, (len(dbs)+drPerReader-1)/drPerReader)
	next := make(chan int, len(dbs))
	for i := range dbs {
		next <- i
	}
	close(next)
	errs := make([]error, readers)
	var wg sync.WaitGroup
	for r := range readers {
		wg.Go(func() {
			c, err := hms.Dial(ctx, addr, opts)
			if err != nil {
				errs[r] = err // hms.Dial names the address
				cancel()
				return
			}
			defer c.Close()
			for i := range next {
				if ctx.Err() != nil {
					return
				}
				if err := drDatabase(ctx, c, &dbs[i]); err != nil {
					errs[r] = err
					cancel()
					return
				}
			}
		})
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return ctx.Err()
}

// drReaders bounds the DR metastore connections drParameters opens (its
// pool is shared with the appliers'); drPerReader is how many databases
// one connection reads before another is opened.
const (
	drReaders   = 4
	drPerReader = 100
)

// drDatabase reads d's DR database, if any, into d.
func drDatabase(ctx context.Context, c *hms.Client, d *Database) error {
	db, err := c.GetDatabase(ctx, d.Database)
	var nso *hive_metastore.NoSuchObjectException
	if errors.As(err, &nso) {
		d.known.dr = true
		return nil
	}
	if err != nil {
		return fmt.Errorf("get database %s: %w", d.Database, err)
	}
	d.known.dr = true
	d.fromParameters(db.Parameters)
	return nil
}

// fromParameters sets what a DR database's parameters say: it is on the
// DR, its repl.target.for, repl.last.id, hivedr.halted and skipped events.
func (d *Database) fromParameters(p map[string]string) {
	d.OnDR, d.params = true, p
	d.ReplTarget, d.Halted = p[drparam.Target], p[drparam.Halted]
	d.LastEventID, _ = strconv.ParseInt(p[drparam.LastID], 10, 64)
	d.Skipped = nil
	for k, v := range p {
		if id, ok := drparam.SkippedEvent(k); ok {
			d.Skipped = append(d.Skipped, SkippedEvent{EventID: id, Note: v})
		}
	}
	sort.Slice(d.Skipped, func(a, b int) bool { return d.Skipped[a].EventID < d.Skipped[b].EventID })
}
