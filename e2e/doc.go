// Package e2e holds hivedr's end-to-end tests. They run the real binaries
// and talk to the real local stack (Kafka, HDFS, Hive Metastore, Postgres,
// S3) that `make stack-up` starts from e2e/stack. A test whose stack is not
// up fails with a message saying so; none of them skips.
package e2e
