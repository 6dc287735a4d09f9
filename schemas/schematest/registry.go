// Package schematest holds an in-memory schema registry for unit tests.
package schematest

import (
	"context"
	"fmt"
	"sync"

	"github.com/hivedr/hivedr/schemas"
)

// Registry is an in-memory schemas.Registry and CompatibilitySetter: IDs
// are global, a schema text registered again gets its old ID. The zero
// value is ready to use; it is safe for concurrent use.
type Registry struct {
	mu       sync.Mutex
	byID     []string         // ID i+1 is byID[i]
	subjects map[string][]int // IDs by subject, oldest first
	compat   map[string]string
}

// Register implements schemas.Registry.
func (r *Registry) Register(_ context.Context, subject, schema string) (int, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.subjects == nil {
		r.subjects = map[string][]int{}
	}
	id := 0
	for i, s := range r.byID {
		if s == schema {
			id = i + 1
			break
		}
	}
	if id == 0 {
		r.byID = append(r.byID, schema)
		id = len(r.byID)
	}
	for _, have := range r.subjects[subject] {
		if have == id {
			return id, nil
		}
	}
	r.subjects[subject] = append(r.subjects[subject], id)
	return id, nil
}

// SchemaByID implements schemas.SchemaFetcher.
func (r *Registry) SchemaByID(_ context.Context, id int) (string, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if id < 1 || id > len(r.byID) {
		return "", fmt.Errorf("%w %d", schemas.ErrUnknownSchemaID, id)
	}
	return r.byID[id-1], nil
}

// SetCompatibility implements schemas.CompatibilitySetter.
func (r *Registry) SetCompatibility(_ context.Context, subject, level string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.compat == nil {
		r.compat = map[string]string{}
	}
	r.compat[subject] = level
	return nil
}

// Subjects returns the registered subjects with their IDs, and each
// subject's compatibility level ("" if never set).
func (r *Registry) Subjects() (ids map[string][]int, compat map[string]string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	ids, compat = map[string][]int{}, map[string]string{}
	for s, l := range r.subjects {
		ids[s] = append([]int(nil), l...)
		compat[s] = r.compat[s]
	}
	return ids, compat
}
