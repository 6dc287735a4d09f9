package hmsevent

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/hivedr/hivedr/internal/hms"
	"github.com/hivedr/hivedr/internal/hmslog"
	"github.com/hivedr/hivedr/schemas"
)

// This file turns notification-log rows into typed events. It is pure: no
// I/O, no clock, no shared state, so the same row always decodes to the
// same event, and tests drive it with captured rows alone.
//
// Guarantee 7 (bad input gets a clear error, never a silent skip) is kept
// here: Decode never fails and never drops a row. A row whose message does
// not decode, or whose type is not one the metastore writes, still becomes
// an Event that keeps MessageFormat and Message as given and carries an
// EventError saying why; the applier halts that database on it.
//
// The JSON field names come from the metastore's JSON*Message classes
// (org.apache.hadoop.hive.metastore.messaging.json). Embedded metastore
// objects (tableObjJson, partitionListJson, dbJson, colStatsJson, ...) are
// Thrift structs serialized with TJSONProtocol; tjson.go reads the fields
// Decode uses straight into schemas types, keeping the original text in
// ThriftJSON.

// defaultCatalog is the metastore's default catalog, used when a row has
// no CAT_NAME (transaction events are logged without one).
const defaultCatalog = "hive"

// maxOpenTxnRange bounds the transaction IDs one OPEN_TXN may expand to, so
// a corrupt fromTxnId/toTxnId pair cannot exhaust memory.
const maxOpenTxnRange = 1 << 20

// fileFieldSeparator separates the parts of a file entry in a message:
// uri#checksum#cmroot#subdir (ReplChangeManager.encodeFileUri). Checksum
// and CM root are empty unless change management is on.
const fileFieldSeparator = "#"

// txnFileListSeparator joins the file entries of one write in a
// COMMIT_TXN message (ReplChangeManager.joinWithSeparator).
const txnFileListSeparator = "]"

// decodeFunc decodes the message JSON of one event type into ev.
type decodeFunc func(d *decoder, msg []byte) error

// decodeKnownEventTypes lists every EVENT_TYPE the metastore writes, in
// canonical form (schemas.EventType.Canonical: an enum name some writers
// use instead decodes as its value). A nil decodeFunc marks a type hivedr
// knows but does not model: it gets a nil Payload and no error.
var decodeKnownEventTypes = map[schemas.EventType]decodeFunc{
	schemas.EventCreateDatabase: decodeCreateDatabase,
	schemas.EventAlterDatabase:  decodeAlterDatabase,
	schemas.EventDropDatabase:   decodeDropDatabase,

	schemas.EventCreateTable: decodeCreateTable,
	schemas.EventAlterTable:  decodeAlterTable,
	schemas.EventDropTable:   decodeDropTable,

	schemas.EventAddPartition:    decodeAddPartition,
	schemas.EventAlterPartition:  decodeAlterPartition,
	schemas.EventAlterPartitions: decodeAlterPartitions,
	schemas.EventDropPartition:   decodeDropPartition,

	schemas.EventInsert: decodeInsert,

	schemas.EventOpenTxn:        decodeOpenTxn,
	schemas.EventCommitTxn:      decodeCommitTxn,
	schemas.EventAbortTxn:       decodeAbortTxn,
	schemas.EventAllocWriteID:   decodeAllocWriteID,
	schemas.EventAcidWrite:      decodeAcidWrite,
	schemas.EventBatchAcidWrite: decodeAcidWrite,

	schemas.EventCommitCompaction: decodeCommitCompaction,

	schemas.EventUpdateTableColStat:     decodeUpdateTableColStat,
	schemas.EventDeleteTableColStat:     decodeDeleteTableColStat,
	schemas.EventUpdatePartitionColStat: decodeUpdatePartitionColStat,
	schemas.EventDeletePartitionColStat: decodeDeletePartitionColStat,

	// Known, not modelled: they change nothing hivedr replicates (or
	// nothing it replicates yet), so they carry only the raw message.
	schemas.EventUpdatePartitionColStatBatch: nil,
	schemas.EventReload:                      nil,
	schemas.EventCreateFunction:              nil,
	schemas.EventDropFunction:                nil,
	schemas.EventAddPrimaryKey:               nil,
	schemas.EventAddForeignKey:               nil,
	schemas.EventAddUniqueConstraint:         nil,
	schemas.EventAddNotNullConstraint:        nil,
	schemas.EventAddDefaultConstraint:        nil,
	schemas.EventAddCheckConstraint:          nil,
	schemas.EventDropConstraint:              nil,
	schemas.EventCreateISchema:               nil,
	schemas.EventAlterISchema:                nil,
	schemas.EventDropISchema:                 nil,
	schemas.EventAddSchemaVersion:            nil,
	schemas.EventAlterSchemaVersion:          nil,
	schemas.EventDropSchemaVersion:           nil,
	schemas.EventCreateCatalog:               nil,
	schemas.EventAlterCatalog:                nil,
	schemas.EventDropCatalog:                 nil,
	schemas.EventCreateDataConnector:         nil,
	schemas.EventAlterDataConnector:          nil,
	schemas.EventDropDataConnector:           nil,
}

