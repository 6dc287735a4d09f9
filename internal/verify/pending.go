package verify

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/hivedr/hivedr/internal/hmslog"
	"github.com/hivedr/hivedr/internal/kafka"
	"github.com/hivedr/hivedr/schemas"
)

// Log reads the events of a database's topic the applier has not
// committed.
type Log interface {
	// Committed returns the applier group's committed offset of the
	// database's topic (its start when the group has none) and the
	// topic's last stable offset; ok is false when there is no topic.
	Committed(ctx context.Context, db string) (from, end int64, ok bool, err error)
	// Events calls fn with each event of the topic's committed records in
	// [from, end), in offset order (heartbeats and markers left out), as
	// it reads them: nothing grows with the number of events.
	Events(ctx context.Context, db string, from, end int64, fn func(*schemas.Event)) error
}

// Tailer reads what the tailer has not published yet: its newest
// checkpoint and the source log above it.
type Tailer interface {
	// Checkpoint returns the tailer's newest committed checkpoint, nil
	// when it has written none.
	Checkpoint(ctx context.Context) (*schemas.TailerCheckpoint, error)
	// Head returns the source log's newest event ID.
	Head(ctx context.Context) (int64, error)
	// Events calls fn with each event of the source log in (after, to],
	// decoded as the tailer decodes it, in ID order, as it reads them.
	Events(ctx context.Context, after, to int64, fn func(*schemas.Event)) error
}

// pending is what the events not yet applied on DR of one database touch,
// each with the first event that explains it: a count, a few reasons and
// a set of table names, which grows with the tables touched, never with
// the events (they are read as streams). Two kinds of event are pending:
// those on the database's topic after the applier group's committed
// offset, and those of the source log the tailer has not published to
// the topic yet (above its newest checkpoint, or held back by a
// bootstrap of the database in progress).
// How in_flight is decided (docs/design.md, "Verify"):
//
//   - a difference on the database itself is in flight when any event is
//     pending;
//   - one in a transactional table's write-ID state or files is in flight
//     when a transaction event (ALLOC_WRITE_ID, COMMIT_TXN, ABORT_TXN) of
//     the database is pending, besides the events that touch the table:
//     a commit or abort names the tables it wrote, not those it only
//     allocated in;
//   - one on a table (its definition, partitions or files) is in flight
//     when a pending event touches that table (schemas.Touches: a rename
//     touches both names), or when a pending event is of the whole
//     database (CREATE/ALTER/DROP_DATABASE, a bootstrap's records, a
//     discontinuity), which may change any of its tables;
//   - a bootstrap of the database in its SNAPSHOT phase has records
//     still to publish: of every table, or of the tables it names.
//
// An empty reason is nothing pending.
type pending struct {
	events      int    // on the topic, not applied
	unpublished int    // in the source log, not published
	first       string // the first event noted: explains the database's own differences
	database    string // an event of the whole database
	txns        string // a transaction event
	tables      map[string]string
	next        int64 // the topic's offset read up to
	topic       bool  // the database has a topic
	src         *unpublished
}

// unpublished is where the source log's reading stands for one database.
type unpublished struct {
	after     int64 // read up to this event
	published int64 // the checkpoint's event: those at or below it were held back by a bootstrap
	boot      string
	// The checkpoint's source transactions that allocated write IDs and
	// had not ended: whether each allocated in the database; those above
	// trackedAbove are all there.
	open         map[int64]bool
	trackedAbove int64
}

// mayWrite reports whether a commit or abort whose message names no
// writes may end a transaction that wrote in the database: one the
// checkpoint holds open with an allocation there, or one older than the
// checkpoint tracks. A transaction that allocated after the checkpoint
// did so in an event read with it (ALLOC_WRITE_ID, which names its
// database).
func (u *unpublished) mayWrite(ev *schemas.Event) bool {
	t, ok := ev.Payload.(*schemas.Transaction)
	if !ok {
		return true // not decoded: it may be any
	}
	for _, id := range t.TxnIDs {
		if in, held := u.open[id]; in || (!held && (u.trackedAbove < 0 || id <= u.trackedAbove)) {
			return true
		}
	}
	return false
}

// newPending reads a database's pending events. The tailer's checkpoint
// is read first, then the topic, then the source log: an event the
// tailer publishes in between is then above the checkpoint read, or on
// the topic, or both, never neither. tl nil: nothing is counted
// unpublished (no tailer is known).
func newPending(ctx context.Context, log Log, tl Tailer, db string) (*pending, error) {
	p := &pending{tables: map[string]string{}}
	if tl != nil {
		cp, err := tl.Checkpoint(ctx)
		if err != nil {
			return nil, fmt.Errorf("the tailer's checkpoint: %w", err)
		}
		// A tailer stopped on a gap publishes nothing more until a
		// bootstrap repairs it: what it did not publish is not lag.
		if cp != nil && cp.State != schemas.StateChainBroken {
			p.src = p.holdBack(cp, db)
		}
	}
	if log != nil {
		from, end, ok, err := log.Committed(ctx, db)
		if err != nil {
			return nil, fmt.Errorf("pending events of %s: %w", db, err)
		}
		p.next, p.topic = from, ok
		if ok {
			if err := p.read(ctx, log, db, end); err != nil {
				return nil, err
			}
		}
	}
	if err := p.readSource(ctx, tl, db); err != nil {
		return nil, err
	}
	return p, nil
}

