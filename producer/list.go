package producer

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/hivedr/hivedr/internal/fs"
	"github.com/hivedr/hivedr/internal/location"
	"github.com/hivedr/hivedr/schemas"
)

// Lister lists the data files under a directory of the source filesystem,
// recursively (*fs.Router). A missing directory is an error wrapping
// fs.ErrNotExist.
type Lister interface {
	Walk(ctx context.Context, dir string, fn func(location string, size int64) error) error
}

// listDirs returns the directories whose files an event brings into the
// replica but whose message does not list: the metastore lists the files
// of new partitions and tables only for managed tables, so for an external
// table's CREATE_TABLE and ADD_PARTITION (and an ALTER that moves it to
// another location) the tailer lists them itself.
func listDirs(ev *schemas.Event) []string {
	if len(ev.Files) > 0 {
		return nil
	}
	external := func(t *schemas.Table) bool { return t != nil && t.TableType == "EXTERNAL_TABLE" }
	switch p := ev.Payload.(type) {
	case *schemas.TableChange:
		if !external(p.After) || len(p.After.PartitionKeys) > 0 || p.After.Location == "" || p.IsTruncate {
			return nil
		}
		if ev.EventType == "CREATE_TABLE" || (ev.EventType == "ALTER_TABLE" && p.Before != nil && moved(p.Before.Location, p.After.Location)) {
			return []string{p.After.Location}
		}
	case *schemas.PartitionChange:
		if !external(p.Table) || p.IsTruncate {
			return nil
		}
		var dirs []string
		for i, part := range p.After {
			switch {
			case part.Location == "":
			case ev.EventType == "ADD_PARTITION":
				dirs = append(dirs, part.Location)
			case strings.HasPrefix(ev.EventType, "ALTER_PARTITION") && i < len(p.Before) && moved(p.Before[i].Location, part.Location):
				dirs = append(dirs, part.Location)
			}
		}
		return dirs
	}
	return nil
}

// moved reports whether an object's location changed: the two differ in
// canonical form (package location). Another spelling of the same place is
// no move; a location that does not parse is compared as written.
func moved(before, after string) bool {
	b, errB := location.Parse(before)
	a, errA := location.Parse(after)
	if errB != nil || errA != nil {
		return before != after
	}
	return a != b
}

// addListedFiles adds the files under the event's directories (listDirs)
// to its file list, as the metastore would have for a managed table.
// Hidden files (names starting with . or _ below the directory) are not
// data, as for Hive. The lister answers in canonical form (package
// location), the metastore in its own spelling, so the path below the
// directory is taken in canonical form.
func addListedFiles(ctx context.Context, l Lister, ev *schemas.Event) error {
	for _, dir := range listDirs(ev) {
		d, err := location.Parse(dir)
		if err != nil {
			return fmt.Errorf("list the files of event %d %s: %w", ev.EventID, ev.EventType, err)
		}
		err = l.Walk(ctx, dir, func(loc string, _ int64) error {
			f, err := location.Parse(loc)
			if err != nil {
				return fmt.Errorf("listed file: %w", err)
			}
			rel, ok := f.Rel(d)
			if !ok || rel == "" {
				return fmt.Errorf("listed file %s is not under %s", loc, dir)
			}
			for _, part := range strings.Split(rel, "/") {
				if strings.HasPrefix(part, ".") || strings.HasPrefix(part, "_") {
					return nil
				}
			}
			ev.Files = append(ev.Files, schemas.FileRef{URI: loc})
			return nil
		})
		if errors.Is(err, fs.ErrNotExist) {
			continue // nothing there (any more): the event brings no files
		}
		if err != nil {
			return fmt.Errorf("list the files of %s (event %d %s): %w", dir, ev.EventID, ev.EventType, err)
		}
	}
	return nil
}