// Decode turns one notification-log row into an Event: the envelope fields
// from the row, and, for the event types hivedr models, a typed Payload and
// the data files the message references.
//
// Decode never fails outright. A message that does not decode (bad base64
// or gzip, bad JSON, an embedded Thrift object that does not parse, an
// unknown message format) yields an Event with a nil Payload, no Files and
// an EventError of kind ErrDecode; an event type the metastore does not
// write yields one of kind ErrUnknownEventType. Either way MessageFormat
// and Message are kept exactly as given.
//
// Databases is the sorted set of databases the event concerns: the row's
// DB_NAME, plus both sides of a table moved across databases and every
// database a transaction wrote to.
func Decode(raw hmslog.RawEvent) schemas.Event {
	ev := schemas.Event{
		EventID:       raw.EventID,
		EventTime:     time.Unix(raw.EventTime, 0).UTC(),
		EventType:     raw.EventType,
		Catalog:       raw.Catalog,
		Database:      raw.Database,
		Table:         raw.Table,
		MessageFormat: raw.MessageFormat,
		Message:       raw.Message,
	}
	if ev.Catalog == "" {
		ev.Catalog = defaultCatalog
	}
	d := decoder{raw: &raw, ev: &ev}
	d.addDatabase(raw.Database)
	if err := d.decode(); err != nil {
		ev.Payload = nil
		ev.Files = nil
		kind := schemas.ErrDecode
		var unknown decodeUnknownTypeError
		if errors.As(err, &unknown) {
			kind = schemas.ErrUnknownEventType
		}
		ev.Errors = append(ev.Errors, schemas.EventError{Kind: kind, Message: err.Error()})
	}
	ev.Databases = d.databases()
	return ev
}

// decodeUnknownTypeError reports an EVENT_TYPE the metastore does not write.
type decodeUnknownTypeError struct{ eventType schemas.EventType }

func (e decodeUnknownTypeError) Error() string {
	return fmt.Sprintf("unknown event type %q: not one the Hive metastore writes", e.eventType)
}

// decoder holds the state of one Decode call.
type decoder struct {
	raw *hmslog.RawEvent
	ev  *schemas.Event
	dbs []string
}

func (d *decoder) decode() (err error) {
	fn, known := decodeKnownEventTypes[d.raw.EventType.Canonical()]
	if !known {
		return decodeUnknownTypeError{eventType: d.raw.EventType}
	}
	// A decoder bug or a pathological message must not take the tailer
	// down: it becomes this event's decode error.
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("%s message: panic while decoding: %v", d.raw.EventType, r)
		}
	}()
	m, err := hms.DecodeMessage(d.raw.MessageFormat, d.raw.Message)
	if err != nil {
		return fmt.Errorf("%s message: %w", d.raw.EventType, err)
	}
	defer m.Release()
	msg := m.JSON
	if fn == nil {
		if !json.Valid(msg) {
			return fmt.Errorf("%s message: not valid JSON", d.raw.EventType)
		}
		return nil
	}
	if err := fn(d, msg); err != nil {
		return fmt.Errorf("%s message: %w", d.raw.EventType, err)
	}
	return nil
}

func (d *decoder) addDatabase(name string) {
	if name != "" {
		d.dbs = append(d.dbs, name)
	}
}

func (d *decoder) databases() []string {
	slices.Sort(d.dbs)
	return slices.Compact(d.dbs)
}

func (d *decoder) addFiles(entries []string) {
	for _, e := range entries {
		if f, ok := parseFileRef(e); ok {
			d.ev.Files = append(d.ev.Files, f)
		}
	}
}

// parseFileRef parses one file entry, uri#checksum#cmroot#subdir, where
// every part after the URI may be missing or empty.
func parseFileRef(entry string) (schemas.FileRef, bool) {
	entry = strings.TrimSpace(entry)
	if entry == "" {
		return schemas.FileRef{}, false
	}
	var f schemas.FileRef
	var rest string
	f.URI, rest, _ = strings.Cut(entry, fileFieldSeparator)
	f.Checksum, rest, _ = strings.Cut(rest, fileFieldSeparator)
	f.CMRoot, f.Subdir, _ = strings.Cut(rest, fileFieldSeparator)
	if f.URI == "" {
		return schemas.FileRef{}, false
	}
	return f, true
}

