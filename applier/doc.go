// Package applier replays the per-database event topics onto the DR Hive
// Metastore: one ordered worker per database, each event applied only after
// the files it references are copied and verified, and its Kafka offset
// committed only after the apply succeeded, so the committed offset is the
// replication checkpoint.
//
// The decision for one event is Plan (plan.go), a pure function of the
// event, the DR state of the objects it touches (Touches names them), the
// copy completions known and the later events of the topic; the worker
// (worker.go) reads that state, runs the actions Plan returns against the
// metastore (exec.go), and moves on. A Decision is to apply, wait (for
// files, or for another database's worker), do nothing, or halt the
// database, with a Reason (reason.go) that is also its metric label and
// what hivedr.halted records. Heartbeats are decided by PlanHeartbeat,
// and every record's previous_event_id is checked against the DR
// database's position (CheckChain: a topic that lost records halts).
//
// The Applier (applier.go) finds database topics as they appear, runs
// one worker per database in one consumer group, and keeps the
// completions topic in a local cache (internal/state). The parameters it
// keeps on DR objects are named in internal/drparam.
package applier
