package schemas

import (
	"slices"
	"strconv"
	"strings"
)

// TableKey names a table; names are lower case, as the metastore keeps them.
type TableKey struct{ DB, Name string }

// PartKey names a partition: its table and its values joined by "/".
type PartKey struct {
	TableKey
	Values string
}

// NewTableKey is the key of table name of database db.
func NewTableKey(db, name string) TableKey {
	return TableKey{strings.ToLower(db), strings.ToLower(name)}
}

// NewPartKey is the key of the partition of t with values.
func NewPartKey(t TableKey, values []string) PartKey {
	return PartKey{t, strings.Join(values, "/")}
}

// String is db.table.
func (k TableKey) String() string { return k.DB + "." + k.Name }

// String is db.table partition [v1/v2].
func (k PartKey) String() string { return k.TableKey.String() + " partition [" + k.Values + "]" }

// Touched lists the DR objects whose state Plan needs for an event.
type Touched struct {
	Databases  []string
	Tables     []TableKey
	Partitions []PartKey
}

// Merge adds what o names and t does not.
func (t *Touched) Merge(o Touched) {
	for _, d := range o.Databases {
		if !slices.Contains(t.Databases, d) {
			t.Databases = append(t.Databases, d)
		}
	}
	for _, k := range o.Tables {
		if !slices.Contains(t.Tables, k) {
			t.Tables = append(t.Tables, k)
		}
	}
	t.Partitions = append(t.Partitions, o.Partitions...)
}

// Touches says which objects ev, arriving on db's topic, names: the DR
// objects whose state the applier reads to plan it, and the objects a
// pending event may still change (hivedr verify's in_flight).
func Touches(db string, ev *Event) Touched {
	var t Touched
	addDB := func(name string) {
		name = strings.ToLower(name)
		for _, d := range t.Databases {
			if d == name {
				return
			}
		}
		t.Databases = append(t.Databases, name)
	}
	addTable := func(tb *Table) {
		if tb != nil && tb.Name != "" {
			t.Tables = append(t.Tables, NewTableKey(tb.Database, tb.Name))
			addDB(tb.Database)
		}
	}
	addDB(db)
	switch p := ev.Payload.(type) {
	case *TableChange:
		addTable(p.Before)
		addTable(p.After)
	case *PartitionChange:
		tk := EventTable(ev, p.Table)
		t.Tables = append(t.Tables, tk)
		for _, ps := range [][]Partition{p.Before, p.After} {
			for _, part := range ps {
				t.Partitions = append(t.Partitions, NewPartKey(tk, part.Values))
			}
		}
	case *InsertData:
		tk := EventTable(ev, p.Table)
		t.Tables = append(t.Tables, tk)
		if p.Partition != nil {
			t.Partitions = append(t.Partitions, NewPartKey(tk, p.Partition.Values))
		}
	case *WriteIDAllocation:
		t.Tables = append(t.Tables, NewTableKey(p.Database, p.Table))
	case *Compaction:
		tk := NewTableKey(p.Database, p.Table)
		t.Tables = append(t.Tables, tk)
		if p.Partition != "" {
			t.Partitions = append(t.Partitions, NewPartKey(tk, PartitionValues(p.Partition)))
		}
	case *Transaction:
		for _, w := range p.WriteIDs {
			k := NewTableKey(w.Database, w.Table)
			if !strings.EqualFold(k.DB, db) {
				continue
			}
			if !slices.Contains(t.Tables, k) {
				t.Tables = append(t.Tables, k)
			}
			if w.Partition != "" {
				if pk := NewPartKey(k, PartitionValues(w.Partition)); !slices.Contains(t.Partitions, pk) {
					t.Partitions = append(t.Partitions, pk)
				}
			}
		}
	}
	return t
}

func EventTable(ev *Event, t *Table) TableKey {
	if t != nil && t.Name != "" {
		return NewTableKey(t.Database, t.Name)
	}
	return NewTableKey(ev.Database, ev.Table)
}

// PartitionValues parses a partition name as the metastore writes it
// (k1=v1/k2=v2, values escaped as %XX) into its values.
func PartitionValues(name string) []string {
	var vals []string
	for _, kv := range strings.Split(name, "/") {
		_, v, _ := strings.Cut(kv, "=")
		vals = append(vals, unescapePathName(v))
	}
	return vals
}

// unescapePathName undoes the metastore's %XX escaping of a partition
// value in a path or name.
func unescapePathName(s string) string {
	if !strings.Contains(s, "%") {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '%' && i+2 < len(s) {
			if n, err := strconv.ParseUint(s[i+1:i+3], 16, 8); err == nil {
				b.WriteByte(byte(n))
				i += 2
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}
