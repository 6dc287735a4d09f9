package producer

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/beltran/gohive/hive_metastore"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/hivedr/hivedr/internal/hms"
)

// Source reads the source metastore's notification log.
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

// ThriftSource reads the log with get_next_notification. It reconnects on
// the call after a failure, so a metastore restart costs one poll.
type ThriftSource struct {
	addr string
	c    *hms.Client
}

// NewThriftSource returns a source for the metastore at addr (host:port).
// It connects lazily.
func NewThriftSource(addr string) *ThriftSource { return &ThriftSource{addr: addr} }

func (s *ThriftSource) client(ctx context.Context) (*hms.Client, error) {
	if s.c != nil {
		return s.c, nil
	}
	c, err := hms.Dial(ctx, s.addr, hms.Options{})
	if err != nil {
		return nil, err
	}
	s.c = c
	return c, nil
}

// drop forgets a connection whose call failed: Thrift connections are not
// reusable after a transport error.
func (s *ThriftSource) drop() {
	if s.c != nil {
		s.c.Close()
		s.c = nil
	}
}

// Head implements Source.
func (s *ThriftSource) Head(ctx context.Context) (int64, error) {
	c, err := s.client(ctx)
	if err != nil {
		return 0, err
	}
	id, err := c.GetCurrentNotificationEventId(ctx)
	if err != nil {
		s.drop()
		return 0, fmt.Errorf("get_current_notificationEventId on %s: %w", s.addr, err)
	}
	return id.EventId, nil
}

// Next implements Source.
func (s *ThriftSource) Next(ctx context.Context, after int64, max int) ([]RawEvent, error) {
	c, err := s.client(ctx)
	if err != nil {
		return nil, err
	}
	n := int32(max)
	resp, err := c.GetNextNotification(ctx, &hive_metastore.NotificationEventRequest{LastEvent: after, MaxEvents: &n})
	if err != nil {
		s.drop()
		return nil, fmt.Errorf("get_next_notification after %d on %s: %w", after, s.addr, err)
	}
	out := make([]RawEvent, 0, len(resp.Events))
	for _, e := range resp.Events {
		out = append(out, RawEvent{
			EventID:       e.EventId,
			EventTime:     int64(e.EventTime),
			EventType:     e.EventType,
			Catalog:       deref(e.CatName),
			Database:      deref(e.DbName),
			Table:         deref(e.TableName),
			MessageFormat: deref(e.MessageFormat),
			Message:       e.Message,
		})
	}
	return out, nil
}

// Databases implements Source.
func (s *ThriftSource) Databases(ctx context.Context) ([]string, error) {
	c, err := s.client(ctx)
	if err != nil {
		return nil, err
	}
	dbs, err := c.GetAllDatabases(ctx)
	if err != nil {
		s.drop()
		return nil, fmt.Errorf("get_all_databases on %s: %w", s.addr, err)
	}
	return dbs, nil
}

// Close implements Source.
func (s *ThriftSource) Close() error { s.drop(); return nil }

func deref(p *string) string {
	if p == nil {
		return ""
	}
	return *p
}

// PostgresSource reads NOTIFICATION_LOG directly from the metastore's
// Postgres database, ordered by EVENT_ID. It sees the same rows as the
// Thrift API, without the metastore in the path. The metastore allocates
// event IDs under a lock on NOTIFICATION_SEQUENCE held until its
// transaction commits, so rows become visible in ID order and a gap seen
// here is a real gap, never a row still in flight.
type PostgresSource struct {
	pool *pgxpool.Pool
	dsn  string
}

// NewPostgresSource connects to the metastore database at dsn.
func NewPostgresSource(ctx context.Context, dsn string) (*PostgresSource, error) {
	pool, err := pgxpool.New(ctx, dsn)
	if err != nil {
		return nil, fmt.Errorf("metastore database: %w", err)
	}
	return &PostgresSource{pool: pool, dsn: redactDSN(dsn)}, nil
}

// Head implements Source.
func (s *PostgresSource) Head(ctx context.Context) (int64, error) {
	var next int64
	err := s.pool.QueryRow(ctx, `SELECT "NEXT_EVENT_ID" FROM "NOTIFICATION_SEQUENCE"`).Scan(&next)
	if err != nil {
		return 0, fmt.Errorf("read NOTIFICATION_SEQUENCE from %s: %w", s.dsn, err)
	}
	return next - 1, nil
}

