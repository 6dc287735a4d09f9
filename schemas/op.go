package schemas

// Op is MetastoreEvent.op: the kind of change as change-data-capture
// readers (Debezium's habits) know it. The schema documents each value;
// docs/change-topics.md maps every event type to one.
type Op string

// The values of Op.
const (
	OpCreate   Op = "c"
	OpUpdate   Op = "u"
	OpDelete   Op = "d"
	OpTruncate Op = "t"
	// OpRead is every record of a bootstrap (a snapshot read).
	OpRead Op = "r"
	// OpTransaction is a transaction's event (open, commit, abort, write
	// IDs): no object changes by itself.
	OpTransaction Op = "x"
	// OpMarker is hivedr's discontinuity marker and any event type hivedr
	// does not know.
	OpMarker Op = "m"
)

// OpOf returns the op of an event from its type, its snapshot block and,
// for truncation, its payload.
func OpOf(e *Event) Op {
	if e.Snapshot != nil && e.EventType != EventDiscontinuity {
		return OpRead
	}
	switch p := e.Payload.(type) {
	case *TableChange:
		if p.IsTruncate {
			return OpTruncate
		}
	case *PartitionChange:
		if p.IsTruncate {
			return OpTruncate
		}
	}
	switch e.EventType.Canonical() {
	case EventSnapshotBegin, EventSnapshotTable, EventSnapshotPartition, EventSnapshotEnd:
		return OpRead
	case EventCreateDatabase, EventCreateTable, EventAddPartition, EventCreateFunction,
		EventAddPrimaryKey, EventAddForeignKey, EventAddUniqueConstraint, EventAddNotNullConstraint,
		EventAddDefaultConstraint, EventAddCheckConstraint,
		EventCreateISchema, EventAddSchemaVersion, EventCreateCatalog, EventCreateDataConnector:
		return OpCreate
	case EventAlterDatabase, EventAlterTable, EventAlterPartition, EventAlterPartitions, EventInsert,
		EventUpdateTableColStat, EventUpdatePartitionColStat, EventUpdatePartitionColStatBatch,
		EventCommitCompaction, EventReload,
		EventAlterISchema, EventAlterSchemaVersion, EventAlterCatalog, EventAlterDataConnector:
		return OpUpdate
	case EventDropDatabase, EventDropTable, EventDropPartition, EventDropFunction, EventDropConstraint,
		EventDeleteTableColStat, EventDeletePartitionColStat,
		EventDropISchema, EventDropSchemaVersion, EventDropCatalog, EventDropDataConnector:
		return OpDelete
	case EventOpenTxn, EventCommitTxn, EventAbortTxn, EventAllocWriteID, EventAcidWrite, EventBatchAcidWrite:
		return OpTransaction
	}
	return OpMarker
}
