package producer

import (
	"fmt"
	"sort"

	"github.com/hivedr/hivedr/internal/acid"
	"github.com/hivedr/hivedr/internal/config"
	"github.com/hivedr/hivedr/schemas"
)

// Reasons an event is not published to any database topic; they label the
// filtered-events metric.
const (
	FilterNoDatabase    = "no_database" // e.g. OPEN_TXN: concerns no database
	FilterOutOfScope    = "database_out_of_scope"
	FilterTableExcluded = "table_excluded"
)

// Routed is what the tailer publishes for one decoded event.
type Routed struct {
	// Event is the decoded event with Databases narrowed to the in-scope
	// ones it goes to, file task IDs set, and any path errors added.
	Event schemas.Event
	// Tasks are the copy tasks of its files.
	Tasks []schemas.CopyTask
	// Filtered is the reason the event goes nowhere; "" when it is published.
	Filtered string
}

// Route decides, without I/O, where an event goes under the policy: to the
// topic of every in-scope database it concerns in which at least one of the
// tables it names is included (a rename from an included name to an
// excluded one still reaches the database, so its replica can follow), and
// which copy tasks its files become.
//
// Guarantee 7: a file outside the source roots, or one no path mapping
// covers, never becomes a copy task; it becomes an EventError naming the
// path, on which the applier halts the database.
func Route(ev schemas.Event, pol *config.Replication) Routed {
	concerned := ev.Databases
	if len(concerned) == 0 && ev.Database != "" {
		concerned = []string{ev.Database}
	}
	if len(concerned) == 0 {
		return Routed{Event: ev, Filtered: FilterNoDatabase}
	}
	tables := namedTables(ev)
	var dbs []string
	reason := FilterOutOfScope
	for _, db := range concerned {
		p, ok := pol.Scope(db)
		if !ok {
			continue
		}
		names := tables[db]
		if len(names) == 0 && (len(tables) == 0 || ev.Table == "") {
			dbs = append(dbs, db) // a database-level event of an in-scope database
			continue
		}
		for _, t := range names {
			if p.TableIncluded(t) {
				dbs = append(dbs, db)
				break
			}
		}
		if len(dbs) == 0 || dbs[len(dbs)-1] != db {
			reason = FilterTableExcluded
		}
	}
	if len(dbs) == 0 {
		return Routed{Event: ev, Filtered: reason}
	}
	sort.Strings(dbs)
	ev.Databases = dbs

	// Files and errors are added to below: copies, so the caller's event
	// is never changed through them.
	r := Routed{Event: ev}
	r.Event.Files = append([]schemas.FileRef(nil), ev.Files...)
	r.Event.Errors = append([]schemas.EventError(nil), ev.Errors...)
	if t, ok := ev.Payload.(*schemas.Transaction); ok && len(t.WriteIDs) > 0 {
		r.Event.Payload, r.Event.Files = inScopeWrites(t, r.Event.Files, pol)
	}
	r.addTasks(0, pol, eventTaskID(ev.EventID))
	return r
}

// eventTaskID names the copy task of an event's i-th file <event>-<i>.
func eventTaskID(eventID int64) func(i int) string {
	return func(i int) string { return fmt.Sprintf("%d-%d", eventID, i) }
}

// AddFiles adds files found by listing (see listDirs) to a routed event,
// with their copy tasks or, for a file outside the roots, an error: as
// Route does for the files the message lists.
func (r *Routed) AddFiles(files []schemas.FileRef, pol *config.Replication) {
	if len(files) == 0 {
		return
	}
	from := len(r.Event.Files)
	r.Event.Files = append(r.Event.Files, files...)
	r.addTasks(from, pol, eventTaskID(r.Event.EventID))
}

