package cdc

import (
	"strings"

	"github.com/hivedr/hivedr/schemas"
)

// Op is a view record's kind of change, in Debezium's letters.
type Op string

// The view's ops; it writes no other (Flink's debezium formats fail on
// any other letter).
const (
	OpCreate Op = "c"
	OpUpdate Op = "u"
	OpDelete Op = "d"
	OpRead   Op = "r" // a bootstrap's snapshot
)

// Change is one view record: an object's change by one event. Before is
// set for u and d, After for c, u and r.
type Change struct {
	Key           Key
	Op            Op
	Before, After *Image
	// Bootstrap is the bootstrap ID of an r record, "" otherwise.
	Bootstrap string
}

// Derive returns the view records of ev, read from database db's event
// topic, given what the view holds (x, which it does not change; Apply
// does). It is a pure function of (ev, db, x).
//
// Each copy of an event on several databases' topics (a table renamed
// across databases, a transaction writing several) is derived on its
// own. A rename is written whole by the first copy derived, both
// databases' records: the old name's deletes and the new name's creates,
// with the partitions' images the index holds; the other copy then
// finds the old name gone and writes nothing. A transaction's commit
// writes, on each copy, the updates of that database's objects.
func Derive(ev *schemas.Event, db string, x *Index) []Change {
	d := deriver{x: x, db: db}
	switch p := ev.Payload.(type) {
	case *schemas.DatabaseChange:
		d.database(ev, p)
	case *schemas.TableChange:
		d.table(ev, p)
	case *schemas.PartitionChange:
		d.partitions(ev, p)
	case *schemas.InsertData:
		d.insert(p)
	case *schemas.Transaction:
		if ev.EventType == schemas.EventCommitTxn {
			d.commit(p)
		}
	case *schemas.Compaction:
		k := Key{Database: strings.ToLower(p.Database), Table: strings.ToLower(p.Table), Partition: p.Partition}
		if k.Database == db {
			d.touch(k)
		}
	}
	if ev.EventType == schemas.EventSnapshotEnd && ev.Snapshot != nil {
		d.end(ev.Snapshot)
	}
	return d.out
}

// bootID is the bootstrap ID of a bootstrap's record, "" otherwise.
func bootID(ev *schemas.Event) string {
	if ev.Snapshot == nil {
		return ""
	}
	return ev.Snapshot.BootstrapID
}

// Apply makes x hold what the changes leave.
func (x *Index) Apply(cs []Change) {
	for _, c := range cs {
		if c.Op == OpDelete {
			x.Delete(c.Key)
		} else {
			x.Put(c.After, c.Bootstrap)
		}
	}
}

type deriver struct {
	x   *Index
	db  string
	out []Change
	// done are the keys this event already changed: later changes of the
	// same key in the same event read them, not the index.
	done map[Key]*Image
	gone map[Key]bool
}

// get is k's image as this event has left it so far.
func (d *deriver) get(k Key) *Image {
	if d.gone[k] {
		return nil
	}
	if im, ok := d.done[k]; ok {
		return im
	}
	im, _ := d.x.Get(k)
	return im
}

func (d *deriver) emit(c Change) {
	if d.done == nil {
		d.done, d.gone = map[Key]*Image{}, map[Key]bool{}
	}
	if c.Op == OpDelete {
		d.gone[c.Key] = true
		delete(d.done, c.Key)
	} else {
		delete(d.gone, c.Key)
		d.done[c.Key] = c.After
	}
	d.out = append(d.out, c)
}

// upsert writes im: a create if the view does not hold its object, an
// update otherwise (nothing if the image is the same).
func (d *deriver) upsert(im *Image) {
	k := im.key()
	before := d.get(k)
	switch {
	case before == nil:
		d.emit(Change{Key: k, Op: OpCreate, After: im})
	case *before != *im:
		d.emit(Change{Key: k, Op: OpUpdate, Before: before, After: im})
	}
}

// touch writes an update of k with its image unchanged (data changed
// under it: a transaction's commit, a compaction), if the view holds it.
func (d *deriver) touch(k Key) {
	if im := d.get(k); im != nil {
		d.emit(Change{Key: k, Op: OpUpdate, Before: im, After: im})
	}
}

// remove writes the delete of k, and before it those of everything the
// view holds under it (a table's partitions, a database's tables).
func (d *deriver) remove(k Key) {
	switch k.Kind() {
	case KindDatabase:
		for _, t := range d.x.Tables(k.Database) {
			d.remove(Key{Database: k.Database, Table: t})
		}
	case KindTable:
		for _, p := range d.x.Partitions(k.Database, k.Table) {
			d.remove(Key{Database: k.Database, Table: k.Table, Partition: p})
		}
	}
	if im := d.get(k); im != nil {
		d.emit(Change{Key: k, Op: OpDelete, Before: im})
	}
}

func (d *deriver) database(ev *schemas.Event, p *schemas.DatabaseChange) {
	switch {
	case ev.EventType == schemas.EventSnapshotBegin && p.After != nil:
		im := databaseImage(p.After)
		d.emit(Change{Key: im.key(), Op: OpRead, After: im, Bootstrap: bootID(ev)})
	case p.After != nil:
		d.upsert(databaseImage(p.After))
	case p.Before != nil:
		d.remove(Key{Database: strings.ToLower(p.Before.Name)})
	}
}

