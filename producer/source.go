package producer

// RawEvent is one row of the source notification log, as a source (the
// metastore's get_next_notification, or a direct read of NOTIFICATION_LOG)
// returns it, before any decoding. Decode turns it into a schemas.Event.
type RawEvent struct {
	// EventID is NOTIFICATION_LOG.EVENT_ID: strictly increasing and, in an
	// unpurged log, contiguous.
	EventID int64
	// EventTime is EVENT_TIME, in seconds since the Unix epoch.
	EventTime int64
	// EventType is EVENT_TYPE as the metastore wrote it, e.g. CREATE_TABLE,
	// ALLOC_WRITE_ID_EVENT.
	EventType string
	// Catalog is CAT_NAME; empty when the row has none (transaction events).
	Catalog string
	// Database is DB_NAME; empty for events tied to no database (OPEN_TXN).
	Database string
	// Table is TBL_NAME; empty for database and transaction events.
	Table string
	// MessageFormat is MESSAGE_FORMAT: "json-0.2" or "gzip(json-2.0)".
	MessageFormat string
	// Message is MESSAGE exactly as stored, undecoded.
	Message string
}
