// Package applier replays each database's event topic, in order, on the DR
// Hive Metastore once the files an event references are copied, and commits
// its Kafka offset as the replication checkpoint.
//
// Not built yet: see the applier issue.
package applier
