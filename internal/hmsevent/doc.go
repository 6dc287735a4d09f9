// Package hmsevent turns rows of the Hive Metastore's notification log
// into typed events (schemas.Event): the payload of each event type
// hivedr models and the data files its message lists. It is pure (no
// I/O, no clock, no shared state), so the tailer, verify and the tests
// decode a row the same way, and the captured fixtures in testdata/
// drive it alone. It also reads the metastore objects the log embeds,
// serialized with Thrift's TJSONProtocol (tjson.go), without reflection.
package hmsevent
