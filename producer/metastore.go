package producer

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/apache/thrift/lib/go/thrift"
	"github.com/beltran/gohive/hive_metastore"

	"github.com/hivedr/hivedr/internal/hms"
	"github.com/hivedr/hivedr/schemas"
)

// MetastoreReader reads the source metastore's current objects over
// Thrift for the tailer's bootstraps (Snapshots), and the writes of source
// transactions whose COMMIT_TXN names none (TxnWrites). Each object is
// serialized with Thrift's TJSONProtocol, the form the notification log
// embeds, and read with the tailer's own reader, so a table a bootstrap
// publishes is exactly what an event about it would carry.
//
// It reads one metastore. It connects lazily and reconnects on the
// call after a failure. Safe for use by one goroutine at a time (calls
// are serialized).
type MetastoreReader struct {
	addr string
	mu   sync.Mutex
	conn hms.Lazy
}

// New returns a reader of the metastore at addr (host:port).
func NewMetastoreReader(addr string, opts hms.Options) *MetastoreReader {
	return &MetastoreReader{addr: addr, conn: hms.Lazy{Addr: addr, Opts: opts}}
}

// Close releases the connection.
func (s *MetastoreReader) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.conn.Drop()
	return nil
}

// call runs fn with a connection; a transport failure drops it (a Thrift
// connection is not reusable after one). The metastore's own answers
// (NoSuchObjectException, MetaException) keep it.
func (s *MetastoreReader) call(ctx context.Context, what string, fn func(c *hms.Client) error) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	c, err := s.conn.Get(ctx)
	if err != nil {
		return err
	}
	err = fn(c)
	if err == nil {
		return nil
	}
	if !hms.Answered(err) {
		s.conn.Drop()
	}
	var nso *hive_metastore.NoSuchObjectException
	if errors.As(err, &nso) {
		return fmt.Errorf("%s on %s: %w: %v", what, s.addr, ErrNoSuchObject, err)
	}
	return fmt.Errorf("%s on %s: %w", what, s.addr, err)
}

// thriftJSON serializes a Thrift object as the notification log does.
func thriftJSON(ctx context.Context, v thrift.TStruct) (string, error) {
	ser := thrift.NewTSerializer()
	ser.Protocol = thrift.NewTJSONProtocolFactory().GetProtocol(ser.Transport)
	return ser.WriteString(ctx, v)
}

// Database implements Snapshots.
func (s *MetastoreReader) Database(ctx context.Context, name string) (*schemas.Database, error) {
	var d *hive_metastore.Database
	if err := s.call(ctx, "get_database "+name, func(c *hms.Client) (err error) {
		d, err = c.GetDatabase(ctx, name)
		return err
	}); err != nil {
		return nil, err
	}
	text, err := thriftJSON(ctx, d)
	if err != nil {
		return nil, fmt.Errorf("serialize database %s: %w", name, err)
	}
	return DatabaseFromThriftJSON(text)
}

// Tables implements Snapshots.
func (s *MetastoreReader) Tables(ctx context.Context, db string) ([]string, error) {
	var names []string
	err := s.call(ctx, "get_all_tables "+db, func(c *hms.Client) (err error) {
		names, err = c.GetAllTables(ctx, db)
		return err
	})
	return names, err
}

// Table implements Snapshots.
func (s *MetastoreReader) Table(ctx context.Context, db, name string) (*schemas.Table, error) {
	var t *hive_metastore.Table
	if err := s.call(ctx, "get_table "+db+"."+name, func(c *hms.Client) error {
		res, err := c.GetTableReq(ctx, hms.TableRequest(db, name))
		if err == nil {
			t = res.Table
		}
		return err
	}); err != nil {
		return nil, err
	}
	text, err := thriftJSON(ctx, t)
	if err != nil {
		return nil, fmt.Errorf("serialize table %s.%s: %w", db, name, err)
	}
	return TableFromThriftJSON(text)
}

// PartitionNames implements Snapshots: the metastore streams
// every name of the table (get_partition_names has no offset) and the
// page is kept as they come, so memory holds limit names whatever the
// table's size.
func (s *MetastoreReader) PartitionNames(ctx context.Context, db, table, after string, limit int) ([]string, bool, error) {
	page := hms.NewNamesAfter(after, limit)
	err := s.call(ctx, "get_partition_names "+db+"."+table, func(c *hms.Client) error {
		page = hms.NewNamesAfter(after, limit) // (a retried call starts over)
		return c.EachPartitionName(ctx, db, table, page.Add)
	})
	if err != nil {
		return nil, false, err
	}
	names, more := page.Names()
	return names, more, nil
}

// Partitions implements Snapshots.
func (s *MetastoreReader) Partitions(ctx context.Context, db, table string, names []string) ([]schemas.Partition, error) {
	if len(names) == 0 {
		return nil, nil
	}
	var parts []*hive_metastore.Partition
	if err := s.call(ctx, fmt.Sprintf("get_partitions_by_names %s.%s (%d names)", db, table, len(names)), func(c *hms.Client) error {
		res, err := c.GetPartitionsByNamesReq(ctx, &hive_metastore.GetPartitionsByNamesRequest{DbName: db, TblName: table, Names: names})
		if err == nil {
			parts = res.Partitions
		}
		return err
	}); err != nil {
		return nil, err
	}
	out := make([]schemas.Partition, 0, len(parts))
	for _, p := range parts {
		text, err := thriftJSON(ctx, p)
		if err != nil {
			return nil, fmt.Errorf("serialize a partition of %s.%s: %w", db, table, err)
		}
		sp, err := PartitionFromThriftJSON(text)
		if err != nil {
			return nil, fmt.Errorf("a partition of %s.%s: %w", db, table, err)
		}
		out = append(out, *sp)
	}
	return out, nil
}

// TxnWrites implements TxnWrites: get_all_write_event_info.
func (s *MetastoreReader) TxnWrites(ctx context.Context, txnID int64) ([]TxnWrite, error) {
	var infos []*hive_metastore.WriteEventInfo
	err := s.call(ctx, fmt.Sprintf("get_all_write_event_info %d", txnID), func(c *hms.Client) (err error) {
		infos, err = c.AllWriteEventInfo(ctx, txnID)
		return err
	})
	if err != nil {
		return nil, err
	}
	out := make([]TxnWrite, len(infos))
	for i, w := range infos {
		out[i] = TxnWrite{Database: w.Database, Table: w.Table, WriteID: w.WriteId, Files: w.Files}
		if w.Partition != nil {
			out[i].Partition = *w.Partition
		}
	}
	return out, nil
}

// TxnHighWaterMark implements TxnWrites: get_open_txns.
func (s *MetastoreReader) TxnHighWaterMark(ctx context.Context) (int64, error) {
	var hwm int64
	err := s.call(ctx, "get_open_txns", func(c *hms.Client) error {
		o, err := c.GetOpenTxns(ctx)
		if err == nil {
			hwm = o.TxnHighWaterMark
		}
		return err
	})
	return hwm, err
}
