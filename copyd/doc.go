// Package copyd is the copy daemon: a consumer group over the manifests
// topic that copies and verifies data files from the source to the DR
// storage and publishes exactly one completion record per copy task.
//
// Three parts, from the bottom up:
//
//   - The Engine carries out one copy task per call (Copy), safe for
//     concurrent calls that share one bandwidth limit; below.
//   - The Daemon (daemon.go) feeds it: tasks run Workers at a time in a
//     sliding window per partition (window.go, whose invariants are
//     written there), and every CommitInterval one Kafka transaction
//     publishes the completions of each partition's finished prefix with
//     the group's offsets just past it, so the committed offset never
//     passes an unfinished task and a crash publishes nothing twice. At
//     start, before the Daemon runs, Engine.DiscardInterrupted discards
//     the writes a killed run left, as the StagingLog (internal/state)
//     recorded them.
//   - CopyTree runs the Engine over a directory tree without Kafka, for
//     `hivedr copy` (bootstraps, benchmarks).
//
// The Engine does one copy task in three steps:
//
//   - Confinement. The source must lie under the source roots (or the
//     change-management roots, for a change-management copy) and the
//     target under the target roots, compared as canonical locations
//     (package location: no ".." and no relative paths, scheme and
//     authority in one spelling, whole path segments); with
//     EngineConfig.MapPath, the target must also be one the tailer makes
//     of the source (acid.CopyTargets of its mapping). Anything else
//     completes FAILED naming the path, before any store is asked
//     anything; from then on the engine uses only the canonical form.
//   - Decision (decide.go, pure). What was observed of the source, the
//     target, and how both relate to the checksum the metastore logged for
//     the file decides between skipping an identical target, copying,
//     looking for Hive's change-management copy of a file that is gone or
//     was rewritten since the event, then for the file in the snapshots of
//     the source directories that hold it (newest first, on stores that
//     implement SnapshotFinder: HDFS), and reporting SOURCE_GONE with the
//     evidence of every place looked in. Bytes whose checksum differs from
//     the event's are never copied; a snapshot copy is copied only when its
//     checksum is known to equal the event's (its CRC32C for a CRC32C
//     event checksum, its FileChecksum for a MD5-of-MD5 one), and only
//     when its location lies under the source roots (a snapshot of a
//     directory above the roots is not read). The completion's CopiedFrom
//     names the change-management or snapshot copy used.
//   - Transfer. Bytes stream from the origin to the target's Writer through
//     a token bucket shared by all the Engine's copies, the CRC32C computed
//     on the way. The write is committed only after that CRC32C agrees with
//     the origin store's checksum and the event's (when they can be had);
//     after the commit it is checked against the target store's checksum.
//     Where a store gives no checksum, the length and a sampled re-read of
//     the target against the origin stand in, and the completion's
//     Verification says so. A mismatch is retried, then reported FAILED
//     naming both values. Transient errors are retried with exponential
//     backoff and jitter; permanent ones fail at once.
//
// With EngineConfig.Preserve, the target keeps the origin's owner, group,
// mode and mtime (set on the staging file before it is published), the
// directories it is written into keep their source directories' owner,
// group and mode (dirs.go), and a target already identical gets its
// metadata repaired without a copy.
//
// A file larger than EngineConfig.SplitSize, to a target store that takes
// ranges (fs.Splitter: S3 multipart uploads; HDFS part files joined with
// CONCAT where the cluster allows it), is copied as ranges in parallel,
// each with its own ranged read and CRC32C; the file's CRC32C is combined
// from theirs (hdfscrc.Combine) and verified as a stream's is. A file
// adds range workers beyond its first only while the Engine runs fewer
// than SplitWorkers streams in all, so a busy daemon gains no streams.
package copyd