// holdBack notes a bootstrap of db the checkpoint holds, and returns
// where db's unpublished events start: after the checkpoint's event, or
// after the bootstrap's cut (SNAPSHOT) or catch-up position (CATCHUP),
// whose events the tailer holds back until the catch-up publishes them.
func (p *pending) holdBack(cp *schemas.TailerCheckpoint, db string) *unpublished {
	u := &unpublished{after: cp.LastEventID, published: cp.LastEventID, open: map[int64]bool{}, trackedAbove: cp.TxnsTrackedAbove}
	for _, o := range cp.OpenTxns {
		u.open[o.TxnID] = slices.ContainsFunc(o.Databases, func(d string) bool { return strings.EqualFold(d, db) })
	}
	for _, b := range cp.Bootstraps {
		if !strings.EqualFold(b.Database, db) {
			continue
		}
		u.boot = b.BootstrapID
		if b.Phase == schemas.PhaseCatchup {
			u.after = min(u.after, b.CatchupEventID)
			continue
		}
		u.after = min(u.after, b.CutEventID)
		why := fmt.Sprintf("bootstrap %s of %s at event %d has records to publish", b.BootstrapID, db, b.CutEventID)
		if len(b.Tables) == 0 {
			p.database = cmp.Or(p.database, why)
			p.first = cmp.Or(p.first, why)
		}
		for _, t := range b.Tables {
			t = strings.ToLower(t)
			p.tables[t] = cmp.Or(p.tables[t], why)
		}
	}
	return u
}

// refresh reads what was published on the topic, and what the source log
// got, since the last read.
func (p *pending) refresh(ctx context.Context, log Log, tl Tailer, db string) error {
	if p.topic && log != nil {
		_, end, ok, err := log.Committed(ctx, db)
		if err != nil {
			return err
		}
		if ok {
			if err := p.read(ctx, log, db, end); err != nil {
				return err
			}
		}
	}
	return p.readSource(ctx, tl, db)
}

func (p *pending) read(ctx context.Context, log Log, db string, end int64) error {
	if end <= p.next {
		return nil
	}
	err := log.Events(ctx, db, p.next, end, func(ev *schemas.Event) {
		p.events++
		p.add(db, ev, fmt.Sprintf("event %d (%s) not applied on DR yet", ev.EventID, ev.EventType))
	})
	if err != nil {
		return fmt.Errorf("pending events of %s: %w", db, err)
	}
	p.next = end
	return nil
}

// readSource reads the source log from where it was read up to its head,
// noting the events of db.
func (p *pending) readSource(ctx context.Context, tl Tailer, db string) error {
	if p.src == nil || tl == nil {
		return nil
	}
	head, err := tl.Head(ctx)
	if err != nil {
		return fmt.Errorf("the source log's head: %w", err)
	}
	if head <= p.src.after {
		return nil
	}
	err = tl.Events(ctx, p.src.after, head, func(ev *schemas.Event) {
		if !slices.ContainsFunc(ev.Databases, func(d string) bool { return strings.EqualFold(d, db) }) {
			if len(ev.Databases) == 0 && isTxnEnd(ev.EventType) && p.src.mayWrite(ev) {
				p.txns = cmp.Or(p.txns, p.unpublishedWhy(ev))
			}
			return
		}
		p.unpublished++
		p.add(db, ev, p.unpublishedWhy(ev))
	})
	if err != nil {
		return fmt.Errorf("the source log after event %d: %w", p.src.after, err)
	}
	p.src.after = head
	return nil
}

func (p *pending) unpublishedWhy(ev *schemas.Event) string {
	if ev.EventID <= p.src.published && p.src.boot != "" {
		return fmt.Sprintf("source event %d (%s) not yet published by the tailer: held back by bootstrap %s", ev.EventID, ev.EventType, p.src.boot)
	}
	return fmt.Sprintf("source event %d (%s) not yet published by the tailer", ev.EventID, ev.EventType)
}

func isTxnEnd(t schemas.EventType) bool {
	switch t.Canonical() {
	case schemas.EventCommitTxn, schemas.EventAbortTxn:
		return true
	}
	return false
}

// add notes what one pending event touches, and why.
func (p *pending) add(db string, ev *schemas.Event, why string) {
	p.first = cmp.Or(p.first, why)
	switch {
	case ev.Snapshot != nil, wholeDatabase(ev.EventType):
		p.database = cmp.Or(p.database, why)
		return
	}
	switch ev.EventType.Canonical() {
	case schemas.EventAllocWriteID, schemas.EventCommitTxn, schemas.EventAbortTxn:
		p.txns = cmp.Or(p.txns, why)
	}
	for _, t := range schemas.Touches(db, ev).Tables {
		if strings.EqualFold(t.DB, db) {
			p.tables[t.Name] = cmp.Or(p.tables[t.Name], why)
		}
	}
}

