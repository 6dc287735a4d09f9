package copyd

import (
	"fmt"

	"github.com/hivedr/hivedr/internal/acid"
	"github.com/hivedr/hivedr/internal/location"
	"github.com/hivedr/hivedr/schemas"
)

// Site adapts the tailer's copy tasks to a further DR site (fan-out: one
// tailer, each site's copy daemons a group of their own). The tailer
// names each task's target under the top-level site's path mappings; a
// further site's daemon writes the same file under its own.
type Site struct {
	// Name is the site's name, for errors and logs.
	Name string
	// InScope reports whether the site replicates db.table. A task outside
	// it is passed over: committed with no completion, since none of the
	// site's appliers reads that object's events.
	InScope func(db, table string) bool
	// TailerMap is the top-level site's path mapping (the one the tailer
	// named the target with), SiteMap the site's own.
	TailerMap, SiteMap func(source string) (string, error)
}

// Target returns the site's target for task: the tailer named one of
// acid.CopyTargets(TailerMap(source), subdir) (the file's DR path, or a
// compaction's name for it); the site's is the same one of
// acid.CopyTargets(SiteMap(source), subdir). A task whose target is none
// of the tailer's, or whose source the site cannot map, is an error
// naming both.
func (s *Site) Target(task *schemas.CopyTask) (string, error) {
	live := liveSource(task.SourceURI)
	from, err := s.TailerMap(live)
	if err != nil {
		return "", fmt.Errorf("site %s: task %s: source %s: %w", s.Name, task.TaskID, task.SourceURI, err)
	}
	to, err := s.SiteMap(live)
	if err != nil {
		return "", fmt.Errorf("site %s: task %s: source %s has no path on the site: %w", s.Name, task.TaskID, task.SourceURI, err)
	}
	tgt, err := location.Canonical(task.TargetURI)
	if err != nil {
		return "", fmt.Errorf("site %s: task %s: target %s: %w", s.Name, task.TaskID, task.TargetURI, err)
	}
	mine := acid.CopyTargets(to, task.Subdir)
	for i, t := range acid.CopyTargets(from, task.Subdir) {
		if c, err := location.Canonical(t); err == nil && c == tgt {
			return mine[i], nil
		}
	}
	return "", fmt.Errorf("site %s: task %s: target %s is not the tailer's DR path of %s (%s under the top-level path mappings)", s.Name, task.TaskID, task.TargetURI, task.SourceURI, from)
}
