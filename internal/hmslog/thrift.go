package hmslog

import (
	"context"
	"fmt"

	"github.com/beltran/gohive/hive_metastore"

	"github.com/hivedr/hivedr/internal/hms"
	"github.com/hivedr/hivedr/schemas"
)

// ThriftSource reads the log with get_next_notification. It reconnects on
// the call after a failure, so a metastore restart costs one poll.
type ThriftSource struct {
	addr string
	conn hms.Lazy
}

// NewThriftSource returns a source for the metastore at addr (host:port),
// dialed with opts. It connects lazily.
func NewThriftSource(addr string, opts hms.Options) *ThriftSource {
	return &ThriftSource{addr: addr, conn: hms.Lazy{Addr: addr, Opts: opts}}
}

func (s *ThriftSource) client(ctx context.Context) (*hms.Client, error) { return s.conn.Get(ctx) }

// drop forgets a connection whose call failed: Thrift connections are not
// reusable after a transport error.
func (s *ThriftSource) drop() { s.conn.Drop() }

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
			EventType:     schemas.EventType(e.EventType),
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
