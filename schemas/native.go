package schemas

import (
	"fmt"
	"math"
	"time"
)

// Conversions between the Go types of types.go and goavro's native form
// (map[string]any for records, map[string]any{branch: value} for non-null
// union values, []any, map[string]any, string, int32, int64, bool, and
// time.Time or int64 milliseconds for timestamp-millis).
//
// Encoding follows the current .avsc exactly. Decoding reads a native
// record as produced by goavro from the WRITER's schema, which may be
// older or newer than this code:
//   - a field the writer's schema lacks takes the current schema's default
//     (or the Go zero value where the schema has none);
//   - a field this code does not know is ignored;
//   - a payload branch or enum symbol this code does not know is an error
//     that names it: such a record cannot be understood, and dropping or
//     guessing at it would break "never silently skip" (DESIGN.md, 7).
//
// Go conventions kept in both directions:
//   - Event.Database and Event.Table "" <-> null;
//   - the zero time.Time <-> 0 (the schemas' default); other times are
//     milliseconds since the epoch, decoded in UTC;
//   - CopyCompletion.CRC32C nil <-> null, else a long in [0, 2^32);
//   - an empty enum value encodes as the enum's default symbol UNKNOWN.

// Payload branch names, as goavro keys the payload union.
const (
	branchDatabaseChange    = "io.hivedr.DatabaseChange"
	branchTableChange       = "io.hivedr.TableChange"
	branchPartitionChange   = "io.hivedr.PartitionChange"
	branchInsertData        = "io.hivedr.InsertData"
	branchTransaction       = "io.hivedr.Transaction"
	branchWriteIDAllocation = "io.hivedr.WriteIdAllocation"
	branchColumnStats       = "io.hivedr.ColumnStats"
	branchCompaction        = "io.hivedr.Compaction"

	nameDatabase  = "io.hivedr.Database"
	nameTable     = "io.hivedr.Table"
	namePartition = "io.hivedr.Partition"
	nameStorage   = "io.hivedr.Storage"
)

// ToNative converts a record (*Event, *CopyTask, *CopyCompletion,
// *Heartbeat, *TailerCheckpoint, or one of those values) into goavro's
// native form for its current schema, and returns the record's full name.
func ToNative(v any) (name string, native map[string]any, err error) {
	switch r := v.(type) {
	case *Event:
		if r == nil {
			return "", nil, fmt.Errorf("nil *Event")
		}
		m, err := eventToNative(r)
		return NameMetastoreEvent, m, err
	case Event:
		m, err := eventToNative(&r)
		return NameMetastoreEvent, m, err
	case *CopyTask:
		if r == nil {
			return "", nil, fmt.Errorf("nil *CopyTask")
		}
		return NameCopyTask, copyTaskToNative(r), nil
	case CopyTask:
		return NameCopyTask, copyTaskToNative(&r), nil
	case *CopyCompletion:
		if r == nil {
			return "", nil, fmt.Errorf("nil *CopyCompletion")
		}
		m, err := copyCompletionToNative(r)
		return NameCopyCompletion, m, err
	case CopyCompletion:
		m, err := copyCompletionToNative(&r)
		return NameCopyCompletion, m, err
	case *Heartbeat:
		if r == nil {
			return "", nil, fmt.Errorf("nil *Heartbeat")
		}
		return NameHeartbeat, heartbeatToNative(r), nil
	case Heartbeat:
		return NameHeartbeat, heartbeatToNative(&r), nil
	case *TailerCheckpoint:
		if r == nil {
			return "", nil, fmt.Errorf("nil *TailerCheckpoint")
		}
		return NameTailerCheckpoint, checkpointToNative(r), nil
	case TailerCheckpoint:
		return NameTailerCheckpoint, checkpointToNative(&r), nil
	case *BootstrapRequest:
		if r == nil {
			return "", nil, fmt.Errorf("nil *BootstrapRequest")
		}
		return NameBootstrapRequest, bootstrapRequestToNative(r), nil
	case BootstrapRequest:
		return NameBootstrapRequest, bootstrapRequestToNative(&r), nil
	}
	return "", nil, fmt.Errorf("no schema for Go type %T", v)
}

// FromNative converts a native record, decoded with a writer's schema of
// the given full name, into its Go type: *Event, *CopyTask,
// *CopyCompletion, *Heartbeat or *TailerCheckpoint.
func FromNative(name string, native any) (any, error) {
	m, ok := native.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("%s: native record is %T, not map[string]any", name, native)
	}
	d := &decoder{}
	var v any
	switch name {
	case NameMetastoreEvent:
		v = d.event(m)
	case NameCopyTask:
		v = d.copyTask(m)
	case NameCopyCompletion:
		v = d.copyCompletion(m)
	case NameHeartbeat:
		v = d.heartbeat(m)
	case NameTailerCheckpoint:
		v = d.checkpoint(m)
	case NameBootstrapRequest:
		v = d.bootstrapRequest(m)
	default:
		return nil, fmt.Errorf("unknown record type %q", name)
	}
	if d.err != nil {
		return nil, fmt.Errorf("%s: %w", name, d.err)
	}
	return v, nil
}

// ---- encoding ----

func millis(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixMilli()
}

func nullableString(s string) any {
	if s == "" {
		return nil
	}
	return map[string]any{"string": s}
}

func nullableLong(v *int64) any {
	if v == nil {
		return nil
	}
	return map[string]any{"long": *v}
}

func longMapToNative(m map[string]int64) map[string]any {
	n := make(map[string]any, len(m))
	for k, v := range m {
		n[k] = v
	}
	return n
}

func stringsToNative(ss []string) []any {
	a := make([]any, len(ss))
	for i, s := range ss {
		a[i] = s
	}
	return a
}

func stringMapToNative(m map[string]string) map[string]any {
	n := make(map[string]any, len(m))
	for k, v := range m {
		n[k] = v
	}
	return n
}