func wholeDatabase(t schemas.EventType) bool {
	switch t {
	case schemas.EventCreateDatabase, schemas.EventAlterDatabase, schemas.EventDropDatabase:
		return true
	}
	return t.IsHivedr()
}

// covers returns the reason a difference of the table ("" for the
// database itself) is in flight: a pending event that explains it; ""
// when none does.
func (p *pending) covers(table string) string {
	if table == "" {
		return p.first
	}
	return cmp.Or(p.database, p.tables[table])
}

// KafkaLog reads the event topics and the applier group's offsets.
type KafkaLog struct {
	// Opts are the Kafka clients' options (connect.Kafka's: brokers, TLS,
	// SASL).
	Opts    []kgo.Opt
	Topics  kafka.Topics
	Group   string
	Decoder interface {
		Decode(ctx context.Context, b []byte) (any, error)
	}
}

// Committed implements Log.
func (k *KafkaLog) Committed(ctx context.Context, db string) (int64, int64, bool, error) {
	topic := k.Topics.Events(db)
	cl, err := kgo.NewClient(k.Opts...)
	if err != nil {
		return 0, 0, false, err
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	ends, err := adm.ListCommittedOffsets(ctx, topic)
	if err != nil {
		return 0, 0, false, fmt.Errorf("end offset of %s: %w", topic, err)
	}
	end, ok := ends.Lookup(topic, 0)
	if !ok || errors.Is(end.Err, kerr.UnknownTopicOrPartition) {
		return 0, 0, false, nil
	}
	if end.Err != nil {
		return 0, 0, false, fmt.Errorf("end offset of %s: %w", topic, end.Err)
	}
	starts, err := adm.ListStartOffsets(ctx, topic)
	if err != nil {
		return 0, 0, false, fmt.Errorf("start offset of %s: %w", topic, err)
	}
	from := int64(0)
	if s, ok := starts.Lookup(topic, 0); ok && s.Err == nil {
		from = s.Offset
	}
	committed, err := adm.FetchOffsets(ctx, k.Group)
	if err != nil && !errors.Is(err, kerr.GroupIDNotFound) {
		return 0, 0, false, fmt.Errorf("committed offsets of group %s: %w", k.Group, err)
	}
	if c, ok := committed.Lookup(topic, 0); ok && c.Err == nil && c.At >= 0 {
		from = max(from, c.At)
	}
	return from, end.Offset, true, nil
}

// Events implements Log, reading the topic a fetch at a time.
func (k *KafkaLog) Events(ctx context.Context, db string, from, end int64, fn func(*schemas.Event)) error {
	topic := k.Topics.Events(db)
	return kafka.EachCommitted(ctx, k.Opts, topic, 0, from, end, func(r *kgo.Record) error {
		if h := header(r, kafka.HeaderType); h != "" && h != schemas.NameMetastoreEvent {
			return nil // heartbeats
		}
		v, err := k.Decoder.Decode(ctx, r.Value)
		if err != nil {
			return fmt.Errorf("%s offset %d: %w", topic, r.Offset, err)
		}
		if ev, ok := v.(*schemas.Event); ok {
			fn(ev)
		}
		return nil
	})
}

func header(r *kgo.Record, key string) string {
	for _, h := range r.Headers {
		if h.Key == key {
			return string(h.Value)
		}
	}
	return ""
}

// SourceLog is the Tailer of a pipeline: its checkpoints on Kafka and the
// source's notification log.
type SourceLog struct {
	// Log reads the source's notification log.
	Log hmslog.Source
	// Decode turns a row of the log into the event the tailer publishes
	// of it (hmsevent.Decode).
	Decode func(hmslog.RawEvent) schemas.Event
	// Opts are the Kafka clients' options (connect.Kafka's).
	Opts   []kgo.Opt
	Topics kafka.Topics
	// Source is the source's name (source.name): the checkpoints' key.
	Source  string
	Decoder *schemas.Decoder
}

// Checkpoint implements Tailer.
func (s *SourceLog) Checkpoint(ctx context.Context) (*schemas.TailerCheckpoint, error) {
	cl, err := kgo.NewClient(s.Opts...)
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	return kafka.NewestCheckpoint(ctx, cl, s.Opts, s.Topics.Checkpoints(), s.Source, s.Decoder)
}

// Head implements Tailer.
func (s *SourceLog) Head(ctx context.Context) (int64, error) { return s.Log.Head(ctx) }

// Events implements Tailer, reading the log a thousand events at a time.
func (s *SourceLog) Events(ctx context.Context, after, to int64, fn func(*schemas.Event)) error {
	for after < to {
		raws, err := s.Log.Next(ctx, after, 1000)
		if err != nil {
			return err
		}
		if len(raws) == 0 {
			return nil
		}
		for _, raw := range raws {
			if raw.EventID > to {
				return nil
			}
			ev := s.Decode(raw)
			fn(&ev)
		}
		after = raws[len(raws)-1].EventID
	}
	return nil
}
