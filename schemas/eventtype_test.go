package schemas

import "testing"

func TestEventTypeCanonical(t *testing.T) {
	for alias, want := range map[EventType]EventType{
		"ALLOC_WRITE_ID":                     EventAllocWriteID,
		"ACID_WRITE":                         EventAcidWrite,
		"BATCH_ACID_WRITE":                   EventBatchAcidWrite,
		"UPDATE_TABLE_COLUMN_STAT":           EventUpdateTableColStat,
		"DELETE_TABLE_COLUMN_STAT":           EventDeleteTableColStat,
		"UPDATE_PARTITION_COLUMN_STAT":       EventUpdatePartitionColStat,
		"DELETE_PARTITION_COLUMN_STAT":       EventDeletePartitionColStat,
		"UPDATE_PARTITION_COLUMN_STAT_BATCH": EventUpdatePartitionColStatBatch,
		"COMMIT_COMPACTION":                  EventCommitCompaction,
		EventCreateTable:                     EventCreateTable,
		EventAllocWriteID:                    EventAllocWriteID,
		"NOT_A_HIVE_EVENT":                   "NOT_A_HIVE_EVENT",
	} {
		if got := alias.Canonical(); got != want {
			t.Errorf("%s.Canonical() = %s, want %s", alias, got, want)
		}
	}
}