// parseTxnFileList splits the "]"-joined file entries of one write in a
// COMMIT_TXN message.
func parseTxnFileList(list string) []string {
	if list == "" {
		return nil
	}
	parts := strings.Split(list, txnFileListSeparator)
	for i := range parts {
		parts[i] = strings.TrimSpace(parts[i])
	}
	return parts
}

func decodeJSON(msg []byte, v any) error {
	if err := json.Unmarshal(msg, v); err != nil {
		return fmt.Errorf("json: %w", err)
	}
	return nil
}

// parseThrift reads one embedded metastore object with read (tjson.go),
// naming the message field in its error.
func parseThrift[T any](field, text string, read func(string) (T, error)) (T, error) {
	var zero T
	if text == "" {
		return zero, fmt.Errorf("%s: empty", field)
	}
	v, err := read(text)
	if err != nil {
		return zero, fmt.Errorf("%s: thrift json: %w", field, err)
	}
	return v, nil
}

func parseThriftTable(field, text string) (*schemas.Table, error) {
	return parseThrift(field, text, tjsonTable)
}

func parseThriftPartition(field, text string) (*schemas.Partition, error) {
	return parseThrift(field, text, tjsonPartition)
}

func parseThriftDatabase(field, text string) (*schemas.Database, error) {
	return parseThrift(field, text, tjsonDatabase)
}

// decodeBool is a boolean the metastore may log as a JSON string
// ("isTruncateOp":"true") or as a JSON boolean.
type decodeBool bool

func (b *decodeBool) UnmarshalJSON(data []byte) error {
	switch string(data) {
	case `true`, `"true"`, `"TRUE"`, `"True"`:
		*b = true
	case `false`, `"false"`, `"FALSE"`, `"False"`, `null`, `""`:
		*b = false
	default:
		return fmt.Errorf("not a boolean: %s", data)
	}
	return nil
}

// decodeKeyValues is a JSON object of partition key to value, read in the
// order the metastore wrote it (partition key order).
type decodeKeyValues []struct{ Key, Value string }

func (kv *decodeKeyValues) UnmarshalJSON(data []byte) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	tok, err := dec.Token()
	if err != nil {
		return err
	}
	if tok == nil {
		*kv = nil
		return nil
	}
	if delim, ok := tok.(json.Delim); !ok || delim != '{' {
		return fmt.Errorf("partition key values: want an object, got %v", tok)
	}
	out := (*kv)[:0]
	for dec.More() {
		kt, err := dec.Token()
		if err != nil {
			return err
		}
		key, _ := kt.(string)
		var val *string
		if err := dec.Decode(&val); err != nil {
			return fmt.Errorf("partition key %q: %w", key, err)
		}
		e := struct{ Key, Value string }{Key: key}
		if val != nil {
			e.Value = *val
		}
		out = append(out, e)
	}
	*kv = out
	return nil
}

// values returns the partition values in the order of the table's
// partition keys when the table is known, else in message order.
func (kv decodeKeyValues) values(table *schemas.Table) []string {
	out := make([]string, 0, len(kv))
	if table != nil && len(table.PartitionKeys) == len(kv) {
		for _, k := range table.PartitionKeys {
			found := false
			for _, e := range kv {
				if strings.EqualFold(e.Key, k.Name) {
					out = append(out, e.Value)
					found = true
					break
				}
			}
			if !found {
				out = out[:0]
				break
			}
		}
		if len(out) == len(kv) {
			return out
		}
	}
	for _, e := range kv {
		out = append(out, e.Value)
	}
	return out
}

// Database events.

type decodeDatabaseMsg struct {
	DB              string `json:"db"`
	DBJSON          string `json:"dbJson"`
	DBObjBeforeJSON string `json:"dbObjBeforeJson"`
	DBObjAfterJSON  string `json:"dbObjAfterJson"`
}

func decodeCreateDatabase(d *decoder, msg []byte) error {
	var m decodeDatabaseMsg
	if err := decodeJSON(msg, &m); err != nil {
		return err
	}
	db, err := parseThriftDatabase("dbJson", m.DBJSON)
	if err != nil {
		return err
	}
	d.addDatabase(db.Name)
	d.ev.Payload = &schemas.DatabaseChange{After: db}
	return nil
}

