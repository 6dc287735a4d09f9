// Package state holds the daemons' local Pebble stores, each in a directory
// of its own:
//
//   - Store, copyd's record of its writes in progress (staging files,
//     multipart uploads), synced before a byte is written, so a restarted
//     daemon can discard what a crash left (copyd's DiscardInterrupted);
//   - Completions, the applier's cache of the completions topic: the
//     latest completion of every copy task, its targets indexed in
//     canonical form, and how far the topic was read.
//
// Both are caches, never the progress itself: Kafka offsets are the
// checkpoints. Losing copyd's directory leaves at worst staging files for
// a later cleanup; losing the applier's costs a re-read of the topic.
package state

import (
	"bytes"
	"context"
	"errors"
	"fmt"

	"github.com/cockroachdb/pebble/v2"
)

// Store is a Pebble database in a directory of its own.
type Store struct {
	db *pebble.DB
}

// Open opens (creating if needed) the store in dir.
func Open(dir string) (*Store, error) {
	db, err := pebble.Open(dir, &pebble.Options{FormatMajorVersion: pebble.FormatNewest, Logger: pebbleLogger{}})
	if err != nil {
		return nil, fmt.Errorf("state store %s: %w", dir, err)
	}
	return &Store{db: db}, nil
}

// Close closes the store.
func (s *Store) Close() error { return s.db.Close() }

// Staging is a write in progress: the target location and the store's
// staging value (a staging path or an upload ID).
type Staging struct {
	TaskID, Location, Staging string
}

const stagingPrefix = "staging\x00"

func stagingKey(location, staging string) []byte {
	return []byte(stagingPrefix + location + "\x00" + staging)
}

// Begin records a write in progress. It is synced before it returns
// (pebble.Sync), so a kill -9 right after cannot lose it.
func (s *Store) Begin(_ context.Context, taskID, location, staging string) error {
	if err := s.db.Set(stagingKey(location, staging), []byte(taskID), pebble.Sync); err != nil {
		return fmt.Errorf("state: record staging %s of %s: %w", staging, location, err)
	}
	return nil
}

// End forgets a write that was committed or cleaned up.
func (s *Store) End(_ context.Context, _, location, staging string) error {
	if err := s.db.Delete(stagingKey(location, staging), pebble.Sync); err != nil {
		return fmt.Errorf("state: forget staging %s of %s: %w", staging, location, err)
	}
	return nil
}

// Pending lists the writes in progress, oldest key first.
func (s *Store) Pending() ([]Staging, error) {
	it, err := s.db.NewIter(&pebble.IterOptions{
		LowerBound: []byte(stagingPrefix),
		UpperBound: []byte("staging\x01"),
	})
	if err != nil {
		return nil, err
	}
	defer it.Close()
	var out []Staging
	for it.First(); it.Valid(); it.Next() {
		k := bytes.TrimPrefix(it.Key(), []byte(stagingPrefix))
		loc, stg, ok := bytes.Cut(k, []byte{0})
		if !ok {
			return nil, errors.New("state: malformed staging key")
		}
		out = append(out, Staging{TaskID: string(it.Value()), Location: string(loc), Staging: string(stg)})
	}
	return out, it.Error()
}
