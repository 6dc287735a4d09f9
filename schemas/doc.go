// Package schemas holds the Avro schemas of every record hivedr writes to
// Kafka (the *.avsc files, documented field by field), their Go types, and
// the codec.
//
// Wire format: the Confluent one, so any Confluent-compatible consumer
// (kcat -s avr, Kafka Connect, ...) reads the topics: a magic byte 0, the
// writer's schema ID (4 bytes, big-endian), then the Avro binary body.
//
// Subjects: one per record, named by the record's full name (the
// record-name strategy), e.g. io.hivedr.MetastoreEvent, because one event
// topic carries both MetastoreEvent and Heartbeat records and event topics
// are created per database. NewSerde registers the current schemas and sets
// each subject's compatibility to BACKWARD.
//
// Decoding always uses the writer's schema, fetched by ID, so records
// written by older (or newer) hivedr versions stay readable: fields the
// writer lacked take their defaults, fields this version does not know are
// ignored, and a payload branch or enum symbol it does not know is an error
// that names it.
//
// Encoding writes the Avro body straight from the Go types (binary.go, the
// tailer's hot path), checked byte for byte against goavro; decoding reads
// goavro's native form into them (native.go).
//
// Values from a fixed set are typed strings, declared here once and used
// by every role: EventType (a notification-log EVENT_TYPE, kept on the
// wire as the metastore wrote it; Canonical folds the enum names some
// writers use), CopyStatus and EventErrorKind (Avro enums), and
// TailerState (the tailer's checkpoint state and metric label), and Op
// (MetastoreEvent.op, the change-data-capture kind of change, from OpOf).
//
// Plain gives a record the form generic Avro readers give (the schema's
// field names, unions unwrapped, RFC 3339 times): what hivedr cat prints,
// and what docs/change-topics.md describes for streaming consumers.
//
// Evolution rules for the .avsc files:
//   - only add fields, each with a default;
//   - never remove or rename a field, a record or an enum symbol, and never
//     change a field's type (int to long is the one allowed widening);
//   - add payload branches and enum symbols at the end; enums keep their
//     default symbol (UNKNOWN, the first);
//   - update types.go, ToNative, the decoder (native.go) and the direct
//     encoder (binary.go) in the same change; the tests check they agree.
package schemas
