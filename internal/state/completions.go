package state

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"sync"

	"github.com/cockroachdb/pebble/v2"

	"github.com/hivedr/hivedr/internal/location"
	"github.com/hivedr/hivedr/schemas"
)

// Completion is what the applier keeps of one copy completion.
type Completion struct {
	TaskID  string `json:"task_id"`
	EventID int64  `json:"event_id"`
	Target  string `json:"target"`
	Status  string `json:"status"`
	Error   string `json:"error,omitempty"`
}

// Completions is the applier's cache of the completions topic: the latest
// completion of every task, an index of targets by the event that wrote
// them, and how far the topic has been read. The completions and the read
// position are written in one synced batch, so after a crash the store
// holds exactly the records before its position. Losing the directory
// loses nothing but time: the applier reads the topic again from its start.
//
// Targets are indexed in canonical form (package location), whatever
// spelling a completion or a WrittenAfter caller uses: the path mapping's
// (what copy tasks carry) and the DR filesystem's (what a listing returns)
// differ, and a miss would let the applier's prune delete a file a later
// event already copied.
type Completions struct {
	db *pebble.DB

	mu      sync.Mutex
	changed chan struct{}
}

const (
	complPrefix  = "c\x00"
	targetPrefix = "t\x00"
	offsetPrefix = "o\x00"
	formatKey    = "v\x00"
)

// completionsFormat is the store's layout version, kept under formatKey.
// Stores without one (targets indexed as spelled) or with another are
// emptied on open and rebuilt from the completions topic.
const completionsFormat = "3" // 2: targets indexed in canonical form; 3: only targets a copy left on DR

// OpenCompletions opens (creating if needed) the completion store in dir.
// A store in an older layout is emptied first: its target index would miss
// lookups in canonical form, and rebuilding it from the topic costs only
// time.
func OpenCompletions(dir string) (*Completions, error) {
	db, err := pebble.Open(dir, &pebble.Options{FormatMajorVersion: pebble.FormatNewest, Logger: pebbleLogger{}})
	if err != nil {
		return nil, fmt.Errorf("completion store %s: %w", dir, err)
	}
	if err := upgrade(db); err != nil {
		db.Close()
		return nil, fmt.Errorf("completion store %s: %w", dir, err)
	}
	return &Completions{db: db, changed: make(chan struct{})}, nil
}

// upgrade empties db unless it is in completionsFormat, then records the
// format, in one synced batch.
func upgrade(db *pebble.DB) error {
	v, closer, err := db.Get([]byte(formatKey))
	switch {
	case err == nil:
		same := string(v) == completionsFormat
		closer.Close()
		if same {
			return nil
		}
	case !errors.Is(err, pebble.ErrNotFound):
		return fmt.Errorf("read format: %w", err)
	}
	b := db.NewBatch()
	defer b.Close()
	if err := b.DeleteRange([]byte{}, []byte{0xff}, nil); err != nil {
		return err
	}
	if err := b.Set([]byte(formatKey), []byte(completionsFormat), nil); err != nil {
		return err
	}
	if err := b.Commit(pebble.Sync); err != nil {
		return fmt.Errorf("reset to format %s: %w", completionsFormat, err)
	}
	return nil
}

// Close closes the store.
func (s *Completions) Close() error { return s.db.Close() }

func offsetKey(topic string, partition int32) []byte {
	k := []byte(offsetPrefix + topic + "\x00")
	return binary.BigEndian.AppendUint32(k, uint32(partition))
}

// targetKey is the index key of target written by eventID: the target's
// canonical form, then the event ID, so one target's entries sort by event.
func targetKey(target string, eventID int64) []byte {
	k := []byte(targetPrefix + canonicalTarget(target) + "\x00")
	return binary.BigEndian.AppendUint64(k, uint64(eventID))
}

