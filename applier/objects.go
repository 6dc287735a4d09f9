package applier

import (
	"fmt"
	"strconv"

	"github.com/apache/thrift/lib/go/thrift"
	"github.com/beltran/gohive/hive_metastore"

	"github.com/hivedr/hivedr/internal/drparam"
	"github.com/hivedr/hivedr/internal/hmsevent"
	"github.com/hivedr/hivedr/internal/iceberg"
	"github.com/hivedr/hivedr/schemas"
)

// The DR objects are built from the source's own Thrift objects when the
// event carries them (every field the source set survives, including ones
// hivedr's schemas do not model), else from the decoded fields. Then the
// locations are rewritten to DR locations, fields that only mean something
// on the source (IDs, privileges, statistics, write IDs) are cleared, and
// the parameters are stamped with the event ID.

func (p *planner) table(src *schemas.Table) (*hive_metastore.Table, error) {
	t := hive_metastore.NewTable()
	if src.ThriftJSON != "" {
		if err := readTJSON(src.ThriftJSON, t, func() { *t = *hive_metastore.NewTable() }); err != nil {
			return nil, fmt.Errorf("table %s.%s of event %d: %w", src.Database, src.Name, p.ev.EventID, err)
		}
	} else {
		t.TableName, t.DbName, t.Owner, t.TableType = src.Name, src.Database, src.Owner, src.TableType
		t.Parameters = copyParams(src.Parameters)
		t.PartitionKeys = fieldSchemas(src.PartitionKeys)
		t.ViewOriginalText, t.ViewExpandedText = src.ViewOriginalText, src.ViewExpandedText
		t.CreateTime = int32(src.CreateTime)
		t.Sd = storage(src.Columns, src.Location, &src.Storage)
	}
	t.DbName, t.TableName = lower(t.DbName), lower(t.TableName)
	t.ID, t.Privileges, t.ColStats, t.CreationMetadata = nil, nil, nil, nil
	t.WriteId, t.IsStatsCompliant, t.AccessType = -1, nil, nil
	t.RequiredReadCapabilities, t.RequiredWriteCapabilities = nil, nil
	t.CatName = strPtr("hive")
	t.Parameters = copyParams(t.Parameters)
	t.Parameters[drparam.LastID] = strconv.FormatInt(p.stampID, 10)
	if t.Sd != nil {
		loc, err := p.mapLocation(t.Sd.Location)
		if err != nil {
			return nil, err
		}
		t.Sd.Location = loc
	}
	if iceberg.IsTable(t.Parameters) {
		// An Iceberg table's pointers name its metadata files, which the
		// event's copies wrote under DR's paths (rewritten to name DR's
		// files only).
		for _, k := range []string{iceberg.ParamMetadataLocation, iceberg.ParamPreviousMetadataLocation} {
			if v := t.Parameters[k]; v != "" {
				m, err := p.mapLocation(v)
				if err != nil {
					return nil, err
				}
				t.Parameters[k] = m
			}
		}
	}
	return t, nil
}

// icebergChain checks an Iceberg commit against DR's table cur: the
// commit's files are what it adds to its previous metadata, so DR must
// point at (the DR path of) that metadata, or its new pointer could name
// files never copied. A change that keeps the pointer, a table made an
// Iceberg table, and a table DR does not have pass.
func (p *planner) icebergChain(c *schemas.TableChange, cur *hive_metastore.Table) (Decision, bool) {
	if cur == nil || c.Before == nil || !iceberg.IsTable(c.Before.Parameters) || !iceberg.IsTable(c.After.Parameters) {
		return Decision{}, true
	}
	before, after := c.Before.Parameters[iceberg.ParamMetadataLocation], c.After.Parameters[iceberg.ParamMetadataLocation]
	if before == "" || before == after {
		return Decision{}, true
	}
	want, err := p.mapLocation(before)
	if err != nil {
		return pathHalt(err), false
	}
	if got := cur.Parameters[iceberg.ParamMetadataLocation]; got != want {
		return halt(ReasonIcebergChain, "Iceberg table %s.%s on DR points at %q; event %d commits on top of %q (DR path %q): an earlier commit was not applied, or the DR table was changed on DR; repair: %s",
			c.After.Database, c.After.Name, got, p.ev.EventID, before, want, BootstrapCommand(c.After.Database)), false
	}
	return Decision{}, true
}

