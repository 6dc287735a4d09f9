package producer

import (
	"errors"
	"fmt"

	"github.com/hivedr/hivedr/internal/hmslog"
	"github.com/hivedr/hivedr/schemas"
)

// ErrChainBroken is the class of errors for a gap in the event chain.
var ErrChainBroken = errors.New(string(schemas.StateChainBroken))

// GapError says the log no longer holds the event after the checkpoint: it
// was purged (metastore.event.db.listener.timetolive) while the tailer was
// behind. The chain of events is broken and only a new bootstrap can
// restore a consistent replica; the tailer must never skip over it.
type GapError struct {
	Checkpoint int64 // last event published
	Found      int64 // first event the log now has after it; 0 if none
	Head       int64 // the log's head when the gap was seen
}

func (e *GapError) Error() string {
	found := "no event"
	if e.Found > 0 {
		found = fmt.Sprintf("event %d", e.Found)
	}
	return fmt.Sprintf("%v: expected event %d after checkpoint %d, but the source log has %s next (head %d); "+
		"events were purged from NOTIFICATION_LOG past the checkpoint, so the replica cannot be brought forward "+
		"event by event: repair it with hivedr bootstrap -repair-chain (the restarted tailer resumes after the gap and "+
		"bootstraps every database in scope)", ErrChainBroken, e.Checkpoint+1, e.Checkpoint, found, e.Head)
}

// Unwrap makes errors.Is(err, ErrChainBroken) true.
func (e *GapError) Unwrap() error { return ErrChainBroken }

// contiguous returns how many of evs continue the chain right after
// checkpoint: len(evs) when there is no gap.
func contiguous(checkpoint int64, evs []hmslog.RawEvent) int {
	for i, e := range evs {
		if e.EventID != checkpoint+1+int64(i) {
			return i
		}
	}
	return len(evs)
}
