// Package copyd is the copy daemon: a consumer group over file manifests
// that copies and verifies data files from the source to the DR storage and
// publishes one completion record per file.
//
// The Engine does one copy task at a time per call, in three steps:
//
//   - Confinement. The source must lie under the source roots and the
//     target under the target roots, as normalised locations (no ".." and no
//     relative paths; scheme and host must match). Anything else completes
//     FAILED naming the path, before any store is asked anything.
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
// Not implemented yet: splitting large files into ranges copied in
// parallel (each file is one stream).
package copyd
