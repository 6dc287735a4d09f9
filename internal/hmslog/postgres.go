package hmslog

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/hivedr/hivedr/internal/config"
	"github.com/hivedr/hivedr/schemas"
)

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
		// pgx's parse errors quote the DSN, masking only password=x.
		return nil, fmt.Errorf("metastore database %s: %w", redactDSN(dsn), maskedError{err})
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
		var typ string
		if err := rows.Scan(&e.EventID, &t, &typ, &e.Catalog, &e.Database, &e.Table, &e.MessageFormat, &e.Message); err != nil {
			return nil, fmt.Errorf("read NOTIFICATION_LOG row after %d: %w", after, err)
		}
		e.EventTime, e.EventType = int64(t), schemas.EventType(typ)
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

// redactDSN hides the password of a DSN for error messages, in both
// forms pgx takes: a postgres:// URL and key=value pairs.
func redactDSN(dsn string) string { return config.MaskSecrets(dsn) }

// maskedError is err with the secrets in its text masked.
type maskedError struct{ err error }

func (e maskedError) Error() string { return config.MaskSecrets(e.err.Error()) }
func (e maskedError) Unwrap() error { return e.err }