func eventToNative(e *Event) (map[string]any, error) {
	payload, err := payloadToNative(e.Payload)
	if err != nil {
		return nil, fmt.Errorf("event %d: %w", e.EventID, err)
	}
	files := make([]any, len(e.Files))
	for i := range e.Files {
		f := &e.Files[i]
		files[i] = map[string]any{
			"uri":      f.URI,
			"checksum": f.Checksum,
			"cm_root":  f.CMRoot,
			"subdir":   f.Subdir,
			"task_id":  f.TaskID,
			"rewrite":  f.Rewrite,
		}
	}
	errs := make([]any, len(e.Errors))
	for i := range e.Errors {
		x := &e.Errors[i]
		kind, err := enumSymbol("EventErrorKind", string(x.Kind), eventErrorKinds)
		if err != nil {
			return nil, fmt.Errorf("event %d: errors[%d]: %w", e.EventID, i, err)
		}
		errs[i] = map[string]any{"kind": kind, "message": x.Message, "path": x.Path}
	}
	return map[string]any{
		"event_id":          e.EventID,
		"event_time":        millis(e.EventTime),
		"event_type":        string(e.EventType),
		"catalog":           e.Catalog,
		"database":          nullableString(e.Database),
		"table":             nullableString(e.Table),
		"databases":         stringsToNative(e.Databases),
		"source":            e.Source,
		"message_format":    e.MessageFormat,
		"message":           e.Message,
		"payload":           payload,
		"files":             files,
		"errors":            errs,
		"snapshot":          snapshotInfoToNative(e.Snapshot),
		"previous_event_id": nullableLong(e.PreviousEventID),
		"op":                string(e.Op),
		"source_info":       sourceInfoToNative(e.SourceInfo),
	}, nil
}

func sourceInfoToNative(s *SourceInfo) any {
	if s == nil {
		return nil
	}
	return map[string]any{"io.hivedr.SourceInfo": map[string]any{
		"name":       s.Name,
		"metastore":  s.Metastore,
		"reader":     s.Reader,
		"version":    s.Version,
		"catalog":    s.Catalog,
		"event_id":   s.EventID,
		"event_time": millis(s.EventTime),
		"database":   nullableString(s.Database),
		"table":      nullableString(s.Table),
		"snapshot":   s.Snapshot,
	}}
}

func snapshotInfoToNative(s *SnapshotInfo) any {
	if s == nil {
		return nil
	}
	return map[string]any{"io.hivedr.SnapshotInfo": map[string]any{
		"bootstrap_id":    s.BootstrapID,
		"cut_event_id":    s.CutEventID,
		"stamp_event_id":  s.StampEventID,
		"seq":             s.Seq,
		"tables":          stringsToNative(s.Tables),
		"with_data":       s.WithData,
		"reason":          s.Reason,
		"table_count":     s.TableCount,
		"partition_count": s.PartitionCount,
		"file_count":      s.FileCount,
		"byte_count":      s.ByteCount,
		"write_ids":       snapshotWriteIDsToNative(s.WriteIDs),
	}}
}

func snapshotWriteIDsToNative(w *SnapshotWriteIDs) any {
	if w == nil {
		return nil
	}
	return map[string]any{"io.hivedr.SnapshotWriteIds": map[string]any{
		"high_water_mark": w.HighWaterMark,
		"aborted":         longsToNative(w.Aborted),
		"open":            longsToNative(w.Open),
	}}
}

func payloadToNative(p Payload) (any, error) {
	var branch string
	var rec map[string]any
	switch x := p.(type) {
	case nil:
		return nil, nil
	case *DatabaseChange:
		if x == nil {
			return nil, nil
		}
		branch = branchDatabaseChange
		rec = map[string]any{"before": databaseToNative(x.Before), "after": databaseToNative(x.After)}
	case *TableChange:
		if x == nil {
			return nil, nil
		}
		branch = branchTableChange
		rec = map[string]any{"before": nullableTable(x.Before), "after": nullableTable(x.After), "is_truncate": x.IsTruncate}
	case *PartitionChange:
		if x == nil {
			return nil, nil
		}
		branch = branchPartitionChange
		rec = map[string]any{
			"table":       nullableTable(x.Table),
			"before":      partitionsToNative(x.Before),
			"after":       partitionsToNative(x.After),
			"is_truncate": x.IsTruncate,
		}
	case *InsertData:
		if x == nil {
			return nil, nil
		}
		branch = branchInsertData
		var part any
		if x.Partition != nil {
			part = map[string]any{namePartition: partitionToNative(x.Partition)}
		}
		rec = map[string]any{"table": nullableTable(x.Table), "partition": part, "replace": x.Replace}
	case *Transaction:
		if x == nil {
			return nil, nil
		}
		branch = branchTransaction
		txns := make([]any, len(x.TxnIDs))
		for i, id := range x.TxnIDs {
			txns[i] = id
		}
		wids := make([]any, len(x.WriteIDs))
		for i, w := range x.WriteIDs {
			wids[i] = map[string]any{"database": w.Database, "table": w.Table, "write_id": w.WriteID,
				"partition": w.Partition, "files": stringsToNative(w.Files)}
		}
		rec = map[string]any{"txn_ids": txns, "write_ids": wids}
	case *WriteIDAllocation:
		if x == nil {
			return nil, nil
		}
		branch = branchWriteIDAllocation
		allocs := make([]any, len(x.Allocations))
		for i, a := range x.Allocations {
			allocs[i] = map[string]any{"txn_id": a.TxnID, "write_id": a.WriteID}
		}
		rec = map[string]any{"database": x.Database, "table": x.Table, "allocations": allocs}
	case *ColumnStats:
		if x == nil {
			return nil, nil
		}
		branch = branchColumnStats
		rec = map[string]any{
			"database":         x.Database,
			"table":            x.Table,
			"partition_values": stringsToNative(x.PartitionValues),
			"columns":          stringsToNative(x.Columns),
			"stats_json":       x.StatsJSON,
		}
	case *Compaction:
		if x == nil {
			return nil, nil
		}
		branch = branchCompaction
		rec = map[string]any{
			"txn_id":        x.TxnID,
			"compaction_id": x.CompactionID,
			"type":          x.Type,
			"database":      x.Database,
			"table":         x.Table,
			"partition":     x.Partition,
			"location":      x.Location,
			"dirs":          stringsToNative(x.Dirs),
		}
	default:
		return nil, fmt.Errorf("payload of unknown Go type %T", p)
	}
	return map[string]any{branch: rec}, nil
}

