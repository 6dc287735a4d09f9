package schemas

import (
	"strings"
	"time"
)

// The Go forms of the records in the *.avsc files beside this file. Field
// docs live in the schemas; names map snake_case <-> CamelCase one to one.
// Nullable Avro fields are pointers (records) or use the zero value where
// the schema's default is the zero value.

// Event is a MetastoreEvent: one entry of the source notification log.
type Event struct {
	EventID       int64
	EventTime     time.Time
	EventType     EventType
	Catalog       string
	Database      string // "" encodes as null
	Table         string // "" encodes as null
	Databases     []string
	Source        string
	MessageFormat string
	Message       string
	Payload       Payload // nil encodes as null
	Files         []FileRef
	Errors        []EventError
	// Snapshot is set on a bootstrap's records and on a discontinuity
	// marker (event types HIVEDR_*); nil on the metastore's own events.
	Snapshot *SnapshotInfo
	// PreviousEventID is the event published to the same topic just
	// before this one (0: none), or nil in records older than the field.
	// The tailer sets it per topic; see Chain.
	PreviousEventID *int64
	// Op is the kind of change (OpCreate, ...; see OpOf); "" in records
	// older than the field.
	Op Op
	// SourceInfo says where the change comes from; nil in records older
	// than the field.
	SourceInfo *SourceInfo
}

// SourceInfo is the source block of an event (see the schema's docs).
type SourceInfo struct {
	Name      string
	Metastore string
	Reader    string
	Version   string
	Catalog   string
	EventID   int64
	EventTime time.Time
	Database  string // "" encodes as null
	Table     string // "" encodes as null
	Snapshot  bool
}

// SnapshotInfo places a record within a bootstrap (see the schema's docs).
type SnapshotInfo struct {
	BootstrapID    string
	CutEventID     int64
	StampEventID   int64
	Seq            int64
	Tables         []string
	WithData       bool
	Reason         string
	TableCount     int64
	PartitionCount int64
	FileCount      int64
	ByteCount      int64
	// WriteIDs is, on the SNAPSHOT_TABLE record of a transactional table,
	// its write-ID state as the tailer listed it; nil otherwise.
	WriteIDs *SnapshotWriteIDs
}

// SnapshotWriteIDs is a transactional table's write-ID state in a
// bootstrap's table record (see the schema's docs): Open holds the write
// IDs still open when the tailer stopped waiting for them.
type SnapshotWriteIDs struct {
	HighWaterMark int64
	Aborted, Open []int64
}

// Payload is one of *DatabaseChange, *TableChange, *PartitionChange,
// *InsertData, *Transaction, *WriteIDAllocation, *ColumnStats,
// *Compaction.
type Payload interface{ isPayload() }

func (*DatabaseChange) isPayload()    {}
func (*TableChange) isPayload()       {}
func (*PartitionChange) isPayload()   {}
func (*InsertData) isPayload()        {}
func (*Transaction) isPayload()       {}
func (*WriteIDAllocation) isPayload() {}
func (*ColumnStats) isPayload()       {}
func (*Compaction) isPayload()        {}

// DatabaseChange is CREATE/ALTER/DROP_DATABASE.
type DatabaseChange struct {
	Before, After *Database
}

// Database is a metastore database.
type Database struct {
	Name            string
	Description     string
	Location        string
	ManagedLocation string
	Owner           string
	Parameters      map[string]string
}

// TableChange is CREATE/ALTER/DROP_TABLE.
type TableChange struct {
	Before, After *Table
	IsTruncate    bool
}

// Table is a metastore table or view.
type Table struct {
	Database         string
	Name             string
	Owner            string
	TableType        string
	Location         string
	Columns          []Column
	PartitionKeys    []Column
	Parameters       map[string]string
	Storage          Storage
	ViewOriginalText string
	ViewExpandedText string
	CreateTime       int64
	WriteID          int64
	ThriftJSON       string
}

// IsExternal reports whether a table of this type and these parameters is
// external: the metastore marks one either way (EXTERNAL_TABLE, or the
// EXTERNAL=TRUE parameter a CREATE EXTERNAL TABLE sets).
func IsExternal(tableType string, params map[string]string) bool {
	return tableType == "EXTERNAL_TABLE" || strings.EqualFold(params["EXTERNAL"], "TRUE")
}

