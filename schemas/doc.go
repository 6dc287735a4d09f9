// Package schemas holds the Avro schemas of every record hivedr writes to
// Kafka, and their Go types and codec.
//
// Not built yet: see the tailer issue.
package schemas