func databaseToNative(db *Database) any {
	if db == nil {
		return nil
	}
	return map[string]any{nameDatabase: map[string]any{
		"name":             db.Name,
		"description":      db.Description,
		"location":         db.Location,
		"managed_location": db.ManagedLocation,
		"owner":            db.Owner,
		"parameters":       stringMapToNative(db.Parameters),
	}}
}

func nullableTable(t *Table) any {
	if t == nil {
		return nil
	}
	return map[string]any{nameTable: tableToNative(t)}
}

func tableToNative(t *Table) map[string]any {
	return map[string]any{
		"database":           t.Database,
		"name":               t.Name,
		"owner":              t.Owner,
		"table_type":         t.TableType,
		"location":           t.Location,
		"columns":            columnsToNative(t.Columns),
		"partition_keys":     columnsToNative(t.PartitionKeys),
		"parameters":         stringMapToNative(t.Parameters),
		"storage":            storageToNative(&t.Storage),
		"view_original_text": t.ViewOriginalText,
		"view_expanded_text": t.ViewExpandedText,
		"create_time":        t.CreateTime,
		"write_id":           t.WriteID,
		"thrift_json":        t.ThriftJSON,
	}
}

func columnsToNative(cols []Column) []any {
	a := make([]any, len(cols))
	for i, c := range cols {
		a[i] = map[string]any{"name": c.Name, "type": c.Type, "comment": c.Comment}
	}
	return a
}

func storageToNative(s *Storage) map[string]any {
	return map[string]any{
		"input_format":     s.InputFormat,
		"output_format":    s.OutputFormat,
		"serde_lib":        s.SerdeLib,
		"serde_parameters": stringMapToNative(s.SerdeParameters),
		"compressed":       s.Compressed,
		"num_buckets":      s.NumBuckets,
		"bucket_columns":   stringsToNative(s.BucketColumns),
		"parameters":       stringMapToNative(s.Parameters),
	}
}

func partitionsToNative(ps []Partition) []any {
	a := make([]any, len(ps))
	for i := range ps {
		a[i] = partitionToNative(&ps[i])
	}
	return a
}

func partitionToNative(p *Partition) map[string]any {
	var storage any
	if p.Storage != nil {
		storage = map[string]any{nameStorage: storageToNative(p.Storage)}
	}
	return map[string]any{
		"values":      stringsToNative(p.Values),
		"location":    p.Location,
		"parameters":  stringMapToNative(p.Parameters),
		"columns":     columnsToNative(p.Columns),
		"storage":     storage,
		"create_time": p.CreateTime,
		"write_id":    p.WriteID,
		"thrift_json": p.ThriftJSON,
	}
}

func copyTaskToNative(t *CopyTask) map[string]any {
	return map[string]any{
		"task_id":    t.TaskID,
		"event_id":   t.EventID,
		"event_time": millis(t.EventTime),
		"database":   t.Database,
		"table":      t.Table,
		"source_uri": t.SourceURI,
		"target_uri": t.TargetURI,
		"checksum":   t.Checksum,
		"cm_root":    t.CMRoot,
		"subdir":     t.Subdir,
		"rewrite":    t.Rewrite,
	}
}

func copyCompletionToNative(c *CopyCompletion) (map[string]any, error) {
	status, err := enumSymbol("CopyStatus", string(c.Status), copyStatuses)
	if err != nil {
		return nil, fmt.Errorf("task %s: %w", c.TaskID, err)
	}
	var crc any
	if c.CRC32C != nil {
		crc = map[string]any{"long": int64(*c.CRC32C)}
	}
	return map[string]any{
		"task_id":      c.TaskID,
		"event_id":     c.EventID,
		"database":     c.Database,
		"source_uri":   c.SourceURI,
		"target_uri":   c.TargetURI,
		"status":       status,
		"length":       c.Length,
		"crc32c":       crc,
		"verification": c.Verification,
		"copied_from":  c.CopiedFrom,
		"error":        c.Error,
		"evidence":     c.Evidence,
		"attempts":     c.Attempts,
		"started":      millis(c.Started),
		"finished":     millis(c.Finished),
	}, nil
}

func heartbeatToNative(h *Heartbeat) map[string]any {
	return map[string]any{
		"database":             h.Database,
		"scanned_event_id":     h.ScannedEventID,
		"scanned_event_time":   millis(h.ScannedEventTime),
		"source_head_event_id": h.SourceHeadEventID,
		"sent":                 millis(h.Sent),
		"source":               h.Source,
		"previous_event_id":    nullableLong(h.PreviousEventID),
	}
}

func checkpointToNative(c *TailerCheckpoint) map[string]any {
	return map[string]any{
		"source":               c.Source,
		"last_event_id":        c.LastEventID,
		"last_event_time":      millis(c.LastEventTime),
		"written":              millis(c.Written),
		"state":                string(c.State),
		"topic_last_event_ids": longMapToNative(c.TopicLastEventIDs),
		"requests_offset":      c.RequestsOffset,
		"bootstraps":           bootstrapsToNative(c.Bootstraps),
		"snapshot_releases":    releasesToNative(c.SnapshotReleases),
		"completions_offsets":  longsToNative(c.CompletionsOffsets),
		"open_txns":            openTxnsToNative(c.OpenTxns),
		"txns_tracked_above":   c.TxnsTrackedAbove,
	}
}