// External reports whether t is an external table (IsExternal); a nil
// table is not.
func (t *Table) External() bool { return t != nil && IsExternal(t.TableType, t.Parameters) }

// Column is a column or partition key.
type Column struct {
	Name, Type, Comment string
}

// Storage is the format part of a storage descriptor.
type Storage struct {
	InputFormat     string
	OutputFormat    string
	SerdeLib        string
	SerdeParameters map[string]string
	Compressed      bool
	NumBuckets      int32
	BucketColumns   []string
	Parameters      map[string]string
}

// PartitionChange is ADD/ALTER/DROP_PARTITION.
type PartitionChange struct {
	Table         *Table
	Before, After []Partition
	IsTruncate    bool
}

// Partition is a partition of a table.
type Partition struct {
	Values     []string
	Location   string
	Parameters map[string]string
	Columns    []Column
	Storage    *Storage
	CreateTime int64
	WriteID    int64
	ThriftJSON string
}

// InsertData is INSERT (INTO, or OVERWRITE when Replace).
type InsertData struct {
	Table     *Table
	Partition *Partition
	Replace   bool
}

// Transaction is OPEN_TXN, COMMIT_TXN or ABORT_TXN.
type Transaction struct {
	TxnIDs   []int64
	WriteIDs []TableWriteID
}

// TableWriteID is a table's write ID within a transaction: for COMMIT_TXN
// and ACID_WRITE, one write the transaction made.
type TableWriteID struct {
	Database, Table string
	WriteID         int64
	// Partition is the partition written (its name, dt=2024-01-01), or "".
	Partition string
	// Files are the URIs of the files the write added.
	Files []string
}

// WriteIDAllocation is ALLOC_WRITE_ID.
type WriteIDAllocation struct {
	Database, Table string
	Allocations     []TxnWriteID
}

// TxnWriteID pairs a transaction with the write ID it got.
type TxnWriteID struct {
	TxnID, WriteID int64
}

// ColumnStats is an update or delete of column statistics.
type ColumnStats struct {
	Database, Table string
	PartitionValues []string
	Columns         []string
	StatsJSON       string
}

// Compaction is COMMIT_COMPACTION: the compactor's transaction TxnID
// committed compaction CompactionID of a transactional table or one of
// its partitions. The message names only those; the tailer adds the
// source directory (Location) and the ACID directories the compaction
// wrote there (Dirs: base_N_vT, delta_A_B_vT, delete_delta_A_B_vT, named
// by the compactor's transaction T), whose files are the event's files.
type Compaction struct {
	TxnID, CompactionID int64
	// Type is the compaction's kind as the metastore names it (MAJOR,
	// MINOR, REBALANCE, ...).
	Type            string
	Database, Table string
	// Partition is the partition's name (k=v/...); "" for a table.
	Partition string
	// Location is the source directory compacted (the table's or the
	// partition's), "" when the tailer could not read it.
	Location string
	// Dirs are the names of the directories the compaction wrote under
	// Location, sorted.
	Dirs []string
}

// FileRef is a data file an event references.
type FileRef struct {
	URI, Checksum, CMRoot, Subdir, TaskID string
	// Rewrite is how a copy rewrites the file for DR's paths: "" (a
	// byte-for-byte copy) or one of the Rewrite* kinds.
	Rewrite string
}

// Rewrites of FileRef.Rewrite and CopyTask.Rewrite: Iceberg files that
// name other files by absolute path, written on DR with DR's paths.
const (
	RewriteIcebergMetadata        = "iceberg-metadata"
	RewriteIcebergManifestList    = "iceberg-manifest-list"
	RewriteIcebergManifest        = "iceberg-manifest"
	RewriteIcebergPositionDeletes = "iceberg-position-deletes"
)

// EventErrorKind says why an event cannot be applied as is.
type EventErrorKind string