// Next implements Source.
func (s *PostgresSource) Next(ctx context.Context, after int64, max int) ([]RawEvent, error) {
	rows, err := s.pool.Query(ctx, `
		SELECT "EVENT_ID", "EVENT_TIME", "EVENT_TYPE", COALESCE("CAT_NAME", ''), COALESCE("DB_NAME", ''),
		       COALESCE("TBL_NAME", ''), COALESCE("MESSAGE_FORMAT", ''), COALESCE("MESSAGE", '')
		FROM "NOTIFICATION_LOG" WHERE "EVENT_ID" > $1 ORDER BY "EVENT_ID" LIMIT $2`, after, max)
	if err != nil {
		return nil, fmt.Errorf("read NOTIFICATION_LOG after %d from %s: %w", after, s.dsn, err)
	}
	defer rows.Close()
	out := make([]RawEvent, 0, max)
	for rows.Next() {
		var e RawEvent
		var t int32
		if err := rows.Scan(&e.EventID, &t, &e.EventType, &e.Catalog, &e.Database, &e.Table, &e.MessageFormat, &e.Message); err != nil {
			return nil, fmt.Errorf("read NOTIFICATION_LOG row after %d: %w", after, err)
		}
		e.EventTime = int64(t)
		out = append(out, e)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read NOTIFICATION_LOG after %d from %s: %w", after, s.dsn, err)
	}
	return out, nil
}

// Databases implements Source.
func (s *PostgresSource) Databases(ctx context.Context) ([]string, error) {
	rows, err := s.pool.Query(ctx, `SELECT "NAME" FROM "DBS" ORDER BY "NAME"`)
	if err != nil {
		return nil, fmt.Errorf("list DBS from %s: %w", s.dsn, err)
	}
	defer rows.Close()
	var dbs []string
	for rows.Next() {
		var n string
		if err := rows.Scan(&n); err != nil {
			return nil, err
		}
		dbs = append(dbs, n)
	}
	return dbs, rows.Err()
}

// Close implements Source.
func (s *PostgresSource) Close() error { s.pool.Close(); return nil }

// redactDSN hides the password of a postgres:// URL for error messages.
func redactDSN(dsn string) string {
	at := strings.LastIndexByte(dsn, '@')
	scheme := strings.Index(dsn, "://")
	if at < 0 || scheme < 0 || at < scheme {
		return dsn
	}
	userinfo := dsn[scheme+3 : at]
	if i := strings.IndexByte(userinfo, ':'); i >= 0 {
		return dsn[:scheme+3] + userinfo[:i] + ":***" + dsn[at:]
	}
	return dsn
}

// ErrChainBroken is the class of errors for a gap in the event chain.
var ErrChainBroken = errors.New("CHAIN_BROKEN")

// GapError says the log no longer holds the event after the checkpoint: it
// was purged (metastore.event.db.listener.timetolive) while the tailer was
// behind. The chain of events is broken and only a new bootstrap can
// restore a consistent replica; the tailer must never skip over it.
type GapError struct {
	Checkpoint int64 // last event published
	Found      int64 // first event the log now has after it; 0 if none
	Head       int64 // the log's head when the gap was seen
}

func (e *GapError) Error() string {
	found := "no event"
	if e.Found > 0 {
		found = fmt.Sprintf("event %d", e.Found)
	}
	return fmt.Sprintf("%v: expected event %d after checkpoint %d, but the source log has %s next (head %d); "+
		"events were purged from NOTIFICATION_LOG past the checkpoint, so the replica cannot be brought forward "+
		"event by event: a new bootstrap is needed", ErrChainBroken, e.Checkpoint+1, e.Checkpoint, found, e.Head)
}

// Unwrap makes errors.Is(err, ErrChainBroken) true.
func (e *GapError) Unwrap() error { return ErrChainBroken }

// contiguous returns how many of evs continue the chain right after
// checkpoint: len(evs) when there is no gap.
func contiguous(checkpoint int64, evs []RawEvent) int {
	for i, e := range evs {
		if e.EventID != checkpoint+1+int64(i) {
			return i
		}
	}
	return len(evs)
}
