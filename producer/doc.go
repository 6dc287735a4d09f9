// Package producer is the tailer: it reads the source Hive Metastore's
// notification log after its checkpoint and publishes, in Kafka
// transactions, one ordered topic per database plus file manifests.
//
// Not built yet: see the tailer issue.
package producer