// The kinds of EventError.
const (
	ErrUnknown          EventErrorKind = "UNKNOWN" // the schema's default; what "" encodes as
	ErrDecode           EventErrorKind = "DECODE"
	ErrUnknownEventType EventErrorKind = "UNKNOWN_EVENT_TYPE"
	ErrPathOutsideRoots EventErrorKind = "PATH_OUTSIDE_ROOTS"
	ErrListingFailed    EventErrorKind = "LISTING_FAILED"
	// ErrWritesUnavailable: a COMMIT_TXN whose message names no writes,
	// and whose writes the source metastore could not give whole.
	ErrWritesUnavailable EventErrorKind = "WRITES_UNAVAILABLE"
	// ErrRecordTooLarge: the event's record was larger than the topics
	// take (kafka.max_message_bytes); it was published without its
	// payload, raw message and files.
	ErrRecordTooLarge EventErrorKind = "RECORD_TOO_LARGE"
)

// EventError is a reason the applier must halt at an event.
type EventError struct {
	Kind    EventErrorKind
	Message string
	Path    string
}

// CopyTask is one file to copy.
type CopyTask struct {
	TaskID    string
	EventID   int64
	EventTime time.Time
	Database  string
	Table     string
	SourceURI string
	TargetURI string
	Checksum  string
	CMRoot    string
	Subdir    string
	// Rewrite is FileRef.Rewrite of the file.
	Rewrite string
}

// CopyStatus is the outcome of a copy task.
type CopyStatus string

// The outcomes of a copy task.
const (
	StatusUnknown          CopyStatus = "UNKNOWN" // the schema's default; what "" encodes as
	StatusCopied           CopyStatus = "COPIED"
	StatusSkippedIdentical CopyStatus = "SKIPPED_IDENTICAL"
	StatusFailed           CopyStatus = "FAILED"
	StatusSourceGone       CopyStatus = "SOURCE_GONE"
)

// CopyCompletion is the outcome of one copy task.
type CopyCompletion struct {
	TaskID       string
	EventID      int64
	Database     string
	SourceURI    string
	TargetURI    string
	Status       CopyStatus
	Length       int64
	CRC32C       *uint32
	Verification string
	CopiedFrom   string
	Error        string
	Evidence     string
	Attempts     int32
	Started      time.Time
	Finished     time.Time
}

// Heartbeat keeps a quiet database's lag true.
type Heartbeat struct {
	Database          string
	ScannedEventID    int64
	ScannedEventTime  time.Time
	SourceHeadEventID int64
	Sent              time.Time
	Source            string
	// PreviousEventID is the last event published to the topic before
	// the heartbeat (0: none), or nil in records older than the field.
	PreviousEventID *int64
}

// CompleteAt is the source time up to which the heartbeat says its topic
// holds every event of the database. When the tailer had read the whole
// log (scanned_event_id at the source head it had just polled), no newer
// event existed when it sent the heartbeat, so that is the time (the
// tailer's clock); otherwise it is scanned_event_time, the time of the
// newest event read. (scanned_event_time alone would age the replica of
// a quiet source by the time it has been quiet.)
func (h *Heartbeat) CompleteAt() time.Time {
	if h.SourceHeadEventID >= 0 && h.ScannedEventID >= h.SourceHeadEventID && h.Sent.After(h.ScannedEventTime) {
		return h.Sent
	}
	return h.ScannedEventTime
}

// TailerCheckpoint is the tailer's position.
type TailerCheckpoint struct {
	Source        string
	LastEventID   int64
	LastEventTime time.Time
	Written       time.Time
	State         TailerState
	// TopicLastEventIDs holds, by database, the last event published to
	// that database's topic.
	TopicLastEventIDs map[string]int64
	// RequestsOffset is the next offset of the control topic to read.
	RequestsOffset int64
	// Bootstraps are the bootstraps in progress.
	Bootstraps []BootstrapState
	// SnapshotReleases are the HDFS snapshots of bootstraps waiting for
	// their copies to complete.
	SnapshotReleases []SnapshotRelease
	// CompletionsOffsets are, by partition of the completions topic, the
	// next offset not counted for SnapshotReleases.
	CompletionsOffsets []int64
	// OpenTxns are the source transactions that allocated write IDs up to
	// LastEventID and have not ended.
	OpenTxns []OpenTxn
	// TxnsTrackedAbove: source transaction IDs above it are tracked whole
	// (each allocation of theirs is in OpenTxns until they end); -1 in the
	// checkpoint of a tailer that did not track transactions.
	TxnsTrackedAbove int64
}

