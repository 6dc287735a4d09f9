package schemas

import "strings"

// EventType is a notification-log EVENT_TYPE as the metastore writes it:
// the string values of Hive's EventMessage.EventType. A few writers use
// the enum's names instead where they differ (ALLOC_WRITE_ID for
// ALLOC_WRITE_ID_EVENT, ...); Canonical maps those to the values. On the
// wire (MetastoreEvent.event_type) it is a string, kept as written.
type EventType string

// The event types Hive 4's metastore writes.
const (
	EventCreateDatabase EventType = "CREATE_DATABASE"
	EventAlterDatabase  EventType = "ALTER_DATABASE"
	EventDropDatabase   EventType = "DROP_DATABASE"

	EventCreateTable EventType = "CREATE_TABLE"
	EventAlterTable  EventType = "ALTER_TABLE"
	EventDropTable   EventType = "DROP_TABLE"

	EventAddPartition    EventType = "ADD_PARTITION"
	EventAlterPartition  EventType = "ALTER_PARTITION"
	EventAlterPartitions EventType = "ALTER_PARTITIONS" // a batch of ALTER_PARTITION
	EventDropPartition   EventType = "DROP_PARTITION"

	EventInsert EventType = "INSERT"

	EventOpenTxn        EventType = "OPEN_TXN"
	EventCommitTxn      EventType = "COMMIT_TXN"
	EventAbortTxn       EventType = "ABORT_TXN"
	EventAllocWriteID   EventType = "ALLOC_WRITE_ID_EVENT"
	EventAcidWrite      EventType = "ACID_WRITE_EVENT"
	EventBatchAcidWrite EventType = "BATCH_ACID_WRITE_EVENT"

	EventUpdateTableColStat          EventType = "UPDATE_TBL_COL_STAT_EVENT"
	EventDeleteTableColStat          EventType = "DELETE_TBL_COL_STAT_EVENT"
	EventUpdatePartitionColStat      EventType = "UPDATE_PART_COL_STAT_EVENT"
	EventDeletePartitionColStat      EventType = "DELETE_PART_COL_STAT_EVENT"
	EventUpdatePartitionColStatBatch EventType = "UPDATE_PART_COL_STAT_EVENT_BATCH"

	EventCommitCompaction EventType = "COMMIT_COMPACTION_EVENT"
	EventReload           EventType = "RELOAD"

	EventCreateFunction EventType = "CREATE_FUNCTION"
	EventDropFunction   EventType = "DROP_FUNCTION"

	EventAddPrimaryKey        EventType = "ADD_PRIMARYKEY"
	EventAddForeignKey        EventType = "ADD_FOREIGNKEY"
	EventAddUniqueConstraint  EventType = "ADD_UNIQUECONSTRAINT"
	EventAddNotNullConstraint EventType = "ADD_NOTNULLCONSTRAINT"
	EventAddDefaultConstraint EventType = "ADD_DEFAULTCONSTRAINT"
	EventAddCheckConstraint   EventType = "ADD_CHECKCONSTRAINT"
	EventDropConstraint       EventType = "DROP_CONSTRAINT"

	EventCreateISchema       EventType = "CREATE_ISCHEMA"
	EventAlterISchema        EventType = "ALTER_ISCHEMA"
	EventDropISchema         EventType = "DROP_ISCHEMA"
	EventAddSchemaVersion    EventType = "ADD_SCHEMA_VERSION"
	EventAlterSchemaVersion  EventType = "ALTER_SCHEMA_VERSION"
	EventDropSchemaVersion   EventType = "DROP_SCHEMA_VERSION"
	EventCreateCatalog       EventType = "CREATE_CATALOG"
	EventAlterCatalog        EventType = "ALTER_CATALOG"
	EventDropCatalog         EventType = "DROP_CATALOG"
	EventCreateDataConnector EventType = "CREATE_DATACONNECTOR"
	EventAlterDataConnector  EventType = "ALTER_DATACONNECTOR"
	EventDropDataConnector   EventType = "DROP_DATACONNECTOR"
)

// hivedr's own record kinds on an events topic, beside the metastore's
// (HIVEDR_ is a prefix no metastore event type has). A bootstrap is
// SNAPSHOT_BEGIN (carrying the database), a SNAPSHOT_TABLE per table and a
// SNAPSHOT_PARTITION per partition (files with both), then SNAPSHOT_END;
// a DISCONTINUITY marks a tailer that started without a checkpoint.
const (
	EventSnapshotBegin     EventType = "HIVEDR_SNAPSHOT_BEGIN"
	EventSnapshotTable     EventType = "HIVEDR_SNAPSHOT_TABLE"
	EventSnapshotPartition EventType = "HIVEDR_SNAPSHOT_PARTITION"
	EventSnapshotEnd       EventType = "HIVEDR_SNAPSHOT_END"
	EventDiscontinuity     EventType = "HIVEDR_DISCONTINUITY"
)

// IsHivedr reports whether t is one of hivedr's own record kinds.
func (t EventType) IsHivedr() bool { return strings.HasPrefix(string(t), "HIVEDR_") }

// Canonical returns the value Hive writes for t: t itself, or, for one of
// EventMessage.EventType's enum names that differ from their values, the
// value (ALLOC_WRITE_ID is ALLOC_WRITE_ID_EVENT). Code that acts on an
// event type switches on its canonical form, so both spellings act alike.
func (t EventType) Canonical() EventType {
	switch t {
	case "ALLOC_WRITE_ID":
		return EventAllocWriteID
	case "ACID_WRITE":
		return EventAcidWrite
	case "BATCH_ACID_WRITE":
		return EventBatchAcidWrite
	case "UPDATE_TABLE_COLUMN_STAT":
		return EventUpdateTableColStat
	case "DELETE_TABLE_COLUMN_STAT":
		return EventDeleteTableColStat
	case "UPDATE_PARTITION_COLUMN_STAT":
		return EventUpdatePartitionColStat
	case "DELETE_PARTITION_COLUMN_STAT":
		return EventDeletePartitionColStat
	case "UPDATE_PARTITION_COLUMN_STAT_BATCH":
		return EventUpdatePartitionColStatBatch
	case "COMMIT_COMPACTION":
		return EventCommitCompaction
	}
	return t
}