func openTxnsToNative(ts []OpenTxn) []any {
	out := make([]any, len(ts))
	for i, t := range ts {
		out[i] = map[string]any{
			"txn_id":         t.TxnID,
			"first_event_id": t.FirstEventID,
			"databases":      stringsToNative(t.Databases),
		}
	}
	return out
}

func releasesToNative(rs []SnapshotRelease) []any {
	out := make([]any, len(rs))
	for i, r := range rs {
		out[i] = map[string]any{
			"bootstrap_id":   r.BootstrapID,
			"hdfs_snapshots": stringsToNative(r.HDFSSnapshots),
			"tasks":          r.Tasks,
			"completed":      r.Completed,
		}
	}
	return out
}

func longsToNative(ls []int64) []any {
	a := make([]any, len(ls))
	for i, l := range ls {
		a[i] = l
	}
	return a
}

func bootstrapsToNative(bs []BootstrapState) []any {
	out := make([]any, len(bs))
	for i := range bs {
		b := &bs[i]
		out[i] = map[string]any{
			"database":                      b.Database,
			"bootstrap_id":                  b.BootstrapID,
			"request_id":                    b.RequestID,
			"reason":                        b.Reason,
			"cut_event_id":                  b.CutEventID,
			"cut_event_time":                millis(b.CutEventTime),
			"phase":                         b.Phase,
			"tables":                        stringsToNative(b.Tables),
			"with_data":                     b.WithData,
			"done_table":                    b.DoneTable,
			"done_partition":                b.DonePartition,
			"catchup_event_id":              b.CatchupEventID,
			"seq":                           b.Seq,
			"tables_total":                  b.TablesTotal,
			"tables_done":                   b.TablesDone,
			"partitions_done":               b.PartitionsDone,
			"files":                         b.Files,
			"bytes":                         b.Bytes,
			"started":                       millis(b.Started),
			"hdfs_snapshots":                stringsToNative(b.HDFSSnapshots),
			"table_in_progress":             b.TableInProgress,
			"published_tables":              stringsToNative(b.PublishedTables),
			"snapshot_event_id":             b.SnapshotEventID,
			"open_txns":                     openTxnsToNative(b.OpenTxns),
			"txns_tracked_above":            b.TxnsTrackedAbove,
			"table_in_progress_incarnation": b.TableInProgressIncarnation,
		}
	}
	return out
}

func bootstrapRequestToNative(r *BootstrapRequest) map[string]any {
	return map[string]any{
		"request_id":   r.RequestID,
		"source":       r.Source,
		"databases":    stringsToNative(r.Databases),
		"tables":       stringsToNative(r.Tables),
		"reason":       r.Reason,
		"requested_by": r.RequestedBy,
		"requested_at": millis(r.RequestedAt),
	}
}

// The symbols of the schemas' enums, in schema order. A symbol added to an
// .avsc must be added here too (TestEnumSymbolsMatchSchemas checks).
var (
	eventErrorKinds = []string{string(ErrUnknown), string(ErrDecode), string(ErrUnknownEventType), string(ErrPathOutsideRoots), string(ErrListingFailed), string(ErrWritesUnavailable), string(ErrRecordTooLarge)}
	copyStatuses    = []string{string(StatusUnknown), string(StatusCopied), string(StatusSkippedIdentical), string(StatusFailed), string(StatusSourceGone)}
)

// enumSymbol checks an enum value before encoding; "" becomes the default
// symbol, the first one.
func enumSymbol(enum, v string, symbols []string) (string, error) {
	if v == "" {
		return symbols[0], nil
	}
	for _, s := range symbols {
		if s == v {
			return s, nil
		}
	}
	return "", fmt.Errorf("unknown %s symbol %q (known: %v)", enum, v, symbols)
}

// ---- decoding ----

// decoder converts native records to Go values, keeping the first error
// (with the path of the field) so the conversion code stays linear.
type decoder struct {
	err error
}

func (d *decoder) failf(format string, args ...any) {
	if d.err == nil {
		d.err = fmt.Errorf(format, args...)
	}
}

func (d *decoder) str(m map[string]any, field, def string) string {
	v, ok := m[field]
	if !ok || v == nil {
		return def
	}
	s, ok := v.(string)
	if !ok {
		d.failf("field %s: want string, got %T", field, v)
	}
	return s
}

// nullableStr reads a ["null", "string"] union; null is "".
func (d *decoder) nullableStr(m map[string]any, field string) string {
	v, ok := m[field]
	if !ok || v == nil {
		return ""
	}
	switch x := v.(type) {
	case string: // a writer whose field was a plain string
		return x
	case map[string]any:
		if s, ok := x["string"].(string); ok && len(x) == 1 {
			return s
		}
	}
	d.failf("field %s: want null or string, got %v", field, v)
	return ""
}

func (d *decoder) long(m map[string]any, field string, def int64) int64 {
	v, ok := m[field]
	if !ok || v == nil {
		return def
	}
	switch x := v.(type) {
	case int64:
		return x
	case int32: // an older writer's int, promoted
		return int64(x)
	case int:
		return int64(x)
	}
	d.failf("field %s: want long, got %T", field, v)
	return def
}

// nullableLong reads a ["null", "long"] union; nil when null or absent
// (a writer older than the field).
func (d *decoder) nullableLong(m map[string]any, field string) *int64 {
	v, ok := m[field]
	if !ok || v == nil {
		return nil
	}
	if u, ok := v.(map[string]any); ok && len(u) == 1 {
		if x, ok := u["long"].(int64); ok {
			return &x
		}
	}
	d.failf("field %s: want null or long, got %v", field, v)
	return nil
}

