package schemas

import "testing"

func TestOpOf(t *testing.T) {
	snap := &SnapshotInfo{BootstrapID: "b-1", CutEventID: 9}
	for _, tc := range []struct {
		name string
		ev   Event
		want Op
	}{
		{"create database", Event{EventType: EventCreateDatabase}, OpCreate},
		{"create table", Event{EventType: EventCreateTable}, OpCreate},
		{"add partition", Event{EventType: EventAddPartition}, OpCreate},
		{"alter table", Event{EventType: EventAlterTable, Payload: &TableChange{}}, OpUpdate},
		{"truncate table", Event{EventType: EventAlterTable, Payload: &TableChange{IsTruncate: true}}, OpTruncate},
		{"truncate partition", Event{EventType: EventAlterPartition, Payload: &PartitionChange{IsTruncate: true}}, OpTruncate},
		{"alter partitions", Event{EventType: EventAlterPartitions}, OpUpdate},
		{"insert", Event{EventType: EventInsert}, OpUpdate},
		{"column stats", Event{EventType: EventUpdateTableColStat}, OpUpdate},
		{"column stats, enum name", Event{EventType: "UPDATE_TABLE_COLUMN_STAT"}, OpUpdate},
		{"delete column stats", Event{EventType: EventDeletePartitionColStat}, OpDelete},
		{"drop table", Event{EventType: EventDropTable}, OpDelete},
		{"drop partition", Event{EventType: EventDropPartition}, OpDelete},
		{"drop database", Event{EventType: EventDropDatabase}, OpDelete},
		{"open txn", Event{EventType: EventOpenTxn}, OpTransaction},
		{"commit txn", Event{EventType: EventCommitTxn}, OpTransaction},
		{"alloc write id, enum name", Event{EventType: "ALLOC_WRITE_ID"}, OpTransaction},
		{"snapshot begin", Event{EventType: EventSnapshotBegin, Snapshot: snap}, OpRead},
		{"snapshot table", Event{EventType: EventSnapshotTable, Snapshot: snap, Payload: &TableChange{}}, OpRead},
		{"snapshot partition", Event{EventType: EventSnapshotPartition, Snapshot: snap}, OpRead},
		{"snapshot end", Event{EventType: EventSnapshotEnd, Snapshot: snap}, OpRead},
		{"discontinuity", Event{EventType: EventDiscontinuity, Snapshot: snap}, OpMarker},
		{"unknown type", Event{EventType: "SOMETHING_NEW"}, OpMarker},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := OpOf(&tc.ev); got != tc.want {
				t.Errorf("OpOf(%s) = %q, want %q", tc.ev.EventType, got, tc.want)
			}
		})
	}
}
