package workload

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"

	"github.com/apache/thrift/lib/go/thrift"
	"github.com/beltran/gohive/hive_metastore"

	"github.com/hivedr/hivedr/internal/hms"
)

// This file builds notification messages as the metastore's
// DbNotificationListener logs them (Hive 4, GzipJSONMessageEncoder): a
// JSON object per event type, with the metastore objects embedded as
// Thrift TJSONProtocol text, gzipped and base64-encoded. The objects start
// from templates: the ones a real metastore logged in the producer's
// captured fixtures (internal/hmsevent/testdata/events), so every field the
// metastore fills in itself (catalog, owner type, write ID, table ID,
// skewed info, ...) is there as the metastore writes it.

// MessageTemplates are the metastore objects of real captured events.
type MessageTemplates struct {
	db    *hive_metastore.Database
	table *hive_metastore.Table
	part  *hive_metastore.Partition
}

// LoadMessageTemplates reads the captured fixtures in dir (JSON files, one
// notification each, message undecoded): a CREATE_DATABASE for the
// database and an ADD_PARTITION for the table and partition.
func LoadMessageTemplates(dir string) (*MessageTemplates, error) {
	files, err := filepath.Glob(filepath.Join(dir, "*.json"))
	if err != nil || len(files) == 0 {
		return nil, fmt.Errorf("message templates: no captured events in %s (%v)", dir, err)
	}
	sort.Strings(files)
	tpl := &MessageTemplates{}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			return nil, fmt.Errorf("message templates: %w", err)
		}
		var fx struct{ EventType, MessageFormat, Message string }
		if err := json.Unmarshal(b, &fx); err != nil {
			return nil, fmt.Errorf("message templates: %s: %w", f, err)
		}
		if (fx.EventType != "CREATE_DATABASE" || tpl.db != nil) && (fx.EventType != "ADD_PARTITION" || tpl.table != nil) {
			continue
		}
		msg, err := hms.MessageJSON(fx.MessageFormat, fx.Message)
		if err != nil {
			return nil, fmt.Errorf("message templates: %s: %w", f, err)
		}
		var m struct {
			DBJSON            string   `json:"dbJson"`
			TableObjJSON      string   `json:"tableObjJson"`
			PartitionListJSON []string `json:"partitionListJson"`
		}
		if err := json.Unmarshal(msg, &m); err != nil {
			return nil, fmt.Errorf("message templates: %s: %w", f, err)
		}
		if fx.EventType == "CREATE_DATABASE" {
			tpl.db = &hive_metastore.Database{}
			if err := fromTJSON(m.DBJSON, tpl.db); err != nil {
				return nil, fmt.Errorf("message templates: %s: dbJson: %w", f, err)
			}
			continue
		}
		if len(m.PartitionListJSON) == 0 {
			continue
		}
		tpl.table, tpl.part = &hive_metastore.Table{}, &hive_metastore.Partition{}
		if err := fromTJSON(m.TableObjJSON, tpl.table); err != nil {
			return nil, fmt.Errorf("message templates: %s: tableObjJson: %w", f, err)
		}
		if err := fromTJSON(m.PartitionListJSON[0], tpl.part); err != nil {
			return nil, fmt.Errorf("message templates: %s: partitionListJson: %w", f, err)
		}
	}
	if tpl.db == nil || tpl.table == nil {
		return nil, fmt.Errorf("message templates: %s holds no CREATE_DATABASE or no ADD_PARTITION with partitions", dir)
	}
	if tpl.table.Sd == nil || tpl.part.Sd == nil || len(tpl.table.PartitionKeys) == 0 {
		return nil, errors.New("message templates: the ADD_PARTITION template's table is not partitioned or has no storage descriptor")
	}
	return tpl, nil
}

func fromTJSON(text string, v thrift.TStruct) error {
	d := thrift.NewTDeserializer()
	d.Protocol = thrift.NewTJSONProtocolFactory().GetProtocol(d.Transport)
	return d.ReadString(context.Background(), v, text)
}

func toTJSON(v thrift.TStruct) string {
	s := thrift.NewTSerializer()
	s.Protocol = thrift.NewTJSONProtocolFactory().GetProtocol(s.Transport)
	text, err := s.WriteString(context.Background(), v)
	if err != nil {
		// Writing a well-formed struct to memory cannot fail.
		panic(fmt.Sprintf("thrift json: %v", err))
	}
	return text
}

