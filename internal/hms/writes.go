package hms

import (
	"context"
	"fmt"

	"github.com/apache/thrift/lib/go/thrift"
	"github.com/beltran/gohive/hive_metastore"
)

// A transaction's writes. Hive's DbNotificationListener logs the writes
// of a transactional table (ACID_WRITE) in TXN_WRITE_NOTIFICATION_LOG,
// not in the notification log, and its COMMIT_TXN message names the
// transaction only; REPL DUMP asks the metastore for them when it dumps
// the commit (get_all_write_event_info, Hive 3.1 and later). gohive's
// generated client predates the call, so AllWriteEventInfo writes it.

// AllWriteEventInfo returns the writes source transaction txnID made, as
// the metastore's write-notification log holds them: table, partition,
// write ID and the files ("]"-joined uri#checksum#cmroot#subdir entries).
// A transaction that wrote nothing, and one whose rows the metastore has
// cleaned (they age out with the notification log), both give none.
func (c *Client) AllWriteEventInfo(ctx context.Context, txnID int64) ([]*hive_metastore.WriteEventInfo, error) {
	var res allWriteEventInfoResult
	meta, err := c.Client_().Call(ctx, "get_all_write_event_info", &allWriteEventInfoArgs{txnID: txnID}, &res)
	c.SetLastResponseMeta_(meta)
	switch {
	case err != nil:
		return nil, fmt.Errorf("get_all_write_event_info of transaction %d: %w", txnID, err)
	case res.o1 != nil:
		return nil, fmt.Errorf("get_all_write_event_info of transaction %d: %w", txnID, res.o1)
	}
	return res.success, nil
}

// allWriteEventInfoArgs is get_all_write_event_info's argument list: a
// GetAllWriteEventInfoRequest (txnId; dbName and tableName left out, so
// every database's writes) as field 1.
type allWriteEventInfoArgs struct{ txnID int64 }

func (a *allWriteEventInfoArgs) Write(ctx context.Context, p thrift.TProtocol) error {
	steps := []func() error{
		func() error { return p.WriteStructBegin(ctx, "get_all_write_event_info_args") },
		func() error { return p.WriteFieldBegin(ctx, "request", thrift.STRUCT, 1) },
		func() error { return p.WriteStructBegin(ctx, "GetAllWriteEventInfoRequest") },
		func() error { return p.WriteFieldBegin(ctx, "txnId", thrift.I64, 1) },
		func() error { return p.WriteI64(ctx, a.txnID) },
		func() error { return p.WriteFieldEnd(ctx) },
		func() error { return p.WriteFieldStop(ctx) },
		func() error { return p.WriteStructEnd(ctx) },
		func() error { return p.WriteFieldEnd(ctx) },
		func() error { return p.WriteFieldStop(ctx) },
		func() error { return p.WriteStructEnd(ctx) },
	}
	for _, s := range steps {
		if err := s(); err != nil {
			return err
		}
	}
	return nil
}

func (a *allWriteEventInfoArgs) Read(context.Context, thrift.TProtocol) error {
	return fmt.Errorf("get_all_write_event_info_args: write-only")
}

// allWriteEventInfoResult is its answer: the list of WriteEventInfo as
// field 0, or a MetaException as field 1.
type allWriteEventInfoResult struct {
	success []*hive_metastore.WriteEventInfo
	o1      *hive_metastore.MetaException
}

func (r *allWriteEventInfoResult) Read(ctx context.Context, p thrift.TProtocol) error {
	if _, err := p.ReadStructBegin(ctx); err != nil {
		return err
	}
	for {
		_, typ, id, err := p.ReadFieldBegin(ctx)
		if err != nil {
			return err
		}
		if typ == thrift.STOP {
			break
		}
		switch {
		case id == 0 && typ == thrift.LIST:
			_, n, err := p.ReadListBegin(ctx)
			if err != nil {
				return err
			}
			r.success = make([]*hive_metastore.WriteEventInfo, 0, min(n, 1024))
			for range n {
				w := hive_metastore.NewWriteEventInfo()
				if err := w.Read(ctx, p); err != nil {
					return fmt.Errorf("WriteEventInfo: %w", err)
				}
				r.success = append(r.success, w)
			}
			if err := p.ReadListEnd(ctx); err != nil {
				return err
			}
		case id == 1 && typ == thrift.STRUCT:
			r.o1 = hive_metastore.NewMetaException()
			if err := r.o1.Read(ctx, p); err != nil {
				return err
			}
		default:
			if err := p.Skip(ctx, typ); err != nil {
				return err
			}
		}
		if err := p.ReadFieldEnd(ctx); err != nil {
			return err
		}
	}
	return p.ReadStructEnd(ctx)
}

func (r *allWriteEventInfoResult) Write(context.Context, thrift.TProtocol) error {
	return fmt.Errorf("get_all_write_event_info_result: read-only")
}
