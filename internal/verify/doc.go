// Package verify compares the replicated databases of a source metastore
// with their replicas on the DR metastore: databases, tables, columns,
// partition keys, partitions by name, the parameters that matter
// (IgnoredParameter says which do not), locations after path mapping, the
// data files' names and lengths, and, for a sample of them, their
// checksums as the stores report them. Open makes a Config from a
// pipeline's configuration; Run compares and streams findings to a Sink.
// `hivedr verify` wires the two; `hivedr drill` calls them after each of
// its steps (and on a sample of files in its -dry-run readiness check).
//
// A difference is in_flight when the object is touched by an event of the
// database's topic after the applier group's committed offset (the DR has
// not applied it yet: lag), and diverged otherwise (pending.go: the events
// after that offset are read through a Log, and what they touch decides).
//
// Run streams: it holds one table at a time, and of a partitioned table
// the two sorted lists of partition names plus one page of partitions
// (PageSize) and their file lists; findings go to a Sink as each table is
// done.
package verify
