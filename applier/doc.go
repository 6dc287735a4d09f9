// Package applier replays the per-database event topics onto the DR Hive
// Metastore: one ordered worker per database, each event applied only after
// the files it references are copied and verified, and its Kafka offset
// committed only after the apply succeeded, so the committed offset is the
// replication checkpoint.
//
// The decision for one event is Plan (plan.go), a pure function of the
// event, the DR state of the objects it touches (schemas.Touches names
// them), the copy completions known and the later events of the topic;
// the worker (worker.go) reads that state (cache.go keeps what it wrote
// itself), runs the Actions (actions.go) Plan returns against the
// metastore (exec.go), and moves on. Consecutive events of one table are
// planned and applied as one run (batch.go): one add_partitions, one
// alter_partitions per table. A Decision is to apply, wait (for files, or
// for another database's worker), do nothing, or halt the database, with
// a Reason (reason.go) that is also its metric label and what
// hivedr.halted records. Heartbeats are decided by PlanHeartbeat, and
// every record's previous_event_id is checked against the DR database's
// position (CheckChain: a topic that lost records halts).
//
// A bootstrap's HIVEDR_SNAPSHOT_* records (bootstrap.go) write the
// source database as of a cut and drop what it no longer holds;
// transactional tables (acid.go, exec_acid.go) are replayed as
// replicated transactions with the source's write IDs, and their
// bootstraps bring the write-ID state (acid_bootstrap.go).
//
// The Applier (applier.go) finds database topics as they appear
// (newdbs.go), runs one worker per database in one consumer group, acts
// on operators' requests from the control topic (control.go), and keeps
// the completions topic in a local cache (internal/state). The parameters
// it keeps on DR objects are named in internal/drparam.
package applier