func (d *deriver) table(ev *schemas.Event, p *schemas.TableChange) {
	switch {
	case ev.EventType == schemas.EventSnapshotTable && p.After != nil:
		im := tableImage(p.After)
		d.emit(Change{Key: im.key(), Op: OpRead, After: im, Bootstrap: bootID(ev)})
	case p.After == nil && p.Before != nil: // a drop
		d.remove(tableImage(p.Before).key())
	case p.After != nil && p.Before != nil && tableImage(p.Before).key() != tableImage(p.After).key():
		d.rename(p.Before, p.After)
	case p.After != nil && p.Before == nil && ev.EventType == schemas.EventCreateTable:
		// A table made anew has no partitions yet: any the view still
		// holds under its name belonged to an earlier table.
		k := tableImage(p.After).key()
		for _, part := range d.x.Partitions(k.Database, k.Table) {
			d.remove(Key{Database: k.Database, Table: k.Table, Partition: part})
		}
		d.upsert(tableImage(p.After))
	case p.After != nil:
		if p.IsTruncate {
			d.touch(tableImage(p.After).key())
			return
		}
		d.upsert(tableImage(p.After))
	}
}

// rename moves a table and its partitions to the new name: deletes under
// the old, creates under the new. A managed table's directory moves with
// it, and its partitions' directories under it; their images follow.
func (d *deriver) rename(before, after *schemas.Table) {
	from, to := tableImage(before), tableImage(after)
	old := from.key()
	if d.get(old) == nil {
		if d.get(to.key()) == nil {
			d.upsert(to) // the view never held the old name
		}
		return // the other database's copy of the rename wrote it
	}
	var parts []*Image
	for _, name := range d.x.Partitions(old.Database, old.Table) {
		if im := d.get(Key{Database: old.Database, Table: old.Table, Partition: name}); im != nil {
			parts = append(parts, im)
		}
	}
	d.remove(old)
	d.upsert(to)
	for _, pim := range parts {
		n := *pim
		n.Database, n.Table = to.Database, to.Table
		if from.Location != "" && to.Location != from.Location && strings.HasPrefix(n.Location, from.Location+"/") {
			n.Location = to.Location + strings.TrimPrefix(n.Location, from.Location)
		}
		d.upsert(&n)
	}
}

func (d *deriver) partitions(ev *schemas.Event, p *schemas.PartitionChange) {
	if p.Table == nil {
		return
	}
	if ev.EventType == schemas.EventSnapshotPartition {
		for i := range p.After {
			im := partitionImage(p.Table, &p.After[i])
			d.emit(Change{Key: im.key(), Op: OpRead, After: im, Bootstrap: bootID(ev)})
		}
		return
	}
	switch ev.EventType {
	case schemas.EventDropPartition:
		for i := range p.Before {
			d.remove(partitionImage(p.Table, &p.Before[i]).key())
		}
	case schemas.EventAlterPartition, schemas.EventAlterPartitions:
		if len(p.Before) != len(p.After) { // no pairs: each after as it is
			for i := range p.After {
				d.upsert(partitionImage(p.Table, &p.After[i]))
			}
			return
		}
		for i := range p.After {
			from, to := partitionImage(p.Table, &p.Before[i]), partitionImage(p.Table, &p.After[i])
			switch {
			case from.key() != to.key():
				d.remove(from.key())
				d.upsert(to)
			case p.IsTruncate:
				d.touch(to.key())
			default:
				d.upsert(to)
			}
		}
	case schemas.EventAddPartition:
		for i := range p.After {
			d.upsert(partitionImage(p.Table, &p.After[i]))
		}
	}
}

// insert updates the table or partition written, with the image the
// event carries (its parameters count the new files); an object the view
// does not hold is created.
func (d *deriver) insert(p *schemas.InsertData) {
	if p.Table == nil {
		return
	}
	if p.Partition != nil {
		d.insertInto(partitionImage(p.Table, p.Partition))
		return
	}
	d.insertInto(tableImage(p.Table))
}

func (d *deriver) insertInto(im *Image) {
	before := d.get(im.key())
	if before == nil {
		d.emit(Change{Key: im.key(), Op: OpCreate, After: im})
		return
	}
	d.emit(Change{Key: im.key(), Op: OpUpdate, Before: before, After: im})
}

// commit touches each object of this database a committed transaction
// wrote, once, in the order the event lists them.
func (d *deriver) commit(p *schemas.Transaction) {
	seen := map[Key]bool{}
	for _, w := range p.WriteIDs {
		k := Key{Database: strings.ToLower(w.Database), Table: strings.ToLower(w.Table), Partition: w.Partition}
		if k.Database != d.db || seen[k] {
			continue
		}
		seen[k] = true
		d.touch(k)
	}
}

// end deletes what the bootstrap's snapshot did not read: objects of the
// database (or of the tables a table-scoped bootstrap names) whose last
// record is not one of this bootstrap's. They were dropped before the
// cut, while the view was not reading.
func (d *deriver) end(s *schemas.SnapshotInfo) {
	stale := func(k Key) bool {
		im, boot := d.x.Get(k)
		return im != nil && boot != s.BootstrapID
	}
	tables := s.Tables
	if len(tables) == 0 {
		tables = d.x.Tables(d.db)
	}
	for _, t := range tables {
		tk := Key{Database: d.db, Table: strings.ToLower(t)}
		if stale(tk) {
			d.remove(tk)
			continue
		}
		for _, part := range d.x.Partitions(tk.Database, tk.Table) {
			if pk := (Key{Database: d.db, Table: tk.Table, Partition: part}); stale(pk) {
				d.remove(pk)
			}
		}
	}
}