func decodeAlterDatabase(d *decoder, msg []byte) error {
	var m decodeDatabaseMsg
	if err := decodeJSON(msg, &m); err != nil {
		return err
	}
	before, err := parseThriftDatabase("dbObjBeforeJson", m.DBObjBeforeJSON)
	if err != nil {
		return err
	}
	after, err := parseThriftDatabase("dbObjAfterJson", m.DBObjAfterJSON)
	if err != nil {
		return err
	}
	d.addDatabase(before.Name)
	d.addDatabase(after.Name)
	d.ev.Payload = &schemas.DatabaseChange{Before: before, After: after}
	return nil
}

func decodeDropDatabase(d *decoder, msg []byte) error {
	var m decodeDatabaseMsg
	if err := decodeJSON(msg, &m); err != nil {
		return err
	}
	var db *schemas.Database
	if m.DBJSON != "" {
		var err error
		if db, err = parseThriftDatabase("dbJson", m.DBJSON); err != nil {
			return err
		}
	} else if m.DB != "" {
		// Older writers logged only the name.
		db = &schemas.Database{Name: m.DB}
	} else {
		return errors.New("no database in message")
	}
	d.addDatabase(db.Name)
	d.ev.Payload = &schemas.DatabaseChange{Before: db}
	return nil
}

// Table events.

type decodeTableMsg struct {
	DB                 string     `json:"db"`
	Table              string     `json:"table"`
	TableObjJSON       string     `json:"tableObjJson"`
	TableObjBeforeJSON string     `json:"tableObjBeforeJson"`
	TableObjAfterJSON  string     `json:"tableObjAfterJson"`
	IsTruncateOp       decodeBool `json:"isTruncateOp"`
	Files              []string   `json:"files"`
}

func decodeCreateTable(d *decoder, msg []byte) error {
	var m decodeTableMsg
	if err := decodeJSON(msg, &m); err != nil {
		return err
	}
	t, err := parseThriftTable("tableObjJson", m.TableObjJSON)
	if err != nil {
		return err
	}
	d.addDatabase(t.Database)
	d.ev.Payload = &schemas.TableChange{After: t}
	if !transactional(t) {
		d.addFiles(m.Files)
	}
	return nil
}

// transactional reports whether t is a transactional (ACID) table, full
// or insert-only. The files the metastore lists in such a table's
// CREATE_TABLE and ADD_PARTITION messages are whatever its directories
// hold, uncommitted and aborted writes included: its data is replicated
// from the COMMIT_TXN of each write instead, as Hive's REPL DUMP does.
func transactional(t *schemas.Table) bool {
	return t != nil && strings.EqualFold(t.Parameters["transactional"], "true")
}

// decodeAlterTable covers renames (the before and after tables differ in
// name or database; the row's DB_NAME and TBL_NAME are the new ones) and
// truncation of an unpartitioned table (isTruncateOp).
func decodeAlterTable(d *decoder, msg []byte) error {
	var m decodeTableMsg
	if err := decodeJSON(msg, &m); err != nil {
		return err
	}
	before, err := parseThriftTable("tableObjBeforeJson", m.TableObjBeforeJSON)
	if err != nil {
		return err
	}
	after, err := parseThriftTable("tableObjAfterJson", m.TableObjAfterJSON)
	if err != nil {
		return err
	}
	d.addDatabase(before.Database)
	d.addDatabase(after.Database)
	d.ev.Payload = &schemas.TableChange{Before: before, After: after, IsTruncate: bool(m.IsTruncateOp)}
	return nil
}

func decodeDropTable(d *decoder, msg []byte) error {
	var m decodeTableMsg
	if err := decodeJSON(msg, &m); err != nil {
		return err
	}
	var t *schemas.Table
	if m.TableObjJSON != "" {
		var err error
		if t, err = parseThriftTable("tableObjJson", m.TableObjJSON); err != nil {
			return err
		}
	} else if m.DB != "" && m.Table != "" {
		// Older writers logged only the names.
		t = &schemas.Table{Database: m.DB, Name: m.Table}
	} else {
		return errors.New("no table in message")
	}
	d.addDatabase(t.Database)
	d.ev.Payload = &schemas.TableChange{Before: t}
	return nil
}

// Partition events.

type decodePartitionFiles struct {
	PartitionName string   `json:"partitionName"`
	Files         []string `json:"files"`
}

