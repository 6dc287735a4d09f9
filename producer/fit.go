package producer

import (
	"fmt"
	"slices"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/hivedr/hivedr/schemas"
)

// batchOverhead bounds what a record batch of one record adds to the
// record's key, value and headers: the batch header (61 bytes) and the
// record's own lengths, offsets and attributes, varints at their widest.
const batchOverhead = 61 + 5*8

// recordBytes is how large a batch holding only r can be.
func recordBytes(r *kgo.Record) int {
	n := batchOverhead + len(r.Key) + len(r.Value)
	for _, h := range r.Headers {
		n += len(h.Key) + len(h.Value) + 2*5
	}
	return n
}

// fit makes the event record r of database db, whose value encodes ev,
// one the topics take: a record larger than kafka.max_message_bytes
// would be refused by the broker (or by the producer before it) at every
// retry, stalling every database behind it. Such a record is published
// instead without the event's payload, raw message and files, carrying a
// RECORD_TOO_LARGE error that names it (database, event, type, size): the
// applier halts that database on it, and only that one; the others go on.
// It reports whether r was replaced.
func (t *Tailer) fit(r *kgo.Record, ev *schemas.Event, db string) (bool, error) {
	size := recordBytes(r)
	if size <= int(t.maxBytes) {
		return false, nil
	}
	what := fmt.Sprintf("event %d (%s)", ev.EventID, ev.EventType)
	if s := ev.Snapshot; s != nil {
		what = fmt.Sprintf("%s record %d of bootstrap %s (event %d)", ev.EventType, s.Seq, s.BootstrapID, ev.EventID)
	}
	msg := fmt.Sprintf("the record of %s for database %s is %d bytes, over kafka.max_message_bytes %d: published without its payload, message and %d files",
		what, db, size, t.maxBytes, len(ev.Files))
	small := *ev
	small.Payload, small.Files, small.Message = nil, nil, ""
	small.Errors = append([]schemas.EventError{{Kind: schemas.ErrRecordTooLarge, Message: msg}}, slices.Clone(ev.Errors)...)
	v, err := t.cfg.Codec.Encode(&small)
	if err != nil {
		return false, fmt.Errorf("encode %s for %s without its payload: %w", what, db, err)
	}
	r.Value = v
	if n := recordBytes(r); n > int(t.maxBytes) {
		return false, fmt.Errorf("the record of %s for database %s is %d bytes even without its payload, over kafka.max_message_bytes %d", what, db, n, t.maxBytes)
	}
	t.log.Error("record too large: publishing it without its payload; the applier halts its database on it",
		"db", db, "event_id", ev.EventID, "type", ev.EventType, "bytes", size, "max_message_bytes", t.maxBytes)
	return true, nil
}