func (p *planner) partition(tbl *hive_metastore.Table, src *schemas.Partition) (*hive_metastore.Partition, error) {
	part := hive_metastore.NewPartition()
	if src.ThriftJSON != "" {
		if err := readTJSON(src.ThriftJSON, part, func() { *part = *hive_metastore.NewPartition() }); err != nil {
			return nil, fmt.Errorf("partition %v of %s.%s, event %d: %w", src.Values, tbl.DbName, tbl.TableName, p.ev.EventID, err)
		}
	} else {
		part.Values = src.Values
		part.Parameters = copyParams(src.Parameters)
		part.CreateTime = int32(src.CreateTime)
		cols := src.Columns
		var st *schemas.Storage
		if src.Storage != nil {
			st = src.Storage
		}
		if len(cols) == 0 && st == nil && tbl.Sd != nil {
			sd := *tbl.Sd
			sd.Location = src.Location
			part.Sd = &sd
		} else {
			part.Sd = storage(cols, src.Location, st)
		}
	}
	part.DbName, part.TableName = tbl.DbName, tbl.TableName
	part.Privileges, part.ColStats, part.IsStatsCompliant = nil, nil, nil
	part.WriteId = -1
	part.CatName = strPtr("hive")
	part.Parameters = copyParams(part.Parameters)
	part.Parameters[drparam.LastID] = strconv.FormatInt(p.stampID, 10)
	if part.Sd != nil {
		loc, err := p.mapLocation(part.Sd.Location)
		if err != nil {
			return nil, err
		}
		part.Sd.Location = loc
	}
	return part, nil
}

// readTJSON reads the source's own Thrift object an event carries into
// obj (hmsevent.ReadThriftJSON: Thrift's result, read by the tailer's
// reader); reset makes obj new again.
func readTJSON(s string, obj thrift.TStruct, reset func()) error {
	if err := hmsevent.ReadThriftJSON(s, obj, reset); err != nil {
		return fmt.Errorf("decode its Thrift JSON: %w", err)
	}
	return nil
}

func fieldSchemas(cols []schemas.Column) []*hive_metastore.FieldSchema {
	out := make([]*hive_metastore.FieldSchema, len(cols))
	for i, c := range cols {
		out[i] = &hive_metastore.FieldSchema{Name: c.Name, Type: c.Type, Comment: c.Comment}
	}
	return out
}

func storage(cols []schemas.Column, loc string, st *schemas.Storage) *hive_metastore.StorageDescriptor {
	sd := &hive_metastore.StorageDescriptor{Cols: fieldSchemas(cols), Location: loc, Parameters: map[string]string{},
		SerdeInfo: &hive_metastore.SerDeInfo{Parameters: map[string]string{}}}
	if st != nil {
		sd.InputFormat, sd.OutputFormat = st.InputFormat, st.OutputFormat
		sd.SerdeInfo.SerializationLib = st.SerdeLib
		sd.SerdeInfo.Parameters = copyParams(st.SerdeParameters)
		sd.Compressed, sd.NumBuckets, sd.BucketCols = st.Compressed, st.NumBuckets, st.BucketColumns
		sd.Parameters = copyParams(st.Parameters)
	}
	return sd
}

func lower(s string) string {
	b := []byte(s)
	for i, c := range b {
		if 'A' <= c && c <= 'Z' {
			b[i] = c + 'a' - 'A'
		}
	}
	return string(b)
}
