// Package hmslog reads a Hive Metastore's notification log, the
// NOTIFICATION_LOG table every metadata change is written to with a
// strictly increasing event ID: through the metastore's Thrift API
// (ThriftSource) or straight from its database (PostgresSource). Both
// give the same rows, undecoded (RawEvent). The tailer reads the source
// log through it; `hivedr status` reads the log's head.
package hmslog

import (
	"context"
	"fmt"

	"github.com/hivedr/hivedr/internal/config"
	"github.com/hivedr/hivedr/internal/hms"
	"github.com/hivedr/hivedr/schemas"
)

// RawEvent is one row of the source notification log, as a source (the
// metastore's get_next_notification, or a direct read of NOTIFICATION_LOG)
// returns it, before any decoding (the tailer decodes it: hmsevent.Decode).
type RawEvent struct {
	// EventID is NOTIFICATION_LOG.EVENT_ID: strictly increasing and, in an
	// unpurged log, contiguous.
	EventID int64
	// EventTime is EVENT_TIME, in seconds since the Unix epoch.
	EventTime int64
	// EventType is EVENT_TYPE as the metastore wrote it, e.g. CREATE_TABLE,
	// ALLOC_WRITE_ID_EVENT.
	EventType schemas.EventType
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

// Source reads a metastore's notification log.
type Source interface {
	// Head returns the newest event ID the log has handed out; 0 for an
	// empty log.
	Head(ctx context.Context) (int64, error)
	// Next returns at most max events with IDs above after, in ID order.
	Next(ctx context.Context, after int64, max int) ([]RawEvent, error)
	// Databases lists the source's databases.
	Databases(ctx context.Context) ([]string, error)
	// Close releases the source's connections.
	Close() error
}

// Open returns the reader of the log that src configures: a ThriftSource
// for source.kind thrift (the default, also for an empty kind), a
// PostgresSource for postgres. Neither connects yet; the first call does.
// opts are the metastore's Dial options (Kerberos for a kerberized one).
func Open(ctx context.Context, src config.Source, opts hms.Options) (Source, error) {
	switch src.Kind {
	case config.SourcePostgres:
		s, err := NewPostgresSource(ctx, src.PostgresDSN)
		if err != nil {
			return nil, fmt.Errorf("source.postgres_dsn: %w", err)
		}
		return s, nil
	case config.SourceThrift, "":
		return NewThriftSource(src.Metastore, opts), nil
	}
	return nil, fmt.Errorf("source.kind: %q is not %s or %s", src.Kind, config.SourceThrift, config.SourcePostgres)
}
