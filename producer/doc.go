// Package producer is the tailer (`hivedr tail`; the package keeps its
// older name): it reads the source Hive Metastore's notification log
// after its checkpoint (an internal/hmslog Source: Thrift or Postgres) and
// publishes it, in Kafka transactions, to one ordered topic per database
// plus copy tasks for the files the events reference.
//
// Each batch goes through these steps, the first three pure:
//
//   - hmsevent.Decode (internal/hmsevent) turns a log row into a schemas.Event: a
//     typed payload for the event types hivedr models and the data files
//     the message lists. It never fails: a row that does not decode, or
//     of a type the metastore does not write, is published with its raw
//     message and an error entry (DECODE, UNKNOWN_EVENT_TYPE), on which
//     the applier halts that database.
//   - Route (route.go) decides, under the replication policy, which
//     in-scope databases' topics the event goes to (or why it goes
//     nowhere: the filter reasons) and which copy tasks its files become;
//     a file outside the source roots or any path mapping becomes a
//     PATH_OUTSIDE_ROOTS error naming it, never a task.
//   - The files of an external table's new directories, which the
//     metastore does not list, are listed through a Lister (list.go;
//     listDirs decides which, purely), retried with backoff; a directory
//     that cannot be listed becomes a LISTING_FAILED error of that event.
//   - One Kafka transaction (tailer.go) publishes the events to
//     <prefix>.events.<db>, their copy tasks to <prefix>.manifests keyed
//     by target, heartbeats when due, and the new checkpoint
//     (checkpoint.go) with each topic's chain (chain.go): the
//     previous_event_id every record carries, so a consumer can tell it
//     lost records.
//
// Event IDs must continue the checkpoint with no hole: a gap (the log was
// purged past the checkpoint) is a GapError (gap.go, ErrChainBroken); the
// tailer writes a last checkpoint in state CHAIN_BROKEN and stops, never
// skipping. On start the transactional producer fences any earlier tailer
// with the same transactional ID and aborts what it left open, so a
// read_committed consumer sees every event exactly once across crashes.
package producer
