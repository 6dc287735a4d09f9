package cdc

import (
	"maps"
	"slices"
)

// Index is the view's knowledge of the live objects: every database,
// table and partition the view holds, with its latest image and the
// bootstrap whose snapshot last wrote it. The metastore's events do not
// name a dropped table's partitions, nor a renamed table's, so the view
// keeps them here to write their deletes and their records under the new
// name. It is rebuilt at start from the view's own topics (the last
// record of each key; a tombstone removes it), which hold exactly what it
// held when the view last committed. It is not safe for concurrent use.
type Index struct {
	dbs map[string]*dbEntry
	n   int
}

type dbEntry struct {
	obj    entry
	tables map[string]*tableEntry
}

type tableEntry struct {
	obj   entry
	parts map[string]*entry
}

// entry is one object: its image (nil for a database or table the index
// holds only as the parent of objects it has images of) and the
// bootstrap whose snapshot record wrote it last ("" if none did).
type entry struct {
	image *Image
	boot  string
}

// NewIndex returns an empty index.
func NewIndex() *Index { return &Index{dbs: map[string]*dbEntry{}} }

// Len is the number of objects with an image.
func (x *Index) Len() int { return x.n }

// Get returns the image of k and the bootstrap that wrote it last, or nil.
func (x *Index) Get(k Key) (*Image, string) {
	if e := x.entry(k); e != nil {
		return e.image, e.boot
	}
	return nil, ""
}

func (x *Index) entry(k Key) *entry {
	d := x.dbs[k.Database]
	if d == nil {
		return nil
	}
	if k.Table == "" {
		return &d.obj
	}
	t := d.tables[k.Table]
	if t == nil {
		return nil
	}
	if k.Partition == "" {
		return &t.obj
	}
	return t.parts[k.Partition]
}

// Put sets the image of the object im shows, written by bootstrap boot
// ("" for an event).
func (x *Index) Put(im *Image, boot string) {
	k := im.key()
	d := x.dbs[k.Database]
	if d == nil {
		d = &dbEntry{tables: map[string]*tableEntry{}}
		x.dbs[k.Database] = d
	}
	var e *entry
	switch {
	case k.Table == "":
		e = &d.obj
	default:
		t := d.tables[k.Table]
		if t == nil {
			t = &tableEntry{parts: map[string]*entry{}}
			d.tables[k.Table] = t
		}
		if k.Partition == "" {
			e = &t.obj
		} else {
			e = t.parts[k.Partition]
			if e == nil {
				e = &entry{}
				t.parts[k.Partition] = e
			}
		}
	}
	if e.image == nil {
		x.n++
	}
	e.image, e.boot = im, boot
}

// Delete removes k's image, and with a table or database everything
// under it.
func (x *Index) Delete(k Key) {
	d := x.dbs[k.Database]
	if d == nil {
		return
	}
	switch {
	case k.Table == "":
		for _, t := range d.tables {
			x.n -= t.count()
		}
		if d.obj.image != nil {
			x.n--
		}
		delete(x.dbs, k.Database)
	case k.Partition == "":
		if t := d.tables[k.Table]; t != nil {
			x.n -= t.count()
			delete(d.tables, k.Table)
		}
	default:
		if t := d.tables[k.Table]; t != nil {
			if e := t.parts[k.Partition]; e != nil {
				if e.image != nil {
					x.n--
				}
				delete(t.parts, k.Partition)
			}
		}
	}
}

func (t *tableEntry) count() int {
	n := len(t.parts)
	if t.obj.image != nil {
		n++
	}
	return n
}

// Tables returns the names of db's tables the index holds, sorted.
func (x *Index) Tables(db string) []string {
	d := x.dbs[db]
	if d == nil {
		return nil
	}
	return slices.Sorted(maps.Keys(d.tables))
}

// Partitions returns the names of the partitions of db.table the index
// holds, sorted.
func (x *Index) Partitions(db, table string) []string {
	d := x.dbs[db]
	if d == nil {
		return nil
	}
	t := d.tables[table]
	if t == nil {
		return nil
	}
	return slices.Sorted(maps.Keys(t.parts))
}
