// Package applier replays the per-database event topics onto the DR Hive
// Metastore: one ordered worker per database, each event applied only after
// the files it references are copied and verified, and its Kafka offset
// committed only after the apply succeeded, so the committed offset is the
// replication checkpoint.
//
// The decision for one event is Plan, a pure function of the event, the DR
// state of the objects it touches and the copy completions known; the
// worker reads that state, runs the actions Plan returns against the
// metastore, and moves on.
package applier