type decodePartitionMsg struct {
	DB                     string                 `json:"db"`
	Table                  string                 `json:"table"`
	TableObjJSON           string                 `json:"tableObjJson"`
	IsTruncateOp           decodeBool             `json:"isTruncateOp"`
	Partitions             []decodeKeyValues      `json:"partitions"`
	PartitionListJSON      []string               `json:"partitionListJson"`
	PartitionFiles         []decodePartitionFiles `json:"partitionFiles"`
	KeyValues              decodeKeyValues        `json:"keyValues"`
	PartitionObjBeforeJSON string                 `json:"partitionObjBeforeJson"`
	PartitionObjAfterJSON  string                 `json:"partitionObjAfterJson"`
}

// table returns the message's table, or one built from its names when the
// writer logged none.
func (m *decodePartitionMsg) table(d *decoder) (*schemas.Table, error) {
	if m.TableObjJSON == "" {
		if m.DB == "" || m.Table == "" {
			return nil, errors.New("no table in message")
		}
		d.addDatabase(m.DB)
		return &schemas.Table{Database: m.DB, Name: m.Table}, nil
	}
	t, err := parseThriftTable("tableObjJson", m.TableObjJSON)
	if err != nil {
		return nil, err
	}
	d.addDatabase(t.Database)
	return t, nil
}

func (m *decodePartitionMsg) partitionList(t *schemas.Table) ([]schemas.Partition, error) {
	if len(m.PartitionListJSON) == 0 {
		// Only the key values are known.
		out := make([]schemas.Partition, 0, len(m.Partitions))
		for _, kv := range m.Partitions {
			out = append(out, schemas.Partition{Values: kv.values(t)})
		}
		return out, nil
	}
	out := make([]schemas.Partition, 0, len(m.PartitionListJSON))
	for i, text := range m.PartitionListJSON {
		p, err := parseThriftPartition(fmt.Sprintf("partitionListJson[%d]", i), text)
		if err != nil {
			return nil, err
		}
		out = append(out, *p)
	}
	return out, nil
}

func decodeAddPartition(d *decoder, msg []byte) error {
	var m decodePartitionMsg
	if err := decodeJSON(msg, &m); err != nil {
		return err
	}
	t, err := m.table(d)
	if err != nil {
		return err
	}
	parts, err := m.partitionList(t)
	if err != nil {
		return err
	}
	d.ev.Payload = &schemas.PartitionChange{Table: t, After: parts}
	if transactional(t) {
		return nil
	}
	for _, pf := range m.PartitionFiles {
		d.addFiles(pf.Files)
	}
	return nil
}

// decodeAlterPartition covers truncation of a partition (isTruncateOp).
func decodeAlterPartition(d *decoder, msg []byte) error {
	var m decodePartitionMsg
	if err := decodeJSON(msg, &m); err != nil {
		return err
	}
	t, err := m.table(d)
	if err != nil {
		return err
	}
	before, err := parseThriftPartition("partitionObjBeforeJson", m.PartitionObjBeforeJSON)
	if err != nil {
		return err
	}
	after, err := parseThriftPartition("partitionObjAfterJson", m.PartitionObjAfterJSON)
	if err != nil {
		return err
	}
	d.ev.Payload = &schemas.PartitionChange{
		Table:      t,
		Before:     []schemas.Partition{*before},
		After:      []schemas.Partition{*after},
		IsTruncate: bool(m.IsTruncateOp),
	}
	return nil
}

// decodeAlterPartitions is the batched form (one event for many altered
// partitions); only the partitions after the change are logged.
func decodeAlterPartitions(d *decoder, msg []byte) error {
	var m decodePartitionMsg
	if err := decodeJSON(msg, &m); err != nil {
		return err
	}
	t, err := m.table(d)
	if err != nil {
		return err
	}
	parts, err := m.partitionList(t)
	if err != nil {
		return err
	}
	d.ev.Payload = &schemas.PartitionChange{Table: t, After: parts, IsTruncate: bool(m.IsTruncateOp)}
	return nil
}

func decodeDropPartition(d *decoder, msg []byte) error {
	var m decodePartitionMsg
	if err := decodeJSON(msg, &m); err != nil {
		return err
	}
	t, err := m.table(d)
	if err != nil {
		return err
	}
	before := make([]schemas.Partition, 0, len(m.Partitions))
	for _, kv := range m.Partitions {
		before = append(before, schemas.Partition{Values: kv.values(t)})
	}
	d.ev.Payload = &schemas.PartitionChange{Table: t, Before: before}
	return nil
}

// INSERT.

type decodeInsertMsg struct {
	DB           string     `json:"db"`
	Table        string     `json:"table"`
	TableObjJSON string     `json:"tableObjJson"`
	PtnObjJSON   string     `json:"ptnObjJson"`
	Replace      decodeBool `json:"replace"`
	Files        []string   `json:"files"`
}