// PartitionKeys are the template table's partition key names, in order.
func (t *MessageTemplates) PartitionKeys() []string {
	var keys []string
	for _, k := range t.table.PartitionKeys {
		keys = append(keys, k.Name)
	}
	return keys
}

// Database returns the template database renamed, located at loc (its
// managed location at managed), created at ts.
func (t *MessageTemplates) Database(name, loc, managed string, ts int32) *hive_metastore.Database {
	d := cloneThrift(t.db, &hive_metastore.Database{})
	d.Name, d.LocationUri, d.Description = name, loc, "hivedr synthetic workload"
	if managed != "" {
		d.ManagedLocationUri = &managed
	}
	d.CreateTime = &ts
	return d
}

// Table returns the template table (an external table partitioned by the
// template's keys) as db.name located at loc, created at ts, with id as
// its metastore ID.
func (t *MessageTemplates) Table(db, name, loc string, id int64, ts int32) *hive_metastore.Table {
	tb := cloneThrift(t.table, &hive_metastore.Table{})
	tb.DbName, tb.TableName, tb.CreateTime, tb.Sd.Location, tb.ID = db, name, ts, loc, &id
	tb.Parameters = map[string]string{"EXTERNAL": "TRUE", "transient_lastDdlTime": strconv.Itoa(int(ts))}
	return tb
}

// Partition returns a partition of tb with the given values, located at
// loc, created at ts, with the given parameters (the metastore adds
// transient_lastDdlTime).
func (t *MessageTemplates) Partition(tb *hive_metastore.Table, values []string, loc string, ts int32, params map[string]string) *hive_metastore.Partition {
	p := cloneThrift(t.part, &hive_metastore.Partition{})
	p.Values, p.DbName, p.TableName, p.CreateTime = append([]string(nil), values...), tb.DbName, tb.TableName, ts
	sd := cloneThrift(tb.Sd, &hive_metastore.StorageDescriptor{})
	sd.Location = loc
	p.Sd = sd
	p.Parameters = map[string]string{"transient_lastDdlTime": strconv.Itoa(int(ts))}
	for k, v := range params {
		p.Parameters[k] = v
	}
	return p
}

// cloneThrift deep-copies a Thrift struct through its TJSON form.
func cloneThrift[T thrift.TStruct](from T, to T) T {
	if err := fromTJSON(toTJSON(from), to); err != nil {
		panic(fmt.Sprintf("thrift json round trip: %v", err))
	}
	return to
}

// orderedKV is a JSON object written in the given key order (partition
// key order, as the metastore writes partition values).
type orderedKV struct{ keys, values []string }

func (o orderedKV) MarshalJSON() ([]byte, error) {
	var b bytes.Buffer
	b.WriteByte('{')
	for i, k := range o.keys {
		if i > 0 {
			b.WriteByte(',')
		}
		kj, _ := json.Marshal(k)
		vj, _ := json.Marshal(o.values[i])
		b.Write(kj)
		b.WriteByte(':')
		b.Write(vj)
	}
	b.WriteByte('}')
	return b.Bytes(), nil
}

func keyValues(tb *hive_metastore.Table, values []string) orderedKV {
	o := orderedKV{values: values}
	for _, k := range tb.PartitionKeys {
		o.keys = append(o.keys, k.Name)
	}
	return o
}

// The messages, their fields in the order the listener's JSON*Message
// classes write them.
type (
	msgCreateDatabase struct {
		Server           string `json:"server"`
		ServicePrincipal string `json:"servicePrincipal"`
		DB               string `json:"db"`
		DBJSON           string `json:"dbJson"`
		Timestamp        int64  `json:"timestamp"`
	}
	msgTable struct {
		Server           string `json:"server"`
		ServicePrincipal string `json:"servicePrincipal"`
		DB               string `json:"db"`
		Table            string `json:"table"`
		TableType        string `json:"tableType"`
		TableObjJSON     string `json:"tableObjJson"`
	}
	msgCreateTable struct {
		msgTable
		Timestamp int64    `json:"timestamp"`
		Files     []string `json:"files"`
	}
	msgAddPartition struct {
		msgTable
		Timestamp         int64       `json:"timestamp"`
		Partitions        []orderedKV `json:"partitions"`
		PartitionListJSON []string    `json:"partitionListJson"`
		PartitionFiles    []string    `json:"partitionFiles"`
	}
	msgAlterPartition struct {
		msgTable
		IsTruncateOp           string    `json:"isTruncateOp"`
		Timestamp              int64     `json:"timestamp"`
		WriteID                int64     `json:"writeId"`
		KeyValues              orderedKV `json:"keyValues"`
		PartitionObjBeforeJSON string    `json:"partitionObjBeforeJson"`
		PartitionObjAfterJSON  string    `json:"partitionObjAfterJson"`
	}
	msgInsert struct {
		msgTable
		PtnObjJSON *string  `json:"ptnObjJson"`
		Timestamp  int64    `json:"timestamp"`
		Replace    string   `json:"replace"`
		Files      []string `json:"files"`
	}
)

