// Package e2e holds hivedr's end-to-end tests. They run the real binary
// (built once per run from this tree, as operators run it: `hivedr tail`,
// `copyd`, `apply`, `status`, `cat`, `copy`), often several at once and
// killed mid-work, against the real local stack (Kafka, the schema
// registry, Postgres, two HDFS, two Hive Metastores, S3) that `make
// stack-up` starts from e2e/stack. A test whose stack is not up fails with
// a message saying so; none of them skips. Faults fire on observed
// progress and waits poll for a condition (eventually), never on sleeps.
//
// The benchmarks live here too: BenchmarkTailerPostgres (`make
// bench-tail`), TestPipelineLag behind the benchlag build tag (`make
// bench-lag`), and bench/ for `make bench-copy` against DistCp. The
// subpackages workload (driving a metastore as Hive's client does, and
// comparing source and DR) and demo (`make demo`) serve the tests and the
// demo alike.
package e2e