func decodeInsert(d *decoder, msg []byte) error {
	var m decodeInsertMsg
	if err := decodeJSON(msg, &m); err != nil {
		return err
	}
	t, err := parseThriftTable("tableObjJson", m.TableObjJSON)
	if err != nil {
		return err
	}
	d.addDatabase(t.Database)
	ins := &schemas.InsertData{Table: t, Replace: bool(m.Replace)}
	if m.PtnObjJSON != "" {
		if ins.Partition, err = parseThriftPartition("ptnObjJson", m.PtnObjJSON); err != nil {
			return err
		}
	}
	d.ev.Payload = ins
	d.addFiles(m.Files)
	return nil
}

// Transaction events.

type decodeTxnMsg struct {
	TxnID      *int64    `json:"txnid"`
	TxnIDs     []int64   `json:"txnIds"`
	FromTxnID  *int64    `json:"fromTxnId"`
	ToTxnID    *int64    `json:"toTxnId"`
	WriteID    *int64    `json:"writeId"`
	WriteIDs   []int64   `json:"writeIds"`
	Database   string    `json:"database"`
	Table      string    `json:"table"`
	Databases  []string  `json:"databases"`
	Tables     []string  `json:"tables"`
	Partitions []*string `json:"partitions"`
	Partition  string    `json:"partition"`
	Files      []string  `json:"files"`
	DBsUpdated []string  `json:"dbsUpdated"`
}

func decodeOpenTxn(d *decoder, msg []byte) error {
	var m decodeTxnMsg
	if err := decodeJSON(msg, &m); err != nil {
		return err
	}
	ids := m.TxnIDs
	if ids == nil {
		if m.FromTxnID == nil || m.ToTxnID == nil {
			return errors.New("neither txnIds nor fromTxnId/toTxnId")
		}
		from, to := *m.FromTxnID, *m.ToTxnID
		if to < from || to-from >= maxOpenTxnRange {
			return fmt.Errorf("bad transaction range %d..%d", from, to)
		}
		ids = make([]int64, 0, to-from+1)
		for id := from; id <= to; id++ {
			ids = append(ids, id)
		}
	}
	d.ev.Payload = &schemas.Transaction{TxnIDs: ids}
	return nil
}

// decodeCommitTxn reads the commit and the writes the transaction made
// (a listener adds them from TXN_WRITE_NOTIFICATION_LOG, as REPL DUMP
// does): every database written is one this event concerns, each write
// keeps its partition and files, and the files written are the event's
// files (their copy tasks are made from them).
func decodeCommitTxn(d *decoder, msg []byte) error {
	var m decodeTxnMsg
	if err := decodeJSON(msg, &m); err != nil {
		return err
	}
	if m.TxnID == nil {
		return errors.New("no txnid")
	}
	if len(m.Databases) != len(m.Tables) || len(m.Databases) != len(m.WriteIDs) {
		return fmt.Errorf("write info lists differ in length: %d databases, %d tables, %d write ids",
			len(m.Databases), len(m.Tables), len(m.WriteIDs))
	}
	if len(m.Partitions) > 0 && len(m.Partitions) != len(m.Databases) {
		return fmt.Errorf("write info lists differ in length: %d databases, %d partitions", len(m.Databases), len(m.Partitions))
	}
	if len(m.Files) > 0 && len(m.Files) != len(m.Databases) {
		return fmt.Errorf("write info lists differ in length: %d databases, %d file lists", len(m.Databases), len(m.Files))
	}
	txn := &schemas.Transaction{TxnIDs: []int64{*m.TxnID}}
	if len(m.Databases) > 0 {
		txn.WriteIDs = make([]schemas.TableWriteID, len(m.Databases))
		for i := range m.Databases {
			var part, files string
			if len(m.Partitions) > 0 && m.Partitions[i] != nil {
				part = *m.Partitions[i]
			}
			if len(m.Files) > 0 {
				files = m.Files[i]
			}
			txn.WriteIDs[i] = d.write(m.Databases[i], m.Tables[i], m.WriteIDs[i], part, files)
		}
	}
	d.ev.Payload = txn
	return nil
}

// write is one write of a committed transaction: its database becomes
// one the event concerns, and its files (files: "]"-joined entries)
// become the event's.
func (d *decoder) write(db, table string, writeID int64, partition, files string) schemas.TableWriteID {
	w := schemas.TableWriteID{Database: db, Table: table, WriteID: writeID, Partition: partition}
	from := len(d.ev.Files)
	d.addFiles(parseTxnFileList(files))
	for _, f := range d.ev.Files[from:] {
		w.Files = append(w.Files, f.URI)
	}
	d.addDatabase(db)
	return w
}