func tableMsg(tb *hive_metastore.Table) msgTable {
	return msgTable{DB: tb.DbName, Table: tb.TableName, TableType: tb.TableType, TableObjJSON: toTJSON(tb)}
}

// gzipRow encodes a message as GzipJSONMessageEncoder does.
func gzipRow(typ, db, table string, msg any) LogRow {
	text, err := json.Marshal(msg)
	if err != nil {
		panic(fmt.Sprintf("%s message: %v", typ, err))
	}
	var b bytes.Buffer
	zw := gzip.NewWriter(&b)
	zw.Write(text)
	zw.Close()
	return LogRow{Type: typ, DB: db, Table: table, Format: hms.FormatGzipJSON, Message: base64.StdEncoding.EncodeToString(b.Bytes())}
}

// CreateDatabaseRow is the CREATE_DATABASE of d.
func CreateDatabaseRow(d *hive_metastore.Database, ts int64) LogRow {
	return gzipRow("CREATE_DATABASE", d.Name, "", msgCreateDatabase{DB: d.Name, DBJSON: toTJSON(d), Timestamp: ts})
}

// CreateTableRow is the CREATE_TABLE of tb: no files, as for any external
// table.
func CreateTableRow(tb *hive_metastore.Table, ts int64) LogRow {
	return gzipRow("CREATE_TABLE", tb.DbName, tb.TableName, msgCreateTable{msgTable: tableMsg(tb), Timestamp: ts, Files: []string{}})
}

// AddPartitionRow is the ADD_PARTITION of parts to tb: no partition files,
// as for an external table (the tailer lists their directories).
func AddPartitionRow(tb *hive_metastore.Table, parts []*hive_metastore.Partition, ts int64) LogRow {
	m := msgAddPartition{msgTable: tableMsg(tb), Timestamp: ts, PartitionFiles: []string{}}
	for _, p := range parts {
		m.Partitions = append(m.Partitions, keyValues(tb, p.Values))
		m.PartitionListJSON = append(m.PartitionListJSON, toTJSON(p))
	}
	return gzipRow("ADD_PARTITION", tb.DbName, tb.TableName, m)
}

// AlterPartitionRow is the ALTER_PARTITION of a partition of tb from
// before to after, as the statistics update of a load logs it.
func AlterPartitionRow(tb *hive_metastore.Table, before, after *hive_metastore.Partition, ts int64) LogRow {
	return gzipRow("ALTER_PARTITION", tb.DbName, tb.TableName, msgAlterPartition{
		msgTable: tableMsg(tb), IsTruncateOp: "false", Timestamp: ts, WriteID: -1,
		KeyValues: keyValues(tb, after.Values), PartitionObjBeforeJSON: toTJSON(before), PartitionObjAfterJSON: toTJSON(after),
	})
}

// InsertRow is the INSERT of files into partition p of tb (nil: the
// table), each file entry written as ReplChangeManager.encodeFileUri does:
// uri#checksum#cmroot# (checksum and cmroot empty when cmRoot is).
func InsertRow(tb *hive_metastore.Table, p *hive_metastore.Partition, files []File, checksums []string, cmRoot string, ts int64) LogRow {
	m := msgInsert{msgTable: tableMsg(tb), Timestamp: ts, Replace: "false"}
	if p != nil {
		s := toTJSON(p)
		m.PtnObjJSON = &s
	}
	for i, f := range files {
		e := f.Location
		if cmRoot != "" {
			e += "#" + checksums[i] + "#" + cmRoot + "#"
		}
		m.Files = append(m.Files, e)
	}
	return gzipRow("INSERT", tb.DbName, tb.TableName, m)
}
