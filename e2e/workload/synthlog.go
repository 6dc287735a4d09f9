package workload

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
)

// SynthLog is a notification log of the metastore's own table layout
// (hive-schema-4.0.0.postgres.sql, reduced to the columns a log reader
// touches) in a Postgres schema of its own. The tailer reads it as it
// reads a real metastore's database (source kind postgres, DSN), so a
// test or benchmark can write to it what must not be done to the real
// metastore's log (purge it, write malformed rows) or write faster than a
// metastore can (Synth). Rows get the next event IDs under a lock on
// NOTIFICATION_SEQUENCE held until commit, as the metastore allocates
// them, so they become visible in ID order.
type SynthLog struct {
	conn   *pgx.Conn
	schema string
	// DSN connects to the log: the base DSN with search_path set to its
	// schema.
	DSN string
}

// LogRow is one row to append to a SynthLog: the notification's type,
// database and table names, message format and message.
type LogRow struct {
	Type, DB, Table, Format, Message string
}

// Appended says which event IDs an Append gave its rows and when they
// became visible: between Committing (the COMMIT was sent) and Committed
// (it returned).
type Appended struct {
	First, Last           int64
	Committing, Committed time.Time
}

// CreateSynthLog creates the schema (it must not exist) and its tables in
// the Postgres database at dsn.
func CreateSynthLog(ctx context.Context, dsn, schema string) (*SynthLog, error) {
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return nil, fmt.Errorf("connect %s: %w", dsn, err)
	}
	ddl := fmt.Sprintf(`
		CREATE SCHEMA %[1]s;
		CREATE TABLE %[1]s."NOTIFICATION_LOG" (
			"NL_ID" BIGINT NOT NULL PRIMARY KEY, "EVENT_ID" BIGINT NOT NULL, "EVENT_TIME" INTEGER NOT NULL,
			"EVENT_TYPE" VARCHAR(32) NOT NULL, "CAT_NAME" VARCHAR(256), "DB_NAME" VARCHAR(128),
			"TBL_NAME" VARCHAR(256), "MESSAGE" TEXT, "MESSAGE_FORMAT" VARCHAR(16));
		CREATE UNIQUE INDEX ON %[1]s."NOTIFICATION_LOG" ("EVENT_ID");
		CREATE TABLE %[1]s."NOTIFICATION_SEQUENCE" ("NNI_ID" BIGINT NOT NULL PRIMARY KEY, "NEXT_EVENT_ID" BIGINT NOT NULL);
		INSERT INTO %[1]s."NOTIFICATION_SEQUENCE" VALUES (1, 1);
		CREATE TABLE %[1]s."DBS" ("DB_ID" BIGINT PRIMARY KEY, "NAME" VARCHAR(128));`, schema)
	if _, err := conn.Exec(ctx, ddl); err != nil {
		conn.Close(ctx)
		return nil, fmt.Errorf("create notification log schema %s: %w", schema, err)
	}
	sep := "?"
	if strings.Contains(dsn, "?") {
		sep = "&"
	}
	return &SynthLog{conn: conn, schema: schema, DSN: dsn + sep + "search_path=" + schema}, nil
}

// Drop deletes the schema and closes the connection.
func (l *SynthLog) Drop(ctx context.Context) error {
	defer l.conn.Close(ctx)
	if _, err := l.conn.Exec(ctx, "DROP SCHEMA "+l.schema+" CASCADE"); err != nil {
		return fmt.Errorf("drop notification log schema %s: %w", l.schema, err)
	}
	return nil
}

// Append adds rows with the next event IDs in one transaction, their
// EVENT_TIME the current second, as the metastore would.
func (l *SynthLog) Append(ctx context.Context, rows []LogRow) (Appended, error) {
	var a Appended
	tx, err := l.conn.Begin(ctx)
	if err != nil {
		return a, fmt.Errorf("append to %s: %w", l.schema, err)
	}
	defer tx.Rollback(ctx)
	if err := tx.QueryRow(ctx, `SELECT "NEXT_EVENT_ID" FROM `+l.schema+`."NOTIFICATION_SEQUENCE" FOR UPDATE`).Scan(&a.First); err != nil {
		return a, fmt.Errorf("append to %s: lock the sequence: %w", l.schema, err)
	}
	now := int32(time.Now().Unix())
	copyRows := make([][]any, len(rows))
	for i, r := range rows {
		id := a.First + int64(i)
		copyRows[i] = []any{id, id, now, r.Type, "hive", nullIfEmpty(r.DB), nullIfEmpty(r.Table), r.Message, r.Format}
	}
	if _, err := tx.CopyFrom(ctx, pgx.Identifier{l.schema, "NOTIFICATION_LOG"},
		[]string{"NL_ID", "EVENT_ID", "EVENT_TIME", "EVENT_TYPE", "CAT_NAME", "DB_NAME", "TBL_NAME", "MESSAGE", "MESSAGE_FORMAT"},
		pgx.CopyFromRows(copyRows)); err != nil {
		return a, fmt.Errorf("append %d rows to %s: %w", len(rows), l.schema, err)
	}
	a.Last = a.First + int64(len(rows)) - 1
	if _, err := tx.Exec(ctx, `UPDATE `+l.schema+`."NOTIFICATION_SEQUENCE" SET "NEXT_EVENT_ID" = $1`, a.Last+1); err != nil {
		return a, fmt.Errorf("append to %s: advance the sequence: %w", l.schema, err)
	}
	a.Committing = time.Now()
	if err := tx.Commit(ctx); err != nil {
		return a, fmt.Errorf("append to %s: commit: %w", l.schema, err)
	}
	a.Committed = time.Now()
	return a, nil
}

func nullIfEmpty(s string) any {
	if s == "" {
		return nil
	}
	return s
}

// Purge deletes events [from, to], as the metastore's cleaner does past
// its time to live.
func (l *SynthLog) Purge(ctx context.Context, from, to int64) error {
	if _, err := l.conn.Exec(ctx, `DELETE FROM `+l.schema+`."NOTIFICATION_LOG" WHERE "EVENT_ID" BETWEEN $1 AND $2`, from, to); err != nil {
		return fmt.Errorf("purge events %d-%d of %s: %w", from, to, l.schema, err)
	}
	return nil
}

// AddDatabases lists databases in DBS, where the tailer finds the
// databases to send heartbeats for; a name listed already is left alone.
func (l *SynthLog) AddDatabases(ctx context.Context, names ...string) error {
	for _, n := range names {
		if _, err := l.conn.Exec(ctx, `INSERT INTO `+l.schema+`."DBS" SELECT (SELECT COALESCE(MAX("DB_ID"), 0) + 1 FROM `+l.schema+`."DBS"), $1::varchar
			WHERE NOT EXISTS (SELECT 1 FROM `+l.schema+`."DBS" WHERE "NAME" = $1::varchar)`, n); err != nil {
			return fmt.Errorf("add database %s to %s: %w", n, l.schema, err)
		}
	}
	return nil
}