func decodeAbortTxn(d *decoder, msg []byte) error {
	var m decodeTxnMsg
	if err := decodeJSON(msg, &m); err != nil {
		return err
	}
	if m.TxnID == nil {
		return errors.New("no txnid")
	}
	for _, db := range m.DBsUpdated {
		d.addDatabase(db)
	}
	d.ev.Payload = &schemas.Transaction{TxnIDs: []int64{*m.TxnID}}
	return nil
}

// decodeAcidWrite reads the files one transaction wrote into a table or
// partition. They become visible only when the transaction commits, so
// the payload is the transaction and its write ID, not an InsertData, and
// its files are the write's, not the event's (no copy tasks): the
// COMMIT_TXN that follows lists the same write, and its files are copied
// then. (Hive's DbNotificationListener keeps ACID writes out of the
// notification log, in TXN_WRITE_NOTIFICATION_LOG; a listener that logs
// them is read all the same.)
func decodeAcidWrite(d *decoder, msg []byte) error {
	var m decodeTxnMsg
	if err := decodeJSON(msg, &m); err != nil {
		return err
	}
	if m.TxnID == nil || m.WriteID == nil {
		return errors.New("no txnid or writeId")
	}
	db, table := m.Database, m.Table
	if db == "" {
		db = d.raw.Database
	}
	if table == "" {
		table = d.raw.Table
	}
	d.addDatabase(db)
	w := schemas.TableWriteID{Database: db, Table: table, WriteID: *m.WriteID, Partition: m.Partition}
	for _, e := range m.Files {
		if f, ok := parseFileRef(e); ok {
			w.Files = append(w.Files, f.URI)
		}
	}
	d.ev.Payload = &schemas.Transaction{TxnIDs: []int64{*m.TxnID}, WriteIDs: []schemas.TableWriteID{w}}
	return nil
}

type decodeAllocWriteIDMsg struct {
	DBName      string  `json:"dbName"`
	TableName   string  `json:"tableName"`
	TxnIDList   []int64 `json:"txnIdList"`
	WriteIDList []int64 `json:"writeIdList"`
}

func decodeAllocWriteID(d *decoder, msg []byte) error {
	var m decodeAllocWriteIDMsg
	if err := decodeJSON(msg, &m); err != nil {
		return err
	}
	if len(m.TxnIDList) != len(m.WriteIDList) {
		return fmt.Errorf("%d transaction ids but %d write ids", len(m.TxnIDList), len(m.WriteIDList))
	}
	a := &schemas.WriteIDAllocation{Database: m.DBName, Table: m.TableName}
	if a.Database == "" {
		a.Database = d.raw.Database
	}
	if a.Table == "" {
		a.Table = d.raw.Table
	}
	a.Allocations = make([]schemas.TxnWriteID, len(m.TxnIDList))
	for i := range m.TxnIDList {
		a.Allocations[i] = schemas.TxnWriteID{TxnID: m.TxnIDList[i], WriteID: m.WriteIDList[i]}
	}
	d.addDatabase(a.Database)
	d.ev.Payload = a
	return nil
}

type decodeCompactionMsg struct {
	TxnID        *int64 `json:"txnid"`
	CompactionID int64  `json:"compactionId"`
	Type         string `json:"type"`
	DBName       string `json:"dbname"`
	TableName    string `json:"tableName"`
	PartName     string `json:"partName"`
}

// decodeCommitCompaction reads a compaction's commit: which table or
// partition the compactor's transaction compacted. The message names no
// directory and no file; the tailer reads them (compactions.go).
func decodeCommitCompaction(d *decoder, msg []byte) error {
	var m decodeCompactionMsg
	if err := decodeJSON(msg, &m); err != nil {
		return err
	}
	if m.TxnID == nil {
		return errors.New("no txnid")
	}
	c := &schemas.Compaction{TxnID: *m.TxnID, CompactionID: m.CompactionID, Type: m.Type,
		Database: m.DBName, Table: m.TableName, Partition: m.PartName}
	if c.Database == "" {
		c.Database = d.raw.Database
	}
	if c.Table == "" {
		c.Table = d.raw.Table
	}
	if c.Database == "" || c.Table == "" {
		return errors.New("no dbname or tableName")
	}
	d.addDatabase(c.Database)
	d.ev.Payload = c
	return nil
}

// Column statistics events.

type decodeColStatMsg struct {
	Database     string   `json:"database"`
	ColStatsJSON string   `json:"colStatsJson"`
	PartVals     []string `json:"partVals"`
	ColName      string   `json:"colName"`
	PartValues   []string `json:"partValues"`
}

