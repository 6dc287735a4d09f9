package verify

import (
	"context"
	"errors"
	"fmt"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

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

// pending is what the events not yet applied on DR of one database touch:
// a count, a flag and a set of table names, which grows with the tables
// touched, never with the events (they are read as a stream).
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
//     when a pending event touches that table (applier.Touches: a rename
//     touches both names), or when a pending event is of the whole
//     database (CREATE/ALTER/DROP_DATABASE, a bootstrap's records, a
//     discontinuity), which may change any of its tables.
type pending struct {
	events   int
	database bool // an event of the whole database is pending
	txns     bool // a transaction event is pending
	tables   map[string]bool
	next     int64 // the offset read up to
	topic    bool  // the database has a topic
}

// newPending reads a database's pending events: its topic from the
// applier group's committed offset to its end.
func newPending(ctx context.Context, log Log, db string) (*pending, error) {
	from, end, ok, err := log.Committed(ctx, db)
	if err != nil {
		return nil, fmt.Errorf("pending events of %s: %w", db, err)
	}
	p := &pending{tables: map[string]bool{}, next: from, topic: ok}
	if !ok {
		return p, nil
	}
	return p, p.read(ctx, log, db, end)
}

// refresh reads what was published on the topic since the last read.
func (p *pending) refresh(ctx context.Context, log Log, db string) error {
	if !p.topic {
		return nil
	}
	_, end, ok, err := log.Committed(ctx, db)
	if err != nil || !ok {
		return err
	}
	return p.read(ctx, log, db, end)
}

func (p *pending) read(ctx context.Context, log Log, db string, end int64) error {
	if end <= p.next {
		return nil
	}
	if err := log.Events(ctx, db, p.next, end, func(ev *schemas.Event) { p.add(db, ev) }); err != nil {
		return fmt.Errorf("pending events of %s: %w", db, err)
	}
	p.next = end
	return nil
}

// add notes what one pending event touches.
func (p *pending) add(db string, ev *schemas.Event) {
	p.events++
	switch {
	case ev.Snapshot != nil, wholeDatabase(ev.EventType):
		p.database = true
		return
	}
	switch ev.EventType.Canonical() {
	case schemas.EventAllocWriteID, schemas.EventCommitTxn, schemas.EventAbortTxn:
		p.txns = true
	}
	for _, t := range schemas.Touches(db, ev).Tables {
		if t.DB == db {
			p.tables[t.Name] = true
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

// covers reports whether a difference of the table ("" for the database
// itself) is explained by a pending event.
func (p *pending) covers(table string) bool {
	if table == "" {
		return p.events > 0
	}
	return p.database || p.tables[table]
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
