package config

import (
	"bytes"
	"context"
	"log/slog"
	"os"
	"sync/atomic"
	"time"

	"go.yaml.in/yaml/v3"
)

// What a running daemon takes from its changed configuration file: the
// replication scope (replication.databases), nothing else. The tailer
// applies a new scope between two of its transactions, the applier for
// the events it plans next; every other key (addresses, roots, mappings,
// tuning) is read once at start, since changing it under a running
// daemon would change the meaning of what it already committed (a
// mapping moves DR locations, a root what may be read).

// WatchEvery is how often Watch looks at the file.
const WatchEvery = 2 * time.Second

// Watch follows the file c was loaded from: when its size or
// modification time changed and then held still for one interval (a file
// being written is not read half-way), or when a value arrives on hup
// (the daemon's SIGHUP), it loads the file again and, if its
// replication.databases differ from those in effect and nothing else
// does, sends c's replication policy with the new databases. A file that
// does not load or validate is logged with the error and skipped (the
// policy in effect stays); one in which other keys changed too is logged
// as needing a restart and its scope not taken either (half a change is
// not applied). It sends nothing for a configuration without a file. The
// channel closes when ctx ends.
func Watch(ctx context.Context, c *Config, interval time.Duration, hup <-chan os.Signal, log *slog.Logger) <-chan Replication {
	out := make(chan Replication)
	if c.File() == "" {
		close(out)
		return out
	}
	stamp := statFile(c.File()) // (before returning: a change made after Watch is seen)
	go func() {
		defer close(out)
		cur := *c
		pending := stamp
		tick := time.NewTicker(interval)
		defer tick.Stop()
		for {
			forced := false
			select {
			case <-ctx.Done():
				return
			case <-hup:
				forced = true
			case <-tick.C:
			}
			s := statFile(c.File())
			if !forced && (s == stamp || s != pending) {
				pending = s // changed: read it once it holds still
				continue
			}
			stamp, pending = s, s
			next, err := Load(c.File())
			if err == nil {
				next, err = next.ForSite(c.TopicSite()) // a further site's process follows its own scope
			}
			if err != nil {
				log.Error("configuration file changed but does not load; the replication scope in effect stays", "file", c.File(), "err", err)
				continue
			}
			if others := changedBesidesScope(&cur, next); len(others) > 0 {
				log.Warn("configuration keys changed that a running daemon does not take; restart it to apply them (the replication scope in effect stays)",
					"file", c.File(), "keys", others)
				continue
			}
			if sameScope(cur.Replication.Databases, next.Replication.Databases) {
				if forced {
					log.Info("configuration read again: the replication scope is unchanged", "file", c.File())
				}
				continue
			}
			rep := cur.Replication
			rep.Databases = next.Replication.Databases
			cur.Replication = rep
			log.Info("configuration file changed: new replication scope", "file", c.File(), "databases", scopeNames(rep.Databases))
			select {
			case out <- rep:
			case <-ctx.Done():
				return
			}
		}
	}()
	return out
}

// fileStamp is what Watch compares to see a file changed.
type fileStamp struct {
	size int64
	mod  time.Time
	err  bool
}

func statFile(p string) fileStamp {
	fi, err := os.Stat(p)
	if err != nil {
		return fileStamp{err: true}
	}
	return fileStamp{size: fi.Size(), mod: fi.ModTime()}
}

// sameScope reports whether two replication.databases say the same.
func sameScope(a, b []DatabasePolicy) bool {
	x, err1 := yaml.Marshal(a)
	y, err2 := yaml.Marshal(b)
	return err1 == nil && err2 == nil && bytes.Equal(x, y)
}

// changedBesidesScope lists the top-level sections (replication's keys
// other than databases by name) in which next differs from cur.
func changedBesidesScope(cur, next *Config) []string {
	a, b := *cur, *next
	a.Replication.Databases, b.Replication.Databases = nil, nil
	var out []string
	for _, s := range []struct {
		name string
		x, y any
	}{
		{"source", a.Source, b.Source}, {"kafka", a.Kafka, b.Kafka}, {"schema_registry", a.SchemaRegistry, b.SchemaRegistry},
		{"tailer", a.Tailer, b.Tailer}, {"copyd", a.Copyd, b.Copyd}, {"applier", a.Applier, b.Applier},
		{"filesystems", a.Filesystems, b.Filesystems},
		{"replication.source_roots", a.Replication.SourceRoots, b.Replication.SourceRoots},
		{"replication.path_mappings", a.Replication.PathMappings, b.Replication.PathMappings},
	} {
		x, err1 := yaml.Marshal(s.x)
		y, err2 := yaml.Marshal(s.y)
		if err1 != nil || err2 != nil || !bytes.Equal(x, y) {
			out = append(out, s.name)
		}
	}
	return out
}

func scopeNames(ps []DatabasePolicy) []string {
	names := make([]string, len(ps))
	for i, p := range ps {
		names[i] = p.Name
	}
	return names
}

// LivePolicy is a replication policy a daemon's goroutines read while
// Watch may replace it: Set swaps it whole, the readers see the old one
// or the new one, never a mix. The zero value holds none: use
// NewLivePolicy.
type LivePolicy struct{ p atomic.Pointer[Replication] }

// NewLivePolicy holds r.
func NewLivePolicy(r *Replication) *LivePolicy {
	l := &LivePolicy{}
	l.p.Store(r)
	return l
}

// Set replaces the policy.
func (l *LivePolicy) Set(r Replication) { l.p.Store(&r) }

// Get returns the policy in effect (not to be changed).
func (l *LivePolicy) Get() *Replication { return l.p.Load() }

// MapLocation is the policy's MapLocation.
func (l *LivePolicy) MapLocation(uri string) (string, error) { return l.Get().MapLocation(uri) }

// Replicated is the policy's Replicated.
func (l *LivePolicy) Replicated(db, table string) bool { return l.Get().Replicated(db, table) }

// RPO is the policy's RPO.
func (l *LivePolicy) RPO(db string) time.Duration { return l.Get().RPO(db) }