// addTasks makes the copy tasks of the event's files from index from on,
// the i-th named id(i).
func (r *Routed) addTasks(from int, pol *config.Replication, id func(i int) string) {
	ev := &r.Event
	taskDB, taskTable := fileOwner(*ev)
	writeOf := writeOwners(ev.Payload)
	for i := from; i < len(ev.Files); i++ {
		f := &ev.Files[i]
		taskDB, taskTable := taskDB, taskTable
		if w, ok := writeOf[f.URI]; ok {
			taskDB, taskTable = w.Database, w.Table
		}
		if _, err := pol.CheckSourceRoot(f.URI); err != nil {
			ev.Errors = append(ev.Errors, schemas.EventError{
				Kind: schemas.ErrPathOutsideRoots, Message: err.Error(), Path: f.URI,
			})
			continue
		}
		target, err := pol.MapPath(f.URI)
		if err != nil {
			ev.Errors = append(ev.Errors, schemas.EventError{
				Kind: schemas.ErrPathOutsideRoots, Message: err.Error(), Path: f.URI,
			})
			continue
		}
		if _, ok := ev.Payload.(*schemas.Compaction); ok {
			target = acid.CompactionTarget(target, f.Subdir)
		} else {
			// A compactor's directory a bootstrap copies goes under the
			// name a replicated compaction gives it.
			target = acid.ReplicaPath(target)
		}
		f.TaskID = id(i)
		r.Tasks = append(r.Tasks, schemas.CopyTask{
			TaskID: f.TaskID, EventID: ev.EventID, EventTime: ev.EventTime,
			Database: taskDB, Table: taskTable,
			SourceURI: f.URI, TargetURI: target,
			Checksum: f.Checksum, CMRoot: f.CMRoot, Subdir: f.Subdir, Rewrite: f.Rewrite,
		})
	}
}

// namedTables returns, per database, the table names an event touches: both
// sides of a rename, or the event's own table.
func namedTables(ev schemas.Event) map[string][]string {
	m := map[string][]string{}
	add := func(t *schemas.Table) {
		if t != nil && t.Name != "" {
			m[t.Database] = append(m[t.Database], t.Name)
		}
	}
	switch p := ev.Payload.(type) {
	case *schemas.TableChange:
		add(p.Before)
		add(p.After)
	case *schemas.Transaction:
		for _, w := range p.WriteIDs {
			m[w.Database] = append(m[w.Database], w.Table)
		}
	case *schemas.Compaction:
		m[p.Database] = append(m[p.Database], p.Table)
	}
	if len(m) == 0 && ev.Table != "" && ev.Database != "" {
		m[ev.Database] = []string{ev.Table}
	}
	return m
}

// fileOwner is the table an event's files belong to: the table after the
// change where there is one.
func fileOwner(ev schemas.Event) (db, table string) {
	switch p := ev.Payload.(type) {
	case *schemas.TableChange:
		if p.After != nil {
			return p.After.Database, p.After.Name
		}
	case *schemas.InsertData:
		if p.Table != nil {
			return p.Table.Database, p.Table.Name
		}
	case *schemas.Compaction:
		return p.Database, p.Table
	}
	return ev.Database, ev.Table
}

// writeOwners maps each file of a transaction's writes to its write: a
// commit's files belong to several tables.
func writeOwners(p schemas.Payload) map[string]*schemas.TableWriteID {
	t, ok := p.(*schemas.Transaction)
	if !ok {
		return nil
	}
	m := map[string]*schemas.TableWriteID{}
	for i := range t.WriteIDs {
		for _, f := range t.WriteIDs[i].Files {
			m[f] = &t.WriteIDs[i]
		}
	}
	return m
}

// inScopeWrites narrows a transaction's writes to the tables in scope, and
// the event's files to theirs: a transaction that also wrote a table out
// of scope must not copy that table's files (nor name them to the
// applier).
func inScopeWrites(t *schemas.Transaction, files []schemas.FileRef, pol *config.Replication) (*schemas.Transaction, []schemas.FileRef) {
	out := &schemas.Transaction{TxnIDs: t.TxnIDs}
	keep := map[string]bool{}
	for _, w := range t.WriteIDs {
		if p, ok := pol.Scope(w.Database); ok && p.TableIncluded(w.Table) {
			out.WriteIDs = append(out.WriteIDs, w)
			for _, f := range w.Files {
				keep[f] = true
			}
		}
	}
	if len(out.WriteIDs) == len(t.WriteIDs) {
		return t, files
	}
	var kept []schemas.FileRef
	for _, f := range files {
		if keep[f.URI] {
			kept = append(kept, f)
		}
	}
	return out, kept
}