// OpenTxn is a source transaction that has allocated write IDs and not
// ended, as the tailer's checkpoint keeps it (see the schema's docs).
type OpenTxn struct {
	TxnID int64
	// FirstEventID is the event of its first allocation.
	FirstEventID int64
	// Databases it allocated write IDs in, lower case, sorted.
	Databases []string
}

// SnapshotRelease is the HDFS snapshots of one bootstrap and how many of
// its copy tasks have completed (see the schema's docs).
type SnapshotRelease struct {
	BootstrapID   string
	HDFSSnapshots []string
	// Tasks is how many copy tasks the bootstrap published; -1 while it
	// may publish more.
	Tasks     int64
	Completed int64
}

// BootstrapState is one bootstrap in progress, as the tailer's checkpoint
// keeps it (see the schema's docs).
type BootstrapState struct {
	Database       string
	BootstrapID    string
	RequestID      string
	Reason         string
	CutEventID     int64
	CutEventTime   time.Time
	Phase          string
	Tables         []string
	WithData       bool
	DoneTable      string
	DonePartition  string
	CatchupEventID int64
	Seq            int64
	TablesTotal    int64
	TablesDone     int64
	PartitionsDone int64
	Files          int64
	Bytes          int64
	Started        time.Time
	HDFSSnapshots  []string
	// TableInProgress is the table whose partitions are being published.
	TableInProgress string
	// PublishedTables are the names, sorted, whose TABLE records are published.
	PublishedTables []string
	// SnapshotEventID is the source head read just before the snapshots
	// of HDFSSnapshots were created; 0 while they are only planned.
	SnapshotEventID int64
	// OpenTxns are the source transactions that had allocated write IDs
	// in Database and not ended at the catch-up's position (CutEventID,
	// then CatchupEventID); TxnsTrackedAbove is the checkpoint's at the
	// cut, -1 in the checkpoint of an older tailer.
	OpenTxns         []OpenTxn
	TxnsTrackedAbove int64
	// TableInProgressIncarnation says which table TableInProgress's TABLE
	// record is of (tableIncarnation in the producer); "" when unknown.
	TableInProgressIncarnation string
}

// The phases of a BootstrapState.
const (
	PhaseSnapshot = "SNAPSHOT"
	PhaseCatchup  = "CATCHUP"
)

// The reasons for a bootstrap: the values of BootstrapRequest.Reason,
// SnapshotInfo.Reason and BootstrapState.Reason. The `hivedr bootstrap`
// command writes the first two kinds; the tailer starts the others itself.
const (
	// ReasonRequested: an operator asked for the databases named.
	ReasonRequested = "requested"
	// ReasonChainBroken: the tailer stopped on a purged log; it resumes
	// after the gap and bootstraps every database in scope.
	ReasonChainBroken = "chain_broken"
	// ReasonNewDatabase: a database came into the policy's scope.
	ReasonNewDatabase = "new_database"
	// ReasonEnteredScope: a table was renamed into the scope.
	ReasonEnteredScope = "entered_scope"
	// ReasonDiscontinuity: the tailer started over databases that already
	// have a replica, without a checkpoint.
	ReasonDiscontinuity = "discontinuity"
)

// BootstrapRequest asks the tailer to bootstrap databases.
type BootstrapRequest struct {
	RequestID   string
	Source      string
	Databases   []string
	Tables      []string
	Reason      string
	RequestedBy string
	RequestedAt time.Time
}

// TailerState is a tailer's state: the state label of its
// hivedr_tailer_state gauge, and the state of its checkpoints, which is
// StateRunning or, in the last checkpoint of a tailer that stopped on a
// gap in the source log, StateChainBroken. On the wire it is a string.
type TailerState string

// The states of a tailer.
const (
	StateStarting    TailerState = "STARTING" // gauge only
	StateRunning     TailerState = "RUNNING"  // the schema's default
	StateChainBroken TailerState = "CHAIN_BROKEN"
	StateFailed      TailerState = "FAILED"  // gauge only
	StateStopped     TailerState = "STOPPED" // gauge only
)