// canonicalTarget is target in canonical form, or as it is when it does
// not parse (no copy wrote such a target; it can only match itself).
func canonicalTarget(target string) string {
	if c, err := location.Canonical(target); err == nil {
		return c
	}
	return target
}

// placed reports whether the task left its target on DR: copied, or
// found there already identical. A task whose source was gone or that
// failed wrote nothing, so the file DR holds at its target (if any) is
// not the task's event's and must not be spared by WrittenAfter.
func (c Completion) placed() bool {
	return c.Status == string(schemas.StatusCopied) || c.Status == string(schemas.StatusSkippedIdentical)
}

// Put stores completions and the topic position after them (next offset
// to read per partition) atomically and durably (pebble.Sync).
func (s *Completions) Put(cs []Completion, topic string, next map[int32]int64) error {
	b := s.db.NewBatch()
	defer b.Close()
	for _, c := range cs {
		v, err := json.Marshal(c)
		if err != nil {
			return fmt.Errorf("completion store: encode %s: %w", c.TaskID, err)
		}
		if err := b.Set([]byte(complPrefix+c.TaskID), v, nil); err != nil {
			return err
		}
		if c.Target != "" && c.placed() {
			if err := b.Set(targetKey(c.Target, c.EventID), []byte(c.TaskID), nil); err != nil {
				return err
			}
		}
	}
	for p, o := range next {
		if err := b.Set(offsetKey(topic, p), binary.BigEndian.AppendUint64(nil, uint64(o)), nil); err != nil {
			return err
		}
	}
	if err := b.Commit(pebble.Sync); err != nil {
		return fmt.Errorf("completion store: commit: %w", err)
	}
	s.mu.Lock()
	close(s.changed)
	s.changed = make(chan struct{})
	s.mu.Unlock()
	return nil
}

// Changed returns a channel closed at the next Put.
func (s *Completions) Changed() <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.changed
}

// Get returns the latest completion of a task.
func (s *Completions) Get(taskID string) (Completion, bool, error) {
	v, closer, err := s.db.Get([]byte(complPrefix + taskID))
	if errors.Is(err, pebble.ErrNotFound) {
		return Completion{}, false, nil
	}
	if err != nil {
		return Completion{}, false, fmt.Errorf("completion store: get %s: %w", taskID, err)
	}
	defer closer.Close()
	var c Completion
	if err := json.Unmarshal(v, &c); err != nil {
		return Completion{}, false, fmt.Errorf("completion store: decode %s: %w", taskID, err)
	}
	return c, true, nil
}

// WrittenAfter reports whether a completion of an event after eventID
// that left its target on DR (copied, or identical already) names target,
// in any spelling of it: a later event's file, already copied ahead of
// metadata. A task whose source was gone does not count: the file at its
// target is an older event's, and a prune must remove it.
func (s *Completions) WrittenAfter(target string, eventID int64) (bool, error) {
	it, err := s.db.NewIter(&pebble.IterOptions{
		LowerBound: targetKey(target, eventID+1),
		UpperBound: []byte(targetPrefix + canonicalTarget(target) + "\x01"),
	})
	if err != nil {
		return false, err
	}
	defer it.Close()
	return it.First(), nil
}

// Offsets returns the next offset to read per partition of topic.
func (s *Completions) Offsets(topic string) (map[int32]int64, error) {
	lo := []byte(offsetPrefix + topic + "\x00")
	hi := []byte(offsetPrefix + topic + "\x01")
	it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: lo, UpperBound: hi})
	if err != nil {
		return nil, err
	}
	defer it.Close()
	out := map[int32]int64{}
	for it.First(); it.Valid(); it.Next() {
		k := it.Key()[len(lo):]
		if len(k) != 4 || len(it.Value()) != 8 {
			return nil, errors.New("completion store: malformed offset entry")
		}
		out[int32(binary.BigEndian.Uint32(k))] = int64(binary.BigEndian.Uint64(it.Value()))
	}
	return out, it.Error()
}
