package cdc

import (
	"encoding/json"
	"strings"

	"github.com/beltran/gohive/hive_metastore"

	"github.com/hivedr/hivedr/internal/hms"
	"github.com/hivedr/hivedr/schemas"
)

// The kinds of object a view record is about.
const (
	KindDatabase  = "database"
	KindTable     = "table"
	KindPartition = "partition"
)

// Key names one metastore object: a database (Table and Partition
// empty), a table (Partition empty) or a partition (its name,
// k1=v1/k2=v2, as the metastore spells it). It is the view record's
// Kafka key, so a compacted view keeps each object's latest state.
type Key struct {
	Database, Table, Partition string
}

// Kind is the kind of object k names.
func (k Key) Kind() string {
	switch {
	case k.Table == "":
		return KindDatabase
	case k.Partition == "":
		return KindTable
	}
	return KindPartition
}

// Image is an object's state in a view record: flat (strings and longs
// only), so that a JDBC sink can write it as one row of one table for
// every kind of object. Fields an object's kind has no use for are
// empty.
type Image struct {
	Kind      string
	Database  string
	Table     string
	Partition string
	// Location is the object's directory on the source.
	Location  string
	Owner     string
	TableType string
	// Columns and PartitionKeys are "name type" pairs joined by ", ".
	Columns       string
	PartitionKeys string
	InputFormat   string
	SerdeLib      string
	// Parameters are the object's metastore parameters as a JSON object
	// with sorted keys.
	Parameters string
	// CreateTime is the metastore's create time, in seconds.
	CreateTime int64
	// WriteID is the write ID of a transactional table's or partition's
	// latest metadata change, 0 otherwise.
	WriteID int64
}

// key is the key of the object i shows.
func (i *Image) key() Key { return Key{Database: i.Database, Table: i.Table, Partition: i.Partition} }

func databaseImage(db *schemas.Database) *Image {
	return &Image{
		Kind:       KindDatabase,
		Database:   strings.ToLower(db.Name),
		Location:   db.Location,
		Owner:      db.Owner,
		Parameters: paramsJSON(db.Parameters),
	}
}

func tableImage(t *schemas.Table) *Image {
	return &Image{
		Kind:          KindTable,
		Database:      strings.ToLower(t.Database),
		Table:         strings.ToLower(t.Name),
		Location:      t.Location,
		Owner:         t.Owner,
		TableType:     t.TableType,
		Columns:       columns(t.Columns),
		PartitionKeys: columns(t.PartitionKeys),
		InputFormat:   t.Storage.InputFormat,
		SerdeLib:      t.Storage.SerdeLib,
		Parameters:    paramsJSON(t.Parameters),
		CreateTime:    t.CreateTime,
		WriteID:       t.WriteID,
	}
}

// partitionImage is p's image as a partition of t; a partition without
// columns or storage of its own (the metastore's messages often leave
// them out) shows its table's.
func partitionImage(t *schemas.Table, p *schemas.Partition) *Image {
	im := &Image{
		Kind:          KindPartition,
		Database:      strings.ToLower(t.Database),
		Table:         strings.ToLower(t.Name),
		Partition:     partitionName(t.PartitionKeys, p.Values),
		Location:      p.Location,
		Owner:         t.Owner,
		TableType:     t.TableType,
		Columns:       columns(p.Columns),
		PartitionKeys: columns(t.PartitionKeys),
		InputFormat:   t.Storage.InputFormat,
		SerdeLib:      t.Storage.SerdeLib,
		Parameters:    paramsJSON(p.Parameters),
		CreateTime:    p.CreateTime,
		WriteID:       p.WriteID,
	}
	if im.Columns == "" {
		im.Columns = columns(t.Columns)
	}
	if p.Storage != nil {
		im.InputFormat, im.SerdeLib = p.Storage.InputFormat, p.Storage.SerdeLib
	}
	return im
}

// partitionName is the metastore's name of the partition with these
// values under these keys.
func partitionName(keys []schemas.Column, values []string) string {
	fs := make([]*hive_metastore.FieldSchema, len(keys))
	for i, k := range keys {
		fs[i] = &hive_metastore.FieldSchema{Name: k.Name}
	}
	return hms.PartitionName(fs, values)
}

func columns(cs []schemas.Column) string {
	var b strings.Builder
	for i, c := range cs {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(c.Name)
		b.WriteByte(' ')
		b.WriteString(c.Type)
	}
	return b.String()
}

// paramsJSON is m as a JSON object; encoding/json sorts map keys, so the
// same parameters always give the same string.
func paramsJSON(m map[string]string) string {
	if len(m) == 0 {
		return "{}"
	}
	b, err := json.Marshal(m)
	if err != nil { // a map of strings always marshals
		return "{}"
	}
	return string(b)
}