func decodeUpdateColStat(d *decoder, msg []byte, partitioned bool) error {
	var m decodeColStatMsg
	if err := decodeJSON(msg, &m); err != nil {
		return err
	}
	cs, err := parseThrift("colStatsJson", m.ColStatsJSON, tjsonColumnStatistics)
	if err != nil {
		return err
	}
	out := &schemas.ColumnStats{Database: m.Database, Table: d.raw.Table, StatsJSON: m.ColStatsJSON}
	if cs.database != "" {
		out.Database = cs.database
	}
	if cs.table != "" {
		out.Table = cs.table
	}
	if out.Database == "" {
		out.Database = d.raw.Database
	}
	out.Columns = cs.columns
	if partitioned {
		out.PartitionValues = m.PartVals
	}
	d.addDatabase(out.Database)
	d.ev.Payload = out
	return nil
}

func decodeUpdateTableColStat(d *decoder, msg []byte) error {
	return decodeUpdateColStat(d, msg, false)
}

func decodeUpdatePartitionColStat(d *decoder, msg []byte) error {
	return decodeUpdateColStat(d, msg, true)
}

// decodeDeleteColStat reads a delete of one column's statistics (or of
// all columns' when colName is empty). The message does not name the
// table: it comes from the row's TBL_NAME.
func decodeDeleteColStat(d *decoder, msg []byte, partitioned bool) error {
	var m decodeColStatMsg
	if err := decodeJSON(msg, &m); err != nil {
		return err
	}
	out := &schemas.ColumnStats{Database: m.Database, Table: d.raw.Table}
	if out.Database == "" {
		out.Database = d.raw.Database
	}
	if m.ColName != "" {
		out.Columns = []string{m.ColName}
	}
	if partitioned {
		out.PartitionValues = m.PartValues
	}
	d.addDatabase(out.Database)
	d.ev.Payload = out
	return nil
}

func decodeDeleteTableColStat(d *decoder, msg []byte) error {
	return decodeDeleteColStat(d, msg, false)
}

func decodeDeletePartitionColStat(d *decoder, msg []byte) error {
	return decodeDeleteColStat(d, msg, true)
}

// TxnWrite is one write of a source transaction to a table or partition,
// as the metastore's write-notification log holds it
// (get_all_write_event_info).
type TxnWrite struct {
	Database, Table string
	// Partition is the partition's name (k=v/...); "" for a table.
	Partition string
	WriteID   int64
	// Files are the write's file entries as a COMMIT_TXN message holds
	// them: uri#checksum#cmroot#subdir, joined by "]".
	Files string
}

// AddTxnWrites makes a COMMIT_TXN whose message named no writes what it
// would be had the message named these: the transaction's writes, their
// databases and their files.
func AddTxnWrites(ev *schemas.Event, writes []TxnWrite) {
	txn, _ := ev.Payload.(*schemas.Transaction)
	out := &schemas.Transaction{WriteIDs: make([]schemas.TableWriteID, len(writes))}
	if txn != nil {
		out.TxnIDs = txn.TxnIDs
	}
	d := decoder{ev: ev, dbs: slices.Clone(ev.Databases)}
	for i, w := range writes {
		out.WriteIDs[i] = d.write(w.Database, w.Table, w.WriteID, w.Partition, w.Files)
	}
	ev.Payload = out
	ev.Databases = d.databases()
}

// TableFromThriftJSON reads a metastore Table serialized with Thrift's
// TJSONProtocol, as the notification log embeds it.
func TableFromThriftJSON(text string) (*schemas.Table, error) {
	return parseThriftTable("table", text)
}

// PartitionFromThriftJSON reads a metastore Partition serialized with
// Thrift's TJSONProtocol.
func PartitionFromThriftJSON(text string) (*schemas.Partition, error) {
	return parseThriftPartition("partition", text)
}

// DatabaseFromThriftJSON reads a metastore Database serialized with
// Thrift's TJSONProtocol.
func DatabaseFromThriftJSON(text string) (*schemas.Database, error) {
	return parseThriftDatabase("database", text)
}

// TableID reads a metastore Table's id (Hive 4's Table.id, field 25)
// from its TJSONProtocol form; 0 when it has none.
func TableID(text string) (int64, error) {
	var id int64
	err := tjsonParse(text, func(r *tjsonReader, f int16, typ tjsonType) (err error) {
		if f == 25 && typ == tjsonI64 {
			id, err = r.i64()
			return err
		}
		return r.skip(typ, tjsonMaxDepth)
	})
	return id, err
}