// longMap reads a map of longs; nil when empty or absent.
func (d *decoder) longMap(m map[string]any, field string) map[string]int64 {
	v, ok := m[field]
	if !ok || v == nil {
		return nil
	}
	mm, ok := v.(map[string]any)
	if !ok {
		d.failf("field %s: want a map, got %T", field, v)
		return nil
	}
	if len(mm) == 0 {
		return nil
	}
	out := make(map[string]int64, len(mm))
	for k, x := range mm {
		n, ok := x.(int64)
		if !ok {
			d.failf("field %s[%q]: want long, got %T", field, k, x)
			return nil
		}
		out[k] = n
	}
	return out
}

func (d *decoder) int(m map[string]any, field string, def int32) int32 {
	v, ok := m[field]
	if !ok || v == nil {
		return def
	}
	switch x := v.(type) {
	case int32:
		return x
	case int64:
		if x >= math.MinInt32 && x <= math.MaxInt32 {
			return int32(x)
		}
		d.failf("field %s: %d does not fit an int", field, x)
		return def
	}
	d.failf("field %s: want int, got %T", field, v)
	return def
}

func (d *decoder) bool(m map[string]any, field string) bool {
	v, ok := m[field]
	if !ok || v == nil {
		return false
	}
	b, ok := v.(bool)
	if !ok {
		d.failf("field %s: want boolean, got %T", field, v)
	}
	return b
}

// time reads a timestamp-millis; 0 (the schemas' default) is the zero
// time.Time.
func (d *decoder) time(m map[string]any, field string) time.Time {
	v, ok := m[field]
	if !ok || v == nil {
		return time.Time{}
	}
	var ms int64
	switch x := v.(type) {
	case time.Time:
		ms = x.UnixMilli()
	case int64: // a writer without the logical type
		ms = x
	default:
		d.failf("field %s: want timestamp-millis, got %T", field, v)
		return time.Time{}
	}
	if ms == 0 {
		return time.Time{}
	}
	return time.UnixMilli(ms).UTC()
}

func (d *decoder) array(m map[string]any, field string) []any {
	v, ok := m[field]
	if !ok || v == nil {
		return nil
	}
	a, ok := v.([]any)
	if !ok {
		d.failf("field %s: want array, got %T", field, v)
	}
	return a
}

func (d *decoder) strings(m map[string]any, field string) []string {
	a := d.array(m, field)
	if len(a) == 0 {
		return nil
	}
	ss := make([]string, len(a))
	for i, v := range a {
		s, ok := v.(string)
		if !ok {
			d.failf("field %s[%d]: want string, got %T", field, i, v)
			return nil
		}
		ss[i] = s
	}
	return ss
}

func (d *decoder) longs(m map[string]any, field string) []int64 {
	a := d.array(m, field)
	if len(a) == 0 {
		return nil
	}
	ls := make([]int64, len(a))
	for i, v := range a {
		switch x := v.(type) {
		case int64:
			ls[i] = x
		case int32:
			ls[i] = int64(x)
		default:
			d.failf("field %s[%d]: want long, got %T", field, i, v)
			return nil
		}
	}
	return ls
}

func (d *decoder) stringMap(m map[string]any, field string) map[string]string {
	v, ok := m[field]
	if !ok || v == nil {
		return nil
	}
	n, ok := v.(map[string]any)
	if !ok {
		d.failf("field %s: want map, got %T", field, v)
		return nil
	}
	if len(n) == 0 {
		return nil
	}
	sm := make(map[string]string, len(n))
	for k, v := range n {
		s, ok := v.(string)
		if !ok {
			d.failf("field %s[%q]: want string, got %T", field, k, v)
			return nil
		}
		sm[k] = s
	}
	return sm
}

// record reads a field holding a record (not a union).
func (d *decoder) record(m map[string]any, field string) map[string]any {
	v, ok := m[field]
	if !ok || v == nil {
		return nil
	}
	r, ok := v.(map[string]any)
	if !ok {
		d.failf("field %s: want record, got %T", field, v)
	}
	return r
}

// element reads element i of an array of records.
func (d *decoder) element(field string, i int, v any) map[string]any {
	r, ok := v.(map[string]any)
	if !ok {
		d.failf("field %s[%d]: want record, got %T", field, i, v)
	}
	return r
}

// nullable reads a ["null", <record name>] union; nil for null.
func (d *decoder) nullable(m map[string]any, field, name string) map[string]any {
	v, ok := m[field]
	if !ok || v == nil {
		return nil
	}
	u, ok := v.(map[string]any)
	if !ok || len(u) != 1 {
		d.failf("field %s: want null or %s, got %v", field, name, v)
		return nil
	}
	r, ok := u[name].(map[string]any)
	if !ok {
		for k := range u {
			d.failf("field %s: unknown union branch %q (want %s)", field, k, name)
		}
		return nil
	}
	return r
}

// enum reads an enum symbol, which must be one this code knows.
func (d *decoder) enum(m map[string]any, field, enum string, symbols []string) string {
	s := d.str(m, field, symbols[0])
	for _, k := range symbols {
		if s == k {
			return s
		}
	}
	d.failf("field %s: unknown %s symbol %q (known: %v)", field, enum, s, symbols)
	return ""
}

