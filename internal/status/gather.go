package status

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"
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

// Gather asks Kafka, the schema registry, the source and the DR metastore
// and returns the summarized report; what cannot be reached becomes an
// entry of Report.Errors (and makes the report not caught up), so Gather
// always returns a report. ctx bounds the whole of it.
//
// The databases are those with an events topic in Kafka and those
// replication.databases names; a non-empty only restricts them to these
// (lower-case) names, each of which must then be replicated to count as
// caught up. tailerWait is how long to re-read the tailer's checkpoint
// until it reaches the source log's head.
func Gather(ctx context.Context, conf *config.Config, only []string, tailerWait time.Duration) *Report {
	rep := &Report{Time: time.Now(), required: map[string]bool{}}
	rep.Tailer.Source = conf.Source.Name
	rep.Applier = Applier{Group: conf.Applier.Group, Members: -1, Metastore: conf.Applier.Metastore}
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

	dbs := map[string]*Database{}
	add := func(name string) *Database {
		name = strings.ToLower(name)
		if d := dbs[name]; d != nil {
			return d
		}
		d := &Database{Database: name, Topic: topics.Events(name), Committed: -1, Lag: -1}
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
func tailerPosition(ctx context.Context, conf *config.Config, cl *kgo.Client, topic string, head int64, wait time.Duration, ts *Tailer) error {
	serde, err := schemas.DialSerde(ctx, conf.SchemaRegistry)
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
		return nil, fmt.Errorf("list end offsets: %w", err)
	}
	end, ok := ends.Lookup(topic, 0)
	if !ok || errors.Is(end.Err, kerr.UnknownTopicOrPartition) {
		return nil, nil
	}
	if end.Err != nil {
		return nil, fmt.Errorf("end offset: %w", end.Err)
	}
	starts, err := adm.ListStartOffsets(ctx, topic)
	if err != nil {
		return nil, fmt.Errorf("list start offsets: %w", err)
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
			return nil, fmt.Errorf("read offsets %d to %d: %w", from, end.Offset, err)
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
func groupLag(ctx context.Context, conf *config.Config, adm *kadm.Client, rep *Report) error {
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
func recordTimes(ctx context.Context, brokers []string, dbs []Database) {
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
	byTopic := map[string]*Database{}
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

// recordType names a record by its type header: event, heartbeat, or the
// header's value; empty without one.
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
func drParameters(ctx context.Context, addr string, dbs []Database) error {
	if len(dbs) == 0 {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	c, err := hms.Dial(ctx, addr, hms.Options{ConnectTimeout: 5 * time.Second, SocketTimeout: 15 * time.Second})
	if err != nil {
		return err // hms.Dial names the address
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
				d.Skipped = append(d.Skipped, SkippedEvent{EventID: n, Note: v})
			}
		}
		sort.Slice(d.Skipped, func(a, b int) bool { return d.Skipped[a].EventID < d.Skipped[b].EventID })
	}
	return nil
}