func (d *decoder) event(m map[string]any) *Event {
	e := &Event{
		EventID:         d.long(m, "event_id", 0),
		EventTime:       d.time(m, "event_time"),
		EventType:       EventType(d.str(m, "event_type", "")),
		Catalog:         d.str(m, "catalog", "hive"),
		Database:        d.nullableStr(m, "database"),
		Table:           d.nullableStr(m, "table"),
		Databases:       d.strings(m, "databases"),
		Source:          d.str(m, "source", ""),
		MessageFormat:   d.str(m, "message_format", ""),
		Message:         d.str(m, "message", ""),
		Payload:         d.payload(m),
		Snapshot:        d.snapshotInfo(m),
		PreviousEventID: d.nullableLong(m, "previous_event_id"),
		Op:              Op(d.str(m, "op", "")),
		SourceInfo:      d.sourceInfo(m),
	}
	if files := d.array(m, "files"); len(files) > 0 {
		e.Files = make([]FileRef, len(files))
		for i, v := range files {
			f := d.element("files", i, v)
			e.Files[i] = FileRef{
				URI:      d.str(f, "uri", ""),
				Checksum: d.str(f, "checksum", ""),
				CMRoot:   d.str(f, "cm_root", ""),
				Subdir:   d.str(f, "subdir", ""),
				TaskID:   d.str(f, "task_id", ""),
				Rewrite:  d.str(f, "rewrite", ""),
			}
		}
	}
	if errs := d.array(m, "errors"); len(errs) > 0 {
		e.Errors = make([]EventError, len(errs))
		for i, v := range errs {
			x := d.element("errors", i, v)
			e.Errors[i] = EventError{
				Kind:    EventErrorKind(d.enum(x, "kind", "EventErrorKind", eventErrorKinds)),
				Message: d.str(x, "message", ""),
				Path:    d.str(x, "path", ""),
			}
		}
	}
	return e
}

func (d *decoder) payload(m map[string]any) Payload {
	v, ok := m["payload"]
	if !ok || v == nil {
		return nil
	}
	u, ok := v.(map[string]any)
	if !ok || len(u) != 1 {
		d.failf("field payload: want null or a single-branch union, got %T", v)
		return nil
	}
	for branch, bv := range u {
		r, ok := bv.(map[string]any)
		if !ok {
			d.failf("field payload: branch %s holds %T, not a record", branch, bv)
			return nil
		}
		switch branch {
		case branchDatabaseChange:
			return &DatabaseChange{
				Before: d.database(d.nullable(r, "before", nameDatabase)),
				After:  d.database(d.nullable(r, "after", nameDatabase)),
			}
		case branchTableChange:
			return &TableChange{
				Before:     d.table(d.nullable(r, "before", nameTable)),
				After:      d.table(d.nullable(r, "after", nameTable)),
				IsTruncate: d.bool(r, "is_truncate"),
			}
		case branchPartitionChange:
			return &PartitionChange{
				Table:      d.table(d.nullable(r, "table", nameTable)),
				Before:     d.partitions(r, "before"),
				After:      d.partitions(r, "after"),
				IsTruncate: d.bool(r, "is_truncate"),
			}
		case branchInsertData:
			return &InsertData{
				Table:     d.table(d.nullable(r, "table", nameTable)),
				Partition: d.partition(d.nullable(r, "partition", namePartition)),
				Replace:   d.bool(r, "replace"),
			}
		case branchTransaction:
			t := &Transaction{TxnIDs: d.longs(r, "txn_ids")}
			if wids := d.array(r, "write_ids"); len(wids) > 0 {
				t.WriteIDs = make([]TableWriteID, len(wids))
				for i, v := range wids {
					w := d.element("write_ids", i, v)
					t.WriteIDs[i] = TableWriteID{
						Database:  d.str(w, "database", ""),
						Table:     d.str(w, "table", ""),
						WriteID:   d.long(w, "write_id", 0),
						Partition: d.str(w, "partition", ""),
						Files:     d.strings(w, "files"),
					}
				}
			}
			return t
		case branchWriteIDAllocation:
			a := &WriteIDAllocation{Database: d.str(r, "database", ""), Table: d.str(r, "table", "")}
			if allocs := d.array(r, "allocations"); len(allocs) > 0 {
				a.Allocations = make([]TxnWriteID, len(allocs))
				for i, v := range allocs {
					x := d.element("allocations", i, v)
					a.Allocations[i] = TxnWriteID{TxnID: d.long(x, "txn_id", 0), WriteID: d.long(x, "write_id", 0)}
				}
			}
			return a
		case branchColumnStats:
			return &ColumnStats{
				Database:        d.str(r, "database", ""),
				Table:           d.str(r, "table", ""),
				PartitionValues: d.strings(r, "partition_values"),
				Columns:         d.strings(r, "columns"),
				StatsJSON:       d.str(r, "stats_json", ""),
			}
		case branchCompaction:
			return &Compaction{
				TxnID:        d.long(r, "txn_id", 0),
				CompactionID: d.long(r, "compaction_id", 0),
				Type:         d.str(r, "type", ""),
				Database:     d.str(r, "database", ""),
				Table:        d.str(r, "table", ""),
				Partition:    d.str(r, "partition", ""),
				Location:     d.str(r, "location", ""),
				Dirs:         d.strings(r, "dirs"),
			}
		default:
			d.failf("field payload: unknown payload branch %q", branch)
			return nil
		}
	}
	return nil
}

func (d *decoder) database(m map[string]any) *Database {
	if m == nil {
		return nil
	}
	return &Database{
		Name:            d.str(m, "name", ""),
		Description:     d.str(m, "description", ""),
		Location:        d.str(m, "location", ""),
		ManagedLocation: d.str(m, "managed_location", ""),
		Owner:           d.str(m, "owner", ""),
		Parameters:      d.stringMap(m, "parameters"),
	}
}

func (d *decoder) table(m map[string]any) *Table {
	if m == nil {
		return nil
	}
	t := &Table{
		Database:         d.str(m, "database", ""),
		Name:             d.str(m, "name", ""),
		Owner:            d.str(m, "owner", ""),
		TableType:        d.str(m, "table_type", ""),
		Location:         d.str(m, "location", ""),
		Columns:          d.columns(m, "columns"),
		PartitionKeys:    d.columns(m, "partition_keys"),
		Parameters:       d.stringMap(m, "parameters"),
		ViewOriginalText: d.str(m, "view_original_text", ""),
		ViewExpandedText: d.str(m, "view_expanded_text", ""),
		CreateTime:       d.long(m, "create_time", 0),
		WriteID:          d.long(m, "write_id", 0),
		ThriftJSON:       d.str(m, "thrift_json", ""),
	}
	if s := d.storage(d.record(m, "storage")); s != nil {
		t.Storage = *s
	} else {
		t.Storage.NumBuckets = -1 // the field defaults of an absent Storage
	}
	return t
}

func (d *decoder) columns(m map[string]any, field string) []Column {
	a := d.array(m, field)
	if len(a) == 0 {
		return nil
	}
	cols := make([]Column, len(a))
	for i, v := range a {
		c := d.element(field, i, v)
		cols[i] = Column{Name: d.str(c, "name", ""), Type: d.str(c, "type", ""), Comment: d.str(c, "comment", "")}
	}
	return cols
}

func (d *decoder) storage(m map[string]any) *Storage {
	if m == nil {
		return nil
	}
	return &Storage{
		InputFormat:     d.str(m, "input_format", ""),
		OutputFormat:    d.str(m, "output_format", ""),
		SerdeLib:        d.str(m, "serde_lib", ""),
		SerdeParameters: d.stringMap(m, "serde_parameters"),
		Compressed:      d.bool(m, "compressed"),
		NumBuckets:      d.int(m, "num_buckets", -1),
		BucketColumns:   d.strings(m, "bucket_columns"),
		Parameters:      d.stringMap(m, "parameters"),
	}
}

func (d *decoder) partitions(m map[string]any, field string) []Partition {
	a := d.array(m, field)
	if len(a) == 0 {
		return nil
	}
	ps := make([]Partition, len(a))
	for i, v := range a {
		if p := d.partition(d.element(field, i, v)); p != nil {
			ps[i] = *p
		}
	}
	return ps
}

func (d *decoder) partition(m map[string]any) *Partition {
	if m == nil {
		return nil
	}
	return &Partition{
		Values:     d.strings(m, "values"),
		Location:   d.str(m, "location", ""),
		Parameters: d.stringMap(m, "parameters"),
		Columns:    d.columns(m, "columns"),
		Storage:    d.storage(d.nullable(m, "storage", nameStorage)),
		CreateTime: d.long(m, "create_time", 0),
		WriteID:    d.long(m, "write_id", 0),
		ThriftJSON: d.str(m, "thrift_json", ""),
	}
}

func (d *decoder) copyTask(m map[string]any) *CopyTask {
	return &CopyTask{
		TaskID:    d.str(m, "task_id", ""),
		EventID:   d.long(m, "event_id", 0),
		EventTime: d.time(m, "event_time"),
		Database:  d.str(m, "database", ""),
		Table:     d.str(m, "table", ""),
		SourceURI: d.str(m, "source_uri", ""),
		TargetURI: d.str(m, "target_uri", ""),
		Checksum:  d.str(m, "checksum", ""),
		CMRoot:    d.str(m, "cm_root", ""),
		Subdir:    d.str(m, "subdir", ""),
		Rewrite:   d.str(m, "rewrite", ""),
	}
}

func (d *decoder) copyCompletion(m map[string]any) *CopyCompletion {
	c := &CopyCompletion{
		TaskID:       d.str(m, "task_id", ""),
		EventID:      d.long(m, "event_id", 0),
		Database:     d.str(m, "database", ""),
		SourceURI:    d.str(m, "source_uri", ""),
		TargetURI:    d.str(m, "target_uri", ""),
		Status:       CopyStatus(d.enum(m, "status", "CopyStatus", copyStatuses)),
		Length:       d.long(m, "length", -1),
		Verification: d.str(m, "verification", ""),
		CopiedFrom:   d.str(m, "copied_from", ""),
		Error:        d.str(m, "error", ""),
		Evidence:     d.str(m, "evidence", ""),
		Attempts:     d.int(m, "attempts", 1),
		Started:      d.time(m, "started"),
		Finished:     d.time(m, "finished"),
	}
	if v, ok := m["crc32c"]; ok && v != nil {
		var crc int64
		switch x := v.(type) {
		case map[string]any:
			l, ok := x["long"].(int64)
			if !ok || len(x) != 1 {
				d.failf("field crc32c: want null or long, got %v", v)
				return c
			}
			crc = l
		case int64:
			crc = x
		default:
			d.failf("field crc32c: want null or long, got %T", v)
			return c
		}
		if crc < 0 || crc > math.MaxUint32 {
			d.failf("field crc32c: %d is not an unsigned 32-bit value", crc)
			return c
		}
		u := uint32(crc)
		c.CRC32C = &u
	}
	return c
}

func (d *decoder) heartbeat(m map[string]any) *Heartbeat {
	return &Heartbeat{
		Database:          d.str(m, "database", ""),
		ScannedEventID:    d.long(m, "scanned_event_id", 0),
		ScannedEventTime:  d.time(m, "scanned_event_time"),
		SourceHeadEventID: d.long(m, "source_head_event_id", -1),
		Sent:              d.time(m, "sent"),
		Source:            d.str(m, "source", ""),
		PreviousEventID:   d.nullableLong(m, "previous_event_id"),
	}
}

func (d *decoder) checkpoint(m map[string]any) *TailerCheckpoint {
	return &TailerCheckpoint{
		Source:             d.str(m, "source", ""),
		LastEventID:        d.long(m, "last_event_id", 0),
		LastEventTime:      d.time(m, "last_event_time"),
		Written:            d.time(m, "written"),
		State:              TailerState(d.str(m, "state", string(StateRunning))),
		TopicLastEventIDs:  d.longMap(m, "topic_last_event_ids"),
		RequestsOffset:     d.long(m, "requests_offset", 0),
		Bootstraps:         d.bootstraps(m),
		SnapshotReleases:   d.releases(m),
		CompletionsOffsets: d.longs(m, "completions_offsets"),
		OpenTxns:           d.openTxns(m),
		TxnsTrackedAbove:   d.long(m, "txns_tracked_above", -1),
	}
}

func (d *decoder) openTxns(m map[string]any) []OpenTxn {
	items := d.array(m, "open_txns")
	if len(items) == 0 {
		return nil
	}
	out := make([]OpenTxn, len(items))
	for i, v := range items {
		r := d.element("open_txns", i, v)
		out[i] = OpenTxn{
			TxnID:        d.long(r, "txn_id", 0),
			FirstEventID: d.long(r, "first_event_id", 0),
			Databases:    d.strings(r, "databases"),
		}
	}
	return out
}

func (d *decoder) releases(m map[string]any) []SnapshotRelease {
	items := d.array(m, "snapshot_releases")
	if len(items) == 0 {
		return nil
	}
	out := make([]SnapshotRelease, len(items))
	for i, v := range items {
		r := d.element("snapshot_releases", i, v)
		out[i] = SnapshotRelease{
			BootstrapID:   d.str(r, "bootstrap_id", ""),
			HDFSSnapshots: d.strings(r, "hdfs_snapshots"),
			Tasks:         d.long(r, "tasks", -1),
			Completed:     d.long(r, "completed", 0),
		}
	}
	return out
}

func (d *decoder) bootstraps(m map[string]any) []BootstrapState {
	items := d.array(m, "bootstraps")
	if len(items) == 0 {
		return nil
	}
	out := make([]BootstrapState, len(items))
	for i, v := range items {
		b := d.element("bootstraps", i, v)
		out[i] = BootstrapState{
			Database:                   d.str(b, "database", ""),
			BootstrapID:                d.str(b, "bootstrap_id", ""),
			RequestID:                  d.str(b, "request_id", ""),
			Reason:                     d.str(b, "reason", ""),
			CutEventID:                 d.long(b, "cut_event_id", 0),
			CutEventTime:               d.time(b, "cut_event_time"),
			Phase:                      d.str(b, "phase", ""),
			Tables:                     d.strings(b, "tables"),
			WithData:                   d.bool(b, "with_data"),
			DoneTable:                  d.str(b, "done_table", ""),
			DonePartition:              d.str(b, "done_partition", ""),
			CatchupEventID:             d.long(b, "catchup_event_id", 0),
			Seq:                        d.long(b, "seq", 0),
			TablesTotal:                d.long(b, "tables_total", 0),
			TablesDone:                 d.long(b, "tables_done", 0),
			PartitionsDone:             d.long(b, "partitions_done", 0),
			Files:                      d.long(b, "files", 0),
			Bytes:                      d.long(b, "bytes", 0),
			Started:                    d.time(b, "started"),
			HDFSSnapshots:              d.strings(b, "hdfs_snapshots"),
			TableInProgress:            d.str(b, "table_in_progress", ""),
			PublishedTables:            d.strings(b, "published_tables"),
			SnapshotEventID:            d.long(b, "snapshot_event_id", 0),
			OpenTxns:                   d.openTxns(b),
			TxnsTrackedAbove:           d.long(b, "txns_tracked_above", -1),
			TableInProgressIncarnation: d.str(b, "table_in_progress_incarnation", ""),
		}
	}
	return out
}

func (d *decoder) snapshotInfo(m map[string]any) *SnapshotInfo {
	s := d.nullable(m, "snapshot", "io.hivedr.SnapshotInfo")
	if s == nil {
		return nil
	}
	return &SnapshotInfo{
		BootstrapID:    d.str(s, "bootstrap_id", ""),
		CutEventID:     d.long(s, "cut_event_id", 0),
		StampEventID:   d.long(s, "stamp_event_id", 0),
		Seq:            d.long(s, "seq", 0),
		Tables:         d.strings(s, "tables"),
		WithData:       d.bool(s, "with_data"),
		Reason:         d.str(s, "reason", ""),
		TableCount:     d.long(s, "table_count", 0),
		PartitionCount: d.long(s, "partition_count", 0),
		FileCount:      d.long(s, "file_count", 0),
		ByteCount:      d.long(s, "byte_count", 0),
		WriteIDs:       d.snapshotWriteIDs(s),
	}
}

func (d *decoder) snapshotWriteIDs(m map[string]any) *SnapshotWriteIDs {
	w := d.nullable(m, "write_ids", "io.hivedr.SnapshotWriteIds")
	if w == nil {
		return nil
	}
	return &SnapshotWriteIDs{HighWaterMark: d.long(w, "high_water_mark", 0), Aborted: d.longs(w, "aborted"), Open: d.longs(w, "open")}
}

func (d *decoder) sourceInfo(m map[string]any) *SourceInfo {
	s := d.nullable(m, "source_info", "io.hivedr.SourceInfo")
	if s == nil {
		return nil
	}
	return &SourceInfo{
		Name:      d.str(s, "name", ""),
		Metastore: d.str(s, "metastore", ""),
		Reader:    d.str(s, "reader", ""),
		Version:   d.str(s, "version", ""),
		Catalog:   d.str(s, "catalog", "hive"),
		EventID:   d.long(s, "event_id", 0),
		EventTime: d.time(s, "event_time"),
		Database:  d.nullableStr(s, "database"),
		Table:     d.nullableStr(s, "table"),
		Snapshot:  d.bool(s, "snapshot"),
	}
}

func (d *decoder) bootstrapRequest(m map[string]any) *BootstrapRequest {
	return &BootstrapRequest{
		RequestID:   d.str(m, "request_id", ""),
		Source:      d.str(m, "source", ""),
		Databases:   d.strings(m, "databases"),
		Tables:      d.strings(m, "tables"),
		Reason:      d.str(m, "reason", "requested"),
		RequestedBy: d.str(m, "requested_by", ""),
		RequestedAt: d.time(m, "requested_at"),
	}
}
